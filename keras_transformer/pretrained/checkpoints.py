"""Reading a Hugging Face checkpoint's files: its config, its generation settings, its weights.

Weights are read from `model.safetensors`, else `tf_model.h5` (h5py; its
TensorFlow names are turned into PyTorch's as transformers names them), else
`pytorch_model.bin` through torch's `weights_only` loader, which unpickles
tensors and nothing else; never through a plain unpickle, which runs whatever
code the file holds. Without torch, a pickle-only checkpoint is an error that
says how to convert it. Every file read is recorded with its sha256.
"""

import json
import pathlib
import re

import numpy as np

from keras_transformer.files.ownership import sha256

WEIGHT_FILES = ("model.safetensors", "tf_model.h5", "pytorch_model.bin")


class Checkpoint:
    """A checkpoint folder's files, read once each; `read` records the sha256 of each (`files`)."""

    def __init__(self, folder):
        self.folder = pathlib.Path(folder)
        self.files = {}

    def path(self, name):
        """The path of file `name`, recorded; a missing file is a `ValueError` naming it."""
        path = self.folder / name
        if not path.is_file():
            raise ValueError(f"{path} is missing: a Hugging Face checkpoint holds it")
        self.files[name] = sha256(path)
        return path

    def json(self, name, required=True):
        """The JSON object in file `name`, or {} when it is absent and not `required`."""
        if not required and not (self.folder / name).is_file():
            return {}
        path = self.path(name)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as error:
            raise ValueError(f"{path} is not JSON: {error}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path} must hold a JSON object")
        return data

    def weights(self):
        """`{PyTorch name: float32 array}` from the first weights file present (see the module docstring)."""
        for name in WEIGHT_FILES:
            if (self.folder / name).is_file():
                return {key: np.asarray(value, np.float32) for key, value in _READERS[name](self.path(name)).items()}
        raise ValueError(f"{self.folder} holds no weights: expected one of {', '.join(WEIGHT_FILES)}")


def _safetensors(path):
    try:
        from safetensors.numpy import load_file
    except ModuleNotFoundError:
        raise ValueError(f"{path} needs the safetensors package: pip install 'keras-transformer[pretrained]'") from None
    return load_file(str(path))


def _h5(path):
    import h5py

    weights = {}

    def visit(name, item):
        if isinstance(item, h5py.Dataset):
            key, transpose = _torch_name(name)
            value = item[()]
            weights[key] = value.T if transpose else value

    with h5py.File(path, "r") as handle:
        handle.visititems(visit)
    return weights


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


def _torch_bin(path):
    try:
        import torch
    except ModuleNotFoundError:
        raise ValueError(
            f"{path} is a pickled PyTorch checkpoint, which keras-transformer reads only with torch's safe "
            "loader: pip install torch, or convert it first (transformers' model.save_pretrained(..., "
            "safe_serialization=True) writes model.safetensors)"
        ) from None
    try:
        state = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001  (torch's unpickler: anything it refuses is "not plain tensors")
        raise ValueError(f"{path} holds more than tensors; torch's safe loader refused it: {error}") from None
    return {key: value.float().numpy() for key, value in state.items()}


_READERS = {"model.safetensors": _safetensors, "tf_model.h5": _h5, "pytorch_model.bin": _torch_bin}
