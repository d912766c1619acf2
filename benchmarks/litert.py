"""LiteRT against the SavedModel: file size, milliseconds per sentence and BLEU, float32 and int8.

The run (`--model`) is exported three ways: the SavedModel (`export.load(run)
.save`, loaded back with `export.load`), LiteRT float32 and LiteRT int8
(`keras_transformer.litert.export_run`, dynamic-range int8 weights). Each
translates the first `--sentences` lines of `--source` in batches of
`--batch-size`, greedy and beam search (the run's beam size); a first
pass over every batch, not timed, compiles the SavedModel's XLA programs
(and warms LiteRT the same way). `--litert` picks the LiteRT exports
(default both). Reported per export and search: the model
file's size, ms per sentence (the median of `--repeats` passes over all
sentences), sacreBLEU (cased 13a) against `--reference`, and how many
translations equal the SavedModel's.

Without `--source` and `--reference`, the Multi30k en-de test set
(`test_2016_flickr`) is read with `keras_transformer.datasets`, downloaded on
first use (or from `--data-dir`). Writes JSON (with the command and the
machine) to `--output`. Not run by CI.

Example:

    python benchmarks/litert.py --model saved_models/multi30k-en-de
    python benchmarks/litert.py --model saved_models/chatbot-ko --source q.txt --reference a.txt \\
        --output benchmarks/results/litert/chatbot-ko.json
"""

import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import time
import warnings

from machine import describe_machine, machine_line


def main(argv=None):
    args = parse_args(argv)
    sources, references = read_pairs(args)
    import sacrebleu

    from keras_transformer import litert
    from keras_transformer.engines.litert.translator import Translator as LiteRTTranslator
    from keras_transformer.export import load

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cut-off translations: the same in every export
        tmp = pathlib.Path(tmp)
        started = time.perf_counter()
        load(args.model).save(tmp / "savedmodel")
        exports = {"savedmodel": (load(tmp / "savedmodel"), tmp / "savedmodel", time.perf_counter() - started)}
        for quantization in args.litert:
            name = f"litert-{quantization}"
            started = time.perf_counter()
            litert.export_run(args.model, tmp / name, quantization=None if quantization == "float32" else quantization)
            exports[name] = (LiteRTTranslator(tmp / name), tmp / name, time.perf_counter() - started)
        rows, outputs = [], {}
        for name, (translator, folder, export_seconds) in exports.items():
            for search in ("greedy", f"beam{int(translator.beam_size.numpy())}"):
                function = translator.greedy if search == "greedy" else translator.__call__
                texts, seconds = timed(function, sources, args.batch_size, args.repeats)
                outputs[name, search] = texts
                same = sum(a == b for a, b in zip(texts, outputs.get(("savedmodel", search), texts)))
                rows.append(
                    {
                        "export": name,
                        "search": search,
                        "model_bytes": model_bytes(folder),
                        "export_seconds": round(export_seconds, 1),
                        "ms_per_sentence": round(1000 * seconds / len(sources), 3),
                        "bleu": round(sacrebleu.corpus_bleu(texts, [references]).score, 2),
                        "same_as_savedmodel": same,
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    report = {"command": " ".join(sys.argv), "sentences": len(sources), "rows": rows, "machine": describe_machine()}
    print(machine_line(report["machine"]))
    if args.output:
        pathlib.Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.output).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def timed(function, sentences, batch_size, repeats):
    """`(translations as str, seconds)`: the median of `repeats` passes, after one untimed pass."""
    batches = [sentences[i : i + batch_size] for i in range(0, len(sentences), batch_size)]
    texts = [t.decode("utf-8", "replace") for batch in batches for t in function(batch).numpy().tolist()]
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        for batch in batches:
            function(batch)
        times.append(time.perf_counter() - started)
    return texts, statistics.median(times)


def model_bytes(folder):
    """The size of the model file(s): `model.tflite`, or the SavedModel's graph and variables."""
    folder = pathlib.Path(folder)
    if (folder / "model.tflite").is_file():
        return (folder / "model.tflite").stat().st_size
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and p.name != "MANIFEST.sha256")


def read_pairs(args):
    if (args.source is None) != (args.reference is None):
        raise SystemExit("--source and --reference go together")
    if args.source:
        sources = pathlib.Path(args.source).read_text(encoding="utf-8").splitlines()
        references = pathlib.Path(args.reference).read_text(encoding="utf-8").splitlines()
    else:
        from keras_transformer.datasets import load_pairs

        pairs = load_pairs("multi30k-en-de", args.data_dir, split="test")
        sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    if len(sources) != len(references):
        raise SystemExit(f"--source has {len(sources)} lines, --reference {len(references)}")
    return sources[: args.sentences], references[: args.sentences]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a training run directory")
    parser.add_argument("--source", help="source sentences, one a line (default: Multi30k en-de test)")
    parser.add_argument("--reference", help="their references, one a line")
    parser.add_argument("--data-dir", help="where Multi30k is (default: downloaded once)")
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", help="write the JSON report here")
    parser.add_argument("--litert", default="float32,int8", help="the LiteRT exports to measure, comma-separated")
    args = parser.parse_args(argv)
    args.litert = args.litert.split(",")
    if not set(args.litert) <= {"float32", "int8"}:
        parser.error(f"--litert takes float32 and int8; received {args.litert}")
    return args


if __name__ == "__main__":
    main()
