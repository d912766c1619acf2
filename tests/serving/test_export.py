"""Translator: strings in and out, SavedModel round trip in a fresh process, atomic save, `load`."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import build_transformer, runs
from keras_transformer.export import Translator, load

from trained_runs import DATA, MAX_LENGTH, tiny_run_dir  # noqa: F401


@pytest.fixture(scope="module")
def run():
    return tiny_run_dir()


@pytest.fixture(scope="module")
def translator(run):
    """A live Translator, built in this module (tokenizers must not outlive a set_random_seed)."""
    return load(run[0])


@pytest.fixture(scope="module")
def exported(translator, tmp_path_factory):
    return pathlib.Path(translator.save(tmp_path_factory.mktemp("export") / "model"))


def _strings(tensor):
    return [s.decode("utf-8") for s in tensor.numpy()]


def test_translates_the_training_pairs(run, translator):
    sources = [s for s, _ in run[1][:4]]
    greedy = _strings(translator.greedy(tf.constant(sources)))
    assert greedy == [t for _, t in run[1][:4]]  # overfitted: exact
    assert isinstance(translator, Translator) and int(translator.beam_size.numpy()) == 4
    assert len(_strings(translator(tf.constant(sources)))) == 4


def test_empty_long_and_no_inputs(run, translator):
    long = " ".join(s for s, _ in run[1])  # hundreds of tokens
    sentences = [run[1][0][0], "", "   \t", long]
    lengths = translator.source_lengths(tf.constant(sentences)).numpy()
    assert lengths[1] == lengths[2] == 0 and lengths[3] > MAX_LENGTH
    for outputs in (translator(tf.constant(sentences)), translator.greedy(tf.constant(sentences))):
        outputs = _strings(outputs)
        assert outputs[0] == run[1][0][1] and outputs[1] == outputs[2] == ""
    assert translator(tf.constant([], tf.string)).shape == (0,)


def test_sample_signature(run, translator):
    sources = tf.constant([s for s, _ in run[1][:3]])
    as_greedy = translator.sample(sources, 0.0, 0, 1.0, -1)
    assert _strings(as_greedy) == _strings(translator.greedy(sources))
    seeded = [_strings(translator.sample(sources, 1.5, 50, 0.95, 7)) for _ in range(2)]
    assert seeded[0] == seeded[1]


def test_saved_model_translates_in_a_fresh_process_without_project_code(run, translator, exported, tmp_path):
    sources = [s for s, _ in run[1][:3]] + ["", " ".join(s for s, _ in run[1])]
    expected = {
        "beam": _strings(translator(tf.constant(sources))),
        "greedy": _strings(translator.greedy(tf.constant(sources))),
    }
    script = textwrap.dedent(f"""
        import json, sys
        import tensorflow as tf
        import tensorflow_text  # registers the SentencePiece ops
        model = tf.saved_model.load({str(exported)!r})
        sources = tf.constant(json.loads(sys.argv[1]))
        decode = lambda t: [s.decode("utf-8") for s in t.numpy()]
        print(json.dumps({{"beam": decode(model(sources)), "greedy": decode(model.greedy(sources)),
                          "project": [m for m in sys.modules if m.startswith("keras_transformer")]}}))
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-c", script, json.dumps(sources)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got["project"] == []
    assert got["beam"] == expected["beam"] and got["greedy"] == expected["greedy"]


def test_failed_save_leaves_the_previous_export_intact(translator, exported, monkeypatch):
    before = sorted(p.relative_to(exported) for p in exported.rglob("*"))

    def broken_save(module, path, signatures=None, options=None):
        pathlib.Path(path, "saved_model.pb").write_bytes(b"half written")
        raise OSError("disk full")

    monkeypatch.setattr(tf.saved_model, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        translator.save(exported)
    assert sorted(p.relative_to(exported) for p in exported.rglob("*")) == before
    assert not [p for p in exported.parent.iterdir() if p.name.startswith(".")]  # no leftovers
    assert load(exported).greedy(tf.constant(["x"])).shape == (1,)


def test_bare_keras_model_export(run, tmp_path):
    model = keras.saving.load_model(run[0] / runs.MODEL, compile=False)
    model.export(tmp_path / "bare")  # Keras's own SavedModel export: ids in, logits out
    reloaded = tf.saved_model.load(str(tmp_path / "bare"))
    inputs = {"encoder_inputs": tf.constant([[5, 6, 7, 0]]), "decoder_inputs": tf.constant([[2, 9, 0]])}
    np.testing.assert_allclose(reloaded.serve(inputs).numpy(), model(inputs).numpy(), atol=1e-5)


def test_load_errors_are_one_line(run, exported, tmp_path):
    with pytest.raises(ValueError, match="is not a model"):
        load(tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        load(tmp_path / "missing")
    with pytest.raises(ValueError, match="exported with beam_size=4"):
        load(exported, beam_size=2)
    for option in ("alpha", "compact"):
        with pytest.raises(ValueError, match="fixed at export"):
            load(exported, **{option: 1})
    corrupt = tmp_path / "corrupt"
    shutil.copytree(run[0], corrupt)
    (corrupt / runs.MODEL).write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match=r"model.keras is not a whole .keras file \(a zip archive\)") as error:
        load(corrupt)
    assert "\n" not in str(error.value)
    broken_export = tmp_path / "broken_export"
    broken_export.mkdir()
    (broken_export / "saved_model.pb").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="could not load the SavedModel"):
        load(broken_export)


@pytest.mark.parametrize("alpha", [float("nan"), float("inf"), -0.5, True, "0.6"])
def test_alpha_must_be_a_finite_number_at_least_zero(run, translator, alpha):
    with pytest.raises(ValueError, match="`alpha` must be a finite number >= 0"):
        Translator(translator.model, translator.source_tokenizer, alpha=alpha)
    with pytest.raises(ValueError, match="`alpha` must be a finite number >= 0"):
        load(run[0], alpha=alpha)


def test_tokenizer_must_fit_the_model(translator):
    model = build_transformer(64, 64, num_layers=1, d_model=32, num_heads=4, d_ff=64, max_length=16)
    with pytest.raises(ValueError, match="`source_tokenizer` does not fit the model: its vocab_size is 400"):
        Translator(model, translator.source_tokenizer)


@pytest.mark.slow  # compaction's results: tests/decoding/test_compaction.py
def test_a_compacting_translator_gives_the_one_program_results(run, translator, tmp_path):
    compacting = load(run[0], compact=True)
    # More than 8 sentences (compaction's smallest batch) of many lengths: training pairs, unseen ones, empty.
    unseen = (DATA / "val.en").read_text(encoding="utf-8").splitlines()[:4]
    sentences = [s for s, _ in run[1][:6]] + unseen + [""]
    for method in ("call_with_status", "greedy_with_status"):
        expected, got = getattr(translator, method)(sentences), getattr(compacting, method)(sentences)
        assert _strings(got["translations"]) == _strings(expected["translations"])
        np.testing.assert_allclose(got["scores"].numpy(), expected["scores"].numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(got["finished"].numpy(), expected["finished"].numpy())
    assert not all(expected["finished"].numpy())  # some unseen sentences run to max_length: rows end apart
    with pytest.raises(ValueError, match="`compact=True` does not save"):
        compacting.save(tmp_path / "export")
    assert not (tmp_path / "export").exists()
