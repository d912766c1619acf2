"""A real-size model: an OPUS-MT-base-shaped Marian model decoded and fine-tuned by ours, transformers and CTranslate2.

The model (`real_size_torch.py build`, in the `--torch-python` interpreter):
a `MarianMTModel` of OPUS-MT base's shape (d_model 512, 6+6 layers, 8 heads,
ffn 2048, 58,101 shared pieces, 74.4M parameters) with random weights,
trained briefly on multi30k so that its outputs end at lengths that differ
(`--checkpoint` and `--run` name another build and its import),
written by transformers' `save_pretrained`, and imported with
`keras-transformer import`. Its weights are the same in every system:

- `decode`: the first `--sentences` English sentences of multi30k's
  `test_2016_flickr`, greedy and beam `--beam`, at most `--max-length` tokens
  (END included), strings in and strings out, in batches of `--batch-size`
  (sorted by length), each system in a process of its own (its peak RSS is
  that process's): ours from the run (`export.load`) and from its
  SavedModel (`keras-transformer export`), both timed after a first pass that
  compiles every shape; ours with `compact=True` (system `ours-compact`:
  finished sentences leave the batch); ours with `--engine ctranslate2`
  (system `engine`);
  transformers' `generate` (PyTorch, CPU, the same thread count);
  CTranslate2 float32 and int8, from CTranslate2's own
  `TransformersConverter` and from `keras-transformer export --format
  ctranslate2`, float32 with CTranslate2's default SGEMM and with MKL's
  (`--ct2-gemm`). Beside each: sentences/s, how many outputs equal
  transformers' (as strings), the mean output length in tokens.
- `train`: training steps per second of the imported model with `model.fit`
  (XLA, `training.recipe.compile_model`: Adam, label smoothing 0.1) against a
  plain PyTorch loop (AdamW, the same label smoothing) on the same batches of
  ids, float32 both, and the peak RSS of each process.

torch and transformers run only in `--torch-python` (CI installs neither).
Writes JSON (with the command and the machine) to
`benchmarks/results/real_size/`. Not run by CI.

Example:

    python benchmarks/real_size.py decode --torch-python /path/to/torch-venv/bin/python --sentences 500
    python benchmarks/real_size.py train --torch-python /path/to/torch-venv/bin/python
"""

import argparse
import json
import os
import pathlib
import resource
import shlex
import statistics
import subprocess
import sys
import time

from corpus import read_lines

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = REPO / "benchmarks" / "results" / "real_size"
TORCH_SIDE = HERE / "real_size_torch.py"


def peak_rss_mb():
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def load_average():
    return round(os.getloadavg()[0], 2)


def batches_of(sentences, batch_size):
    """`(order, batches)`: the sentences sorted by length (as CTranslate2 and transformers users do), in batches."""
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    ordered = [sentences[i] for i in order]
    return order, [ordered[s : s + batch_size] for s in range(0, len(ordered), batch_size)]


def unsort(order, outputs):
    result = [None] * len(order)
    for position, index in enumerate(order):
        result[index] = outputs[position]
    return result


def last_json(stdout):
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"no JSON line in:\n{stdout[-3000:]}")


def spawn(command, log, keep=None):
    """Runs `command`, its stderr to `log`; returns its last JSON line and the load average around it.

    `keep`: a JSON file that holds the result of an earlier run of the same
    command (returned instead of running it again), else written with it.
    """
    if keep and keep.is_file():
        kept = json.loads(keep.read_text(encoding="utf-8"))
        if kept.get("command") == [str(c) for c in command]:
            print("kept", keep, flush=True)
            return kept
    before = load_average()
    print("$", " ".join(shlex.quote(str(c)) for c in command), flush=True)
    with open(log, "a", encoding="utf-8") as handle:
        done = subprocess.run([str(c) for c in command], stdout=subprocess.PIPE, stderr=handle, text=True)
    if done.returncode:
        raise RuntimeError(f"{command} failed ({done.returncode}); see {log}\n{done.stdout[-2000:]}")
    result = last_json(done.stdout)
    result["load_average_1min"] = [before, load_average()]
    if keep:
        keep.parent.mkdir(parents=True, exist_ok=True)
        keep.write_text(json.dumps(dict(result, command=[str(c) for c in command])), encoding="utf-8")
    return result


# ---------------------------------------------------------------- workers (one process each)


def worker_ours(args):
    """Ours, from the run directory or a SavedModel: greedy and beam, each after a first (compiling) pass.

    `--compact`: the run's `Translator` with `compact=True` (`translate --compact`).

    `--engine ctranslate2`: the run decoded by `keras-transformer translate
    --engine ctranslate2`'s translator (converted once into its cache).
    """
    import warnings

    if args.gemm == "mkl":
        os.environ["CT2_USE_MKL"] = "1"
    import tensorflow as tf

    from keras_transformer.opener import open_translator

    warnings.simplefilter("ignore")
    sentences = read_lines(args.sources, args.sentences)
    order, batches = batches_of(sentences, args.batch_size)
    saved = not (pathlib.Path(args.path) / "config.json").is_file()
    options = dict(beam_size=args.beam) if saved else dict(beam_size=args.beam, max_length=args.max_length)
    if args.compact:  # finished sentences leave the batch between segments of steps
        options.update(compact=True)
    if args.engine == "ctranslate2":  # the engine's translate_batch threads, as the direct CTranslate2 rows'
        options.update(threads=args.inter_threads, intra_threads=args.intra_threads)
    start = time.perf_counter()
    translator = open_translator(args.path, args.engine, **options)
    load_seconds = time.perf_counter() - start
    results = {}
    for search in ("greedy", "beam"):
        call = translator.greedy if search == "greedy" else translator

        def run(call=call):
            outputs = []
            for batch in batches:
                outputs.extend(s.decode("utf-8") for s in call(tf.constant(batch)).numpy())
            return outputs

        start = time.perf_counter()
        run()
        first = time.perf_counter() - start
        runs = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            outputs = run()
            runs.append(time.perf_counter() - start)
        results[search] = dict(runs=runs, first_pass_seconds=first, outputs=unsort(order, outputs))
    print(json.dumps(dict(results=results, load_seconds=load_seconds, peak_rss_mb=peak_rss_mb())))


def worker_ours_search(args):
    """Ours below the Translator: `decoding.compile_search` (XLA) with the model's own START/END ids.

    The run's tokenizers (TensorFlow ops) and the decode, strings in and
    strings out, as the Translator does; `--alpha` is the GNMT length penalty
    of the beam search (the Translator of a run uses the checkpoint's own
    length normalization where the package has it).
    """
    import keras
    import tensorflow as tf

    from keras_transformer import decoding, runs

    run = pathlib.Path(args.path)
    model = keras.saving.load_model(run / runs.MODEL, compile=False)
    tokenizers = runs.load_tokenizers(run)
    config = model.config
    end, pad = int(tokenizers.source.end_id), int(tokenizers.source.pad_id)
    sentences = read_lines(args.sources, args.sentences)
    order, batches = batches_of(sentences, args.batch_size)
    results = {}
    for search_name in ("greedy", "beam"):
        beam = 1 if search_name == "greedy" else args.beam
        search = decoding.search_for(beam, args.alpha, start_id=config.start_id, end_id=config.end_id)
        decode = decoding.compile_search(model, search, max_length=args.max_length)

        def run_all(decode=decode):
            outputs = []
            for batch in batches:
                ids = tokenizers.source.tokenize(tf.constant(batch))
                ids = tf.concat([tf.cast(ids, tf.int32), tf.fill([ids.nrows(), 1], end)], axis=1)
                width = -(-int(tf.reduce_max(ids.row_lengths())) // 16) * 16
                dense = ids.to_tensor(pad, shape=[args.batch_size, width])
                best = decode(dense).best().ids.numpy()[: len(batch)]
                rows = [
                    list(row[: list(row).index(config.end_id)]) if config.end_id in row else list(row) for row in best
                ]
                text = tokenizers.target.detokenize(tf.ragged.constant(rows or [[]], dtype=tf.int32)).numpy()
                outputs.extend(t.decode("utf-8") for t in text[: len(batch)])
            return outputs

        start = time.perf_counter()
        run_all()
        first = time.perf_counter() - start
        runs = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            outputs = run_all()
            runs.append(time.perf_counter() - start)
        results[search_name] = dict(runs=runs, first_pass_seconds=first, outputs=unsort(order, outputs))
    print(json.dumps(dict(results=results, peak_rss_mb=peak_rss_mb())))


def worker_ct2(args):
    """CTranslate2 on source.spm's pieces (END appended unless the model adds it), strings out through target.spm.

    `--gemm mkl` sets CT2_USE_MKL=1 before CTranslate2 loads: its float32
    matrix products then run in Intel MKL's packed SGEMM, which CTranslate2
    picks by itself only on Intel CPUs (elsewhere oneDNN's, unpacked).
    """
    if args.gemm == "mkl":
        os.environ["CT2_USE_MKL"] = "1"
    import ctranslate2
    import sentencepiece as spm

    sentences = read_lines(args.sources, args.sentences)
    order, batches = batches_of(sentences, args.batch_size)
    source = spm.SentencePieceProcessor(model_file=str(pathlib.Path(args.checkpoint) / "source.spm"))
    target = spm.SentencePieceProcessor(model_file=str(pathlib.Path(args.checkpoint) / "target.spm"))
    translator = ctranslate2.Translator(
        args.path, compute_type=args.compute_type, inter_threads=args.inter_threads, intra_threads=args.intra_threads
    )
    # CTranslate2's own converter drops Marian's padding from the vocabulary (it starts from </s>); ours keeps it.
    vocabularies = list(pathlib.Path(args.path).glob("*vocabulary.json"))
    has_pad = any("<pad>" in json.loads(v.read_text(encoding="utf-8")) for v in vocabularies)
    # A model whose config adds END to the source itself (our export) gets the pieces alone; else END appended.
    adds_end = json.loads((pathlib.Path(args.path) / "config.json").read_text(encoding="utf-8")).get("add_source_eos")
    end = [] if adds_end else ["</s>"]
    results = {}
    for search in ("greedy", "beam"):
        options = dict(
            max_batch_size=args.batch_size,
            beam_size=1 if search == "greedy" else args.beam,
            max_decoding_length=args.max_length,
            length_penalty=1.0,
        )
        if has_pad:  # transformers' bad_words_ids: Marian's padding, never generated
            options["suppress_sequences"] = [["<pad>"]]
        tokens = None

        def run(options=options):
            nonlocal tokens
            flat = [piece for batch in batches for piece in batch]
            pieces = [source.encode(s, out_type=str) + end for s in flat]
            hypotheses = [r.hypotheses[0] for r in translator.translate_batch(pieces, **options)]
            tokens = hypotheses
            return [target.decode_pieces([p for p in h if p != "<unk>"]) for h in hypotheses]

        translator.translate_batch([["▁A", "</s>"]], **options)  # warm-up
        runs = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            outputs = run()
            runs.append(time.perf_counter() - start)
        lengths = [len(t) + 1 if len(t) < args.max_length else len(t) for t in tokens]  # + END, where it ended
        results[search] = dict(runs=runs, outputs=unsort(order, outputs), mean_length=statistics.mean(lengths))
    print(
        json.dumps(
            dict(results=results, peak_rss_mb=peak_rss_mb(), ctranslate2=ctranslate2.__version__, gemm=args.gemm)
        )
    )


def worker_train(args):
    """Ours: `model.fit` (XLA) of the imported model on fixed batches; writes the batches for the PyTorch loop."""
    import keras
    import numpy as np
    import tensorflow as tf

    from keras_transformer import runs
    from keras_transformer.training.recipe import compile_model

    run = pathlib.Path(args.path)
    config = runs.RunConfig.read(run)
    tokenizers = runs.load_tokenizers(run)
    source_tokenizer, target_tokenizer = tokenizers.source, tokenizers.target
    rows, width = args.token_budget // args.width, args.width
    english = read_lines(pathlib.Path(args.data) / "train.en", 4000)
    german = read_lines(pathlib.Path(args.data) / "train.de", 4000)
    sources = source_tokenizer.tokenize(tf.constant(english)).to_list()
    targets = target_tokenizer.tokenize(tf.constant(german)).to_list()
    end, start = int(target_tokenizer.end_id), int(target_tokenizer.start_id)
    source_pad, target_pad = int(source_tokenizer.pad_id), int(target_tokenizer.pad_id)
    fitting = [(s + [end], t) for s, t in zip(sources, targets) if len(s) + 1 <= width and len(t) + 1 <= width]
    batches = []
    for b in range(args.batches):
        chunk = fitting[b * rows : (b + 1) * rows]
        encoder = np.full((rows, width), source_pad, "int32")
        decoder = np.full((rows, width), target_pad, "int32")
        labels = np.full((rows, width), target_pad, "int32")
        for i, (s, t) in enumerate(chunk):
            encoder[i, : len(s)] = s
            decoder[i, : len(t) + 1] = [start] + t
            labels[i, : len(t) + 1] = t + [end]
        batches.append((encoder, decoder, labels))
    target_tokens = sum(int((labels != target_pad).sum()) for _, _, labels in batches) / len(batches)
    pathlib.Path(args.batches_file).write_text(
        json.dumps(
            [
                dict(source=e.tolist(), target_in=d.tolist(), labels=np.where(y == target_pad, -100, y).tolist())
                for e, d, y in batches
            ]
        )
    )
    model = keras.saving.load_model(run / runs.MODEL, compile=False)
    compile_model(model, config.preset, jit_compile=True)

    def dataset(count):
        def generator():
            for index in range(count):
                encoder, decoder, labels = batches[index % len(batches)]
                yield {"encoder_inputs": encoder, "decoder_inputs": decoder}, labels

        spec = tf.TensorSpec((rows, width), tf.int32)
        return tf.data.Dataset.from_generator(
            generator, output_signature=({"encoder_inputs": spec, "decoder_inputs": spec}, spec)
        ).prefetch(2)

    start_time = time.perf_counter()
    model.fit(dataset(args.warmup), epochs=1, verbose=0)
    first = time.perf_counter() - start_time
    runs = []
    for _ in range(args.repeats):
        start_time = time.perf_counter()
        history = model.fit(dataset(args.steps), epochs=1, verbose=0)
        runs.append(time.perf_counter() - start_time)
    print(
        json.dumps(
            dict(
                seconds=runs,
                steps=args.steps,
                first_fit_seconds=first,
                loss=float(history.history["loss"][-1]),
                batch_shape=[rows, width],
                target_tokens_per_batch=target_tokens,
                peak_rss_mb=peak_rss_mb(),
            )
        )
    )


# ---------------------------------------------------------------- the benchmarks


def prepare(args, scratch):
    """The checkpoint (built by `--torch-python` if absent), its import as a run, and the exports."""
    from corpus import multi30k_folder

    args.data = str(multi30k_folder(args.data))
    checkpoint, run = pathlib.Path(args.checkpoint), pathlib.Path(args.run)
    log = scratch / "log.txt"
    if not (checkpoint / "config.json").is_file():
        spawn([args.torch_python, TORCH_SIDE, "build", checkpoint, "--data", args.data], log)
    if not (run / "config.json").is_file():
        cli = pathlib.Path(sys.executable).parent / "keras-transformer"
        subprocess.run([cli, "import", checkpoint, "--output", run], check=True)
    return checkpoint, run, log


def export(command, folder):
    if not pathlib.Path(folder).is_dir():
        cli = pathlib.Path(sys.executable).parent / "keras-transformer"
        start = time.perf_counter()
        subprocess.run([cli, "export", *map(str, command), "--output", str(folder)], check=True)
        print(f"exported {folder} in {time.perf_counter() - start:.0f} s", flush=True)
    return folder


def output_lengths(outputs, checkpoint, max_length):
    """The spread of output tokens (END counted) of strings, re-encoded by target.spm: one measure for every system.

    `{"mean", "min", "quartiles", "max", "at_max_length"}`: the last counts the
    outputs cut off at `max_length` (they never ended).
    """
    import sentencepiece as spm

    target = spm.SentencePieceProcessor(model_file=str(pathlib.Path(checkpoint) / "target.spm"))
    lengths = [min(len(target.encode(s)) + 1, max_length) for s in outputs]
    return dict(
        mean=round(statistics.mean(lengths), 2),
        min=min(lengths),
        quartiles=statistics.quantiles(lengths, n=4),
        max=max(lengths),
        at_max_length=sum(length == max_length for length in lengths),
    )


def decode(args):
    scratch = pathlib.Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    checkpoint, run, log = prepare(args, scratch)
    sources = pathlib.Path(args.data) / "test_2016_flickr.en"
    common = ["--sentences", args.sentences, "--batch-size", args.batch_size, "--max-length", args.max_length]
    common += ["--beam", args.beam, "--repeats", args.repeats]
    me = [sys.executable, __file__]
    systems = {}
    wanted = set(args.systems.split(","))

    def keep(name):  # each system's result, reused by a rerun of the same command (delete to measure again)
        return scratch / "results" / f"{name}.json"

    if "transformers" in wanted:
        for search, beam in (("greedy", 1), ("beam", args.beam)):
            result = spawn(
                [args.torch_python, TORCH_SIDE, "generate", checkpoint, sources, "--sentences", args.sentences,
                 "--batch-size", args.batch_size, "--beam", beam, "--max-length", args.max_length,
                 "--repeats", args.repeats, "--threads", args.threads],
                log,
                keep(f"transformers-{search}"),
            )  # fmt: skip
            systems.setdefault("transformers generate (PyTorch)", {})[search] = result
    if "ours" in wanted:
        systems["ours, run (export.load)"] = spawn([*me, "worker-ours", run, sources, *common], log, keep("ours-run"))
    if "ours-compact" in wanted:
        systems["ours, run, compact=True"] = spawn(
            [*me, "worker-ours", run, sources, *common, "--compact"], log, keep("ours-compact")
        )
    if "engine" in wanted:
        for gemm in args.ct2_gemm.split(","):
            backend = "" if gemm == "default" else ", CT2_USE_MKL=1"
            systems[f"ours, --engine ctranslate2 float32{backend}"] = spawn(
                [*me, "worker-ours", run, sources, *common, "--engine", "ctranslate2", "--gemm", gemm,
                 "--inter-threads", args.ct2_inter_threads, "--intra-threads", args.ct2_intra_threads],
                log,
                keep(f"engine-{gemm}"),
            )  # fmt: skip
    if "ours-search" in wanted:
        systems["ours, compile_search (XLA)"] = spawn(
            [*me, "worker-ours-search", run, sources, *common, "--alpha", args.alpha], log, keep("ours-search")
        )
    if "ours-savedmodel" in wanted:
        saved = export(["--model", run, "--beam", args.beam, "--max-length", args.max_length], scratch / "savedmodel")
        systems["ours, SavedModel (keras-transformer export)"] = spawn(
            [*me, "worker-ours", saved, sources, *common], log, keep("ours-savedmodel")
        )
    ct2_exports = {}
    if "ct2-hf" in wanted:
        folder = scratch / "ct2-transformers"
        if not folder.is_dir():
            spawn([args.torch_python, TORCH_SIDE, "ct2", checkpoint, folder], log)
        ct2_exports["TransformersConverter"] = folder
    if "ct2-ours" in wanted:
        ct2_exports["keras-transformer export"] = export(
            ["--model", run, "--format", "ctranslate2"], scratch / "ct2-ours"
        )
    for origin, folder in ct2_exports.items():
        for compute_type in ("float32", "int8"):
            for gemm in args.ct2_gemm.split(",") if compute_type == "float32" else ["default"]:
                result = spawn(
                    [*me, "worker-ct2", folder, sources, *common, "--checkpoint", checkpoint, "--compute-type",
                     compute_type, "--inter-threads", args.ct2_inter_threads, "--intra-threads",
                     args.ct2_intra_threads, "--gemm", gemm],
                    log,
                    keep(f"ct2-{compute_type}-{gemm}-{folder.name}"),
                )  # fmt: skip
                backend = "" if gemm == "default" else ", CT2_USE_MKL=1"
                systems[f"CTranslate2 {compute_type} ({origin}{backend})"] = result
    return report_decode(args, systems, checkpoint)


def report_decode(args, systems, checkpoint):
    reference = systems.get("transformers generate (PyTorch)")
    rows = []
    for name, result in systems.items():
        for search in ("greedy", "beam"):
            one = result[search] if "results" not in result else result["results"][search]
            seconds = min(one["runs"])
            same = None
            if reference:
                same = sum(a == b for a, b in zip(one["outputs"], reference[search]["outputs"]))
            lengths = output_lengths(one["outputs"], checkpoint, args.max_length)
            rows.append(
                dict(
                    system=name,
                    search=search,
                    seconds=round(seconds, 2),
                    runs=[round(r, 2) for r in one["runs"]],
                    sentences_per_second=round(len(one["outputs"]) / seconds, 2),
                    same_as_transformers=same,
                    mean_length=lengths.pop("mean"),
                    output_lengths=lengths,
                    peak_rss_mb=one.get("peak_rss_mb", result.get("peak_rss_mb")),
                    first_pass_seconds=one.get("first_pass_seconds"),
                    load_average_1min=one.get("load_average_1min", result.get("load_average_1min")),
                )
            )
            print(rows[-1], flush=True)
    outputs = {f"{name} | {search}": (r[search] if "results" not in r else r["results"][search])["outputs"]
               for name, r in systems.items() for search in ("greedy", "beam")}  # fmt: skip
    return write_report(args, "decode", rows, extra=dict(outputs=outputs))


def train(args):
    scratch = pathlib.Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    checkpoint, run, log = prepare(args, scratch)
    batches_file = scratch / "train_batches.json"
    common = ["--steps", args.steps, "--warmup", args.warmup, "--repeats", args.repeats]
    ours = spawn(
        [sys.executable, __file__, "worker-train", run, "--batches-file", batches_file, "--data", args.data,
         "--token-budget", args.token_budget, "--width", args.width, *common],
        log,
    )  # fmt: skip
    torch = spawn(
        [args.torch_python, TORCH_SIDE, "train", checkpoint, batches_file, "--steps", args.steps * args.repeats,
         "--warmup", args.warmup, "--threads", args.threads],
        log,
    )  # fmt: skip
    ours_step = min(ours["seconds"]) / args.steps
    torch_steps = torch["step_seconds"]
    torch_step = min(statistics.mean(torch_steps[i : i + args.steps]) for i in range(0, len(torch_steps), args.steps))
    rows = [
        dict(system="ours, model.fit (XLA, Adam)", step_seconds=round(ours_step, 3),
             steps_per_second=round(1 / ours_step, 3), peak_rss_mb=ours["peak_rss_mb"],
             first_fit_seconds=round(ours["first_fit_seconds"], 1), load_average_1min=ours["load_average_1min"],
             raw=ours),
        dict(system="PyTorch loop (eager, AdamW)", step_seconds=round(torch_step, 3),
             steps_per_second=round(1 / torch_step, 3), peak_rss_mb=torch["peak_rss_mb"],
             load_average_1min=torch["load_average_1min"], raw=torch),
    ]  # fmt: skip
    for row in rows:
        print({k: v for k, v in row.items() if k != "raw"}, flush=True)
    return write_report(args, "train", rows, extra=dict(ratio=round(torch_step / ours_step, 3)))


def write_report(args, name, rows, extra):
    sys.path.insert(0, str(HERE))
    from machine import describe_machine, machine_line

    info = describe_machine()
    info["cpu_flags"] = cpu_flags()
    report = dict(
        benchmark=f"real_size {name}",
        command="python " + " ".join(shlex.quote(a) for a in sys.argv),
        machine=info,
        machine_line=machine_line(info),
        settings={k: v for k, v in vars(args).items() if k not in ("func",)},
        results=rows,
        **extra,
    )
    output = pathlib.Path(args.output or RESULTS / f"{name}.json")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {output}")
    return report


def cpu_flags():
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return sorted(f for f in flags if f.startswith(("avx", "amx", "fma", "vnni")))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("decode", "train"):
        p = commands.add_parser(name)
        p.add_argument("--torch-python", required=True, help="an interpreter with torch and transformers")
        p.add_argument(
            "--data",
            help="multi30k task 1, train.en/.de and test_2016_flickr.en (default: found as corpus.py says, "
            "else downloaded once)",
        )
        p.add_argument("--checkpoint", default="/tmp/real_size/marian", help="the Marian folder (built if absent)")
        p.add_argument("--run", default="/tmp/real_size/run", help="its import (imported if absent)")
        p.add_argument("--scratch", default="/tmp/real_size/work", help="exports, batches and the log")
        p.add_argument("--threads", type=int, default=2, help="PyTorch's threads")
        p.add_argument("--repeats", type=int, default=1)
        p.add_argument("--output", help="the JSON report (default: benchmarks/results/real_size/NAME.json)")
    decode_parser = commands.choices["decode"]
    decode_parser.add_argument("--sentences", type=int, default=500)
    decode_parser.add_argument("--batch-size", type=int, default=32)
    decode_parser.add_argument("--max-length", type=int, default=64)
    decode_parser.add_argument("--beam", type=int, default=4)
    decode_parser.add_argument("--alpha", type=float, default=1.0, help="GNMT alpha of ours-search's beam")
    decode_parser.add_argument("--ct2-inter-threads", type=int, default=1)
    decode_parser.add_argument("--ct2-intra-threads", type=int, default=2)
    decode_parser.add_argument("--systems", default="transformers,ours,ours-savedmodel,ct2-hf,ct2-ours")
    decode_parser.add_argument(
        "--ct2-gemm",
        default="default,mkl",
        help="CTranslate2's float32 matrix-product backends to run: default (its own), mkl (CT2_USE_MKL=1)",
    )
    train_parser = commands.choices["train"]
    train_parser.add_argument("--token-budget", type=int, default=1024, help="rows x width of every batch")
    train_parser.add_argument("--width", type=int, default=32)
    train_parser.add_argument("--steps", type=int, default=5, help="steps timed per repeat")
    train_parser.add_argument("--warmup", type=int, default=2)
    for name in ("worker-ours", "worker-ct2", "worker-ours-search"):
        w = commands.add_parser(name)
        w.add_argument("path")
        w.add_argument("sources")
        w.add_argument("--sentences", type=int, default=500)
        w.add_argument("--batch-size", type=int, default=32)
        w.add_argument("--max-length", type=int, default=64)
        w.add_argument("--beam", type=int, default=4)
        w.add_argument("--repeats", type=int, default=1)
        if name == "worker-ours-search":
            w.add_argument("--alpha", type=float, default=1.0)
        if name == "worker-ct2":
            w.add_argument("--checkpoint", required=True)
            w.add_argument("--compute-type", default="float32")
        if name == "worker-ours":
            w.add_argument("--engine", choices=("xla", "ctranslate2"), default="xla")
            w.add_argument("--compact", action="store_true", help="the run's Translator with compact=True")
        if name in ("worker-ct2", "worker-ours"):
            w.add_argument("--inter-threads", type=int, default=1)
            w.add_argument("--intra-threads", type=int, default=2)
            w.add_argument("--gemm", choices=("default", "mkl"), default="default")
    w = commands.add_parser("worker-train")
    w.add_argument("path")
    w.add_argument("--batches-file", required=True)
    w.add_argument("--data", required=True, help="the multi30k task 1 folder")
    w.add_argument("--token-budget", type=int, default=1024)
    w.add_argument("--width", type=int, default=32)
    w.add_argument("--batches", type=int, default=4)
    w.add_argument("--steps", type=int, default=5)
    w.add_argument("--warmup", type=int, default=2)
    w.add_argument("--repeats", type=int, default=1)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    handlers = {"decode": decode, "train": train, "worker-ours": worker_ours, "worker-ct2": worker_ct2}
    handlers["worker-train"] = worker_train
    handlers["worker-ours-search"] = worker_ours_search
    handlers[args.command](args)


if __name__ == "__main__":
    main()
