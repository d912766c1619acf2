"""Variants of the old-layout fixtures (tests/data/layouts/) that differ from a base folder in a few files.

The fixture script (tests/data/make_bert_gpt2_layouts.py) computes each
variant's reference outputs on the folder `assemble` writes, and the tests
assemble the same folder: so a variant costs a few small files, not a copy
of its weights. Plain Python, NumPy and safetensors: the script's
environment (torch, transformers) and the tests' (neither) both import it.
"""

import json
import pathlib
import shutil

import numpy as np

LAYOUTS = pathlib.Path(__file__).resolve().parent / "data" / "layouts"
REFERENCE_FILES = ("reference.json", "reference_outputs.npz")
TRANSFORMER = {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}
POOLING = {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}
NORMALIZE = {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
ALL_MODES = ["cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken"]


def legacy_pooling(width, mode):
    """A `1_Pooling/config.json` as sentence-transformers 2.x wrote it: one boolean per mode."""
    flags = {
        "cls": "pooling_mode_cls_token",
        "mean": "pooling_mode_mean_tokens",
        "max": "pooling_mode_max_tokens",
        "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
        "weightedmean": "pooling_mode_weightedmean_tokens",
        "lasttoken": "pooling_mode_lasttoken",
    }
    return {"word_embedding_dimension": width, **{flag: name == mode for name, flag in flags.items()}}


# The sentence-transformers variants of `sbert/` (a 6-layer BertModel of width 32 with mean pooling and
# Normalize): each file written over the base folder's (None: removed).
SBERT_VARIANTS = {
    "mean-normalize": {},
    "cls": {"modules.json": [TRANSFORMER, POOLING], "1_Pooling/config.json": legacy_pooling(32, "cls")},
    "max": {"modules.json": [TRANSFORMER, POOLING], "1_Pooling/config.json": legacy_pooling(32, "max")},
    "all-modes": {"1_Pooling/config.json": {"embedding_dimension": 32, "pooling_mode": ALL_MODES}},
    "plain": {  # a BertModel without sentence-transformers' files: mean pooling, as it embeds any checkpoint
        "modules.json": None,
        "1_Pooling/config.json": None,
        "sentence_bert_config.json": None,
        "config_sentence_transformers.json": None,
    },
}


# `pytorch_model.bin` in place of `model.safetensors`: the same tensors, pickled by `torch.save` (bin/).
BIN_VARIANTS = {
    name: {"model.safetensors": None, "pytorch_model.bin": LAYOUTS / "bin" / f"{name}.bin"}
    for name in ("gpt2-lmhead", "bert-pretraining")
}


def assemble(base, files, destination):
    """A copy of folder `base` (its reference outputs left out) with `files` written over it; returns it.

    Each of `files` is JSON to write (a dict or a list), a file to copy (a
    `pathlib.Path`), or None to remove.
    """
    destination = pathlib.Path(destination)
    shutil.copytree(base, destination, ignore=shutil.ignore_patterns(*REFERENCE_FILES))
    for name, content in files.items():
        path = destination / name
        if content is None:
            path.unlink(missing_ok=True)
            if path.parent != destination and path.parent.is_dir() and not any(path.parent.iterdir()):
                path.parent.rmdir()
        elif isinstance(content, pathlib.Path):
            shutil.copy(content, path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(content, indent=2), encoding="utf-8")
    return destination


def sbert_variant(name, destination):
    """The `sbert/` variant `name` of `SBERT_VARIANTS`, assembled at `destination`."""
    return assemble(LAYOUTS / "sbert", SBERT_VARIANTS[name], destination)


def legacy_norm_names(folder):
    """Renames the LayerNorms of `folder/model.safetensors` `gamma` and `beta`, as the first BERT uploads named them."""
    from safetensors.numpy import load_file, save_file

    path = pathlib.Path(folder) / "model.safetensors"
    renamed = {
        name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): value
        for name, value in load_file(str(path)).items()
    }
    save_file(renamed, str(path), metadata={"format": "pt"})
    return folder


def to_float16(folder):
    """Rewrites `folder/model.safetensors` with its float32 tensors as float16 (as `model.half()` saves them)."""
    from safetensors.numpy import load_file, save_file

    path = pathlib.Path(folder) / "model.safetensors"
    tensors = load_file(str(path))
    halved = {name: value.astype(np.float16) if value.dtype == np.float32 else value for name, value in tensors.items()}
    save_file(halved, str(path), metadata={"format": "pt"})
    config_path = pathlib.Path(folder) / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["torch_dtype"] = "float16"
    config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return folder
