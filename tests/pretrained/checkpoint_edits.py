"""Copies of the tiny Marian fixtures with one thing edited: a config field, a generation setting, a tensor, a file.

The safety tests (`test_hostile_checkpoints.py`) and the importer's property
test (`test_import_properties.py`) build their hostile checkpoints with these.
"""

import json
import pathlib
import shutil

import numpy as np
from safetensors.numpy import load_file, save_file

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "marian"
REFERENCE_FILES = ("reference.json", "reference_logits.npz")
LAYOUT_FILE = "layout.json"  # a layout variant's: the fixture it comes from, and the files it takes from it
DATA = FIXTURES.parent
# The layout variants of the fixtures (tests/data/old_layouts.py): checkpoints as older transformers uploaded them.
LAYOUTS = {
    name: DATA / family / "layouts" / name
    for family, names in (("marian", ("opus-2020", "opus-2022", "base-fp16")), ("m2m100", ("m2m100-2021", "nllb-2022")))
    for name in names
}


def assemble(variant, folder):
    """Lays the layout variant `variant` (tests/data/FAMILY/layouts/NAME) out whole in `folder`; returns it.

    The variant's own files, and the `base_files` of the fixture its
    `layout.json` names (`base`, a folder beside `layouts/`): what
    tests/data/old_layouts.py rewrote, and transformers' outputs were
    computed on.
    """
    variant, folder = pathlib.Path(variant), pathlib.Path(folder)
    layout = json.loads((variant / LAYOUT_FILE).read_text(encoding="utf-8"))
    folder.mkdir(parents=True)
    for name in layout["base_files"]:
        shutil.copyfile(variant.parents[1] / layout["base"] / name, folder / name)
    for path in variant.iterdir():
        if path.name not in (LAYOUT_FILE, *REFERENCE_FILES):
            shutil.copyfile(path, folder / path.name)
    return folder


def copy_fixture(tmp_path, kind="shared", name="checkpoint"):
    """A copy of the fixture `kind` (without its reference outputs) in `tmp_path / name`."""
    folder = tmp_path / name
    shutil.copytree(FIXTURES / kind, folder, ignore=shutil.ignore_patterns(*REFERENCE_FILES))
    return folder


def edit_json(folder, name, **changes):
    """Sets `changes` in JSON file `name` of `folder` (a value of `DELETE` removes the key); returns the dict."""
    path = pathlib.Path(folder) / name
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    for key, value in changes.items():
        if value is DELETE:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(json.dumps(data), encoding="utf-8")  # NaN and Infinity as JSON's extensions, as Python writes
    return data


DELETE = object()


def read_tensors(folder):
    """`{name: array}` of the fixture's model.safetensors."""
    return load_file(str(pathlib.Path(folder) / "model.safetensors"))


def write_tensors(folder, tensors):
    """Writes `tensors` as the fixture's model.safetensors."""
    save_file({name: np.ascontiguousarray(value) for name, value in tensors.items()}, str(folder / "model.safetensors"))


def edit_tensor(folder, name, change):
    """Replaces tensor `name` with `change(array)` (None deletes it)."""
    tensors = read_tensors(folder)
    value = change(tensors[name])
    if value is None:
        del tensors[name]
    else:
        tensors[name] = value
    write_tensors(folder, tensors)
