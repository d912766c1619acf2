"""Rewrites a tiny saved model into the layouts older transformers uploaded, and computes transformers' outputs on each.

The fixture scripts (tests/data/marian/make_fixtures.py and
tests/data/m2m100/make_fixtures.py, `--layouts`) call this module. A layout
variant is a folder under `FAMILY/layouts/NAME/` that holds only what differs
from the fixture it comes from, and a `layout.json` naming that fixture and
the files taken from it unchanged (its tokenizer files, which are the
largest); `checkpoint_edits.assemble` (tests/pretrained/) lays the whole
folder out again, for the tests as for this script. So the variants share
the tiny models' tokenizer files and the repository stays small.

What a variant can be rewritten into (each as a transformers of 2020-2022 wrote it):

- `old_config`: config.json with the generation settings inside (no
  generation_config.json) and the keys of its time (`id2label`,
  `static_position_embeddings`, `transformers_version`, ...);
- `write_weights`: the state dict (its tied copies and stored buffers
  included, as `model.state_dict()` holds them) as `model.safetensors` or
  `pytorch_model.bin` (`torch.save`, the zip format or the legacy one of
  PyTorch < 1.6), in float16 or bfloat16, in shards with an index, with or
  without the base model's prefix.

`references(...)` loads the assembled folder with `from_pretrained`
(float32 arithmetic: the numbers an import computes, whatever the weights'
dtype) and generates greedy and beam-4 outputs with the folder's own
settings, `max_new_tokens` aside.
"""

import json
import pathlib
import shutil
import sys

import torch
import transformers
from safetensors.torch import save_file

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "pretrained"))
from checkpoint_edits import LAYOUT_FILE, assemble  # noqa: E402

# Keys every config.json of transformers 3 and 4 held, whatever the model (PretrainedConfig's own).
OLD_KEYS = {
    "_num_labels": 3,
    "id2label": {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"},
    "label2id": {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2},
    "gradient_checkpointing": False,
    "output_past": True,
}


def start(folder, base, base_files, about):
    """An empty variant folder with its `layout.json`: the fixture `base` (a sibling of layouts/) and its files."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    layout = {"about": about, "base": base, "base_files": sorted(base_files)}
    (folder / LAYOUT_FILE).write_text(json.dumps(layout, indent=1) + "\n", encoding="utf-8")


def old_config(folder, config, generation, **keys):
    """config.json as an old upload holds it: `config`, `generation` inside, `keys`; no generation_config.json."""
    data = {**config, **OLD_KEYS, **generation, **keys}
    data.pop("dtype", None)  # transformers 5's key; older ones wrote torch_dtype, or nothing
    write_json(folder / "config.json", data)
    (folder / "generation_config.json").unlink(missing_ok=True)


def write_json(path, data):
    path.write_text(json.dumps(dict(sorted(data.items())), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def state_dict(model, prefix=None, drop=(), dtype=None, extra=None):
    """`model.state_dict()` (tied tensors sharing one storage, as saved), its prefix stripped, `drop` left out."""
    state = dict(model.state_dict())
    state.update(extra or {})
    if prefix:
        state = {name[len(prefix) :]: value for name, value in state.items() if name.startswith(prefix)}
    state = {name: value for name, value in state.items() if name not in drop}
    if dtype is not None:
        cast = {}  # one cast per storage, so that tied tensors still share theirs
        state = {name: cast.setdefault(value.data_ptr(), value.to(dtype)) for name, value in state.items()}
    return state


def write_weights(folder, state, kind="safetensors", shards=1):
    """Writes `state` as `kind` ("safetensors", "bin", "bin-legacy"), in `shards` files with an index if > 1."""
    names = list(state)
    if shards == 1:
        _write_one(folder / WEIGHT_NAMES[kind][0], state, kind)
        return
    stem, extension = WEIGHT_NAMES[kind][1]
    weight_map = {}
    for index in range(shards):
        part = names[index::shards]
        shard = f"{stem}-{index + 1:05d}-of-{shards:05d}.{extension}"
        _write_one(folder / shard, {name: state[name] for name in part}, kind)
        weight_map.update(dict.fromkeys(part, shard))
    size = sum(value.numel() * value.element_size() for value in state.values())
    index = {"metadata": {"total_size": size}, "weight_map": dict(sorted(weight_map.items()))}
    (folder / f"{WEIGHT_NAMES[kind][0]}.index.json").write_text(json.dumps(index, indent=2) + "\n")


WEIGHT_NAMES = {
    "safetensors": ("model.safetensors", ("model", "safetensors")),
    "bin": ("pytorch_model.bin", ("pytorch_model", "bin")),
    "bin-legacy": ("pytorch_model.bin", ("pytorch_model", "bin")),
}


def _write_one(path, state, kind):
    if kind == "safetensors":  # safetensors stores no shared storage: each tensor a copy of its own
        save_file(
            {name: value.detach().clone().contiguous() for name, value in state.items()}, str(path), {"format": "pt"}
        )
        return
    torch.save(state, path, _use_new_zipfile_serialization=kind == "bin")


def references(model_class, tokenizer_class, folder, sentences, max_new_tokens, **generate):
    """transformers' greedy and beam-4 outputs on the variant `folder` (assembled in a temporary folder)."""
    work = pathlib.Path(folder).parent / f".{pathlib.Path(folder).name}-assembled"
    if work.exists():
        shutil.rmtree(work)
    assemble(folder, work)
    model = model_class.from_pretrained(work, dtype=torch.float32).eval()
    tokenizer = tokenizer_class.from_pretrained(work)
    if "src_lang" in generate:
        tokenizer.src_lang = generate.pop("src_lang")
    encoded = tokenizer(sentences, padding=True, return_tensors="pt")
    reference = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "max_new_tokens": max_new_tokens,
        "sentences": sentences,
        "generation_config": model.generation_config.to_diff_dict(),
    }
    for name, beams in (("greedy", 1), ("beam", 4)):
        with torch.no_grad():
            out = model.generate(**encoded, num_beams=beams, max_new_tokens=max_new_tokens, **generate)
        reference[name] = tokenizer.batch_decode(out, skip_special_tokens=True)
        reference[f"{name}_ids"] = [[i for i in row[1:] if i != tokenizer.pad_token_id] for row in out.tolist()]
    (pathlib.Path(folder) / "reference.json").write_text(
        json.dumps(reference, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    shutil.rmtree(work)
    return reference
