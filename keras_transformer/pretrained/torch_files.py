"""A `pytorch_model.bin` read without torch: its pickle through an unpickler that builds tensors and nothing else.

`torch.save` writes a dictionary of tensors as a pickle whose tensors point
at storages kept beside it: in a zip archive (`ARCHIVE/data.pkl`, one entry
`ARCHIVE/data/KEY` a storage, written since PyTorch 1.6), or, in the legacy
format of older uploads, as pickles one after the other in one file, the
storages' raw bytes after them. A pickle can name any function of any module
and have it called (`os.system`, `builtins.eval`): unpickling a file is
running it. So the pickle is read by `_TensorUnpickler`, whose
`find_class` resolves the few names a dictionary of tensors is made of
(`collections.OrderedDict`, `torch._utils._rebuild_tensor_v2`,
`torch.FloatStorage` and the other storage types) to stand-ins of this
module that only record what they are given, and refuses every other name
before anything is called: one line naming the file and the global, nothing
run. (llama.cpp's converter reads these files the same way.)

Nothing of a storage is read while the pickle is: each tensor is recorded
as its storage's place in the file (an offset), its dtype, shape and
strides, and read later a block of rows at a time (`read(name, rows)`), as
the safetensors reader does. A storage shorter than a tensor needs is one
line naming the file and the tensor.

Example:

>>> reader = TorchFile("pytorch_model.bin")  # doctest: +SKIP
>>> reader.infos["model.shared.weight"]  # doctest: +SKIP
TensorInfo(shape=(58101, 512), dtype='F32')
"""

import collections
import pickle
import struct
import zipfile
from typing import NamedTuple

import numpy as np

# The dtypes of torch's storage types, as safetensors names them, and as NumPy reads them (BF16 as its bits).
STORAGES = {
    "DoubleStorage": ("F64", "f8"),
    "FloatStorage": ("F32", "f4"),
    "HalfStorage": ("F16", "f2"),
    "BFloat16Storage": ("BF16", "u2"),
    "LongStorage": ("I64", "i8"),
    "IntStorage": ("I32", "i4"),
    "ShortStorage": ("I16", "i2"),
    "CharStorage": ("I8", "i1"),
    "ByteStorage": ("U8", "u1"),
    "BoolStorage": ("BOOL", "u1"),
}
MAX_PICKLE_BYTES = 256 * 2**20  # a dictionary of tensors pickles to a few hundred bytes a tensor
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # the legacy format's first pickle, then its protocol version
_LEGACY_PROTOCOL = 1001


class _Storage(NamedTuple):
    """A storage as the pickle names it: its key, its element type (a `STORAGES` key), its size in elements."""

    key: str
    kind: str
    numel: int
    view_offset: int = 0  # a legacy view: where in its root storage it starts (elements)


class _Tensor(NamedTuple):
    storage: _Storage
    offset: int
    shape: tuple
    stride: tuple


def _rebuild_tensor(storage, storage_offset, size, stride, *_):
    """`torch._utils._rebuild_tensor_v2` (and `_rebuild_tensor`): a tensor recorded, not built."""
    if not isinstance(storage, _Storage):
        raise pickle.UnpicklingError("a tensor whose storage is not a storage")
    shape, stride = tuple(size), tuple(stride)
    if not all(_count(v) for v in (storage_offset, *shape, *stride)) or len(shape) != len(stride):
        raise pickle.UnpicklingError(f"a tensor of shape {shape!r} and strides {stride!r}"[:200])
    return _Tensor(storage, storage_offset, shape, stride)


def _count(value):
    """Whether `value` is an int >= 0 (a size, an offset or a stride)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _rebuild_parameter(data, *_):
    """`torch._utils._rebuild_parameter`: a `Parameter` is its tensor."""
    return data


class _StorageType:
    """`torch.FloatStorage` and its kin: a name that the persistent ids of storages carry."""

    def __init__(self, kind):
        self.kind = kind


_ALLOWED = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    **{("torch", kind): _StorageType(kind) for kind in STORAGES},
}


class _Refused(Exception):
    pass


class _TensorUnpickler(pickle.Unpickler):
    """An unpickler that knows the names of `_ALLOWED` only: any other global is refused before it is resolved."""

    def find_class(self, module, name):
        if (module, name) not in _ALLOWED:
            module = {"__builtin__": "builtins"}.get(module, module)  # a protocol-2 pickle's name for builtins
            raise _Refused(f"{module}.{name}"[:120])
        return _ALLOWED[(module, name)]

    def persistent_load(self, saved_id):
        if not (isinstance(saved_id, tuple) and len(saved_id) in (5, 6) and saved_id[0] in ("storage", b"storage")):
            raise pickle.UnpicklingError("a persistent id that is not a storage")
        storage_type, key, _, numel = saved_id[1:5]
        view = saved_id[5] if len(saved_id) == 6 else None
        if not isinstance(storage_type, _StorageType) or not isinstance(numel, int) or numel < 0:
            raise pickle.UnpicklingError("a storage of no known type")
        if view is not None:  # the legacy format's view of a root storage: (view key, offset, size)
            if not (isinstance(view, tuple) and len(view) == 3 and all(_count(v) for v in view[1:])):
                raise pickle.UnpicklingError("a storage view that is not (key, offset, size)")
            return _Storage(str(key), storage_type.kind, view[2], view_offset=view[1])
        return _Storage(str(key), storage_type.kind, numel)


def _unpickle(handle, path):
    """One pickle from `handle` through `_TensorUnpickler`; a refused global or a damaged pickle is a `ValueError`."""
    try:
        return _TensorUnpickler(handle).load()
    except _Refused as refused:
        raise ValueError(
            f"{path} is a pickle that names `{refused}`; a checkpoint holds tensors only, so it was refused "
            "and nothing of it was run"
        ) from None
    except Exception as error:  # noqa: BLE001  (a damaged pickle raises any of pickle's errors)
        raise ValueError(f"{path} is not a readable PyTorch checkpoint: {_first_line(error)}") from None


class TorchFile:
    """The tensors of a `pytorch_model.bin` (zip or legacy format): `infos` from the pickle, `read` from the storages.

    Its `infos` list every tensor, integer buffers too (`position_ids` is
    I64); reading one as a weight is the caller's to refuse.
    """

    def __init__(self, path):
        from keras_transformer.pretrained.checkpoints import TensorInfo

        self.path = path
        with open(path, "rb") as handle:
            zipped, start = zipfile.is_zipfile(handle), handle.seek(0) or handle.read(4)
        if not zipped and start == b"PK\x03\x04":
            raise ValueError(f"{path} is a damaged zip archive: it has no directory of its entries (truncated?)")
        state, self._places, byteorder = (self._zipped if zipped else self._legacy)()
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise ValueError(f"{path} must hold a dictionary of tensors by name")
        self._tensors, self.infos = {}, {}
        for name, tensor in state.items():
            if not isinstance(tensor, _Tensor):
                raise ValueError(f"{path}: `{name}` is not a tensor"[:300])
            self._tensors[name] = tensor
            self.infos[name] = TensorInfo(tensor.shape, STORAGES[tensor.storage.kind][0])
            self._check_extent(name, tensor)
        self._byteorder = byteorder

    def _zipped(self):
        path = self.path
        try:
            archive = zipfile.ZipFile(path)
            entries = {info.filename: info for info in archive.infolist()}
        except (zipfile.BadZipFile, OSError) as error:
            raise ValueError(f"{path} is not a readable PyTorch zip archive: {_first_line(error)}") from None
        with archive:
            pickles = [name for name in entries if name.count("/") == 1 and name.endswith("/data.pkl")]
            if len(pickles) != 1:
                raise ValueError(f"{path} is not a PyTorch checkpoint: it holds no single ARCHIVE/data.pkl")
            root = pickles[0][: -len("data.pkl")]
            if entries[pickles[0]].file_size > MAX_PICKLE_BYTES:
                raise ValueError(f"{path}: its pickle is over {MAX_PICKLE_BYTES} bytes; a checkpoint's is far smaller")
            with archive.open(pickles[0]) as handle:
                state = _unpickle(handle, path)
            byteorder = "little"
            if f"{root}byteorder" in entries:
                byteorder = archive.read(f"{root}byteorder")[:16].decode("ascii", errors="replace").strip()
            if byteorder not in ("little", "big"):
                raise ValueError(f"{path}: its byteorder is {byteorder!r}, neither little nor big")
        places = {}
        for name, info in entries.items():
            if name.startswith(f"{root}data/"):
                places[name[len(f"{root}data/") :]] = (self._data_offset(info), info.file_size, info.compress_type)
        return state, places, byteorder

    def _data_offset(self, info):
        """Where entry `info`'s bytes start in the file: after its local header (30 bytes, its name, its extra)."""
        with open(self.path, "rb") as handle:
            handle.seek(info.header_offset)
            header = handle.read(30)
        if len(header) != 30 or header[:4] != b"PK\x03\x04":
            raise ValueError(f"{self.path}: entry {info.filename} has no local header")
        name_length, extra_length = struct.unpack("<HH", header[26:30])
        return info.header_offset + 30 + name_length + extra_length

    def _legacy(self):
        """The legacy format: magic number, protocol, system info, the tensors, the storage keys, then the storages."""
        path = self.path
        with open(path, "rb") as handle:
            magic = _unpickle(handle, path)
            if magic != _LEGACY_MAGIC or _unpickle(handle, path) != _LEGACY_PROTOCOL:
                raise ValueError(f"{path} is neither a PyTorch zip archive nor a legacy PyTorch checkpoint")
            system = _unpickle(handle, path)
            little = not isinstance(system, dict) or system.get("little_endian", True)
            state = _unpickle(handle, path)
            keys = _unpickle(handle, path)
            if not isinstance(keys, list):
                raise ValueError(f"{path} is not a readable PyTorch checkpoint: no list of storages")
            sizes = {tensor.storage.key: tensor.storage for tensor in _values(state)}
            places = {}
            for key in keys:
                raw = handle.read(8)
                if len(raw) != 8 or str(key) not in sizes:
                    raise ValueError(f"{path}: the file ends, or names a storage no tensor uses, before storage {key}")
                numel = int.from_bytes(raw, "little" if little else "big")
                start = handle.tell()
                item = np.dtype(STORAGES[sizes[str(key)].kind][1]).itemsize
                places[str(key)] = (start, numel * item, zipfile.ZIP_STORED)
                handle.seek(start + numel * item)
        return state, places, "little" if little else "big"

    def _check_extent(self, name, tensor):
        """The storage holds every element of `tensor`, uncompressed; else a `ValueError` naming file and tensor."""
        storage = tensor.storage
        place = self._places.get(storage.key)
        if place is None:
            raise ValueError(f"{self.path}: tensor `{name}` points at storage {storage.key}, which the file lacks")
        if place[2] != zipfile.ZIP_STORED:
            raise ValueError(f"{self.path}: tensor `{name}`'s storage is compressed; torch.save stores it as is")
        item = np.dtype(STORAGES[storage.kind][1]).itemsize
        last = sum((size - 1) * step for size, step in zip(tensor.shape, tensor.stride)) if all(tensor.shape) else -1
        needed = (storage.view_offset + tensor.offset + last + 1) * item
        if int(np.prod(tensor.shape, dtype=np.float64)) * item > place[1]:  # strides of 0 repeating a few values
            raise ValueError(
                f"{self.path}: tensor `{name}` of shape {tensor.shape} has more elements than its storage holds"
            )
        if needed > place[1]:
            raise ValueError(
                f"{self.path}: tensor `{name}` needs {needed} bytes of its storage, which holds {place[1]}: "
                "the file is truncated or damaged"
            )

    def read(self, name, rows=None):
        """Tensor `name` (or its rows `[start, stop)`) as an array of its own dtype, or float32 for BF16."""
        tensor = self._tensors[name]
        kind = tensor.storage.kind
        dtype = np.dtype(STORAGES[kind][1]).newbyteorder("<" if self._byteorder == "little" else ">")
        shape, stride = tensor.shape, tensor.stride
        start, stop = (0, shape[0] if shape else 1) if rows is None else rows
        first = tensor.storage.view_offset + tensor.offset + (start * stride[0] if shape else 0)
        part = (stop - start, *shape[1:]) if shape else ()
        count = sum((size - 1) * step for size, step in zip(part, stride)) + 1 if all(part) else 0
        value = np.empty(count, dtype)
        with open(self.path, "rb", buffering=0) as handle:
            handle.seek(self._places[tensor.storage.key][0] + first * dtype.itemsize)
            view = memoryview(value).cast("B")
            while view:  # a raw read may return fewer bytes than asked
                got = handle.readinto(view)
                if not got:
                    raise ValueError("the file ends inside the tensor")
                view = view[got:]
        strides = tuple(step * dtype.itemsize for step in stride)
        value = np.lib.stride_tricks.as_strided(value, part, strides) if count else np.zeros(part, dtype)
        value = np.array(value, dtype.newbyteorder("="))  # a copy of its own, in the machine's order
        if kind == "BFloat16Storage":  # NumPy has no bfloat16: its bits are a float32's upper half
            value = (value.astype(np.uint32) << 16).view(np.float32)
        return value


def _values(state):
    return state.values() if isinstance(state, dict) else ()


def _first_line(error):
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
