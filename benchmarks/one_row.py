"""One sentence at a time: a greedy decode stepped as one row against the same decode padded to two rows.

XLA:CPU runs the products of a one-row decoder step as matrix-vector
products; `decoding.model_search.MIN_STEP_ROWS` pads a search of one
hypothesis to two rows instead (an empty row, dropped from the result). This
script measures both in one process: two translators of the same run, the
first traced with `MIN_STEP_ROWS = 1` (the old way), the second with the
default, called in turn on the same sentences, one sentence a call
(`greedy`, and a `stream` read to its end), after one warm-up call each. It
reports each call's milliseconds, their medians and ratio, whether both give
the same strings, and the machine. `--step-rows 1,2,4` also times the
model's decoder step alone at those row counts (a 64-step XLA loop of the
cached step and the argmax, sources 16 tokens wide). Not run by CI.

Example:

    python benchmarks/one_row.py RUN --source test_2016_flickr.en --sentences 40 \\
        --output benchmarks/results/decoding/one_row.json
"""

import argparse
import contextlib
import json
import os
import pathlib
import statistics
import time

from corpus import read_lines
from machine import describe_machine, machine_line


def timed(call):
    start = time.perf_counter()
    value = call()
    return (time.perf_counter() - start) * 1000, value


@contextlib.contextmanager
def step_rows(name):
    """`model_search.MIN_STEP_ROWS` of `name` ("one row": 1), read when a decode is traced and when a stream starts."""
    from keras_transformer.decoding import model_search

    default = model_search.MIN_STEP_ROWS
    model_search.MIN_STEP_ROWS = 1 if name == "one row" else default
    try:
        yield
    finally:
        model_search.MIN_STEP_ROWS = default


def open_both(run, max_length):
    """`{"one row": translator, "two rows": translator}`, each traced with its `MIN_STEP_ROWS`."""
    from keras_transformer.opener import open_translator

    translators = {}
    for name in ("one row", "two rows"):
        with step_rows(name):
            translator = open_translator(run, "xla", beam_size=1, max_length=max_length)
            translator.greedy(["A warm-up."])
            "".join(translator.stream("A warm-up.", "greedy"))
        translators[name] = translator
    return translators


def step_times(translator, rows_list, steps=64, width=16, repeats=3):
    """`{rows: milliseconds a step}`: `steps` cached decoder steps of `rows` rows as one XLA loop."""
    import tensorflow as tf

    from keras_transformer.models import as_transformer

    model, times = as_transformer(translator.model), {}
    for rows in rows_list:

        @tf.function(jit_compile=True, autograph=False)
        def loop(source, rows=rows):
            cross = model.cross_attention_caches(model.encode(source))
            mask = model.source_padding_mask(source)

            def body(index, tokens, caches):
                logits, caches = model.decoder_step(tokens, index, caches, cross, mask)
                return index + 1, tf.cast(tf.argmax(logits[:, -1], -1), tf.int32)[:, None], caches

            start = (tf.constant(0), tf.fill([rows, 1], 3), model.empty_self_attention_caches(rows, steps))
            return tf.while_loop(lambda index, *_: index < steps, body, start)[1]

        source = tf.fill([rows, width], 5)
        loop(source).numpy()
        ms, _ = timed(lambda source=source: [loop(source).numpy() for _ in range(repeats)])
        times[rows] = ms / repeats / steps
    return times


def measure(translators, sentences):
    times = {name: {"greedy": [], "stream": []} for name in translators}
    outputs = {name: [] for name in translators}
    streamed_same = {name: 0 for name in translators}  # streams whose text is the greedy call's
    for sentence in sentences:
        for name, translator in translators.items():  # in turn: the same machine state for both
            with step_rows(name):
                ms, text = timed(lambda t=translator, s=sentence: t.greedy([s]).numpy()[0].decode("utf-8"))
            times[name]["greedy"].append(ms)
            with step_rows(name):
                ms, streamed = timed(lambda t=translator, s=sentence: "".join(t.stream(s, "greedy")))
            times[name]["stream"].append(ms)
            outputs[name].append(text)
            streamed_same[name] += streamed == text
    return times, outputs, streamed_same


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", help="a run directory (`keras-transformer train` or `import`)")
    parser.add_argument("--source", required=True, help="a text file, one sentence a line")
    parser.add_argument("--sentences", type=int, default=40)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--step-rows", default="", help="row counts to time the decoder step at, e.g. 1,2,4")
    parser.add_argument("--output", type=pathlib.Path)
    args = parser.parse_args()
    sentences = read_lines(args.source, args.sentences)
    translators = open_both(args.run, args.max_length)
    times, outputs, streamed_same = measure(translators, sentences)
    medians = {name: {call: statistics.median(ms) for call, ms in calls.items()} for name, calls in times.items()}
    report = dict(
        machine=describe_machine(),
        run=str(args.run),
        sentences=len(sentences),
        max_length=args.max_length,
        load_average_1min=round(os.getloadavg()[0], 2),
        median_ms=medians,
        one_row_over_two_rows={
            call: medians["one row"][call] / medians["two rows"][call] for call in ("greedy", "stream")
        },
        streams_equal_to_greedy=streamed_same,
        same_strings=sum(a == b for a, b in zip(outputs["one row"], outputs["two rows"])),
        milliseconds=times,
    )
    if args.step_rows:
        rows_list = [int(rows) for rows in args.step_rows.split(",")]
        report["step_ms_by_rows"] = step_times(translators["two rows"], rows_list)
    print(machine_line(report["machine"]))
    shown = ("median_ms", "one_row_over_two_rows", "same_strings", "step_ms_by_rows")
    print(json.dumps({key: report[key] for key in shown if key in report}, indent=1))
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
