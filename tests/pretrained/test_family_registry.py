"""The registry of checkpoint families: a new family is one module and one registry line.

A stand-in family `toy` (Marian's parts under another `model_type`, each
call counted) is registered, and a copy of the tiny Marian fixture that
names it is imported: the importer reads every part from the registry, and
knows no family by name. The model is built and saved, never compiled.
"""

import json
import pathlib
import shutil
import types

import pytest

from keras_transformer import runs
from keras_transformer.pretrained import families, import_pretrained
from keras_transformer.pretrained.families import marian

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "data" / "marian" / "shared"


def _toy_family(calls):
    """The one module a new family is: here Marian's parts, each counted, named `toy`."""
    toy = types.ModuleType("toy")
    toy.__dict__.update({name: value for name, value in vars(marian).items() if not name.startswith("__")})
    toy.MODEL_TYPE, toy.FAMILY = "toy", "Toy"

    def counted(name):
        part = getattr(marian, name)

        def call(*args, **kwargs):
            calls.append(name)
            return part(*args, **kwargs)

        return call

    for name in families.PARTS:
        setattr(toy, name, counted(name))
    return toy


def test_a_new_family_is_one_module_and_one_registry_line(tmp_path, monkeypatch):
    checkpoint = tmp_path / "toy-checkpoint"
    shutil.copytree(FIXTURE, checkpoint)
    config = json.loads((checkpoint / "config.json").read_text(encoding="utf-8"))
    (checkpoint / "config.json").write_text(json.dumps({**config, "model_type": "toy"}), encoding="utf-8")
    with pytest.raises(ValueError, match="model_type 'toy' is not one keras-transformer imports"):
        import_pretrained(checkpoint, tmp_path / "refused")

    calls = []
    monkeypatch.setitem(families.FAMILIES, "toy", _toy_family(calls))  # the registry line
    run_config = import_pretrained(checkpoint, tmp_path / "run")
    assert sorted(calls) == sorted(families.PARTS)  # each part once, from the registry
    assert run_config.pretrained["model_type"] == "toy" and runs.is_run_dir(tmp_path / "run")
    assert runs.RunConfig.read(tmp_path / "run").model == run_config.model
    with pytest.raises(ValueError, match="'toy' checkpoint, which keras-transformer does not write back"):
        families.writer_of(run_config.pretrained)  # a family without a writer module is imported only
