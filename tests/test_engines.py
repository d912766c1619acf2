"""A new engine is one module and one registry line: an engine that echoes its input, opened by every command.

`EchoTranslator` and `ECHO` below are the whole engine (what a module in
`keras_transformer/engines/` would hold); the test registers it in the
public registry, `engines.ENGINES`, and nothing else: `export.load`,
`translate`, `evaluate`, `score` and `serve` (its REST handler, through
`opener.open_served`) then open a run directory with `--engine echo`. No
model is built or compiled: the run directory is a config.json and an empty
model.keras, which the echo engine never reads.
"""

import dataclasses
import json
import os
import threading
import time

import pytest
import tensorflow as tf

from keras_transformer import engines, export, opener, runs
from keras_transformer.commands import cli
from keras_transformer.config import ModelConfig
from keras_transformer.engines import Engine
from keras_transformer.files.folders import RUN
from keras_transformer.serving.served_translator import ServedTranslator
from keras_transformer.translators import TranslatorInterface


class EchoTranslator(TranslatorInterface):
    """Translates each sentence into itself: every search, every beam; scores each target by its length."""

    def __init__(self, path, beam_size=None, source_lang=None, target_lang=None):
        self.path, self.beam_size, self.max_source_length = path, tf.constant(beam_size or 1), tf.constant(64)

    def _decode(self, search, sentences, controls, *sampling):
        rows = tf.shape(sentences)[0]
        return {"translations": sentences, "scores": tf.zeros([rows]), "finished": tf.ones([rows], tf.bool)}

    def _nbest(self, sentences, controls):
        return {name: tf.expand_dims(value, 1) for name, value in self._decode("best", sentences, controls).items()}

    def _score(self, sources, targets, controls):
        lengths = tf.strings.length(targets)
        return {"log_probs": -tf.cast(lengths, tf.float32), "target_lengths": lengths}

    def _source_lengths(self, sentences):
        return tf.strings.length(sentences)


ECHO = Engine(
    name="echo",
    opens=(RUN,),
    open=EchoTranslator,
    what="the echo engine",
    takes=("beam_size", "source_lang", "target_lang"),
    drops=("threads", "jit_compile", "alpha"),
    refuses=("compact", "max_length"),
    because="it echoes",
)


@pytest.fixture
def run(tmp_path, monkeypatch):
    """A run directory the echo engine opens (a real config.json; a model.keras it never reads), echo registered."""
    monkeypatch.setitem(engines.ENGINES, "echo", ECHO)
    folder = tmp_path / "run"
    folder.mkdir()
    runs.RunConfig(model=ModelConfig()).write(folder)
    (folder / runs.MODEL).write_bytes(b"")
    return folder


def _main(capsys, argv):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_registry_line_makes_an_engine_of_the_opener(run):
    assert "echo" in opener.engine_names() and opener.opens()[RUN] == ("xla", "ctranslate2", "echo")
    translator = export.load(run, "echo", beam_size=2)
    assert isinstance(translator, EchoTranslator) and int(translator.beam_size) == 2
    assert translator(["A dog runs."]).numpy().tolist() == [b"A dog runs."]
    with pytest.raises(ValueError, match=r"is the echo engine: compact=True does not apply \(it echoes\)"):
        export.load(run, "echo", compact=True)
    with pytest.raises(ValueError, match=r"`top_n` is not an option of the echo engine .* beam_size, source_lang"):
        export.load(run, "echo", top_n=3)


def test_translate_evaluate_and_score_open_the_new_engine(run, tmp_path, capsys):
    code, out, _ = _main(capsys, ["translate", "--model", str(run), "--engine", "echo", "A dog runs.", "Zwei."])
    assert code == 0 and out == "A dog runs.\nZwei.\n"
    source, target = tmp_path / "source.txt", tmp_path / "target.txt"
    source.write_text("A dog runs.\nTwo cats.\n", encoding="utf-8")
    target.write_text("A dog.\nTwo cats.\n", encoding="utf-8")
    argv = ["evaluate", "--model", str(run), "--engine", "echo", "--source", str(source), "--quiet"]
    code, out, _ = _main(capsys, [*argv, "--reference", str(source)])
    assert code == 0 and json.loads(out)["bleu"] == pytest.approx(100.0)
    argv = ["score", "--model", str(run), "--engine", "echo", "--source", str(source), "--target", str(target)]
    code, out, _ = _main(capsys, [*argv, "--quiet"])
    assert code == 0 and out == "-6.000000\n-9.000000\n"


def test_serve_serves_the_new_engines_translator(run, tmp_path):
    served = opener.open_served(run, "echo", workdir=tmp_path)
    assert isinstance(served.translator, EchoTranslator) and served.saved_model is None and not served.in_rows
    model = ServedTranslator(served.translator, run)
    request = model.parse({"instances": ["A dog runs."]})
    outputs = model.render(request, model.run(request.signature, request.inputs, request.scalars))
    assert outputs["predictions"][0]["translations"] == "A dog runs."


def test_the_commands_decode_as_many_batches_side_by_side_as_the_engine_says(run, capsys, monkeypatch):
    cores = os.cpu_count() or 1
    assert opener.default_workers(run) == min(2, cores)  # the xla engine's two
    assert opener.default_workers(run, "ctranslate2") == 1  # CTranslate2 takes its threads itself
    threads = set()

    class Recording(EchoTranslator):
        def _decode(self, *args):
            threads.add(threading.current_thread().name)
            time.sleep(0.05)  # each batch long enough for the other thread to take the next
            return super()._decode(*args)

    monkeypatch.setitem(engines.ENGINES, "echo", dataclasses.replace(ECHO, open=Recording, workers=2))
    argv = ["translate", "--model", str(run), "--engine", "echo", "--batch-size", "1", "a", "b", "c", "d"]
    code, out, _ = _main(capsys, argv)
    assert code == 0 and out == "a\nb\nc\nd\n"
    assert threads == ({"translate_0", "translate_1"} if cores >= 2 else {"MainThread"})
    threads.clear()
    assert _main(capsys, [*argv, "--workers", "1"])[0] == 0 and threads == {"MainThread"}
