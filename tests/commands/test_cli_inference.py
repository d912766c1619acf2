"""`keras-transformer translate | chat | evaluate | export` on a tiny trained run."""

import io
import json
import os
import subprocess
import sys

import pytest

from keras_transformer.commands import cli

from trained_runs import tiny_run_dir  # the shared tiny run directory (built once per session)


@pytest.fixture(scope="module")
def run():
    return tiny_run_dir()


def _main(capsys, monkeypatch, argv, stdin=None):
    """Runs the command in-process: `(exit code, stdout, stderr)`."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_translate_arguments_and_stdin(run, capsys, monkeypatch):
    path, pairs = run
    code, out, _ = _main(
        capsys, monkeypatch, ["translate", "--model", str(path), "--beam", "1", pairs[0][0], "", pairs[1][0]]
    )
    assert code == 0 and out.split("\n") == [pairs[0][1], "", pairs[1][1], ""]
    long = " ".join(s for s, _ in pairs)
    stdin = f"{pairs[2][0]}\n{long}\n\n".encode()
    code, out, err = _main(capsys, monkeypatch, ["translate", "--model", str(path), "--quiet"], stdin)
    assert code == 0 and len(out.split("\n")) == 4 and out.split("\n")[2] == ""
    assert "warning: sentence 2 has" in err and "truncated to 32" in err


def test_translate_file_with_progress(run, capsys, monkeypatch, tmp_path):
    path, pairs = run
    (tmp_path / "in.en").write_text("".join(s + "\n" for s, _ in pairs[:5]), encoding="utf-8")
    output = tmp_path / "out.de"
    argv = ["translate", "--model", str(path), "--input", str(tmp_path / "in.en"), "--output", str(output)]
    # Greedy, in three batches of similar length, two of them side by side.
    code, out, err = _main(capsys, monkeypatch, [*argv, "--beam", "1", "--batch-size", "2", "--workers", "2"])
    assert code == 0 and out == "" and "translated 5/5" in err
    assert output.read_text(encoding="utf-8").splitlines() == [t for _, t in pairs[:5]]  # in input order


@pytest.mark.parametrize(
    "argv, stdin, message",
    [
        (["translate", "--model", "{run}"], b"fine\n\xff\xfe not utf-8\n", "stdin, line 2: not valid UTF-8"),
        (["translate", "--model", "{run}", "caf\udce9"], None, "argument 1 is not valid UTF-8"),
        (["translate", "--model", "{tmp}", "hello"], None, "is not a model"),
        (
            ["evaluate", "--model", "{run}", "--source", "{tmp}/nothing", "--reference", "{tmp}/nothing"],
            None,
            "must be an existing file",
        ),
        (["export", "--model", "{tmp}", "--output", "{tmp}/out"], None, "not a training run"),
    ],
)
def test_clear_one_line_errors(run, capsys, monkeypatch, tmp_path, argv, stdin, message):
    argv = [a.format(run=run[0], tmp=tmp_path) for a in argv]
    code, out, err = _main(capsys, monkeypatch, argv, stdin)
    assert code == 2 and message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_evaluate_writes_json(run, capsys, monkeypatch, tmp_path):
    path, pairs = run
    # More than 8 sentences: `--compact` drops the finished ones between segments of steps.
    (tmp_path / "src").write_text("".join(s + "\n" for s, _ in pairs[:10]), encoding="utf-8")
    (tmp_path / "ref").write_text("".join(t + "\n" for _, t in pairs[:10]), encoding="utf-8")
    code, out, err = _main(
        capsys,
        monkeypatch,
        [
            "evaluate",
            "--model",
            str(path),
            "--source",
            str(tmp_path / "src"),
            "--reference",
            str(tmp_path / "ref"),
            "--beam",
            "1",
            "--output",
            str(tmp_path / "scores.json"),
            "--hypotheses",
            str(tmp_path / "hyp"),
            "--quiet",
            "--compact",
        ],
    )
    assert code == 0 and "BLEU" in err
    written = json.loads((tmp_path / "scores.json").read_text(encoding="utf-8"))
    assert json.loads(out) == written
    assert written["bleu"] > 90 and written["beam_size"] == 1 and written["num_sentences"] == 10
    assert (tmp_path / "hyp").read_text(encoding="utf-8").splitlines() == [t for _, t in pairs[:10]]


def test_export_then_translate_and_chat_with_the_saved_model(run, capsys, monkeypatch, tmp_path):
    path, pairs = run
    output = tmp_path / "saved_models" / "tiny"
    output.mkdir(parents=True)
    (output / "notes.txt").write_text("not an export")
    code, _, err = _main(capsys, monkeypatch, ["export", "--model", str(path), "--output", str(output)])
    assert code == 2 and "is not a SavedModel export" in err  # a folder it did not make is never replaced
    assert (output / "notes.txt").read_text() == "not an export"
    output = output / "export"
    code, _, err = _main(capsys, monkeypatch, ["export", "--model", str(path), "--output", str(output)])
    assert code == 0 and "Exported" in err
    assert (output / "saved_model.pb").is_file()
    code, out, _ = _main(capsys, monkeypatch, ["translate", "--model", str(output), "--beam", "1", pairs[3][0]])
    assert code == 0 and out == pairs[3][1] + "\n"
    code, _, err = _main(capsys, monkeypatch, ["translate", "--model", str(output), "--beam", "3", "x"])
    assert code == 2 and "exported with beam_size=4" in err
    code, _, err = _main(capsys, monkeypatch, ["translate", "--model", str(output), "--compact", "x"])
    assert code == 2 and "fixed at export" in err

    stdin = f"{pairs[0][0]}\n{pairs[1][0]}\n\nnever read\n".encode()
    code, out, _ = _main(capsys, monkeypatch, ["chat", "--model", str(output), "--temperature", "0"], stdin)
    assert code == 0 and out.splitlines() == [pairs[0][1], pairs[1][1]]  # stops at the empty line
    code, out, _ = _main(
        capsys,
        monkeypatch,
        ["chat", "--model", str(output), "--seed", "1", "--top-k", "5"],
        pairs[0][0].encode("utf-8"),
    )  # ends at end of input
    assert code == 0 and len(out.splitlines()) == 1


def test_console_entry_point_in_a_subprocess(run):
    path, pairs = run
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-m", "keras_transformer.commands.cli", "translate", "--model", str(path), pairs[4][0]],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == [pairs[4][1]]


@pytest.mark.slow  # n-best rows: test_signatures.py and tests/serving
def test_translate_n_best_prints_index_score_translation(run, capsys, monkeypatch):
    path, pairs = run
    argv = ["translate", "--model", str(path), "--n-best", "3", pairs[0][0], pairs[1][0]]
    code, out, _ = _main(capsys, monkeypatch, argv)
    rows = [line.split("\t") for line in out.splitlines()]
    assert code == 0 and [int(index) for index, _, _ in rows] == [0, 0, 0, 1, 1, 1]
    code, best, _ = _main(capsys, monkeypatch, ["translate", "--model", str(path), pairs[0][0], pairs[1][0]])
    assert [rows[0][2], rows[3][2]] == best.splitlines()  # the first of each n-best list is the translation
    scores = [float(score) for _, score, _ in rows]
    assert scores[0] >= scores[1] >= scores[2] and scores[3] >= scores[4] >= scores[5]
    code, _, err = _main(capsys, monkeypatch, ["translate", "--model", str(path), "--n-best", "5", "hi"])
    assert code == 2 and "--n-best 5 must be between 1 and the beam size, --beam 4" in err


def test_score_prints_log_probabilities_and_writes_json(run, capsys, monkeypatch, tmp_path):
    path, pairs = run
    (tmp_path / "src").write_text("".join(s + "\n" for s, _ in pairs[:3]) * 2, encoding="utf-8")
    wrong = [pairs[(i + 5) % 20][1] for i in range(3)]
    (tmp_path / "tgt").write_text("".join(t + "\n" for _, t in pairs[:3]) + "".join(t + "\n" for t in wrong))
    argv = ["score", "--model", str(path), "--source", str(tmp_path / "src"), "--target", str(tmp_path / "tgt")]
    code, out, _ = _main(capsys, monkeypatch, [*argv, "--quiet"])
    values = [float(line) for line in out.splitlines()]
    assert code == 0 and len(values) == 6 and all(value < 0 for value in values)
    assert all(right > bad for right, bad in zip(values[:3], values[3:]))  # the references are likelier
    code, out, err = _main(capsys, monkeypatch, [*argv, "--output", str(tmp_path / "scores.json")])
    report = json.loads((tmp_path / "scores.json").read_text())
    assert code == 0 and out == "" and "scored 6/6" in err
    assert report["log_probs"] == pytest.approx(values, abs=1e-5) and len(report["target_lengths"]) == 6
    (tmp_path / "short").write_text("one line\n", encoding="utf-8")
    code, _, err = _main(capsys, monkeypatch, [*argv[:-1], str(tmp_path / "short")])
    assert code == 2 and "has 1 lines but" in err
