"""A property of the importer: a randomly edited checkpoint imports to transformers' logits, or is refused in one line.

Seeded random edits of a tiny Marian fixture: config.json and
generation_config.json fields set to hostile values (strings for numbers and
booleans, huge, negative and non-finite numbers, lists, objects, nulls),
tensors of other shapes or integer dtypes, deleted or renamed tensors. Each
edited checkpoint is imported in one child process under a bounded address
space (`bounded_imports.py`). Every import must either give a run whose
teacher-forced logits equal transformers' on the unedited checkpoint (an edit
the model does not depend on), or fail with one line that names a file of
the checkpoint, with nothing written.
"""

import json
import math
import os
import pathlib
import random
import subprocess
import sys

import keras
import numpy as np

import keras_transformer  # noqa: F401  (registers its layers and model for load_model)

import checkpoint_edits as edits

HERE = pathlib.Path(__file__).resolve().parent
CASES = 32
SEED = 20261128
HOSTILE = ["false", "true", "abc", "", [], [1, 2], {}, None, -1, 0, 10**9, 2**63, 10**100, 1.5, math.nan, math.inf]
BOOLEANS = [True, False]
FILES = ("config.json", "generation_config.json", "model.safetensors")


def _edit_json(rng, folder, name):
    data = json.loads((folder / name).read_text(encoding="utf-8"))
    key = rng.choice(sorted(data) + ["num_beams", "bad_words_ids", "length_penalty", "early_stopping"])
    pool = HOSTILE + ([] if isinstance(data.get(key), bool) else BOOLEANS)  # a valid other boolean changes the model
    value = rng.choice(pool)
    edits.edit_json(folder, name, **{key: value})
    return f"{name}: {key}={value!r}"


def _edit_tensor(rng, folder):
    tensors = edits.read_tensors(folder)
    name = rng.choice(sorted(tensors))
    value = tensors[name]
    kind = rng.choice(["row", "flat", "axis", "int", "delete", "rename"])
    if kind == "row":
        tensors[name] = np.concatenate([value, value[:1]], axis=0)
    elif kind == "flat":
        tensors[name] = value.reshape(-1) if value.ndim > 1 else value.reshape(1, 1, -1)
    elif kind == "axis":
        tensors[name] = value[None]
    elif kind == "int":
        tensors[name] = value.astype(rng.choice([np.int32, np.int64, np.uint8]))
    elif kind == "delete":
        del tensors[name]
    else:
        tensors[name.replace(".weight", ".wieght").replace(".bias", ".bais")] = tensors.pop(name)
    edits.write_tensors(folder, tensors)
    return f"model.safetensors: {name} {kind}"


def edited_checkpoints(tmp_path):
    """`{case: (folder, [edits])}`: CASES seeded copies of the fixture with one to three edits each."""
    rng = random.Random(SEED)
    plans = {}
    for index in range(CASES):
        folder = edits.copy_fixture(tmp_path, name=f"case-{index}")
        made = []
        for _ in range(rng.randint(1, 3)):
            target = rng.choice(["config.json", "generation_config.json", "tensor"])
            made.append(_edit_tensor(rng, folder) if target == "tensor" else _edit_json(rng, folder, target))
        plans[f"case-{index}"] = (folder, made)
    return plans


def test_each_edited_checkpoint_imports_to_the_same_logits_or_is_refused_in_one_line(tmp_path):
    plans = edited_checkpoints(tmp_path)
    plan = {case: str(folder) for case, (folder, _) in plans.items()}
    done = subprocess.run(
        [sys.executable, str(HERE / "bounded_imports.py"), json.dumps(plan), str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    reference = np.load(edits.FIXTURES / "shared" / "reference_logits.npz")
    inputs = {"encoder_inputs": reference["input_ids"], "decoder_inputs": reference["decoder_input_ids"]}
    outcomes = {"imported": 0, "refused": 0}
    for case, (folder, made) in plans.items():
        result, run = results[case], tmp_path / "runs" / case
        if result["status"] == 0:
            model = keras.saving.load_model(run / "model.keras", compile=False)
            logits = keras.ops.convert_to_numpy(model(inputs))
            np.testing.assert_allclose(logits, reference["logits"], rtol=0, atol=1e-4, err_msg=str(made))
            outcomes["imported"] += 1
            continue
        message = result["message"]
        assert result["status"] == 2 and "\n" not in message, (made, message)
        assert message.startswith("keras-transformer import: error: "), (made, message)
        assert any(f"{folder}/{name}" in message for name in FILES), (made, message)
        assert "unexpected" not in message, (made, message)
        assert not run.exists(), made
        outcomes["refused"] += 1
    assert outcomes["imported"] and outcomes["refused"], outcomes  # the edits reach both outcomes
