"""`keras-transformer plot`: the figures of `keras_transformer.plotting` as PNG files.

    keras-transformer plot positional-encoding --length 50 --depth 128 --output pe.png
    keras-transformer plot schedule --d-model 512 --warmup-steps 4000 --steps 40000 --output lr.png
    keras-transformer plot attention --model saved_models/multi30k-en-de \\
        --sentence "A man is riding a bike." --output heads.png
    keras-transformer plot history --csv saved_models/chatbot-ko/history.csv --output curves.png
"""

import pathlib

from keras_transformer.commands.arguments import non_empty, positive_finite_float, positive_int, setting_type
from keras_transformer.config import DecodingConfig


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "plot",
        help="draw a figure as a PNG",
        description="Draw the positional encoding, the learning-rate schedule, a trained "
        "model's attention heads or its training curves as a PNG file.",
    )
    figures = parser.add_subparsers(dest="figure", metavar="FIGURE")
    figures.required = True

    def figure(name, help_text):
        sub = figures.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--output", required=True, type=non_empty, help="PNG file to write")
        sub.add_argument("--dpi", type=positive_int, default=None, help="resolution (default 100)")
        return sub

    sub = figure("positional-encoding", "heatmap of the sinusoidal positional encoding")
    sub.add_argument("--length", type=positive_int, default=50, help="positions (default 50)")
    sub.add_argument("--depth", type=positive_int, default=128, help="dimensions, d_model (default 128)")

    sub = figure("schedule", "learning rate of the warmup schedule over training steps")
    sub.add_argument("--d-model", type=positive_int, default=512, help="model width (default 512)")
    sub.add_argument("--warmup-steps", type=positive_int, default=4000, help="warm-up steps (default 4000)")
    sub.add_argument("--steps", type=positive_int, default=40000, help="steps on the x axis (default 40000)")
    sub.add_argument("--scale", type=positive_finite_float, default=1.0, help="factor on the whole curve (default 1)")

    sub = figure("attention", "attention weights of a trained model, one panel per head")
    sub.add_argument(
        "--model",
        required=True,
        type=non_empty,
        help="a training run directory (config.json, model.keras) that you trust",
    )
    sub.add_argument("--sentence", required=True, type=non_empty, help="the source sentence")
    sub.add_argument(
        "--target",
        type=non_empty,
        help="a target sentence to attend with (teacher forcing); default: the model's own greedy output",
    )
    sub.add_argument(
        "--attention",
        default="cross",
        choices=["cross", "decoder-self", "encoder"],
        help="which attention to draw (default: cross, target tokens over source tokens)",
    )
    sub.add_argument("--layer", type=int, default=-1, help="layer index, negative from the end (default -1)")
    sub.add_argument(
        "--max-length", type=setting_type(DecodingConfig, "max_new_tokens"), help="tokens to generate at most"
    )
    sub.add_argument("--columns", type=positive_int, default=4, help="heads per row of panels (default 4)")

    sub = figure("history", "training curves (loss, accuracy) from a history CSV")
    sub.add_argument("--csv", required=True, type=non_empty, help="history.csv of a run (keras CSVLogger)")
    sub.add_argument("--title", help="figure title")

    parser.set_defaults(run=run)
    return parser


def run(args):
    from keras_transformer import plotting
    from keras_transformer.files import output_files

    plotting.png_path(args.output)  # before any work, as the checks below
    output_files.check_outputs(
        [("output", args.output)],
        [("csv", getattr(args, "csv", None))],
        [("model", args.model)] if args.figure == "attention" else [],
    )
    if args.figure == "positional-encoding":
        plotting.plot_positional_encoding(args.length, args.depth, output=args.output, dpi=args.dpi)
    elif args.figure == "schedule":
        plotting.plot_schedule(
            args.d_model, args.warmup_steps, args.steps, scale=args.scale, output=args.output, dpi=args.dpi
        )
    elif args.figure == "history":
        plotting.plot_history(args.csv, output=args.output, dpi=args.dpi, title=args.title)
    elif args.figure == "attention":
        _plot_attention(args, plotting)
    print(f"Wrote {args.output}")
    return 0


def _plot_attention(args, plotting):
    from keras_transformer import runs
    from keras_transformer.plotting import attention_maps

    path = pathlib.Path(args.model)
    if runs.is_saved_model(path) and not runs.is_run_dir(path):
        raise ValueError(
            f"{path} is an exported SavedModel; `plot attention` needs the training run directory "
            "(config.json, model.keras, tokenizers/) that it was exported from"
        )
    if not runs.is_run_dir(path):
        raise FileNotFoundError(f"{path} is not a training run directory (config.json and model.keras)")
    config = runs.RunConfig.read(path)
    if config.members:
        raise ValueError(
            f"{path} is an ensemble; `plot attention` shows one model's heads: pass one "
            f"member's run directory, e.g. {path / config.members[0]}"
        )
    model, source_tokenizer, target_tokenizer = load_run(path)
    result = attention_maps.sentence_attention(
        model,
        source_tokenizer,
        args.sentence,
        target_tokenizer,
        target=args.target,
        max_length=args.max_length,
        add_source_end=config.add_source_end,
    )
    key = {"cross": "decoder_cross", "decoder-self": "decoder_self", "encoder": "encoder"}[args.attention]
    layers = result["weights"][key]
    if not -len(layers) <= args.layer < len(layers):
        raise ValueError(f"`--layer` must be in [{-len(layers)}, {len(layers) - 1}]. Received: {args.layer}")
    layer = args.layer % len(layers)
    query_tokens, key_tokens = {
        "cross": (result["output_tokens"], result["source_tokens"]),
        "decoder-self": (result["input_tokens"], result["input_tokens"]),
        "encoder": (result["source_tokens"], result["source_tokens"]),
    }[args.attention]
    plotting.plot_attention_heads(
        layers[layer][0],
        query_tokens,
        key_tokens,
        output=args.output,
        dpi=args.dpi,
        columns=args.columns,
        title=f"{args.attention} attention, layer {layer}: {args.sentence}",
    )


def load_run(path):
    """`(model, source_tokenizer, target_tokenizer)` of a training run directory."""
    from keras_transformer import runs

    run = runs.open_run(path)
    return (run.models[0], *run.tokenizers)
