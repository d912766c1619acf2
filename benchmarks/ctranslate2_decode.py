"""Decoding against CTranslate2: ours (XLA, cached) vs CTranslate2 float32 and int8, greedy and beam search.

The run (`--model`, or by default the `tiny` preset trained here in a few
minutes) is exported with `keras-transformer export --format ctranslate2`
(float32; CTranslate2's int8 is the same export loaded with
`compute_type="int8"`). `--sentences` source sentences of the preset's test
split, tokenized beforehand and cut to `--max-length` tokens, sorted by
length, are decoded in batches of `--batch-size`, at most `--max-length`
generated tokens:

- ours: `compile_search` (XLA) greedy and beam, every batch padded to one
  width (the longest source rounded up to 16), as one XLA program
  (`compact=False`) and compacting (`compact=True`: finished sentences dropped
  from the batch between segments of steps, `keras_transformer.decoding.compaction`),
  the batches one after the other and on `--workers` threads side by side
  (as CTranslate2's `inter_threads`), the compilation excluded (a first pass
  over all batches compiles every shape; its time is reported);
- CTranslate2: `translate_batch` on the pieces of the same sentences with
  `max_batch_size=--batch-size`, `inter_threads=2, intra_threads=1` (with
  `intra_threads=2` its int8 was 3-6x slower on this 2-core CPU: issue #37),
  `min_decoding_length=0` and `<pad>`/`<s>` suppressed (ours never generate them).

Length penalties differ: ours divides a hypothesis's log-probability by
GNMT's `((5 + L) / 6) ** alpha`, CTranslate2 by `L ** beta`. The two agree
up to a constant factor (which does not change the ranking of hypotheses of
one source) where their slopes in log L agree, `beta = alpha * L / (5 + L)`;
`beta` is taken at the mean length of our greedy outputs unless
`--ct2-length-penalty` is given.

Each time is the median of `--repeats` runs over all sentences. Beside each:
BLEU (sacreBLEU, cased 13a, on the detokenized output against the raw
references), so that speed never comes from broken output, and how many
sentences' ids equal ours (one program, one worker) in the same search. Writes JSON
(with the command and the machine) to `benchmarks/results/decoding/`. Not
run by CI.

Example:

    python benchmarks/ctranslate2_decode.py --model saved_models/multi30k-en-de
    python benchmarks/ctranslate2_decode.py      # trains the tiny preset first
"""

import argparse
import json
import os
import pathlib
import shlex
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from machine import describe_machine, machine_line  # noqa: E402

from keras_transformer import (
    decoding,
    runs,  # noqa: E402
)
from keras_transformer.ctranslate2.conversion import convert_run, read_pieces  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "decoding"
SUPPRESS = [["<pad>"], ["<s>"]]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a training run directory (default: train the tiny preset here)")
    parser.add_argument(
        "--data-dir", help="the corpora's folder (default: $KERAS_TRANSFORMER_DATA_DIR, else bundled or downloaded)"
    )
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--max-length", type=int, default=64, help="source tokens kept and tokens generated, at most")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=None, help="our GNMT length penalty (default: the run's)")
    parser.add_argument("--ct2-length-penalty", type=float, default=None, help="CTranslate2's beta (default: matched)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="our threads decoding batches side by side (and 1)")
    parser.add_argument(
        "--only-best",
        action="store_true",
        help="of ours, only the compacting decoder with --workers (skip one program and 1 worker)",
    )
    parser.add_argument(
        "--output", help="the JSON report (default: benchmarks/results/decoding/ctranslate2_<run>.json)"
    )
    return parser.parse_args(argv)


def train_tiny(data_dir, folder):
    """Trains the `tiny` preset into `folder/tiny` with the command line; returns the run directory."""
    from keras_transformer.commands import cli

    path = pathlib.Path(folder) / "tiny"
    data_flags = ["--data-dir", str(data_dir)] if data_dir else []
    code = cli.main(["train", "--preset", "tiny", *data_flags, "--output", str(path)])
    if code:
        sys.exit(f"training the tiny preset failed (exit {code})")
    return path


def test_pairs(run, data_dir, count):
    """`(corpus, split, pairs)`: the first `count` pairs of the test split (validation where there is none)."""
    from keras_transformer.datasets.corpora import get_corpus, load_pairs

    corpus = runs.RunConfig.read(run).preset.data.corpus
    split = "test" if "test" in get_corpus(corpus).splits else "validation"
    return corpus, split, load_pairs(corpus, data_dir, split)[:count]


def tokenize(run, sentences, max_length):
    """The source ids of `sentences` as the run's model reads them: END added where its preset adds it."""
    from keras_transformer.tokenizers import END_ID, SubwordTokenizer

    add_source_end = runs.RunConfig.read(run).add_source_end
    tokenizer = SubwordTokenizer.load(run / runs.SOURCE_TOKENIZER)
    rows = tokenizer.tokenize(tf.constant(sentences)).to_list()
    return [(row + [END_ID] if add_source_end else row)[:max_length] for row in rows]


def detokenizer(run):
    from keras_transformer.tokenizers import SubwordTokenizer

    path = run / runs.TARGET_TOKENIZER
    tokenizer = SubwordTokenizer.load(path if path.is_dir() else run / runs.SOURCE_TOKENIZER)
    return lambda rows: [s.decode("utf-8") for s in tokenizer.detokenize(tf.ragged.constant(rows)).numpy()]


def ours(model, batches, search, beam, alpha, max_length, repeats, compact, workers):
    """(median seconds, per-run seconds, first-pass seconds, ids per sentence) of our XLA decoder.

    `workers` threads decode batches side by side, as CTranslate2's
    `inter_threads` does (each XLA program still uses every core). The
    first pass over all batches compiles every shape it meets (the
    compacting decoder meets a few batch sizes) and is not in the median.
    """
    search = decoding.BeamSearch(beam, alpha=alpha) if search == "beam" else decoding.GreedySearch()
    compiled = decoding.compile_search(model, search, max_length=max_length, compact=compact)

    def decode(source_ids):
        return compiled(source_ids).best().ids

    pool = ThreadPoolExecutor(workers)

    def decode_all():
        outputs = pool.map(lambda batch: decode(batch[1]).numpy()[: batch[0]], batches)
        return [row for output in outputs for row in output]

    start = time.perf_counter()
    for _, batch in batches:
        decode(batch).numpy()
    compile_seconds = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        ids = decode_all()
        times.append(time.perf_counter() - start)
    pool.shutdown()
    return statistics.median(times), times, compile_seconds, [[int(i) for i in row if i != 0] for row in ids]


def ctranslate2_decode(path, compute_type, sources, pieces, batch_size, beam, beta, max_length, repeats):
    """(median seconds, per-run seconds, ids per sentence) of CTranslate2 on 2 inter-op threads."""
    import ctranslate2

    translator = ctranslate2.Translator(str(path), compute_type=compute_type, inter_threads=2, intra_threads=1)
    tokens = [[pieces[i] for i in row] for row in sources]
    options = dict(
        max_batch_size=batch_size,
        beam_size=beam,
        length_penalty=beta,
        max_decoding_length=max_length,
        min_decoding_length=0,
        suppress_sequences=SUPPRESS,
        return_end_token=True,
    )
    translator.translate_batch(tokens[:batch_size], **options)  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        results = translator.translate_batch(tokens, **options)
        times.append(time.perf_counter() - start)
    index = {piece: i for i, piece in enumerate(pieces)}
    return statistics.median(times), times, [[index[p] for p in r.hypotheses[0]] for r in results]


def bleu(ids, references, detokenize):
    import sacrebleu

    return round(sacrebleu.corpus_bleu(detokenize(ids), [references]).score, 2)


def batches_of(sources, batch_size):
    """Our padded batches `(real rows, (batch_size, width) ids)`, one width for all (one XLA program)."""
    width = -(-max(len(row) for row in sources) // 16) * 16
    out = []
    for start in range(0, len(sources), batch_size):
        rows = sources[start : start + batch_size]
        batch = np.zeros((batch_size, width), "int32")
        for i, row in enumerate(rows):
            batch[i, : len(row)] = row
        out.append((len(rows), tf.constant(batch)))
    return out


def main(argv=None):
    args = parse_args(argv)
    print(machine_line(describe_machine()), flush=True)
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="ct2-bench-"))
    run = pathlib.Path(args.model) if args.model else train_tiny(args.data_dir, scratch)
    config = runs.RunConfig.read(run)
    alpha = args.alpha if args.alpha is not None else config.decoding.alpha
    model = keras.saving.load_model(run / runs.MODEL, compile=False)
    max_length = min(args.max_length, model.max_length)

    corpus, split, pairs = test_pairs(run, args.data_dir, args.sentences)
    sources = tokenize(run, [s for s, _ in pairs], max_length)
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))  # length-sorted, as CTranslate2 does
    sources = [sources[i] for i in order]
    references = [pairs[i][1] for i in order]
    batches = batches_of(sources, args.batch_size)
    detokenize = detokenizer(run)
    target = run / runs.TARGET_TOKENIZER
    pieces = read_pieces(target if target.is_dir() else run / runs.SOURCE_TOKENIZER)
    export = pathlib.Path(convert_run(run, scratch / "ct2"))

    rows, reference_ids = [], {}

    def add_row(system, search, seconds, times, ids, **extra):
        # The first of ours: float32, one program and one worker (with --only-best, compacting).
        reference_ids.setdefault(search, ids)
        rows.append(
            dict(
                system=system,
                search=search,
                seconds=round(seconds, 3),
                runs=[round(r, 3) for r in times],
                **extra,
                bleu=bleu(ids, references, detokenize),
                same_ids_as_ours=sum(a == b for a, b in zip(ids, reference_ids[search])),
            )
        )
        print(rows[-1], flush=True)

    quantized = keras.saving.load_model(run / runs.MODEL, compile=False)
    quantized.quantize("int8")
    for search in ("greedy", "beam"):
        for precision, weights in (("float32", model), ("int8", quantized)):
            for compact in (False, True):
                for workers in sorted({1, args.workers}):
                    if (args.only_best or precision == "int8") and not (compact and workers == args.workers):
                        continue
                    seconds, times, first_pass, ids = ours(
                        weights, batches, search, args.beam, alpha, max_length, args.repeats, compact, workers
                    )
                    kind = "compacting" if compact else "one program"
                    quantization = ", Keras int8" if precision == "int8" else ""
                    system = f"ours (XLA, cached{quantization}, {kind}, {workers} worker{'s' if workers > 1 else ''})"
                    add_row(system, search, seconds, times, ids, first_pass_seconds=round(first_pass, 1))
    mean_length = float(np.mean([len(row) for row in reference_ids["greedy"]]))
    beta = args.ct2_length_penalty
    if beta is None:
        beta = round(alpha * mean_length / (5.0 + mean_length), 3)
    for compute_type in ("float32", "int8"):
        for search in ("greedy", "beam"):
            beam = 1 if search == "greedy" else args.beam
            seconds, times, ids = ctranslate2_decode(
                export, compute_type, sources, pieces, args.batch_size, beam, beta, max_length, args.repeats
            )
            add_row(f"CTranslate2 {compute_type}", search, seconds, times, ids)

    report = dict(
        benchmark="ctranslate2_decode",
        command="python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(sys.argv[1:] if argv is None else argv)]),
        machine=describe_machine(),
        machine_line=machine_line(describe_machine()),
        model=dict(
            run=str(run) if args.model else "the tiny preset, trained by this script",
            preset=config.preset.name if config.preset else None,
            corpus=corpus,
            parameters=int(model.count_params()),
            epochs_trained=_epochs(run),
        ),
        settings=dict(
            sentences=len(sources),
            split=split,
            batch_size=args.batch_size,
            max_length=max_length,
            beam=args.beam,
            ours_alpha=alpha,
            ctranslate2_beta=beta,
            beta_matched_at_length=round(mean_length, 2),
            ctranslate2_threads="inter_threads=2, intra_threads=1",
            ours_workers=sorted({1, args.workers}),
            repeats=args.repeats,
            timing="median of the repeats, all sentences, compile excluded",
            bleu="sacreBLEU corpus BLEU, cased 13a, detokenized output vs raw references",
        ),
        results=rows,
    )
    output = pathlib.Path(args.output) if args.output else RESULTS / f"ctranslate2_{run.name}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {output}")
    print(markdown_table(rows))


def _epochs(run):
    history = run / runs.HISTORY
    if not history.is_file():
        return None
    return max(0, len(history.read_text(encoding="utf-8").splitlines()) - 1)


def markdown_table(rows):
    lines = ["| system | search | seconds | BLEU | ids equal to ours |", "|---|---|---|---|---|"]
    for row in rows:
        lines.append(
            f"| {row['system']} | {row['search']} | {row['seconds']:.2f} | {row['bleu']:.2f} | "
            f"{row['same_ids_as_ours']} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
