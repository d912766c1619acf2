"""Training on a user's own parallel files, and fine-tuning a run with `init_from` (`--init-from`)."""

import csv
import hashlib
import json
import os
import pathlib
import random
import shutil

import pytest

from keras_transformer import runs, training
from keras_transformer.commands import cli
from keras_transformer.datasets import corpora
from keras_transformer.presets import get_preset

WORDS = [
    "red",
    "blue",
    "green",
    "small",
    "big",
    "dog",
    "cat",
    "bird",
    "house",
    "tree",
    "runs",
    "sleeps",
    "eats",
    "sees",
    "the",
    "a",
    "old",
    "young",
    "river",
    "hill",
    "car",
    "boat",
    "sings",
    "walks",
]
# A tiny "language" whose translation is a word-for-word substitution: quick to learn.
TRANSLATION = {word: word[::-1] + "o" for word in WORDS}
SMALL = dict(vocab_size=400)  # the `tiny` preset's 1,000 pieces are more than 300 short pairs hold


def generated_pairs(count, seed):
    """`count` distinct (source, target) sentence pairs."""
    rng, pairs, seen = random.Random(seed), [], set()
    while len(pairs) < count:
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 7))]
        source = " ".join(words)
        if source not in seen:
            seen.add(source)
            pairs.append((source, " ".join(TRANSLATION[word] for word in words)))
    return pairs


def write_aligned(folder, name, pairs):
    folder.mkdir(parents=True, exist_ok=True)
    source, target = folder / f"{name}.src", folder / f"{name}.tgt"
    source.write_text("".join(f"{s}\n" for s, _ in pairs), encoding="utf-8")
    target.write_text("".join(f"{t}\n" for _, t in pairs), encoding="utf-8")
    return source, target


def write_tsv(path, pairs):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    return path


def first_epoch_loss(run):
    with open(pathlib.Path(run) / runs.HISTORY, newline="") as file:
        return float(next(csv.DictReader(file))["loss"])


def tree_bytes(folder):
    folder = pathlib.Path(folder)
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
    """`tiny` trained on two user files of 300 generated pairs (100 held out for validation)."""
    root = tmp_path_factory.mktemp("own")
    source, target = write_aligned(root / "data", "train", generated_pairs(300, seed=0))
    output = root / "base"
    training.train("tiny", output=output, corpus_files={"train": (source, target)}, epochs=20, verbose=0, **SMALL)
    return output, source, target


def test_a_run_on_own_files_records_them_and_holds_out_a_seeded_validation_split(base_run):
    output, source, target = base_run
    config = runs.read_config(output)
    assert config["preset"]["corpus"] == corpora.OWN_FILES and config["finished"]
    recorded = config["corpus_files"]["train"]
    assert [entry["path"] for entry in recorded] == [str(source.resolve()), str(target.resolve())]
    assert [entry["sha256"] for entry in recorded] == [
        hashlib.sha256(p.read_bytes()).hexdigest() for p in (source, target)
    ]
    splits = corpora.load_file_splits({"train": (source, target)})
    assert len(splits["validation"]) == 100 and len(splits["train"]) == 200
    assert not {s for s, _ in splits["validation"]} & {s for s, _ in splits["train"]}
    assert config["train_data_sha256"] == training.training_data_sha256(splits["train"][:2000])


@pytest.mark.slow  # trains twice: fine-tuning is checked in tests/pretrained/test_fine_tuning.py
def test_fine_tuning_reuses_the_vocabulary_and_starts_below_a_fresh_model(base_run, tmp_path, capsys, monkeypatch):
    base, _, _ = base_run
    monkeypatch.chdir(tmp_path)  # the default output, saved_models/tiny-finetuned, goes here
    pairs = generated_pairs(400, seed=1)[250:]  # none of the base run's 300 (seed 0 draws others)
    source, target = write_aligned(tmp_path / "new", "train", pairs[:100])
    valid = write_tsv(tmp_path / "new" / "valid.tsv", pairs[100:150])
    tuned, fresh = tmp_path / "saved_models" / "tiny-finetuned", tmp_path / "fresh"
    code = cli.main(
        [
            "train",
            "--init-from",
            str(base),
            "--train-source",
            str(source),
            "--train-target",
            str(target),
            "--valid-tsv",
            str(valid),
            "--epochs",
            "1",
        ]
    )
    assert code == 0, capsys.readouterr().err
    training.train(
        "tiny",
        output=fresh,
        corpus_files={"train": (source, target), "validation": valid},
        epochs=1,
        verbose=0,
        **SMALL,
    )
    assert tree_bytes(tuned / "tokenizers") == tree_bytes(base / "tokenizers")
    config = runs.read_config(tuned)
    assert config["init_from"]["run"] == str(base.resolve())
    assert config["model"] == runs.read_config(base)["model"]
    assert first_epoch_loss(tuned) < first_epoch_loss(fresh), (first_epoch_loss(tuned), first_epoch_loss(fresh))


def test_a_preset_of_another_shape_is_refused_naming_the_fields(base_run, tmp_path, capsys):
    base, source, target = base_run
    code = cli.main(
        [
            "train",
            "--preset",
            "chatbot-ko",
            "--init-from",
            str(base),
            "--train-source",
            str(source),
            "--train-target",
            str(target),
            "--output",
            str(tmp_path / "run"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("keras-transformer train: error: "), err
    for field in ("num_layers 2 (run: 1)", "d_model 256 (run: 32)", "vocab_size 8000 (run: 400)"):
        assert field in err, err
    assert not (tmp_path / "run").exists()
    with pytest.raises(ValueError, match="`output` must be another folder than `init_from`"):
        training.train(init_from=base, output=base, overwrite=True, corpus_files={"train": (source, target)})
    assert runs.read_config(base)["finished"]
    with pytest.raises(ValueError, match=r"`init_from` must be a run directory .*init_from='.*nowhere'"):
        training.train(init_from=tmp_path / "nowhere", output=tmp_path / "run")
    corrupt = pathlib.Path(shutil.copytree(base, tmp_path / "corrupt"))
    (corrupt / runs.MODEL).write_bytes(b"not a zip")
    code = cli.main(
        [
            "train",
            "--init-from",
            str(corrupt),
            "--train-source",
            str(source),
            "--train-target",
            str(target),
            "--output",
            str(tmp_path / "run"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert f"{corrupt / runs.MODEL}: cannot fine-tune from it, the model does not load" in err
    assert not (tmp_path / "run").exists()


def _one_line_error(capsys, *arguments):
    code = cli.main(["train", "--preset", "tiny", *map(str, arguments)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("keras-transformer train: error: "), err
    return err


def _nul_on_line(text, number):
    lines = text.split("\n")
    lines[number - 1] = lines[number - 1].replace(" ", " \0", 1)
    return "\n".join(lines).encode("utf-8")


UTF16_CASES = {  # which file, its bytes from its text, the line named
    "NUL byte in the target": ("target", lambda text: _nul_on_line(text, 3), 3),
    "UTF-16LE without BOM source": ("source", lambda text: text.encode("utf-16-le"), 1),
    "UTF-16BE without BOM target": ("target", lambda text: text.encode("utf-16-be"), 1),
    "UTF-16 TSV": ("tsv", lambda text: text.encode("utf-16-le"), 1),
    "NUL byte in a TSV": ("tsv", lambda text: _nul_on_line(text, 7), 7),
}


@pytest.mark.parametrize("case", sorted(UTF16_CASES))
def test_utf16_or_nul_bytes_in_own_files_are_one_line_naming_the_file_and_line(case, tmp_path, capsys):
    """Before: trained silently into a vocabulary of NULs and letters."""
    which, encode, line = UTF16_CASES[case]
    pairs = generated_pairs(250, seed=4)
    source, target = write_aligned(tmp_path, "train", pairs)
    tsv = write_tsv(tmp_path / "pairs.tsv", pairs)
    path = {"source": source, "target": target, "tsv": tsv}[which]
    path.write_bytes(encode(path.read_text(encoding="utf-8")))
    flags = ("--train-tsv", tsv) if which == "tsv" else ("--train-source", source, "--train-target", target)
    err = _one_line_error(capsys, *flags, "--output", tmp_path / "run")
    assert f"{path}, line {line}: contains a NUL byte (is it UTF-16? save it as UTF-8)" in err, err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("count", [0, 1, 2])
def test_a_corpus_of_0_1_or_2_pairs_is_one_line_or_trains_its_tokenizer(count, tmp_path, capsys):
    """Too few to hold out a validation split: one line naming the files (never SentencePiece's own words)."""
    source, target = write_aligned(tmp_path, "train", generated_pairs(count, seed=5))
    err = _one_line_error(capsys, "--train-source", source, "--train-target", target, "--output", tmp_path / "run")
    expected = "hold no sentences" if count == 0 else f"hold {count} pair{'s' * (count > 1)}: too few to hold out"
    assert expected in err and str(source) in err and "sentences_" not in err, err
    if count:  # the flags that give validation files, not the Python argument
        assert "give validation files too (--valid-tsv, or --valid-source and --valid-target)" in err, err
        assert "corpus_files" not in err
    assert not (tmp_path / "run").exists()
    if count:  # with a validation split given, the shared tokenizer trains on the pairs
        splits = corpora.load_file_splits({"train": (source, target), "validation": (source, target)})
        tokenizer = training.train_tokenizer(get_preset("tiny"), splits["train"])
        assert tokenizer.vocab_size > 256


@pytest.mark.parametrize("case", ["mismatched line counts", "blank line", "invalid UTF-8", "one-column TSV row"])
def test_bad_own_files_are_one_line_naming_the_file_and_line(case, tmp_path, capsys):
    pairs = generated_pairs(250, seed=2)
    source, target = write_aligned(tmp_path, "train", pairs)
    output = tmp_path / "run"
    if case == "mismatched line counts":
        target.write_text("".join(f"{t}\n" for _, t in pairs[:-1]), encoding="utf-8")
        err = _one_line_error(capsys, "--train-source", source, "--train-target", target, "--output", output)
        assert f"{source} has 250 lines but {target} has 249" in err and "line 250" in err
    elif case == "blank line":
        lines = source.read_text(encoding="utf-8").splitlines()
        lines[41] = "  "
        source.write_text("\n".join(lines) + "\n", encoding="utf-8")
        err = _one_line_error(capsys, "--train-source", source, "--train-target", target, "--output", output)
        assert f"{source}, line 42: empty line" in err
    elif case == "invalid UTF-8":
        lines = target.read_bytes().split(b"\n")
        lines[7] += b" M\xe4dchen"  # Latin-1
        target.write_bytes(b"\n".join(lines))
        err = _one_line_error(capsys, "--train-source", source, "--train-target", target, "--output", output)
        assert f"{target}, line 8: not valid UTF-8" in err
    else:
        tsv = write_tsv(tmp_path / "pairs.tsv", pairs)
        lines = tsv.read_text(encoding="utf-8").splitlines()
        lines[99] = lines[99].split("\t")[0]
        tsv.write_text("\n".join(lines) + "\n", encoding="utf-8")
        err = _one_line_error(capsys, "--train-tsv", tsv, "--output", output)
        assert f"{tsv}, line 100: expected 2 '\\t'-separated columns, found 1" in err
    assert not output.exists()


def test_flags_that_do_not_go_together_are_one_line(tmp_path, capsys):
    source, target = write_aligned(tmp_path, "train", generated_pairs(150, seed=3))
    tsv = write_tsv(tmp_path / "pairs.tsv", generated_pairs(100, seed=3))
    cases = [
        (("--train-source", source), "--train-source needs --train-target"),
        (("--train-tsv", tsv, "--train-source", source), "--train-tsv replaces --train-source"),
        (("--valid-tsv", tsv), "go with --train-source/--train-target or --train-tsv"),
        (("--train-tsv", tsv, "--data-dir", tmp_path), "leave it out with --train-source/--train-tsv"),
        (("--train-tsv", tsv), "hold 100 pairs: too few to hold out 100 for validation"),
    ]
    for arguments, expected in cases:
        err = _one_line_error(capsys, *arguments, "--output", tmp_path / "run")
        assert expected in err, err
    assert not (tmp_path / "run").exists()
    assert json.dumps(corpora.describe_files({"train": tsv}))  # what config.json records is JSON


def test_a_training_corpus_from_a_pipe_is_refused_in_one_line(tmp_path, capsys):
    """Pipes are read as files (`--input <(cmd)`), but a run reads its corpus again: its sha256 is recorded."""
    pipe = tmp_path / "pairs.tsv"
    os.mkfifo(pipe)
    err = _one_line_error(capsys, "--train-tsv", pipe, "--output", tmp_path / "run")
    assert f"{pipe} is not a regular file: a training run reads its corpus again" in err, err
    assert not (tmp_path / "run").exists()
