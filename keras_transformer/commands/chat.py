"""`keras-transformer chat`: an interactive loop; an empty line or end of input ends it.

Example::

    keras-transformer chat --model saved_models/korean-chatbot --temperature 0.8 --top-p 0.9
    keras-transformer chat --model saved_models/nllb --source-lang eng_Latn --target-lang fra_Latn --beam 4

`--target-lang` chooses a multilingual model's language for every reply,
and `--prefix` forces the beginning of every reply.
"""

import sys

from keras_transformer.commands.arguments import (
    SEED_MAX,
    TRUST,
    add_ban_argument,
    add_engine_argument,
    add_language_arguments,
    add_loadable_model_argument,
    add_prefix_argument,
    int_in_range,
    non_negative_finite_float,
    non_negative_int,
    probability,
    setting_type,
)
from keras_transformer.commands.streaming import add_stream_argument, print_stream
from keras_transformer.config import DecodingConfig
from keras_transformer.input_rules import check_sentence


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "chat",
        help="talk to a model interactively (sampling options)",
        description=__doc__.split("\n\n")[0] + " " + TRUST,
    )
    add_loadable_model_argument(parser)
    add_engine_argument(parser)
    add_language_arguments(parser)
    add_prefix_argument(parser)
    add_ban_argument(parser)
    parser.add_argument(
        "--temperature",
        type=non_negative_finite_float,
        default=0.8,
        help="sampling temperature; 0 = greedy (default 0.8)",
    )
    parser.add_argument(
        "--top-k", type=non_negative_int, default=0, help="keep the k likeliest tokens (0 = all, the default)"
    )
    parser.add_argument(
        "--top-p",
        type=probability,
        default=0.9,
        help="keep the smallest set of tokens with this probability, in (0, 1] (1 = all; default 0.9)",
    )
    parser.add_argument(
        "--seed",
        type=int_in_range(-1, SEED_MAX),
        default=-1,
        help=f"sampling seed, 0 to {SEED_MAX}; -1 = random (the default)",
    )
    parser.add_argument(
        "--beam",
        type=setting_type(DecodingConfig, "beam_size"),
        default=None,
        help="use beam search with this many beams instead of sampling",
    )
    add_stream_argument(parser, "default: on when stdout is a terminal")
    parser.set_defaults(run=run)


def run(args):
    from keras_transformer.commands.arguments import open_model
    from keras_transformer.translators.translation import translate_lines

    translator = open_model(args, beam_size=args.beam)
    interactive = sys.stdin.isatty()
    stream = sys.stdout.isatty() if args.stream is None else args.stream
    if interactive:
        print("Type a sentence; an empty line or Ctrl-D ends the chat; Ctrl-C stops an answer.", file=sys.stderr)
    turn = 0
    while True:
        if interactive:
            print("> ", end="", file=sys.stderr, flush=True)
        line = sys.stdin.buffer.readline()
        turn += 1
        text = check_sentence(line, f"input line {turn}").decode("utf-8").strip()
        if not text:
            return 0
        seed = args.seed if args.seed < 0 else args.seed + turn
        sample = None if args.beam is not None else (args.temperature, args.top_k, args.top_p, seed)
        try:
            if stream:
                print_stream(_stream(translator, text, sample, target_prefix=args.prefix, banned=args.ban))
            else:
                print(
                    translate_lines(translator, [text], sample=sample, target_prefix=args.prefix, banned=args.ban)[0],
                    flush=True,
                )
        except KeyboardInterrupt:  # the answer stops; the chat goes on
            print(" [stopped]", flush=True)


def _stream(translator, text, sample, **controls):
    if sample is None:
        return translator.stream_pieces(text, **controls)
    temperature, top_k, top_p, seed = sample
    numbers = dict(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
    return translator.stream_pieces(text, "sample", **numbers, **controls)
