"""`keras-transformer generate`: continue prompts with a decoder-only model (GPT), from arguments, a file or stdin.

Example::

    keras-transformer generate --model saved_models/gpt2-tiny "오늘 너무"
    keras-transformer generate --model saved_models/gpt2-tiny --input prompts.txt --output continuations.txt --beam 4
    echo "Once upon a time" | keras-transformer generate --model RUN --temperature 0.8 --top-p 0.9 --seed 1
    keras-transformer generate --model saved_models/gpt2-tiny --stream "오늘 너무"

Each prompt gives one line: its continuation alone (special tokens dropped,
a newline inside it written as a space). `--max-length` counts the tokens
generated, END included (transformers' `max_new_tokens`). Without `--beam`
or `--temperature` the run's own generation settings decode (an imported
GPT-2: greedy, as transformers' `generate`). A warning on stderr names each
prompt whose continuation reached `--max-length` before END (cut off).
`--stream` prints each continuation's words as they are decoded (greedy
search and sampling; beam search prints its text at the end), the same
lines as without it: each prompt sampled with `--seed` as it is alone.
"""

import sys

from keras_transformer.commands.arguments import (
    SEED_MAX,
    TRUST,
    add_loadable_model_argument,
    int_in_range,
    non_empty,
    non_negative_finite_float,
    non_negative_int,
    positive_int,
    probability,
    setting_type,
)
from keras_transformer.commands.translate import read_lines
from keras_transformer.config import DecodingConfig
from keras_transformer.input_rules import check_sentence


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "generate",
        help="continue prompts with a decoder-only model (GPT)",
        description=__doc__.split("\n\n")[0] + " " + TRUST,
    )
    parser.add_argument("prompts", nargs="*", help="prompts to continue; without them, --input or stdin (one a line)")
    add_loadable_model_argument(parser)
    parser.add_argument("--input", type=non_empty, help="a UTF-8 file, one prompt a line (default: stdin)")
    parser.add_argument("--output", type=non_empty, help="write the continuations here (default: stdout)")
    parser.add_argument(
        "--beam", type=setting_type(DecodingConfig, "beam_size"), help="beam size, 1 = greedy (default: the run's)"
    )
    parser.add_argument(
        "--max-length",
        type=setting_type(DecodingConfig, "max_new_tokens"),
        help="tokens generated at most, END included (default: the run's, else 20, cut to what the longest prompt "
        "leaves of the model's positions)",
    )
    parser.add_argument("--temperature", type=non_negative_finite_float, help="sample at this temperature")
    parser.add_argument("--top-k", type=non_negative_int, default=0, help="sample from the k likeliest (0 = all)")
    parser.add_argument("--top-p", type=probability, default=1.0, help="sample from this much probability (1 = all)")
    parser.add_argument("--seed", type=int_in_range(0, SEED_MAX), help="the sampling seed")
    parser.add_argument("--batch-size", type=positive_int, default=16, help="prompts per batch (default 16)")
    parser.add_argument("--quiet", action="store_true", help="no warnings about cut-off continuations")
    parser.add_argument(
        "--stream",
        action="store_true",
        help="print the words as they are decoded (to stdout; beam search prints its text at the end)",
    )
    parser.set_defaults(run=run)


def run(args):
    from keras_transformer.files import output_files
    from keras_transformer.opener import open_generator

    output_files.check_outputs([("output", args.output)], [("input", args.input)], [("model", args.model)])
    prompts = [check_sentence(p, f"argument {i}") for i, p in enumerate(args.prompts, 1)]
    if not prompts:
        prompts = read_lines(args.input)
    if args.temperature is not None and args.beam not in (None, 1):
        raise ValueError("--temperature samples one continuation: it takes no --beam")
    if args.stream and args.output:
        raise ValueError("--stream prints to stdout as it decodes: it takes no --output")
    generator = open_generator(args.model, beam_size=args.beam)
    generator.batch_size = args.batch_size
    sampling = dict(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    if args.stream:
        return _streamed(generator, prompts, args.max_length, sampling, args.quiet)
    continuations, finished = generator.generate_with_status(prompts, max_length=args.max_length, **sampling)
    if not args.quiet:
        for number, done in enumerate(finished, 1):
            if not done:
                print(f"warning: prompt {number}: the continuation reached --max-length before END", file=sys.stderr)
    text = "".join(line + "\n" for line in continuations)
    if args.output:
        output_files.write_text(args.output, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0


def _streamed(generator, prompts, max_length, sampling, quiet):
    """`generate --stream`: each prompt's continuation printed as it is decoded, one line each."""
    from keras_transformer.commands.streaming import print_stream

    max_length = generator.max_length_for(prompts, max_length)  # every prompt checked before the first word
    search, numbers = "best", {}
    if sampling["temperature"] is not None:
        search = "sample"
        numbers = {**sampling, "seed": -1 if sampling["seed"] is None else sampling["seed"]}
    for number, prompt in enumerate(prompts, 1):
        reason = print_stream(generator.stream_pieces(prompt, search, max_length=max_length, **numbers))
        if reason == "length" and not quiet:
            print(f"warning: prompt {number}: the continuation reached --max-length before END", file=sys.stderr)
        if reason == "cancelled":
            return 130
    return 0
