"""`translate --stream` and `chat --stream`: the words as they come, the same lines; Ctrl-C stops one answer."""

import io
import sys

import pytest

from keras_transformer.commands import cli
from keras_transformer.commands.streaming import print_stream
from keras_transformer.translators.streaming import Piece

from trained_runs import tiny_run_dir


def run_cli(capsys, monkeypatch, *argv, stdin=""):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8"))))
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_translate_stream_prints_the_plain_lines(capsys, monkeypatch):
    path, pairs = tiny_run_dir()
    sentences = [source for source, _ in pairs[:4]]
    plain = run_cli(capsys, monkeypatch, "translate", "--model", path, "--beam", "1", *sentences)
    streamed = run_cli(capsys, monkeypatch, "translate", "--model", path, "--beam", "1", "--stream", *sentences)
    assert streamed == plain and len(plain.splitlines()) == 4


@pytest.mark.slow  # bans in a stream: test_banned_words.py and test_stream_api.py
def test_translate_stream_keeps_the_banned_words_out(capsys, monkeypatch):
    path, pairs = tiny_run_dir()
    sentences = [source for source, _ in pairs[:4]]
    plain = run_cli(capsys, monkeypatch, "translate", "--model", path, "--beam", "1", *sentences)
    word = max(plain.split(), key=len)  # a word the model says without a ban
    argv = ["translate", "--model", path, "--beam", "1", "--ban", word, *sentences]
    banned = run_cli(capsys, monkeypatch, *argv)
    assert word not in banned.split()
    assert run_cli(capsys, monkeypatch, *argv[:-4], "--stream", *sentences) == banned


def test_chat_streams_the_same_answers(capsys, monkeypatch):
    path, pairs = tiny_run_dir()
    lines = "".join(source + "\n" for source, _ in pairs[:3]) + "\n"
    argv = ["chat", "--model", path, "--temperature", "0.9", "--seed", "5"]
    plain = run_cli(capsys, monkeypatch, *argv, "--no-stream", stdin=lines)
    streamed = run_cli(capsys, monkeypatch, *argv, "--stream", stdin=lines)
    assert streamed == plain and len(plain.splitlines()) == 3


def test_ctrl_c_stops_the_answer_and_keeps_the_words():
    closed = []

    def pieces():
        try:
            yield Piece("Ein", (5,))
            yield Piece(" Hund", (6,))
            raise KeyboardInterrupt
        finally:
            closed.append(True)

    out = io.StringIO()
    assert print_stream(pieces(), out) == "cancelled"
    assert out.getvalue() == "Ein Hund [stopped]\n" and closed == [True]


def test_stream_refuses_what_it_cannot_print(capsys):
    path, _ = tiny_run_dir()
    code = cli.main(["translate", "--model", str(path), "--stream", "--n-best", "2", "A dog."])
    assert code != 0 and "--n-best" in capsys.readouterr().err


@pytest.fixture(autouse=True)
def _quiet_tf(monkeypatch):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
