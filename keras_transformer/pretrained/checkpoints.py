"""Reading a Hugging Face checkpoint's files: its JSON files, its tensors' shapes, then its tensors one by one.

A checkpoint is untrusted input, so each file is checked before anything is
built from it, and a file that is not what it claims is a `ValueError`
naming it:

- JSON files are read only up to a size (`MAX_JSON_BYTES`), and must hold
  an object; nesting too deep for the parser is refused, not a crash.
- Tensors are listed from the weights' headers first (`tensors()`: names,
  shapes, dtypes, integer buffers such as `position_ids` too; nothing is
  read), so that a config can be checked against the shapes the files hold
  before a model is built; then they are read one at a time
  (`tensor(name)`), or a large one a block of rows at a time
  (`row_blocks(name, max_bytes)`), each as float32 of the shape the header
  gave, with no NaN or infinite value. Reading a tensor that is not of
  floats as a weight is a `ValueError` naming it.
- The names are a family's (`read_as(layout)`, `tensor_names.Layout`):
  with or without the base model's prefix, legacy names renamed, the
  buffers transformers skips left out.

Weights are read from the first of `WEIGHT_FILES` the folder holds:
`model.safetensors` (its header through the safetensors package, its
tensors with plain reads at the offsets the header gives: a memory map
would leave every page read resident in the importing process, which then
holds the whole file beside the model), or the shards that
`model.safetensors.index.json` names; `pytorch_model.bin` or the shards of
`pytorch_model.bin.index.json`, through an unpickler that builds tensors
and runs nothing (`torch_files`); else `tf_model.h5` (h5py; its TensorFlow
names turned into PyTorch's as transformers names them). Each shard is
read as a file of its own, a tensor at a time. Every file read is recorded
with its sha256.

Example:

>>> checkpoint = Checkpoint("opus-mt-en-de")  # doctest: +SKIP
>>> checkpoint.tensors()["model.shared.weight"]  # doctest: +SKIP
TensorInfo(shape=(58101, 512), dtype='F32')
"""

import json
import pathlib
import re
from typing import NamedTuple

import numpy as np

from keras_transformer.files.json_files import MAX_JSON_BYTES, read_json_object
from keras_transformer.files.ownership import sha256
from keras_transformer.pretrained.tensor_names import PLAIN
from keras_transformer.pretrained.torch_files import TorchFile

# The weights an import reads, the first present: transformers' order (safetensors, then PyTorch's pickles).
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "tf_model.h5",
)
FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")


class TensorInfo(NamedTuple):
    """A tensor as a weights file's header describes it: its shape and its dtype (safetensors' names)."""

    shape: tuple
    dtype: str


class Checkpoint:
    """A checkpoint folder's files; each file read is recorded with its sha256 (`files`)."""

    def __init__(self, folder):
        self.folder = pathlib.Path(folder)
        self.files = {}
        self.texts = {}  # the JSON files read, as their text: what an export writes back where nothing changed
        self.layout = PLAIN
        self._readers = None  # {stored name: the reader of the file that holds it}
        self._view = None

    def read_as(self, layout):
        """Names the tensors as `layout` (a family's `tensor_names.Layout`) says, from now on; returns self."""
        self.layout, self._view = layout, None
        return self

    def path(self, name):
        """The path of file `name`, recorded; a missing file is a `ValueError` naming it."""
        path = self.folder / name
        if not path.is_file():
            raise ValueError(f"{path} is missing: a Hugging Face checkpoint holds it")
        self.files[name] = sha256(path)
        return path

    def has(self, name):
        """Whether the checkpoint holds file `name`."""
        return (self.folder / name).is_file()

    def json(self, name, required=True, max_bytes=MAX_JSON_BYTES):
        """The JSON object in file `name`, or {} when it is absent and not `required`.

        A file over `max_bytes`, not UTF-8 JSON, nested too deeply or not an
        object is a `ValueError` naming it.
        """
        if not required and not self.has(name):
            return {}
        path = self.path(name)
        data = read_json_object(path, max_bytes)
        self.texts[name] = path.read_bytes().decode("utf-8")
        return data

    def text(self, name, max_bytes):
        """The start of text file `name` (at most `max_bytes`, UTF-8, errors replaced), or None when it is absent."""
        if not self.has(name):
            return None
        with open(self.path(name), "rb") as handle:
            return handle.read(max_bytes).decode("utf-8", errors="replace")

    @property
    def weights_file(self):
        """The name of the weights file (or shard index) an import reads: the first of `WEIGHT_FILES` present."""
        for name in WEIGHT_FILES:
            if self.has(name):
                return name
        raise ValueError(f"{self.folder} holds no weights: expected one of {', '.join(WEIGHT_FILES)}")

    def tensors(self):
        """`{name: TensorInfo}` of every tensor the weights hold, under the layout's names (`tensor_names.Tensors`)."""
        if self._view is None:
            readers = self._open()
            infos = {name: reader.infos[name] for name, reader in readers.items()}
            self._view = self.layout.view(infos, self.folder / self.weights_file)
        return self._view

    def stored_path(self, name):
        """The file that holds tensor `name` (a shard, where the weights are sharded)."""
        return self._readers_of(name)[0].path

    def tensor(self, name):
        """Tensor `name` as float32, of the shape `tensors()` gives it; NaN or infinity is a `ValueError`."""
        reader, stored = self._readers_of(name)
        return self._checked(reader, stored, None, reader.infos[stored].shape)

    def row_blocks(self, name, max_bytes):
        """`(start, rows)` blocks of tensor `name`'s first axis, each at most `max_bytes` of float32 (one row at least).

        Each block is read, converted and checked as `tensor` checks a whole
        tensor, so that a large tensor (an embedding) never sits in memory
        whole beside the weight it is copied into.
        """
        reader, stored = self._readers_of(name)
        shape = reader.infos[stored].shape
        if not shape:
            yield 0, self.tensor(name)
            return
        row_bytes = 4 * int(np.prod(shape[1:], dtype=np.int64))
        step = max(1, max_bytes // max(row_bytes, 1))
        for start in range(0, shape[0], step):
            stop = min(start + step, shape[0])
            yield start, self._checked(reader, stored, (start, stop), (stop - start, *shape[1:]))

    def _readers_of(self, name):
        stored = self.tensors().stored_name(name)
        return self._open()[stored], stored

    def _checked(self, reader, name, rows, shape):
        dtype = reader.infos[name].dtype
        if dtype not in FLOAT_DTYPES:
            raise ValueError(
                f"{reader.path}: tensor `{name}` has dtype {dtype}; weights must be floats ({', '.join(FLOAT_DTYPES)})"
            )
        try:
            value = np.asarray(reader.read(name, rows), np.float32)
        except Exception as error:  # noqa: BLE001  (each format's reader has its own errors for a damaged file)
            raise ValueError(f"{reader.path}: tensor `{name}` cannot be read: {_first_line(error)}") from None
        if value.shape != tuple(shape):
            raise ValueError(
                f"{reader.path}: tensor `{name}` holds shape {value.shape}, not the {reader.infos[name].shape} "
                "its header gives"
            )
        if not np.isfinite(value).all():
            raise ValueError(f"{reader.path}: tensor `{name}` holds NaN or infinite values")
        return value

    def _open(self):
        if self._readers is None:
            name = self.weights_file
            if name.endswith(".index.json"):
                self._readers = self._shards(name, _READERS[name[: -len(".index.json")]])
            else:
                reader = _READERS[name](self.path(name))
                self._readers = dict.fromkeys(reader.infos, reader)
        return self._readers

    def _shards(self, index_name, kind):
        """`{stored name: reader}` of the shards the index names, each checked to be a file of this folder."""
        index = self.json(index_name)
        where = self.folder / index_name
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise ValueError(f"{where}: `weight_map` must map tensor names to the shards' file names")
        readers = {}
        for shard in sorted(set(weight_map.values())):
            if pathlib.PurePosixPath(shard).name != shard or "\\" in shard or shard in ("", ".", ".."):
                raise ValueError(f"{where} names the shard {shard!r}, not a file beside it"[:300])
            if not self.has(shard):
                raise ValueError(f"{where} names the shard {shard}, which is missing"[:300])
            reader = kind(self.path(shard))
            for stored in reader.infos:
                if stored in readers:
                    raise ValueError(f"{where}: tensor `{stored}` is in {readers[stored].path.name} and in {shard}")
                readers[stored] = reader
        for stored, shard in weight_map.items():
            if readers.get(stored) is None or readers[stored].path.name != shard:
                raise ValueError(f"{where} puts tensor `{stored}` in {shard}, which does not hold it"[:300])
        return readers


class _Safetensors:
    """The tensors of a `model.safetensors`: its header checked by the safetensors package, its data read plainly.

    The safetensors package validates the header (dtypes, shapes, offsets
    that tile the data); the tensors are then read with plain reads at the
    header's offsets, a block of rows at a time where asked, and converted
    from their dtype to float32 by NumPy (BF16 as the upper half of a
    float32's bits). No memory map stays open: the importing process holds
    no more of the file than the block it is converting.
    """

    _NUMPY = {"F16": "<f2", "F32": "<f4", "F64": "<f8", "BF16": "<u2"}

    def __init__(self, path):
        try:
            from safetensors import safe_open
        except ModuleNotFoundError:
            raise ValueError(
                f"{path} needs the safetensors package: pip install 'keras-transformer[pretrained]'"
            ) from None
        self.path = path
        try:
            with safe_open(str(path), framework="np") as handle:
                self.infos = {}
                for name in handle.keys():
                    part = handle.get_slice(name)
                    self.infos[name] = TensorInfo(tuple(part.get_shape()), part.get_dtype())
            self._offsets, self._data_start = _safetensors_offsets(path)
        except Exception as error:  # noqa: BLE001  (safetensors' SafetensorError for a damaged header)
            raise ValueError(f"{path} is not a readable safetensors file: {_first_line(error)}") from None

    def read(self, name, rows=None):
        """Tensor `name` (or its rows `[start, stop)`) as an array of its own dtype, or float32 for BF16."""
        shape, dtype = self.infos[name]
        begin, end = self._offsets[name]
        if dtype not in self._NUMPY:
            raise ValueError(f"dtype {dtype} is not a float")
        item = np.dtype(self._NUMPY[dtype])
        start, stop = (0, shape[0] if shape else 1) if rows is None else rows
        row_items = int(np.prod(shape[1:], dtype=np.int64)) if shape else 1
        count = (stop - start) * row_items
        if end - begin != int(np.prod(shape, dtype=np.int64)) * item.itemsize:
            raise ValueError(f"its {end - begin} bytes do not hold shape {shape} of {dtype}")
        value = np.empty(count, item)
        with open(self.path, "rb", buffering=0) as handle:
            handle.seek(self._data_start + begin + start * row_items * item.itemsize)
            view = memoryview(value).cast("B")
            while view:  # a raw read may return fewer bytes than asked
                got = handle.readinto(view)
                if not got:
                    raise ValueError("the file ends inside the tensor")
                view = view[got:]
        if dtype == "BF16":  # NumPy has no bfloat16: its bits are a float32's upper half
            value = (value.astype(np.uint32) << 16).view(np.float32)
        return value.reshape((stop - start, *shape[1:]) if shape else ())


def _safetensors_offsets(path):
    """`({name: (begin, end)}, data start)` from a safetensors header (8 bytes of length, then JSON)."""
    with open(path, "rb") as handle:
        length = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(length))
    offsets = {name: tuple(entry["data_offsets"]) for name, entry in header.items() if name != "__metadata__"}
    return offsets, 8 + length


class _H5:
    """The tensors of a transformers `tf_model.h5`, under their PyTorch names (kernels transposed)."""

    def __init__(self, path):
        import h5py

        self.path, self.infos, self._datasets = path, {}, {}
        try:
            handle = h5py.File(path, "r")
        except OSError as error:
            raise ValueError(f"{path} is not a readable HDF5 file: {_first_line(error)}") from None

        def visit(name, item):
            if isinstance(item, h5py.Dataset):
                key, transpose = _torch_name(name)
                shape = tuple(reversed(item.shape)) if transpose else tuple(item.shape)
                self.infos[key] = TensorInfo(shape, _DTYPES.get(item.dtype.str.lstrip("<>="), str(item.dtype)))
                self._datasets[key] = (item, transpose)

        handle.visititems(visit)

    def read(self, name, rows=None):
        item, transpose = self._datasets[name]
        if rows is None:
            value = item[()]
        else:
            value = item[:, rows[0] : rows[1]] if transpose else item[rows[0] : rows[1]]
        return value.T if transpose else value


_DTYPES = {"f2": "F16", "f4": "F32", "f8": "F64"}


def _torch_name(tf_name):
    """transformers' TensorFlow weight name as its PyTorch name, and whether the array is transposed."""
    parts = [part for part in re.sub(r":\d+$", "", tf_name).replace("_._", "/").split("/") if part]
    while parts and parts[0] not in ("model", "final_logits_bias", "lm_head"):
        parts = parts[1:]  # the h5 groups and the model's own name in front
    transpose = parts[-1] == "kernel"
    parts[-1] = {"kernel": "weight", "embeddings": "weight", "gamma": "weight", "beta": "bias"}.get(
        parts[-1], parts[-1]
    )
    if parts[:1] == ["final_logits_bias"]:
        parts = ["final_logits_bias"]
    return ".".join(parts), transpose


def _first_line(error):
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]


_READERS = {"model.safetensors": _Safetensors, "tf_model.h5": _H5, "pytorch_model.bin": TorchFile}
