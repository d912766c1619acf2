"""`train --marian-compatible`: a new run that `export --format transformers` writes as a Marian checkpoint.

This package's defaults (no END after the source, LayerNorm epsilon 1e-6)
have no Marian equivalent: such a run is refused at export in one line
that names the option.
"""

import shutil

import keras
import numpy as np
import pytest

from keras_transformer import runs
from keras_transformer.commands.cli import main
from keras_transformer.pretrained import import_pretrained
from keras_transformer.training import train


@pytest.fixture(scope="module")
def compatible(tmp_path_factory):
    """A tiny run trained with `marian_compatible=True` on 300 chatbot pairs, one epoch."""
    output = tmp_path_factory.mktemp("runs") / "marian"
    train("tiny", output=str(output), epochs=1, max_examples=300, marian_compatible=True, verbose=0)
    return output


def export(run, output):
    return main(["export", "--model", str(run), "--output", str(output), "--format", "transformers"])


def test_the_run_ends_its_sources_with_end_and_has_marians_epsilon(compatible):
    config = runs.RunConfig.read(compatible)
    assert config.add_source_end and config.model.layer_norm_epsilon == 1e-5
    assert config.decoding.normalization == "length"
    assert keras.saving.load_model(compatible / runs.MODEL, compile=False).config.layer_norm_epsilon == 1e-5


def test_it_exports_as_marian_and_imports_back_to_its_outputs(compatible, tmp_path):
    assert export(compatible, tmp_path / "hf") == 0
    import_pretrained(tmp_path / "hf", tmp_path / "again")
    models = [keras.saving.load_model(path / runs.MODEL, compile=False) for path in (compatible, tmp_path / "again")]
    ids = np.array([[5, 9, 40, 7, 3], [11, 12, 3, 0, 0]], np.int32)
    inputs = {"encoder_inputs": ids, "decoder_inputs": np.array([[2, 8, 30, 6, 0], [2, 19, 0, 0, 0]], np.int32)}
    logits = [keras.ops.convert_to_numpy(model(inputs)) for model in models]
    np.testing.assert_allclose(logits[1], logits[0], rtol=0, atol=1e-5)


def test_a_run_trained_without_it_is_told_the_option_in_one_line(compatible, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(compatible, run)
    runs.update_config(run, add_source_end=False)  # as a run of this package's defaults
    assert export(run, tmp_path / "hf") == 2
    err = capsys.readouterr().err.strip()
    assert "add_source_end=False" in err and "train --marian-compatible" in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize(
    "options, named",
    [
        (dict(init_from="saved_models/some-run"), "`marian_compatible` trains a new run"),
        (dict(layer_norm_epsilon=1e-6), "sets layer_norm_epsilon=1e-05"),
        (dict(normalization="gnmt"), "sets normalization='length'"),
        (dict(norm_first=True), "`marian_compatible`: preset 'tiny''s `norm_first`=True"),
    ],
)
def test_what_marian_cannot_hold_is_refused_before_any_work(tmp_path, options, named):
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace(")", r"\)")):
        train("tiny", output=str(tmp_path / "run"), epochs=1, marian_compatible=True, **options)
    assert not (tmp_path / "run").exists()
