"""Multi30k end to end: train a preset from scratch, tune the decoder on val, score test.

1. `keras-transformer train --preset multi30k-en-de` (or `-de-en`) into
   `--output`; a finished run there is reused, an interrupted one resumed.
2. Beam search (the preset's beam size) on `val` for each length penalty
   in `--alphas`; the best by BLEU is kept and written into the run's
   `config.json`, so `translate`, `evaluate` and `export` use it. A run that
   held training pairs out (`Preset.dev_examples`) is scored on that dev set
   too, and the choice is made there, on sentences with the training data's
   lengths. Test sets play no part in any choice.
3. `test_2016_flickr` (and any other `test_*` files of the folder, e.g. a
   2017 set), translated once with that setting, scored with sacreBLEU
   (13a, cased and `--lowercase`) and chrF; greedy decoding too, for
   reference.
4. A JSON of the scores, the training minutes, the epochs and the model
   size (all members' for an ensemble preset), with the machine and the
   command.

Example (about 90 minutes on 2 CPU cores)::

    python benchmarks/multi30k.py                      # downloads Multi30k once, as `train` does
    python benchmarks/multi30k.py --direction de-en --data-dir DATA/multi30k_task1
"""

import argparse
import json
import os
import pathlib
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = pathlib.Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from machine import describe_machine  # noqa: E402

LANGUAGES = {"en-de": ("en", "de"), "de-en": ("de", "en")}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--direction", default="en-de", choices=sorted(LANGUAGES))
    parser.add_argument(
        "--data-dir",
        help="a multi30k_task1 folder (train/val/test_2016_flickr files) or its parent; "
        "default: $KERAS_TRANSFORMER_DATA_DIR, else downloaded as `train` does",
    )
    parser.add_argument("--output", help="run directory (default: runs/multi30k-DIRECTION)")
    parser.add_argument(
        "--alphas", default="0.6,1.0,1.5,2.0,2.5,3.0", help="GNMT length penalties to try on val (comma-separated)"
    )
    parser.add_argument("--batch-size", type=int, default=100, help="sentences per decoding batch")
    parser.add_argument(
        "--json",
        help="where the scores go, the translations beside them "
        "(default: benchmarks/results/multi30k-DIRECTION/current.json)",
    )
    return parser.parse_args(argv)


def decode(run, sentences, beam_size, alpha, batch_size):
    """(translations, seconds) of a run directory's model on `sentences` (greedy for a beam of 1)."""
    from keras_transformer.export import load
    from keras_transformer.translators.translation import translate_lines

    translator = load(run, beam_size=beam_size, alpha=alpha)
    started = time.perf_counter()
    hypotheses = translate_lines(translator, sentences, batch_size)
    return hypotheses, time.perf_counter() - started


def training_record(run, config):
    """The run's training figures; an ensemble's per member, with the minutes of all."""
    from keras_transformer import runs

    keys = ("train_minutes", "completed_epochs", "best_val_loss", "best_epoch", "averaged")
    if not config.members:
        return {key: getattr(config, key) for key in keys}
    members = [runs.RunConfig.read(run / member) for member in config.members]
    return {
        "train_minutes": config.train_minutes,
        "members": [{key: getattr(member, key) for key in keys} for member in members],
    }


def main(argv=None):
    args = parse_args(argv)
    source, target = LANGUAGES[args.direction]
    preset = f"multi30k-{args.direction}"
    from keras_transformer.datasets.corpora import resolve_dir

    data = resolve_dir(preset, args.data_dir)
    run = pathlib.Path(args.output or REPO / "runs" / preset)
    results_path = pathlib.Path(args.json or REPO / "benchmarks" / "results" / preset / "current.json")

    from keras_transformer import evaluation, runs, train
    from keras_transformer.datasets import hold_out_dev, load_pairs

    summary = train(preset=preset, output=run, data_dir=data, resume=True)
    print(json.dumps(summary), flush=True)
    config = runs.RunConfig.read(run)
    beam_size = config.decoding.beam_size

    def read(stem, language):
        return evaluation.read_lines(data / f"{stem}.{language}")

    tuning_sets = {"val": (read("val", source), read("val", target))}
    if config.preset.data.dev_examples:
        held_out = hold_out_dev(load_pairs(preset, data, "train"), config.preset.data.dev_examples)["dev"]
        tuning_sets["dev"] = tuple(list(side) for side in zip(*held_out))
    tuning = {name: {} for name in tuning_sets}
    for alpha in [float(a) for a in args.alphas.split(",")]:
        for name, (sources, references) in tuning_sets.items():
            hypotheses, seconds = decode(run, sources, beam_size, alpha, args.batch_size)
            tuning[name][alpha] = dict(evaluation.score(hypotheses, references), seconds=seconds)
            print(
                f"{name}, beam {beam_size}, alpha {alpha}: {evaluation.format_scores(tuning[name][alpha])}", flush=True
            )
    tuned_on = "dev" if "dev" in tuning else "val"
    alpha = max(tuning[tuned_on], key=lambda a: tuning[tuned_on][a]["bleu"])
    config = config.replace(decoding=config.decoding.replace(alpha=alpha, tuned_on=tuned_on))
    config.write(run)

    tests = {}
    for path in sorted(data.glob(f"test_*.{source}")):
        stem = path.name[: -len(source) - 1]
        if not (data / f"{stem}.{target}").is_file():
            continue
        sources, references = read(stem, source), read(stem, target)
        hypotheses, seconds = decode(run, sources, beam_size, alpha, args.batch_size)
        greedy, greedy_seconds = decode(run, sources, 1, None, args.batch_size)
        out = results_path.parent / f"{results_path.stem}.{stem}.hyp.{target}"  # beside the JSON
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
        tests[stem] = {
            "beam": dict(evaluation.score(hypotheses, references), seconds=seconds),
            "greedy": dict(evaluation.score(greedy, references), seconds=greedy_seconds),
            "hypotheses": str(out.relative_to(REPO)) if out.is_relative_to(REPO) else str(out),
        }
        print(f"{stem}, beam {beam_size}, alpha {alpha}: {evaluation.format_scores(tests[stem]['beam'])}")
        print(f"{stem}, greedy: {evaluation.format_scores(tests[stem]['greedy'])}", flush=True)

    import keras

    models = [keras.saving.load_model(path, compile=False) for path in runs.model_paths(run)]
    report = {
        "command": " ".join(["python"] + sys.argv),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": describe_machine(),
        "direction": args.direction,
        "run": str(run),
        "preset": config.preset.to_dict(),
        "parameters": sum(model.count_params() for model in models),
        "training": training_record(run, config),
        "decoding": {
            "beam_size": beam_size,
            "length_penalty": alpha,
            "chosen_on": f"{tuned_on} BLEU",
            **{name: {str(a): s for a, s in scores.items()} for name, scores in tuning.items()},
        },
        "test": tests,
    }
    results_path.parent.mkdir(parents=True, exist_ok=True)
    runs.write_json_atomic(results_path, report)
    print(f"Wrote {results_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
