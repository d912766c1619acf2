"""Opening a run's model.keras draws no random weights and reads each weight once, into its variable.

`keras.saving.load_model` draws every weight from its initializer, then reads
the whole weights member into memory and each weight from that copy: for an
OPUS-MT-base run (282 MB of weights) 1.04 GB over the imports. The model here
is tiny (tied embeddings, as an imported Marian model has them), and what is
checked is counted, not timed: the initializers' random draws, the reads of
each HDF5 dataset, and the Python and NumPy memory held at once (`tracemalloc`,
to which NumPy reports its buffers), which a whole copy of the weights would
exceed. Each check fails on `keras.saving.load_model`.
"""

import collections
import pathlib
import tracemalloc
import zipfile

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf
from keras.src.initializers import random_initializers

from keras_transformer.models import build_transformer, loading
from keras_transformer.runs import writing


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """`(model, path of its model.keras, the weights' bytes)`: a tiny model with tied embeddings, as a run saves it."""
    model = build_transformer(
        1024, 1024, num_layers=2, d_model=256, num_heads=4, d_ff=4096, max_length=16,
        share_embeddings=True, tie_output_embedding=True,
    )  # fmt: skip
    path = tmp_path_factory.mktemp("run") / "model.keras"
    writing.save_keras(model, path)
    weight_bytes = sum(int(np.prod(w.shape)) * np.dtype(w.dtype).itemsize for w in model.weights)
    return model, path, weight_bytes


def assert_same_model(loaded, model, path):
    """`loaded` is `model`, saved at `path`: its weights, and the configuration Keras's own loading gives."""
    assert type(loaded) is type(model)
    assert loaded.get_config() == keras.saving.load_model(path, compile=False).get_config()
    assert [w.path for w in loaded.weights] == [w.path for w in model.weights]
    for theirs, ours in zip(loaded.weights, model.weights):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(theirs.value), keras.ops.convert_to_numpy(ours.value))


@pytest.fixture
def draws(monkeypatch):
    """A counter of the random values Keras's initializers (GlorotUniform, RandomNormal, ...) draw eagerly.

    Building a functional model traces its layers' calls in a graph, where an
    uncreated variable reads as its initializer's symbolic output: those
    draws allocate nothing, and are not counted.
    """
    counts = collections.Counter()
    for name in ("uniform", "normal", "truncated_normal"):
        draw = getattr(random_initializers.random, name)

        def counted(*args, draw=draw, name=name, **kwargs):
            counts[name] += tf.executing_eagerly()
            return draw(*args, **kwargs)

        monkeypatch.setattr(random_initializers.random, name, counted)
    return counts


@pytest.fixture
def reads(monkeypatch):
    """A counter of the reads of each HDF5 dataset, by its name."""
    counts = collections.Counter()
    for method in ("__getitem__", "read_direct"):  # `dataset[...]`, and `np.array(dataset)` (Keras's read)
        read = getattr(h5py.Dataset, method)

        def counted(self, *args, read=read, **kwargs):
            counts[self.name] += 1
            return read(self, *args, **kwargs)

        monkeypatch.setattr(h5py.Dataset, method, counted)
    return counts


def test_loading_draws_no_random_weights_and_reads_each_weight_once(saved, draws, reads):
    model, path, _ = saved
    loaded = loading.load_model(path)
    assert not +draws, f"the initializers drew {dict(draws)}"
    unique = {id(w) for w in loaded.weights}
    assert sum(reads.values()) == len(unique), f"{sum(reads.values())} reads for {len(unique)} weights"
    assert max(reads.values()) == 1
    assert_same_model(loaded, model, path)


def test_keras_load_model_draws_weights(saved, draws, reads):
    """What the counters above see in Keras's own loading, so that the checks can fail."""
    _, path, _ = saved
    keras.saving.load_model(path, compile=False)
    assert +draws
    assert sum(reads.values()) >= len(reads) > 0  # its reads are seen (it reads them from a whole copy in memory)


def traced_peak(function):
    """`(result, peak bytes)`: the most memory traced (NumPy buffers, Python objects) while `function()` ran."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = function()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_loading_holds_no_whole_copy_of_the_weights(saved):
    model, path, weight_bytes = saved
    largest = max(int(np.prod(w.shape)) * 4 for w in model.weights)
    assert largest < weight_bytes / 4  # the embedding is not most of it
    # What is held: the model's Python objects (about 4 MB) and one weight twice (read, and TensorFlow's copy).
    loaded, peak = traced_peak(lambda: loading.load_model(path))
    _, keras_peak = traced_peak(lambda: keras.saving.load_model(path, compile=False))
    assert keras_peak > weight_bytes  # Keras's: the whole weights member in memory
    assert peak < weight_bytes / 2, f"{peak} bytes held loading {weight_bytes} bytes of weights (Keras: {keras_peak})"
    assert_same_model(loaded, model, path)


def test_an_archive_it_does_not_read_goes_to_keras(saved, tmp_path):
    """A compressed weights member (Keras never writes one) loads as Keras loads it."""
    model, path, _ = saved
    compressed = tmp_path / "model.keras"
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(compressed, "w", zipfile.ZIP_DEFLATED) as target:
        for name in source.namelist():
            target.writestr(name, source.read(name))
    assert loading.read_once(compressed) is None
    assert_same_model(loading.load_model(compressed), model, compressed)


def test_a_trained_runs_optimizer_state_is_not_read(reads):
    """A run saved while training holds Adam's moments too (twice the weights); loading without compiling skips them."""
    path = pathlib.Path(__file__).parent / "data" / "run_11d2bb5" / "model.keras"
    loaded = loading.read_once(path)
    assert loaded is not None
    assert reads and not [name for name in reads if name.startswith("/optimizer/")]
    assert_same_model(loaded, keras.saving.load_model(path, compile=False), path)
