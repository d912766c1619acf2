"""Where the memory of a real-size decode goes: peak and current RSS stage by stage, each part estimated.

Runs in fresh child processes (each a new interpreter, so every peak is its
own) and writes one JSON report:

- `decode`: one process that imports TensorFlow and keras_transformer, opens
  the run (`keras_transformer.export.load`), translates the first batch of
  32 greedily, the rest of the `--sentences` greedily, then all of them with
  beam search; after each stage, the peak RSS so far (`ru_maxrss`), the
  current RSS, and TensorFlow's BFC allocator (current and peak bytes: the
  weights, the decode caches and activations, nothing of XLA's programs);
- `import`, `tokenizers`, `model`, `keras_load_model`: processes that only
  import, only open the tokenizers, only load the model as the run opens it
  (`models.loading.load_model`), and load it with Keras's own
  `keras.saving.load_model`, each with its peak and current RSS.

The parts (in MB) are differences of those figures, so estimates: the TF
runtime (RSS after the imports), the Keras model (RSS it adds, against its
weight bytes), the load overhead (peak of loading less what stays), the
tokenizer tables, the decode caches (the BFC allocator's peak during the
decode less the weights), the XLA programs (RSS the first batch adds
beyond what the allocator holds: compiled code and what the compiler's
malloc keeps). Not run by CI.

Example:

    python benchmarks/memory_breakdown.py /work/scratch/opus-run \\
        --sources /work/shared/data/multi30k_task1/raw/test_2016_flickr.en.gz \\
        --output benchmarks/results/real_size/memory_breakdown.json
"""

import argparse
import gzip
import json
import os
import pathlib
import resource
import subprocess
import sys
import time

from machine import describe_machine

MB = 2**20


def rss():
    """`{"peak_rss_mb", "rss_mb"}` of this process, and TensorFlow's BFC allocator's bytes if it has any."""
    current = 0
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                current = int(line.split()[1]) * 1024
    row = dict(
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        rss_mb=round(current / MB, 1),
    )
    tf = sys.modules.get("tensorflow")
    if tf is not None:
        try:
            info = tf.config.experimental.get_memory_info("CPU:0")
            row.update(bfc_current_mb=round(info["current"] / MB, 1), bfc_peak_mb=round(info["peak"] / MB, 1))
        except ValueError:  # the default allocator keeps no statistics
            pass
    return row


def read_sentences(path, count):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line, _ in zip(handle, range(count))]


def batches_of(sentences, batch_size):
    """The sentences sorted by length (as benchmarks/real_size.py batches them), in batches."""
    ordered = sorted(sentences, key=len)
    return [ordered[s : s + batch_size] for s in range(0, len(ordered), batch_size)]


def weight_bytes(model):
    import numpy as np

    return sum(int(np.prod(w.shape, dtype=np.int64)) * np.dtype(w.dtype).itemsize for w in model.weights)


# ---------------------------------------------------------------- children (one process each)


def child_decode(args):
    stages = []

    def stage(name, started, **extra):
        stages.append(dict(stage=name, seconds=round(time.perf_counter() - started, 2), **rss(), **extra))
        print(json.dumps(stages[-1]), file=sys.stderr, flush=True)

    start = time.perf_counter()
    import tensorflow as tf

    from keras_transformer import export

    stage("import tensorflow + keras_transformer", start)
    start = time.perf_counter()
    translator = export.load(args.run, beam_size=args.beam, max_length=args.max_length)
    stage("open the run (export.load)", start, weight_mb=round(weight_bytes(translator.model) / MB, 1))
    batches = batches_of(read_sentences(args.sources, args.sentences), args.batch_size)
    outputs = {"greedy": [], "beam": []}
    start = time.perf_counter()
    outputs["greedy"] += [s.decode() for s in translator.greedy(tf.constant(batches[0])).numpy()]
    stage(f"first greedy batch of {len(batches[0])}", start)
    start = time.perf_counter()
    for batch in batches[1:]:
        outputs["greedy"] += [s.decode() for s in translator.greedy(tf.constant(batch)).numpy()]
    stage(f"the rest of the {sum(map(len, batches))} greedy", start)
    start = time.perf_counter()
    for batch in batches:
        outputs["beam"] += [s.decode() for s in translator(tf.constant(batch)).numpy()]
    stage(f"beam {args.beam}, all {sum(map(len, batches))}", start)
    print(json.dumps(dict(stages=stages, outputs=outputs)))


def child_part(args):
    start = time.perf_counter()
    import tensorflow  # noqa: F401

    import keras_transformer  # noqa: F401
    from keras_transformer import export  # noqa: F401  (what the decode child imports)

    imported = rss()
    row, kept = dict(part=args.part, imported=imported), None
    run = pathlib.Path(args.run)
    if args.part == "tokenizers":
        from keras_transformer.runs.tokenizers import load_tokenizers

        kept = load_tokenizers(run)
    elif args.part == "model":
        from keras_transformer.models.loading import load_model

        kept = load_model(run / "model.keras")
        row["weight_mb"] = round(weight_bytes(kept) / MB, 1)
    elif args.part == "keras_load_model":
        import keras

        kept = keras.saving.load_model(run / "model.keras", compile=False)
        row["weight_mb"] = round(weight_bytes(kept) / MB, 1)
    row.update(after=rss(), seconds=round(time.perf_counter() - start, 2))
    print(json.dumps(row))
    return kept


# ---------------------------------------------------------------- the parent


def spawn(argv):
    print("$", " ".join(map(str, argv)), file=sys.stderr, flush=True)
    done = subprocess.run([sys.executable, __file__, *map(str, argv)], stdout=subprocess.PIPE, text=True)
    if done.returncode:
        sys.exit(f"{argv} failed ({done.returncode})")
    return json.loads(done.stdout.strip().splitlines()[-1])


def estimate(decode, parts):
    """The parts of the decode's peak, in MB, from the children's figures (see the module docstring)."""
    stages = decode["stages"]
    imported, opened, first = stages[0], stages[1], stages[2]
    weights = opened["weight_mb"]
    model, tokenizers = parts["model"], parts["tokenizers"]
    bfc_peak = max(s.get("bfc_peak_mb", 0) for s in stages)
    xla = first["rss_mb"] - opened["rss_mb"] - (first.get("bfc_current_mb", 0) - opened.get("bfc_current_mb", 0))
    return dict(
        weights=weights,
        tf_runtime_and_imports=imported["rss_mb"],
        keras_model_held=round(model["after"]["rss_mb"] - model["imported"]["rss_mb"], 1),
        load_overhead=round(model["after"]["peak_rss_mb"] - model["after"]["rss_mb"], 1),
        tokenizer_tables=round(tokenizers["after"]["rss_mb"] - tokenizers["imported"]["rss_mb"], 1),
        translator_beyond_model_and_tokenizers=round(
            opened["rss_mb"]
            - imported["rss_mb"]
            - (model["after"]["rss_mb"] - model["imported"]["rss_mb"])
            - (tokenizers["after"]["rss_mb"] - tokenizers["imported"]["rss_mb"]),
            1,
        ),
        decode_caches_and_activations_peak=round(bfc_peak - weights, 1) if bfc_peak else None,
        xla_programs_first_batch=round(xla, 1),
        rss_added_by_the_rest=round(stages[-1]["rss_mb"] - first["rss_mb"], 1),
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("child", nargs="?", choices=("parent", "decode", "part"), default="parent")
    parser.add_argument("run")
    parser.add_argument("--sources", default="/work/shared/data/multi30k_task1/raw/test_2016_flickr.en.gz")
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--part", choices=("import", "tokenizers", "model", "keras_load_model"))
    parser.add_argument("--output", help="the JSON report (default: printed only)")
    parser.add_argument("--outputs", help="also write the decode's translations here (JSON), to compare")
    args = parser.parse_args(argv)
    if args.child == "decode":
        return child_decode(args)
    if args.child == "part":
        return child_part(args)
    common = [args.run, "--sources", args.sources, "--sentences", args.sentences, "--batch-size", args.batch_size]
    common += ["--max-length", args.max_length, "--beam", args.beam]
    load_before = round(os.getloadavg()[0], 2)
    parts = {part: spawn(["part", *common, "--part", part]) for part in ("import", "tokenizers", "model")}
    parts["keras_load_model"] = spawn(["part", *common, "--part", "keras_load_model"])
    decode = spawn(["decode", *common])
    outputs = decode.pop("outputs")
    if args.outputs:
        pathlib.Path(args.outputs).write_text(json.dumps(outputs, ensure_ascii=False), encoding="utf-8")
    report = dict(
        benchmark="memory breakdown of the real-size decoder",
        command=" ".join(["python", *sys.argv]),
        machine=describe_machine(),
        load_average_1min=[load_before, round(os.getloadavg()[0], 2)],
        settings={
            name: getattr(args, name) for name in ("run", "sources", "sentences", "batch_size", "max_length", "beam")
        },
        decode=decode["stages"],
        parts=parts,
        estimates_mb=estimate(decode, parts),
    )
    text = json.dumps(report, indent=1)
    print(text)
    if args.output:
        pathlib.Path(args.output).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
