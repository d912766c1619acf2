"""`load_model`: a `.keras` file as a model, each weight read once into its variable.

Keras's own `keras.saving.load_model` builds the model with every weight
drawn from its initializer, reads the whole `model.weights.h5` member into
memory (when it judges memory free enough), then reads each weight from that
copy and assigns it, which leaves the random values' memory behind in
TensorFlow's allocator. For an OPUS-MT-base run (282 MB of weights) that
peaked at 1.04 GB over the imports and kept 0.54 GB (now 0.39 GB and 0.35 GB). Here:

- the model is built from the archive's `config.json` with its variables
  deferred (`keras.StatelessScope(initialize_variables=False)`): nothing is
  drawn or allocated;
- each variable's initializer becomes a read of its dataset in
  `model.weights.h5`, read in place from the archive (Keras stores it
  uncompressed): each variable is created once, from its own values, and a
  weight that several layers share (tied embeddings) is read once.

Which dataset holds which variable is what Keras's saving walk says (the one
`model.save` takes, run against a store that only records); a trained run's
optimizer state is not read (nor by Keras, without compiling). An archive
this does not understand (a compressed or missing weights member, assets, a
variable without its dataset, a dataset of neither a variable nor the
optimizer, a Keras without those internals) is loaded by
`keras.saving.load_model`, as before: the same model either way.

A `.keras` file that is cut off is one line that says so (Keras says "File
not found" of one that exists): a `.keras` file is a zip archive, and one
that is not a whole zip is truncated or damaged.

Example:

>>> model = load_model("saved_models/chatbot-ko/model.keras")  # doctest: +SKIP
"""

import contextlib
import io
import pathlib
import struct
import zipfile

from keras_transformer.errors import first_line

CONFIG, WEIGHTS = "config.json", "model.weights.h5"


def load_model(path):
    """The model in the `.keras` file `path` (not compiled); a one-line `ValueError` naming it when it cannot be."""
    import keras

    path = pathlib.Path(path)
    if not path.is_file():
        raise ValueError(f"{path} is missing: a run holds its model there")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is not a whole .keras file (a zip archive): it is truncated or damaged")
    try:
        model = read_once(path)
        return model if model is not None else keras.saving.load_model(path, compile=False)
    except Exception as error:  # noqa: BLE001  (zip, JSON, HDF5, Keras: all mean "corrupt or incompatible")
        raise ValueError(f"{path}: could not load the model (corrupt or incompatible?): {first_line(error)}") from None


def read_once(path):
    """The model of the `.keras` file `path`, each variable created from its stored values; None where unsure.

    None (the caller then asks Keras) for an archive or a Keras this does
    not know; see the module docstring.
    """
    import h5py
    import keras

    saving_lib = _saving_lib()
    if saving_lib is None:
        return None
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        if not {CONFIG, WEIGHTS} <= names or names - {CONFIG, WEIGHTS, "metadata.json"}:
            return None  # no weights, or assets: Keras's own path
        info = archive.getinfo(WEIGHTS)
        if info.compress_type != zipfile.ZIP_STORED:
            return None
        config_json = archive.read(CONFIG)
    with keras.StatelessScope(initialize_variables=False):  # variables deferred: nothing drawn, nothing allocated
        model = saving_lib._model_from_config(config_json, None, False, True)  # compile=False, safe_mode=True
    sources = variable_sources(model, saving_lib)
    with _member(path, info) as member, h5py.File(member, "r") as weights:
        stored = _datasets(weights)
        # A trained run's optimizer state too, which a model loaded without compiling does not read (nor Keras).
        unread = set(stored) - set(sources or {})
        understood = (
            sources is not None and set(sources) <= set(stored) and all(n.startswith("optimizer/") for n in unread)
        )
        if understood and not any(_mismatch(stored[name], v) for name, v in sources.items()):
            for name, variable in reversed(sources.items()):  # a variable stored twice: its first dataset
                variable._initializer = _reader(stored[name])
        else:
            understood = False
        _create_deferred()  # each variable read from its dataset here, while the file is open
    return model if understood else None


def variable_sources(model, saving_lib):
    """`{dataset path in model.weights.h5: deferred variable}`, as Keras's saving walk lays it out; None if unsure."""
    import keras

    class Recorder(saving_lib.H5IOStore):  # Keras's walk checks the store's type; this one writes nothing
        def __init__(self):
            self.values, self._group = {}, "vars"

        def make(self, path, metadata=None):
            self._group = f"{path}/vars" if path else "vars"  # H5IOStore's layout
            return self

        def __setitem__(self, key, value):
            self.values[f"{self._group}/{key}"] = value

        def __bool__(self):
            return True

        def close(self):
            pass

    recorder = Recorder()
    saving_lib._save_state(model, weights_store=recorder, assets_store=None, inner_path="", visited_saveables=set())
    deferred = all(isinstance(v, keras.Variable) and v._initializer is not None for v in recorder.values.values())
    return recorder.values if recorder.values and deferred else None


def _create_deferred():
    """Creates the variables whose creation a `StatelessScope(initialize_variables=False)` deferred."""
    import keras

    with keras.StatelessScope():  # on leaving a scope, Keras creates the variables that were deferred
        pass


def _saving_lib():
    """Keras's saving module where it has what `read_once` uses (private names), else None."""
    try:
        from keras.src.saving import saving_lib
    except ImportError:
        return None
    needed = ("_model_from_config", "_save_state", "H5IOStore")
    return saving_lib if all(hasattr(saving_lib, name) for name in needed) else None


def _datasets(weights):
    """`{path: dataset}` of every dataset of the HDF5 file `weights`."""
    import h5py

    found = {}
    weights.visititems(lambda name, item: found.__setitem__(name, item) if isinstance(item, h5py.Dataset) else None)
    return found


def _mismatch(dataset, variable):
    """Whether `dataset` cannot be read as `variable` is (its shape, a float dtype, Keras's bfloat16 marker)."""
    import numpy as np

    return (
        tuple(dataset.shape) != tuple(variable.shape)
        or "dtype" in dataset.attrs
        or np.dtype(dataset.dtype).kind != np.dtype(variable.dtype).kind
    )


def _reader(dataset):
    """An initializer that reads `dataset` (once, when Keras creates the variable)."""
    import numpy as np

    def read(shape, dtype=None):
        return np.asarray(dataset[()], dtype=np.dtype(dtype) if dtype else None)

    return read


@contextlib.contextmanager
def _member(path, info):
    """The stored (uncompressed) zip member `info` of `path` as a seekable binary file of its own bytes."""
    with open(path, "rb") as handle:
        handle.seek(info.header_offset)
        header = handle.read(30)  # the local file header; its names' lengths end it
        if header[:4] != b"PK\x03\x04":
            raise ValueError(f"{info.filename}: no local file header at offset {info.header_offset}")
        name_length, extra_length = struct.unpack("<HH", header[26:30])
        yield _Window(handle, info.header_offset + 30 + name_length + extra_length, info.file_size)


class _Window(io.RawIOBase):
    """Bytes `[start, start + size)` of the open binary file `handle`, as a file of their own."""

    def __init__(self, handle, start, size):
        super().__init__()
        self._handle, self._start, self._size, self._position = handle, start, size, 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self._position

    def seek(self, offset, whence=io.SEEK_SET):
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def readinto(self, buffer):
        count = max(0, min(len(buffer), self._size - self._position))
        self._handle.seek(self._start + self._position)
        count = self._handle.readinto(memoryview(buffer)[:count]) if count else 0
        self._position += count
        return count
