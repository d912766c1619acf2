"""A run directory written by an earlier version loads, translates, resumes and exports as it did.

`tests/data/run_11d2bb5/` is the `tiny` preset trained 1 epoch by the package
at commit 11d2bb5 (`tests/data/make_run_11d2bb5.py` rebuilds it), whose
config.json predates the record of the files a run wrote. Beside it,
`run_11d2bb5_outputs.npz` holds that version's logits on fixed ids and its
greedy and beam-4 translations of fixed sentences.
"""

import pathlib
import shutil

import keras
import numpy as np
import pytest

from keras_transformer import runs
from keras_transformer.commands import cli
from keras_transformer.export import load
from keras_transformer.files import atomic, destinations

DATA = pathlib.Path(__file__).resolve().parent / "data"
RUN = DATA / "run_11d2bb5"


@pytest.fixture(scope="module")
def expected():
    return np.load(DATA / "run_11d2bb5_outputs.npz")


def _strings(tensor):
    return [s.decode("utf-8") for s in tensor.numpy()]


def test_its_model_gives_the_same_logits(expected):
    model = keras.saving.load_model(RUN / runs.MODEL, compile=False)
    logits = model({"encoder_inputs": expected["source"], "decoder_inputs": expected["target"]})
    # The same weights and graph; the last bits differ with the CPU's kernels (AVX2 vs AVX-512).
    np.testing.assert_allclose(keras.ops.convert_to_numpy(logits), expected["logits"], rtol=0, atol=1e-5)


def test_it_translates_to_the_same_strings(expected):
    sentences = [str(s) for s in expected["sentences"]]
    translator = load(RUN)
    with pytest.warns(Warning):  # the tiny model's outputs are cut off at max_length
        assert _strings(translator.greedy(sentences)) == [str(s) for s in expected["greedy"]]
        assert _strings(translator(sentences)) == [str(s) for s in expected["beam"]]


def test_it_exports_and_the_export_translates_the_same(expected, tmp_path, capsys):
    sentences = [str(s) for s in expected["sentences"]]
    assert cli.main(["export", "--model", str(RUN), "--output", str(tmp_path / "export")]) == 0, capsys.readouterr()
    with pytest.warns(Warning):
        assert _strings(load(tmp_path / "export").greedy(sentences)) == [str(s) for s in expected["greedy"]]


def test_it_resumes_and_is_replaced_as_a_run_of_this_package(tmp_path):
    from keras_transformer.training import train

    run = pathlib.Path(shutil.copytree(RUN, tmp_path / "run"))
    assert destinations.check_destination(run, "run") == "ours"  # an earlier version's run: its files by name
    assert train("tiny", output=run, resume=True, max_examples=300, verbose=0)["message"].startswith("a finished run")
    config = runs.read_config(run)
    atomic.write_json(run / runs.CONFIG, {**config, "finished": False})  # as if interrupted
    summary = train("tiny", output=run, resume=True, epochs=2, max_examples=300, verbose=0)
    assert summary["completed_epochs"] == 2 and runs.read_config(run)["finished"]
    assert destinations.is_own_run(run)  # recorded now
    (run / "logs" / "my_notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(destinations.UnsafeDestinationError, match="my_notes.txt was not written"):
        train("tiny", output=run, overwrite=True, epochs=1, max_examples=300, verbose=0)
