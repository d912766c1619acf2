"""What a model folder is: a training run directory, a SavedModel export or a LiteRT export.

`folder_kind(path)` is the one decision of it, which the opener reads (and
the engines registry names its folders by): a run directory holds a
`config.json` and a `model.keras` (or an ensemble's members with one), a
LiteRT export a `litert.json` of format `litert`, a SavedModel a
`saved_model.pb`. Anything else is a one-line `ValueError` that says what
was expected.

Example:

>>> folder_kind("saved_models/multi30k-en-de")  # doctest: +SKIP
'run directory'
>>> folder_kind("/nonexistent")
Traceback (most recent call last):
...
ValueError: /nonexistent does not exist: pass a training run directory, a SavedModel or a LiteRT export
"""

import pathlib

from keras_transformer.files import destinations, run_files
from keras_transformer.files.json_files import read_json_object

RUN, SAVED_MODEL, LITERT = "run directory", "SavedModel export", "LiteRT export"
PLURAL = {RUN: "run directories", SAVED_MODEL: "SavedModel exports", LITERT: "LiteRT exports"}
MODEL = "model.keras"  # a run's model (`runs.layout`)
LITERT_INFO = destinations.LITERT_PROVENANCE  # a LiteRT export's checked description (`litert.info`)


def is_run_dir(path):
    """Whether `path` holds a training run (a `config.json` and a `model.keras`, or members with one)."""
    path = pathlib.Path(path)
    return (path / run_files.CONFIG).is_file() and ((path / MODEL).is_file() or any(path.glob(f"member-*/{MODEL}")))


def is_saved_model(path):
    """Whether `path` is an exported SavedModel directory."""
    return (pathlib.Path(path) / "saved_model.pb").is_file()


def is_litert_export(path):
    """Whether `path` is a folder holding a LiteRT export's `litert.json`."""
    try:
        info = read_json_object(pathlib.Path(path) / LITERT_INFO)
    except (OSError, ValueError):
        return False
    return isinstance(info, dict) and info.get("format") == "litert"


def folder_kind(path):
    """What `path` holds: `RUN`, `SAVED_MODEL` or `LITERT`; a one-line `ValueError` for anything else."""
    path = pathlib.Path(path)
    destinations.recover(path)  # a replacement a crash interrupted, put right first
    if not path.exists():
        raise ValueError(f"{path} does not exist: pass a training run directory, a SavedModel or a LiteRT export")
    if is_run_dir(path):
        return RUN
    if is_litert_export(path):
        return LITERT
    if is_saved_model(path):
        return SAVED_MODEL
    raise ValueError(
        f"{path} is not a model: expected a training run directory (config.json + model.keras), "
        "an exported SavedModel (saved_model.pb) or a LiteRT export (litert.json)"
    )
