"""An import never holds a large tensor twice: it is read, copied and saved a block of rows at a time.

The fixture is the tiny NLLB checkpoint of tests/data/m2m100/nllb/, whose
embedding (1,404 × 32 float32, 180 KB) is by far its largest tensor. With the
block size lowered to a tenth of it, the NumPy memory held while the weights
are set, and while the run's model.keras is written, is counted with
`tracemalloc` (NumPy reports its buffers to it): a whole copy of the
embedding would be counted, a block of it is well below. Counted, not timed.
The values are checked too: copying in blocks changes none of them.
"""

import pathlib
import tracemalloc

import keras
import numpy as np
import pytest

from keras_transformer.models import build_transformer
from keras_transformer.pretrained import weight_blocks
from keras_transformer.pretrained.checkpoints import Checkpoint
from keras_transformer.pretrained.families import family_of
from keras_transformer.runs import writing

FOLDER = pathlib.Path(__file__).resolve().parents[1] / "data" / "m2m100" / "nllb"
EMBEDDING = "model.shared.weight"


@pytest.fixture(scope="module")
def imported():
    """`(checkpoint, family, model config, embedding bytes)` of the fixture, read as the importer reads it."""
    checkpoint = Checkpoint(FOLDER)
    hf_config = checkpoint.json("config.json")
    family = family_of(hf_config, FOLDER / "config.json")
    tensors = checkpoint.tensors()
    config = family.model_config(hf_config, tensors, "config.json", "model.safetensors")
    embedding_bytes = 4 * int(np.prod(tensors[EMBEDDING].shape))
    return checkpoint, family, config, embedding_bytes


def numpy_peak(function):
    """`(result, peak bytes)`: the most memory traced (NumPy buffers, Python objects) while `function()` ran."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = function()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_row_blocks_tile_the_tensor_within_the_block_size(imported):
    checkpoint, _, _, embedding_bytes = imported
    whole = checkpoint.tensor(EMBEDDING)
    limit = embedding_bytes // 10
    blocks = list(checkpoint.row_blocks(EMBEDDING, limit))
    assert len(blocks) > 1
    assert all(rows.nbytes <= limit for _, rows in blocks)
    assert [start for start, _ in blocks] == list(np.cumsum([0] + [len(rows) for _, rows in blocks[:-1]]))
    np.testing.assert_array_equal(np.concatenate([rows for _, rows in blocks]), whole)


def test_weights_are_set_without_a_whole_copy_of_the_embedding(imported, monkeypatch):
    checkpoint, family, config, embedding_bytes = imported
    monkeypatch.setattr(weight_blocks, "BLOCK_BYTES", embedding_bytes // 10)
    model = weight_blocks.zero_initialized(lambda: build_transformer(config=config))
    _, peak = numpy_peak(lambda: family.assign_weights(model, checkpoint))
    assert peak < embedding_bytes / 2, f"{peak} bytes held while setting a {embedding_bytes}-byte embedding"
    embeddings = [w for w in model.weights if tuple(w.shape) == checkpoint.tensors()[EMBEDDING].shape]
    assert embeddings
    for weight in embeddings:  # tied: the encoder's, the decoder's and the output's rows are the same tensor
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(weight.value), checkpoint.tensor(EMBEDDING))


def test_zero_initialized_model_keeps_its_config_and_starts_at_zero(imported):
    _, _, config, _ = imported
    keras.backend.clear_session()  # the same automatic names for both models
    model = weight_blocks.zero_initialized(lambda: build_transformer(config=config))
    assert all(not np.any(keras.ops.convert_to_numpy(w.value)) for w in model.weights)
    keras.backend.clear_session()
    assert model.get_config() == build_transformer(config=config).get_config()  # the initializers included


def test_model_keras_is_written_a_block_at_a_time_and_loads_the_same(imported, monkeypatch, tmp_path):
    _, _, config, _ = imported
    config = config.with_vocabulary(65536, 65536)  # an 8 MiB embedding: Keras's own saving takes far less
    embedding_bytes = 65536 * config.d_model * 4
    monkeypatch.setattr(writing, "LARGE_BYTES", embedding_bytes // 16)
    model = build_transformer(config=config)
    written, peak = numpy_peak(lambda: writing.save_keras(model, tmp_path / "model.keras"))
    assert written, "no weight was written a block at a time"
    assert peak < embedding_bytes / 2, f"{peak} bytes held while saving a {embedding_bytes}-byte embedding"
    reloaded = keras.saving.load_model(tmp_path / "model.keras")
    assert [w.path for w in reloaded.weights] == [w.path for w in model.weights]
    for ours, theirs in zip(model.weights, reloaded.weights):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(ours.value), keras.ops.convert_to_numpy(theirs.value))
