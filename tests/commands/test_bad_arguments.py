"""Bad arguments fail loudly (issue #36): one line naming the flag or the file, exit status 2, nothing written.

- Nonsense values on the command line (`--epochs 0`, `--minutes nan`,
  `--alpha nan`, `--top-p 0`, `--output ""`, ...) are refused by argparse
  while parsing, for every flag of every command.
- A config.json of the wrong shape is one line, never a traceback.
- A corpus too small for its seeded split, or a header-only CSV, is a
  `ValueError` naming the file.
- The commands that load a model say in `--help` to load only trusted ones.

Everything runs in-process through `cli.main`; only the config.json tests
need a trained model (`test_load.trained_export`, trained once per session).
"""

import json
import pathlib
import re
import shutil

import pytest

from keras_transformer.commands import arguments, cli
from keras_transformer.datasets import corpora, parallel_text

NAN, INF, SEED_LIMIT = "nan", "inf", str(arguments.SEED_MAX + 1)

# The first arguments of each command that make the rest parse; the paths need not exist: parsing fails first.
BASE = {
    "train": ["train", "--preset", "tiny", "--output", "run"],
    "import": ["import", "checkpoint", "--output", "run"],
    "translate": ["translate", "--model", "model", "hello"],
    "evaluate": ["evaluate", "--model", "model", "--source", "src.txt", "--reference", "ref.txt"],
    "chat": ["chat", "--model", "model"],
    "score": ["score", "--model", "model", "--source", "src.txt", "--target", "tgt.txt"],
    "export": ["export", "--model", "model", "--output", "export"],
    "plot positional-encoding": ["plot", "positional-encoding", "--output", "pe.png"],
    "plot schedule": ["plot", "schedule", "--output", "lr.png"],
    "plot attention": ["plot", "attention", "--model", "model", "--sentence", "hi", "--output", "a.png"],
    "plot history": ["plot", "history", "--csv", "history.csv", "--output", "h.png"],
}

# (command, flag, bad value): every numeric and path argument of every command.
BAD_VALUES = [
    ("train", "--epochs", "0"),
    ("train", "--epochs", "-1"),
    ("train", "--epochs", "2.5"),
    ("train", "--minutes", "-1"),
    ("train", "--minutes", "0"),
    ("train", "--minutes", NAN),
    ("train", "--minutes", INF),
    ("train", "--minutes", "1e999"),
    ("train", "--cpu-devices", "0"),
    ("train", "--cpu-devices", "-2"),
    ("train", "--seed", "-1"),
    ("train", "--seed", SEED_LIMIT),
    ("train", "--seed", "x"),
    ("train", "--output", ""),
    ("train", "--output", "  "),
    ("train", "--data-dir", ""),
    ("translate", "--beam", "0"),
    ("translate", "--beam", "-1"),
    ("translate", "--alpha", NAN),
    ("translate", "--alpha", INF),
    ("translate", "--alpha", "-0.5"),
    ("translate", "--batch-size", "0"),
    ("translate", "--workers", "0"),
    ("translate", "--model", ""),
    ("translate", "--input", ""),
    ("translate", "--output", ""),
    ("evaluate", "--beam", "0"),
    ("evaluate", "--alpha", NAN),
    ("evaluate", "--batch-size", "-3"),
    ("score", "--workers", "1.5"),
    ("evaluate", "--source", ""),
    ("evaluate", "--reference", ""),
    ("evaluate", "--output", ""),
    ("evaluate", "--hypotheses", ""),
    ("chat", "--temperature", NAN),
    ("chat", "--temperature", "-1"),
    ("chat", "--temperature", INF),
    ("chat", "--top-k", "-1"),
    ("chat", "--top-k", str(2**31)),
    ("chat", "--top-p", "0"),
    ("chat", "--top-p", NAN),
    ("chat", "--top-p", "1.5"),
    ("chat", "--top-p", "-0.1"),
    ("chat", "--seed", "-2"),
    ("chat", "--seed", SEED_LIMIT),
    ("chat", "--beam", "0"),
    ("chat", "--model", ""),
    ("export", "--beam", "0"),
    ("export", "--alpha", NAN),
    ("export", "--max-length", "0"),
    ("export", "--max-length", "-5"),
    ("export", "--model", ""),
    ("export", "--output", ""),
    ("plot positional-encoding", "--length", "0"),
    ("plot positional-encoding", "--depth", "-1"),
    ("plot positional-encoding", "--dpi", "0"),
    ("plot positional-encoding", "--output", ""),
    ("plot schedule", "--d-model", "0"),
    ("plot schedule", "--warmup-steps", "0"),
    ("plot schedule", "--steps", "-10"),
    ("plot schedule", "--scale", NAN),
    ("plot schedule", "--scale", "0"),
    ("plot attention", "--columns", "0"),
    ("plot attention", "--max-length", "0"),
    ("plot attention", "--model", ""),
    ("plot attention", "--sentence", " "),
    ("plot attention", "--target", ""),
    ("plot history", "--csv", ""),
    ("import", "--output", ""),
    ("import", "--output", "  "),
]


def _parse_error(capsys, argv):
    """Runs the command line, which must stop while parsing: its stderr."""
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    out, err = capsys.readouterr()
    assert stopped.value.code == 2, err
    assert out == ""
    return err


def _assert_one_line(err, prefix):
    assert "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(prefix), err


@pytest.mark.parametrize("command, flag, value", BAD_VALUES, ids=[f"{c}-{f}={v!r}" for c, f, v in BAD_VALUES])
def test_nonsense_argument_is_one_line_naming_the_flag(command, flag, value, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    err = _parse_error(capsys, BASE[command] + [flag, value])
    _assert_one_line(err, f"keras-transformer {command}: error: argument {flag}: ")
    assert repr(value) in err  # the line shows what was received
    assert list(tmp_path.iterdir()) == []  # nothing written, not even the train run's folder


UNKNOWN_OPTIONS = [
    ("translate", ["--beam-size", "4"], "--beam-size 4 (did you mean --beam?)"),
    ("plot history", ["--dpii", "3"], "--dpii 3 (did you mean --dpi?)"),
    ("train", ["--seeed=1"], "--seeed=1 (did you mean --seed?)"),
    ("evaluate", ["--xyzzy"], "--xyzzy"),
]


@pytest.mark.parametrize("command, extra, expected", UNKNOWN_OPTIONS, ids=[c for c, _, _ in UNKNOWN_OPTIONS])
def test_an_unknown_option_is_named_by_its_command_with_the_nearest_flag(
    command, extra, expected, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    err = _parse_error(capsys, BASE[command] + extra)
    _assert_one_line(err, f"keras-transformer {command}: error: unrecognized arguments: ")
    assert err.strip().endswith(f": {expected}"), err
    assert list(tmp_path.iterdir()) == []


def test_train_epochs_and_minutes_rejected_before_the_run_folder_exists(tmp_path, capsys):
    """`--epochs -1` used to exit 0 with no model and a run marked finished; `--minutes nan` never stopped."""
    output = tmp_path / "run"
    for flag, value in [("--epochs", "-1"), ("--epochs", "0"), ("--minutes", NAN), ("--minutes", "-1")]:
        err = _parse_error(capsys, ["train", "--preset", "tiny", "--output", str(output), flag, value])
        assert f"argument {flag}: must be a positive" in err
        assert not output.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["chat", "--model", "m", "--temperature", "0", "--top-k", "0", "--top-p", "1", "--seed", "-1"],
        ["chat", "--model", "m", "--seed", str(arguments.SEED_MAX), "--top-k", str(2**31 - 1)],
        ["translate", "--model", "m", "--beam", "1", "--alpha", "0", "--batch-size", "1"],
        ["train", "--epochs", "1", "--seed", "0", "--cpu-devices", "1"],
        ["train", "--minutes", "0.5"],
        ["plot", "attention", "--model", "m", "--sentence", "s", "--output", "a.png", "--layer", "-1"],
    ],
)
def test_limits_themselves_are_accepted(argv):
    """The checks refuse nonsense, not the documented edge values (0 = greedy, -1 = random, 1 = off)."""
    args = cli.build_parser().parse_args(argv)
    assert args.run is not None


def test_argument_types_return_the_parsed_value():
    assert arguments.positive_int("3") == 3
    assert arguments.non_negative_int("0") == 0
    assert arguments.positive_finite_float("0.25") == 0.25
    assert arguments.non_negative_finite_float("0") == 0.0
    assert arguments.probability("1") == 1.0
    assert arguments.int_in_range(-1, 5)("-1") == -1
    assert arguments.non_empty("out") == "out"


@pytest.mark.parametrize("command", ["translate", "chat", "evaluate", "serve"])
def test_help_says_to_load_only_trusted_models(command, capsys):
    with pytest.raises(SystemExit) as stopped:
        cli.main([command, "--help"])
    assert stopped.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse rewraps the description
    assert arguments.TRUST in text
    assert "a SavedModel is a program" in text


# -- Errors while running: one line for every exception, a traceback on request ---------------------


def _failing_command(monkeypatch, error):
    """Makes `translate` raise `error` once its arguments are parsed."""
    from keras_transformer.commands import translate

    def run(args):
        raise error

    monkeypatch.setattr(translate, "run", run)


@pytest.mark.parametrize(
    "error, expected",
    [
        (ValueError("config.json is corrupt"), "config.json is corrupt"),
        (FileNotFoundError(2, "No such file or directory", "model"), "[Errno 2] No such file or directory: 'model'"),
        (KeyError("model"), "KeyError: 'model' (unexpected"),
        (TypeError("'int' object is not iterable"), "TypeError: 'int' object is not iterable (unexpected"),
        (RuntimeError("line one\nline two\n  line three"), "RuntimeError: line one (unexpected"),
    ],
)
def test_any_error_while_running_is_one_line(error, expected, monkeypatch, capsys):
    monkeypatch.delenv(cli.DEBUG_ENV, raising=False)
    _failing_command(monkeypatch, error)
    code = cli.main(["translate", "--model", "m", "hi"])
    err = capsys.readouterr().err
    assert code == 2
    _assert_one_line(err, f"keras-transformer translate: error: {expected}")


@pytest.mark.parametrize("how", ["flag", "flag-after-the-command", "environment"])
def test_traceback_on_request(how, monkeypatch):
    _failing_command(monkeypatch, KeyError("model"))
    argv = ["translate", "--model", "m", "hi"]
    if how.startswith("flag"):
        monkeypatch.delenv(cli.DEBUG_ENV, raising=False)
        argv = ["--traceback"] + argv if how == "flag" else argv[:1] + ["--traceback"] + argv[1:]
    else:
        monkeypatch.setenv(cli.DEBUG_ENV, "1")
    with pytest.raises(KeyError):
        cli.main(argv)


BAD_CONFIGS = [{"model": 5}, {"decoding": []}, {"decoding": [1]}, {"members": 5}, {"decoding": {"beam_size": "x"}}]


@pytest.fixture(scope="module")
def trained_run():
    from trained_runs import trained_export

    return trained_export()[0]


@pytest.mark.parametrize("config", BAD_CONFIGS, ids=[json.dumps(c) for c in BAD_CONFIGS])
def test_config_of_the_wrong_shape_is_never_a_traceback(config, trained_run, tmp_path, capsys):
    """Valid JSON, wrong structure: the command translates (the section is not needed) or fails in one line."""
    run = pathlib.Path(shutil.copytree(trained_run, tmp_path / "run"))
    (run / "config.json").write_text(json.dumps(config))
    code = cli.main(["translate", "--model", str(run), "안녕"])  # an escaping exception fails the test
    out, err = capsys.readouterr()
    if code == 0:
        assert len(out.splitlines()) == 1  # one translation for one sentence
    else:
        assert code == 2 and out == ""
        _assert_one_line(err, "keras-transformer translate: error: ")


def test_config_sections_the_loader_reads_must_have_their_shape(trained_run, tmp_path, capsys):
    """`preset`, `model` and `decoding` must be objects and `members` a list: a checked error naming the file."""
    run = pathlib.Path(shutil.copytree(trained_run, tmp_path / "run"))
    for section, config in [
        ("decoding", {"decoding": [1]}),
        ("members", {"members": 5}),
        ("model", {"model": 5}),
        ("decoding", {"decoding": []}),
    ]:
        (run / "config.json").write_text(json.dumps(config))
        assert cli.main(["translate", "--model", str(run), "안녕"]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        _assert_one_line(err, "keras-transformer translate: error: ")
        assert f"config.json is corrupt: `{section}` must be" in err and "unexpected" not in err, err


WRONG_FIELDS = [  # (section, field, value as JSON text, what the field must be)
    ("decoding", "max_length", '"abc"', "an int in [1, 65536]"),  # an earlier version's name of max_new_tokens
    ("decoding", "max_length", "-4", "an int in [1, 65536]"),
    ("decoding", "max_new_tokens", "2.5", "an int in [1, 65536]"),
    ("decoding", "max_new_tokens", "true", "an int in [1, 65536]"),
    ("decoding", "length_penalty", '"nan"', "a finite number >= 0"),
    ("decoding", "length_penalty", "NaN", "a finite number >= 0"),
    ("decoding", "length_penalty", "Infinity", "a finite number >= 0"),
    ("decoding", "length_penalty", "-0.5", "a finite number >= 0"),
    ("decoding", "length_penalty", "1" + "0" * 400, "a finite number >= 0"),
    ("decoding", "beam_size", '"x"', "an int in [1, 128]"),
    ("decoding", "beam_size", "0", "an int in [1, 128]"),
    ("decoding", "beam_size", "1e400", "an int in [1, 128]"),
    ("decoding", "beam_size", "1000000000", "an int in [1, 128]"),
    ("model", "d_model", '"x"', "a positive int"),
    ("model", "num_heads", "0", "a positive int"),
    ("model", "dropout", "1.5", "a number in [0, 1)"),
    ("model", "norm_first", '"yes"', "true or false"),
    ("preset", "vocab_size", '"big"', "a positive int"),
    ("preset", "token_budget", "-1", "a positive int"),
]


@pytest.mark.parametrize(
    "section, field, value, expected", WRONG_FIELDS, ids=[f"{s}.{f}={v[:12]}" for s, f, v, _ in WRONG_FIELDS]
)
def test_config_fields_of_the_wrong_kind_name_the_file_and_the_field(
    section, field, value, expected, trained_run, tmp_path, capsys
):
    """Before: `int('abc')`'s message, or a TensorFlow error, naming neither; or nothing at all (`model`)."""
    run = pathlib.Path(shutil.copytree(trained_run, tmp_path / "run"))
    config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    config[section][field] = "PLACEHOLDER"
    text = json.dumps(config).replace('"PLACEHOLDER"', value)
    (run / "config.json").write_text(text, encoding="utf-8")
    message = f"{run / 'config.json'}: `{section}.{field}` must be {expected}. Received: "
    assert cli.main(["translate", "--model", str(run), "안녕"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and message in err, err
    _assert_one_line(err, "keras-transformer translate: error: ")
    from keras_transformer.export import load

    with pytest.raises(ValueError, match=re.escape(message)):
        load(run)


# -- Corpora too small for their split ------------------------------------------------------------


def _chatbot_csv(folder, rows):
    folder.mkdir()
    lines = ["Q,A,label"] + [f"질문 {i},대답 {i},0" for i in range(rows)]
    (folder / corpora.CHATBOT_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    "rows, expected",
    [
        (3, r"ChatbotData\.csv has 3 rows \(3 distinct sources\): too few for the seeded split .* at least 11 rows"),
        (0, r"ChatbotData\.csv holds no examples \(an empty file, or a header row only\)"),
    ],
)
def test_train_on_a_tiny_chatbot_corpus_names_the_file(rows, expected, tmp_path, capsys):
    data = _chatbot_csv(tmp_path / "data", rows)
    output = tmp_path / "run"
    code = cli.main(["train", "--preset", "tiny", "--data-dir", str(data), "--output", str(output), "--epochs", "1"])
    out, err = capsys.readouterr()
    assert code == 2
    _assert_one_line(err, "keras-transformer train: error: ")
    assert str(data / corpora.CHATBOT_FILE) in err
    assert re.search(expected, err), err
    assert not output.exists()


def test_the_smallest_chatbot_corpus_splits(tmp_path):
    """`minimum_rows` is exact: 11 distinct rows give every split a pair, 10 do not."""
    assert corpora.minimum_rows(corpora.CHATBOT_FRACTIONS) == 11
    splits = corpora.load_split_pairs("chatbot-ko", _chatbot_csv(tmp_path / "eleven", 11))
    assert {name: len(pairs) for name, pairs in splits.items()} == {"train": 10, "validation": 1}
    with pytest.raises(ValueError, match="has 10 rows"):
        corpora.load_split_pairs("chatbot-ko", _chatbot_csv(tmp_path / "ten", 10))


def test_tiny_tatoeba_file_names_the_file(tmp_path):
    (tmp_path / corpora.SPA_FILE).write_text("Hi.\tHola.\nRun!\t¡Corre!\nGo.\tVe.\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"spa\.txt has 3 rows .*validation 5% / test 5%.*at least 11"):
        corpora.load_pairs("spa-en", tmp_path)


def test_empty_multi30k_split_names_the_files(tmp_path):
    for stem in corpora.MULTI30K_FILES.values():
        for language in ("en", "de"):
            text = "" if stem == "val" else f"{stem} {language}\n"
            (tmp_path / f"{stem}.{language}").write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=r"val\.en and .*val\.de hold no sentences"):
        corpora.load_pairs("multi30k-en-de", tmp_path)


def test_parallel_text_header_only_csv_names_the_file(tmp_path):
    (tmp_path / "chat.csv").write_text("Q,A\n", encoding="utf-8")
    config = parallel_text.ParallelTextConfig(
        name="header_only",
        files={"train": "chat.csv"},
        delimiter=",",
        header=True,
        source_column="Q",
        target_column="A",
    )
    builder = parallel_text.ParallelText(config=config, source_dir=tmp_path, data_dir=tmp_path / "tfds")
    with pytest.raises(ValueError, match=r"chat\.csv: no examples for split 'train'"):
        builder.download_and_prepare()
