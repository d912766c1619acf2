"""Streaming against a whole decode: time to the first word, words/s, and the non-streamed time of the same output.

Opens a run with the XLA engine (`open_translator`), decodes one sentence
greedily `--repeats` times each way after a first pass that compiles every
shape: `translator.greedy([sentence])` (the whole decode, one XLA program)
and `translator.stream(sentence, "greedy")` (`decoding.SteppedSearch`, one
compiled step a token, cut into words). Checks that the pieces joined are
the non-streamed string, and reports the medians: the whole decode's
seconds, the stream's seconds to its first piece and to its end, words/s
while streaming (whitespace-separated words of the output over the
stream's time), and the output's tokens. Writes JSON (with the command and
the machine) to `benchmarks/results/streaming/`.

Example:

    python benchmarks/streaming.py --run /path/to/nllb_real_size/run --target-lang deu_Latn --max-length 64
"""

import argparse
import json
import pathlib
import statistics
import sys
import time

from machine import describe_machine, machine_line

RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "streaming"
SENTENCE = "A man in a blue shirt is standing on a ladder and cleaning the windows of a tall building."


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True, help="a run directory (e.g. a real-size import)")
    parser.add_argument("--sentence", default=SENTENCE)
    parser.add_argument("--max-length", type=int, default=64, help="tokens generated at most")
    parser.add_argument("--target-lang", default=None, help="a multilingual run's target language")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", default=str(RESULTS / "stream.json"))
    args = parser.parse_args(argv)

    import warnings

    import tensorflow as tf

    from keras_transformer.opener import open_translator

    warnings.simplefilter("ignore")
    controls = {"target_lang": args.target_lang} if args.target_lang else {}
    translator = open_translator(args.run, beam_size=1, max_length=args.max_length)
    started = time.perf_counter()
    status = translator.greedy_with_status([args.sentence], **controls)
    plain = status["translations"].numpy()[0].decode("utf-8")
    streamed = "".join(translator.stream(args.sentence, "greedy", **controls))
    compile_s = time.perf_counter() - started
    whole, first, total, pieces = [], [], [], []
    for _ in range(args.repeats):
        started = time.perf_counter()
        translator.greedy([args.sentence], **controls)
        whole.append(time.perf_counter() - started)
        started = time.perf_counter()
        got = []
        for piece in translator.stream(args.sentence, "greedy", **controls):
            if not got:
                first.append(time.perf_counter() - started)
            got.append(piece)
        total.append(time.perf_counter() - started)
        pieces.append(len(got))
    tokens = int(translator.target_tokenizer.tokenize(tf.constant([plain])).row_lengths()[0])
    words = len(plain.split())
    report = {
        "command": " ".join(sys.argv),
        "machine": describe_machine(),
        "run": args.run,
        "max_length": args.max_length,
        "output_tokens_retokenized": int(tokens),  # the output's text tokenized again (not the ids decoded)
        "reached_max_length": not bool(status["finished"].numpy()[0]),
        "output_words": words,
        "pieces": pieces[-1],
        "joined_equals_plain": streamed == plain,
        "first_pass_s": round(compile_s, 2),
        "whole_decode_s": round(statistics.median(whole), 3),
        "stream_first_word_s": round(statistics.median(first), 3),
        "stream_total_s": round(statistics.median(total), 3),
        "stream_words_per_s": round(words / statistics.median(total), 2),
        "repeats": args.repeats,
    }
    pathlib.Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.output).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(machine_line(report["machine"]))
    print(json.dumps({k: v for k, v in report.items() if k != "machine"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
