"""A checkpoint's files as uploads hold them: every layout reads the same tensors, and a hostile one runs nothing.

The layout variants (tests/data/*/layouts/, see test_old_layouts.py) hold
their fixture's tensors under other names, formats and dtypes: read
through the family's names, each tensor equals its fixture's, rounded to
the variant's dtype. The hostile cases edit copies of the fixtures and run
`keras-transformer import`: each is one line naming the file (and the
tensor or shard), exit 2, nothing written, and a pickle that would run a
command runs nothing.
"""

import json
import os
import pickle
import zipfile

import numpy as np
import pytest

from keras_transformer.commands import cli
from keras_transformer.pretrained import sources
from keras_transformer.pretrained.checkpoints import Checkpoint
from keras_transformer.pretrained.families import m2m100, marian

import checkpoint_edits as edits
from fake_hub import FakeHub

# variant: (its family, its fixture, the dtype its tensors were rounded to)
DATA = edits.DATA
SIDES = ("encoder", "decoder")
VARIANT_TENSORS = {
    "opus-2020": (marian, DATA / "marian" / "shared", np.float32),
    "opus-2022": (marian, DATA / "marian" / "shared", np.float32),
    "base-fp16": (marian, DATA / "marian" / "shared", np.float16),
    "m2m100-2021": (m2m100, DATA / "m2m100" / "m2m100", np.float32),
    "nllb-2022": (m2m100, DATA / "m2m100" / "nllb", "bfloat16"),
}


def _rounded(value, dtype):
    if dtype == "bfloat16":  # to nearest, ties to even, as torch casts
        bits = value.astype(np.float32).view(np.uint32)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return bits.view(np.float32)
    return value.astype(dtype).astype(np.float32)


@pytest.mark.parametrize("variant", sorted(VARIANT_TENSORS))
def test_every_layout_reads_its_fixtures_tensors_under_the_familys_names(tmp_path, variant):
    family, fixture, dtype = VARIANT_TENSORS[variant]
    folder = edits.assemble(edits.LAYOUTS[variant], tmp_path / "checkpoint")
    ours = Checkpoint(folder).read_as(family.LAYOUT)
    theirs = Checkpoint(fixture).read_as(family.LAYOUT)
    expected = theirs.tensors()
    assert ours.weights_file != "model.safetensors" or variant == "base-fp16"  # another format or names
    shared = sorted(set(ours.tensors()) & set(expected))
    # All but a base model's missing head and the position tables it need not store.
    assert set(expected) - set(shared) <= {
        "final_logits_bias",
        *(f"model.{side}.embed_positions.weight" for side in SIDES),
    }
    for name in shared:
        np.testing.assert_array_equal(ours.tensor(name), _rounded(theirs.tensor(name), dtype), err_msg=name)


def test_a_tensor_that_is_not_of_floats_is_listed_and_refused_as_a_weight(tmp_path):
    from safetensors.numpy import save_file

    save_file({"embeddings.position_ids": np.arange(8, dtype=np.int64)[None]}, str(tmp_path / "model.safetensors"))
    checkpoint = Checkpoint(tmp_path)
    assert checkpoint.tensors()["embeddings.position_ids"] == ((1, 8), "I64")
    with pytest.raises(ValueError, match=r"model.safetensors: tensor `embeddings.position_ids` has dtype I64"):
        checkpoint.tensor("embeddings.position_ids")


def refusal(capsys, folder, output, *names):
    """Runs the import; asserts one line, exit 2, nothing written, and each of `names` in the line."""
    status = cli.main(["import", str(folder), "--output", str(output)])
    message = capsys.readouterr().err.strip()
    assert status == 2, message
    assert message.startswith("keras-transformer import: error: ") and "\n" not in message, message
    for name in names:
        assert name in message, message
    assert not output.exists()
    return message


# -- pickles that would run something ----------------------------------------------------------------


class _Runs:
    """What a hostile pickle holds: an object whose unpickling calls `function(*arguments)`."""

    def __init__(self, function, *arguments):
        self.function, self.arguments = function, arguments

    def __reduce__(self):
        return self.function, self.arguments


def _hostile_bin(folder, payload, zipped):
    (folder / "model.safetensors").unlink()
    data = pickle.dumps({"model.shared.weight": payload}, protocol=2)
    if zipped:
        with zipfile.ZipFile(folder / "pytorch_model.bin", "w") as archive:
            archive.writestr("pytorch_model/data.pkl", data)
    else:  # the legacy format: its first pickle is read first
        (folder / "pytorch_model.bin").write_bytes(data)


@pytest.mark.parametrize("zipped", [True, False], ids=["zip", "legacy"])
@pytest.mark.parametrize("call", ["os.system", "builtins.eval"])
def test_a_bin_whose_pickle_would_run_a_command_is_refused_and_runs_nothing(tmp_path, capsys, call, zipped):
    marker = tmp_path / "ran"
    payload = (
        _Runs(os.system, f"touch {marker}")
        if call == "os.system"
        else _Runs(eval, f"open({str(marker)!r}, 'w').close()")
    )
    folder = edits.copy_fixture(tmp_path)
    _hostile_bin(folder, payload, zipped)
    name = "system" if call == "os.system" else "builtins.eval"
    refusal(capsys, folder, tmp_path / "run", "pytorch_model.bin", name, "nothing of it was run")
    assert not marker.exists()


def test_a_bin_with_a_truncated_storage_is_refused_naming_the_tensor(tmp_path, capsys):
    folder = edits.assemble(edits.LAYOUTS["m2m100-2021"], tmp_path / "checkpoint")
    original = zipfile.ZipFile(folder / "pytorch_model.bin")
    with zipfile.ZipFile(folder / "short.bin", "w") as archive:
        for info in original.infolist():
            data = original.read(info.filename)
            archive.writestr(info.filename, data[: len(data) // 2] if info.filename.endswith("data/1") else data)
    (folder / "short.bin").replace(folder / "pytorch_model.bin")
    message = refusal(capsys, folder, tmp_path / "run", "pytorch_model.bin", "truncated")
    assert "tensor `model." in message


def _tensor_pickle(name, shape, stride, numel):
    """A torch.save pickle of `{name: a float32 tensor}`, written opcode by opcode (protocol 2), without torch."""

    def text(value):
        data = value.encode()
        return b"X" + len(data).to_bytes(4, "little") + data

    def ints(values):
        return b"(" + b"".join(b"J" + v.to_bytes(4, "little", signed=True) for v in values) + b"t"

    storage = b"(" + text("storage") + b"ctorch\nFloatStorage\n" + text("0") + text("cpu") + ints([numel])[1:-1]
    storage += b"tQ"  # the persistent id of storage "0"
    rebuild = b"ctorch._utils\n_rebuild_tensor_v2\n(" + storage + b"J\0\0\0\0" + ints(shape) + ints(stride)
    rebuild += b"\x89ccollections\nOrderedDict\n)RtR"
    return b"\x80\x02}" + text(name) + rebuild + b"s."


def test_a_bin_tensor_larger_than_its_storage_is_refused(tmp_path):
    from keras_transformer.pretrained.torch_files import TorchFile

    def written(shape, stride, numel=4):
        path = tmp_path / "pytorch_model.bin"
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("archive/data.pkl", _tensor_pickle("x", shape, stride, numel))
            archive.writestr("archive/data/0", np.arange(numel, dtype="<f4").tobytes())
        return TorchFile(path)

    np.testing.assert_array_equal(written((2, 2), (2, 1)).read("x"), [[0, 1], [2, 3]])
    np.testing.assert_array_equal(written((2, 2), (1, 2)).read("x", (1, 2)), [[1, 3]])  # a transposed view
    with pytest.raises(ValueError, match=r"tensor `x` of shape \(1000000000,\) has more elements than its storage"):
        written((10**9,), (0,))
    with pytest.raises(ValueError, match=r"tensor `x` needs 20 bytes of its storage, which holds 16"):
        written((2,), (4,))  # its second element past the end


# -- buffers that disagree with what they stand for --------------------------------------------------


def test_a_stored_position_table_other_than_the_sinusoids_is_refused(tmp_path, capsys):
    folder = edits.copy_fixture(tmp_path)
    table = "model.decoder.embed_positions.weight"
    edits.edit_tensor(folder, table, lambda value: np.concatenate([value[:7], value[7:] + 0.5]))
    refusal(capsys, folder, tmp_path / "run", "model.safetensors", table, "row 7", "not the position table")


def test_a_float16_position_table_is_the_sinusoids_rounded_and_one_off_by_a_hundredth_is_not(tmp_path):
    folder = edits.copy_fixture(tmp_path)
    table = "model.encoder.embed_positions.weight"
    edits.edit_tensor(folder, table, lambda value: value.astype(np.float16))

    def checked():
        checkpoint = Checkpoint(folder).read_as(marian.LAYOUT)
        config = marian.model_config(checkpoint.json("config.json"), checkpoint.tensors())
        marian.check_buffers(config, checkpoint)

    checked()
    edits.edit_tensor(folder, table, lambda value: value + np.float16(0.01))
    with pytest.raises(ValueError, match=r"tensor `model.encoder.embed_positions.weight` is not the position table"):
        checked()


def test_an_m2m100_position_table_other_than_fairseqs_is_refused(tmp_path, capsys):
    from keras_transformer.layers.positional_encoding import positional_encoding

    folder = tmp_path / "checkpoint"
    folder.mkdir()
    for path in (DATA / "m2m100" / "m2m100").iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    tensors = edits.read_tensors(folder)
    table = positional_encoding(1026, 32, layout="fairseq")  # the padding row (1) not zeroed: not fairseq's
    tensors["model.encoder.embed_positions.weights"] = table
    edits.write_tensors(folder, tensors)
    refusal(capsys, folder, tmp_path / "run", "model.encoder.embed_positions.weights", "row 1")


def test_a_tied_copy_that_differs_from_its_original_is_refused(tmp_path, capsys):
    folder = edits.copy_fixture(tmp_path)
    tensors = edits.read_tensors(folder)
    tensors["lm_head.weight"] = tensors["model.shared.weight"].copy()
    tensors["lm_head.weight"][12, 3] += 1e-3
    edits.write_tensors(folder, tensors)
    refusal(capsys, folder, tmp_path / "run", "lm_head.weight", "model.shared.weight", "row 12", "differs")


def test_a_base_model_tensor_stored_under_both_names_is_refused(tmp_path, capsys):
    folder = edits.copy_fixture(tmp_path)
    tensors = edits.read_tensors(folder)
    tensors["encoder.layers.0.fc1.bias"] = tensors["model.encoder.layers.0.fc1.bias"]
    edits.write_tensors(folder, tensors)
    refusal(capsys, folder, tmp_path / "run", "encoder.layers.0.fc1.bias", "model.encoder.layers.0.fc1.bias", "twice")


# -- shard indexes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shard, words",
    [
        ("model-00003-of-00002.safetensors", ["model-00003-of-00002.safetensors", "missing"]),
        ("../model-00001-of-00002.safetensors", ["'../model-00001-of-00002.safetensors'", "not a file beside it"]),
        ("/etc/passwd", ["'/etc/passwd'", "not a file beside it"]),
        ("sub\\model-00001-of-00002.safetensors", ["not a file beside it"]),
    ],
    ids=["missing", "parent", "absolute", "backslash"],
)
def test_a_shard_index_naming_a_missing_file_or_one_outside_the_folder_is_refused(tmp_path, capsys, shard, words):
    folder = edits.assemble(edits.LAYOUTS["base-fp16"], tmp_path / "checkpoint")
    (tmp_path / "model-00001-of-00002.safetensors").write_bytes(b"outside")  # what `..` would reach
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    index["weight_map"]["shared.weight"] = shard
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    refusal(capsys, folder, tmp_path / "run", "model.safetensors.index.json", *words)


# -- hf:// fetches the one format an import reads ----------------------------------------------------


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    pytest.importorskip("huggingface_hub")
    import huggingface_hub.constants

    cache = tmp_path / "hub-cache"
    cache.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    return cache


@pytest.mark.parametrize("variant", ["opus-2022", "base-fp16"])
def test_hf_fetches_the_first_weights_format_present_and_its_shards_only(tmp_path, monkeypatch, hub_cache, variant):
    """transformers' order: model.safetensors, its index, pytorch_model.bin, its index, then tf_model.h5."""
    folder = edits.assemble(edits.LAYOUTS[variant], tmp_path / "checkpoint")
    index = next(folder.glob("*.index.json")).name
    shards = sorted(json.loads((folder / index).read_text())["weight_map"].values())
    (folder / "tf_model.h5").write_bytes(b"never fetched")
    if variant == "base-fp16":
        (folder / "pytorch_model.bin").write_bytes(b"never fetched: safetensors come first")
    with FakeHub(sorted(folder.iterdir())) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        fetched = sources.resolve("hf://org/name").folder
    downloads = {request.rsplit("/", 1)[-1] for request in hub.requests if request.startswith("GET /org/name/resolve")}
    assert {index, *shards, "config.json"} <= downloads
    assert not downloads & {"tf_model.h5", "pytorch_model.bin"}, downloads
    assert {index, *shards} <= {path.name for path in fetched.iterdir()}
    assert Checkpoint(fetched).weights_file == index
