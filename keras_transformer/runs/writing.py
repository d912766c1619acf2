"""`write_run`: a whole run directory written at once: its model, tokenizers, config.json and record.

An import writes a run so (`keras_transformer.pretrained`); training writes
the same files epoch by epoch (`keras_transformer.training`). Write it into a
temporary folder and swap it in (`files.atomic.replace_dir`), so that a crash
leaves nothing half-written.

Example:

>>> write_run(tmp, model, run_config, Tokenizers(source, target))  # doctest: +SKIP
"""

import contextlib
import inspect
import pathlib
import tempfile
import uuid
import zipfile

import keras
import numpy as np

from keras_transformer.files import run_files
from keras_transformer.runs.layout import MODEL, SOURCE_TOKENIZER, TARGET_TOKENIZER

# The members of a `.keras` file in the order Keras writes them; anything else (assets) follows, sorted.
KERAS_MEMBERS = ("metadata.json", "config.json", "model.weights.h5")
# A weight larger than this (bytes) goes into model.weights.h5 a block of rows, of about this size, at a time.
LARGE_BYTES = 64 * 2**20


def write_run(folder, model, config, tokenizers):
    """Writes `model` (`model.keras`), `tokenizers` (each with its `save(directory)`) and `config` in `folder`.

    The run's `config.json` then records every file written (`run_files`),
    which is what lets `--overwrite` replace exactly those files later.
    """
    folder = pathlib.Path(folder)
    save_keras(model, folder / MODEL)
    tokenizers.source.save(folder / SOURCE_TOKENIZER)
    tokenizers.target.save(folder / TARGET_TOKENIZER)
    config.write(folder)
    run_files.FileRecorder(folder).record()


def save_keras(model, path):
    """`model.save(path)`: the same `.keras` archive, written without a whole extra copy of the weights in memory.

    Returns the paths of the weights written a block at a time (those over
    `LARGE_BYTES`; none where Keras's internals differ from what this
    expects, and the file is then the one `model.save` writes).

    Keras builds a `.keras` file's `model.weights.h5` in memory before it
    zips it when it judges the memory free enough (half of what is
    available), and copies it once more into the archive; and its store
    converts each weight whole to a NumPy array, which copies it twice (the
    variable's read, then `np.array`). For NLLB-200 (2.4 GB of weights, 1 GB
    of them one embedding) that was 4.6 GB beside the model. Here:

    - Keras writes the archive's files into a folder beside `path`
      (`model.save(..., zipped=False)`), which are then stored into the
      archive from disk, uncompressed, as Keras stores them;
    - a weight over `LARGE_BYTES` is handed to Keras's store as a small
      marker (each layer's `save_own_variables` gets a store that swaps it),
      and its dataset in `model.weights.h5` is then written a block of rows
      at a time, at the marker's place, with the same name, shape and dtype.

    `keras.saving.load_model` reads it as it reads what `model.save` writes.
    A Keras whose `save` has no `zipped` argument saves as before.
    """
    path = pathlib.Path(path)
    if "zipped" not in inspect.signature(model.save).parameters:
        model.save(path)
        return []
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".unzipped-") as scratch:
        files = pathlib.Path(scratch) / "model"
        with _large_weights_marked(model) as marked:
            model.save(files, zipped=False)
        written = _write_marked(files / "model.weights.h5", marked)
        members = [files / name for name in KERAS_MEMBERS if (files / name).is_file()]
        others = (p for p in files.rglob("*") if p.is_file() and p.relative_to(files).as_posix() not in KERAS_MEMBERS)
        with zipfile.ZipFile(path, "w") as archive:
            for member in members + sorted(others):
                archive.write(member, member.relative_to(files).as_posix())
    return written


class _MarkingStore:
    """A layer's weights store that takes a marker instead of each large weight, and passes the rest on."""

    def __init__(self, store, large, marked):
        self._store, self._large, self._marked = store, large, marked

    def __setitem__(self, key, value):
        weight = self._large.get(id(value))
        if weight is None:
            self._store[key] = value
            return
        marker = np.frombuffer(f"keras-transformer block-written weight {uuid.uuid4()}".encode(), np.uint8)
        self._marked[marker.tobytes()] = weight
        self._store[key] = marker

    def __getattr__(self, name):
        return getattr(self._store, name)

    def __getitem__(self, key):
        return self._store[key]


@contextlib.contextmanager
def _large_weights_marked(model):
    """Within it, `model.save` stores a marker for each float weight over `LARGE_BYTES`: `{marker bytes: weight}`."""
    large = {
        id(w): w for w in model.weights if w.dtype in ("float16", "float32", "float64") and _nbytes(w) > LARGE_BYTES
    }
    marked, patched = {}, []
    flatten = getattr(model, "_flatten_layers", None)  # Keras's walk over every layer, nested ones too
    try:
        for layer in flatten(include_self=True, recursive=True) if large and flatten else ():
            method = layer.save_own_variables

            def save_own_variables(store, method=method):
                return method(_MarkingStore(store, large, marked))

            object.__setattr__(layer, "save_own_variables", save_own_variables)  # this instance, for this save
            patched.append(layer)
        yield marked
    finally:
        for layer in patched:
            object.__delattr__(layer, "save_own_variables")


def _write_marked(weights_file, marked):
    """Replaces each marker dataset in `weights_file` by its weight, written a block of rows at a time."""
    if not marked:
        return []
    import h5py

    found = {}
    with h5py.File(weights_file, "r+") as h5:

        def visit(name, item):
            if isinstance(item, h5py.Dataset) and item.dtype == np.uint8 and item.shape and item.shape[0] < 256:
                weight = marked.get(item[()].tobytes())
                if weight is not None:
                    found[name] = weight

        h5.visititems(visit)
        for name, weight in found.items():
            del h5[name]
            dataset = h5.create_dataset(name, shape=tuple(weight.shape), dtype=np.dtype(weight.dtype))
            rows = max(1, LARGE_BYTES // max(1, _nbytes(weight) // max(1, weight.shape[0])))
            for start in range(0, weight.shape[0], rows):
                dataset[start : start + rows] = _rows(weight, start, min(start + rows, weight.shape[0]))
    if len(found) != len(marked):  # a marker Keras did not write as it was given: the file cannot be trusted
        raise RuntimeError(f"{weights_file}: {len(marked) - len(found)} weights were not written")
    return sorted(weight.path for weight in found.values())


def _rows(weight, start, stop):
    """Rows `[start, stop)` of `weight` as a NumPy array, read without a copy of the whole variable.

    A TensorFlow variable written by row updates (`scatter_update`, as an
    import writes it) copies its whole buffer on every plain read; a gather
    of its rows (`sparse_read`) reads those rows alone.
    """
    value = weight.value
    if hasattr(value, "sparse_read"):
        import tensorflow as tf

        return value.sparse_read(tf.range(start, stop)).numpy()
    return keras.ops.convert_to_numpy(value[start:stop])


def _nbytes(weight):
    return int(np.prod(weight.shape, dtype=np.int64)) * np.dtype(weight.dtype).itemsize
