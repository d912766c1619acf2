"""`keras-transformer import`: a checkpoint folder or `hf://` name as a run; bad input is one line, nothing written.

The `hf://` test lays a fixture out the way huggingface_hub's
`snapshot_download` caches a repository and runs the command with
`HF_HUB_OFFLINE=1` in a subprocess (huggingface_hub reads that variable when
it is imported), so the real huggingface_hub code resolves it.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from keras_transformer import runs
from keras_transformer.commands import cli
from keras_transformer.files.ownership import sha256

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "marian"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def checkpoint_copy(tmp_path, kind="shared"):
    folder = tmp_path / f"checkpoint-{kind}"
    shutil.copytree(FIXTURES / kind, folder)
    return folder


def run_import(capsys, *arguments):
    status = cli.main(["import", *map(str, arguments)])
    return status, capsys.readouterr().err.strip()


def test_a_local_checkpoint_imports_as_a_run_that_records_each_file(tmp_path, capsys):
    folder = checkpoint_copy(tmp_path)
    status, message = run_import(capsys, folder, "--output", tmp_path / "run")
    assert status == 0, message
    assert (
        "Imported" in message
        and f"Translate with `keras-transformer translate --model {tmp_path / 'run'} TEXT`" in message
    )
    assert "(2 encoder + 2 decoder layers, width 32)" in message
    recorded = runs.RunConfig.read(tmp_path / "run").pretrained
    assert recorded["files"]["model.safetensors"] == sha256(folder / "model.safetensors")
    assert recorded["files"]["vocab.json"] == sha256(folder / "vocab.json")


@pytest.mark.parametrize(
    "architecture, head, layers, words",
    [
        ("decoder_only", {}, "12 layers", "Continue a prompt with `keras-transformer generate --model RUN TEXT`."),
        ("encoder_only", {"encoder_head": "none"}, "6 layers", "Embed sentences with `keras-transformer embed"),
        (
            "encoder_only",
            {"encoder_head": "classifier", "num_classes": 3},
            "2 layers",
            "Classify texts with `keras-transformer classify --model RUN TEXT`.",
        ),
    ],
)
def test_the_hint_names_the_command_of_a_decoder_or_an_encoder_and_its_one_stack(architecture, head, layers, words):
    from keras_transformer.commands.import_checkpoint import _next_command, _stacks
    from keras_transformer.config import ModelConfig

    model = ModelConfig(
        **head,
        source_vocab_size=8,
        target_vocab_size=8,
        num_layers=int(layers.split()[0]),
        d_model=8,
        num_heads=2,
        d_ff=8,
        architecture=architecture,
        max_length=8,
    )
    assert _stacks(model) == layers
    assert _next_command(model, "RUN").startswith(words)


def _one_line_refusal(capsys, output, *arguments):
    status, message = run_import(capsys, *arguments, "--output", output)
    assert status == 2
    assert message.startswith("keras-transformer import: error: ") and "\n" not in message
    return message


def test_every_registered_family_has_the_four_parts():
    from keras_transformer.pretrained.families import FAMILIES, PARTS

    assert FAMILIES and all(name == family.MODEL_TYPE for name, family in FAMILIES.items())
    for family in FAMILIES.values():
        assert all(callable(getattr(family, part, None)) for part in PARTS), family.__name__
        assert isinstance(family.FAMILY, str) and isinstance(family.ADD_SOURCE_END, bool)


def test_a_model_type_not_supported_is_named_with_the_supported_ones(tmp_path, capsys):
    folder = checkpoint_copy(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "bart"}))
    message = _one_line_refusal(capsys, tmp_path / "run", folder)
    assert "'bart'" in message and "'marian'" in message and "'m2m_100'" in message
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("name", ["source.spm", "vocab.json", "config.json"])
def test_a_missing_file_is_named(tmp_path, capsys, name):
    folder = checkpoint_copy(tmp_path)
    (folder / name).unlink()
    message = _one_line_refusal(capsys, tmp_path / "run", folder)
    assert name in message
    assert not (tmp_path / "run").exists()


def test_a_vocabulary_that_does_not_cover_the_embedding_rows_is_refused(tmp_path, capsys):
    folder = checkpoint_copy(tmp_path)
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    del vocab[next(piece for piece, index in vocab.items() if index == 7)]
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    message = _one_line_refusal(capsys, tmp_path / "run", folder)
    assert "vocab.json" in message and "866 embedding rows" in message
    assert not (tmp_path / "run").exists()


def test_an_output_that_is_not_new_is_refused_as_train_refuses_it(tmp_path, capsys):
    folder = checkpoint_copy(tmp_path)
    output = tmp_path / "thesis"
    output.mkdir()
    (output / "chapter1.txt").write_text("mine")
    message = _one_line_refusal(capsys, output, folder, "--overwrite")
    assert str(output) in message
    assert [p.name for p in output.iterdir()] == ["chapter1.txt"] and (output / "chapter1.txt").read_text() == "mine"

    status, _ = run_import(capsys, folder, "--output", tmp_path / "run")
    assert status == 0
    model_before = (tmp_path / "run" / runs.MODEL).read_bytes()
    message = _one_line_refusal(capsys, tmp_path / "run", folder)
    assert "--overwrite" in message
    assert (tmp_path / "run" / runs.MODEL).read_bytes() == model_before


def hf_cache(tmp_path, repo, kind="shared"):
    """A huggingface_hub cache holding `repo` at `COMMIT` (refs/main, snapshots/, blobs/), as it downloads them."""
    cache = tmp_path / "hf-cache"
    repository = cache / ("models--" + repo.replace("/", "--"))
    snapshot = repository / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (repository / "blobs").mkdir()
    for path in sorted((FIXTURES / kind).iterdir()):
        if path.suffix == ".npz" or path.name == "reference.json":
            continue
        blob = repository / "blobs" / sha256(path)
        shutil.copyfile(path, blob)
        (snapshot / path.name).symlink_to(os.path.relpath(blob, snapshot))
    (repository / "refs").mkdir()
    (repository / "refs" / "main").write_text(COMMIT)
    return cache


def test_an_hf_source_resolves_through_huggingface_hub_offline(tmp_path):
    pytest.importorskip("huggingface_hub")
    cache = hf_cache(tmp_path, "Helsinki-NLP/opus-mt-tiny-ko-ko")
    environment = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
    command = [sys.executable, "-m", "keras_transformer_cli", "import"]
    done = subprocess.run(
        [*command, "hf://Helsinki-NLP/opus-mt-tiny-ko-ko", "--output", str(tmp_path / "run")],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    recorded = runs.RunConfig.read(tmp_path / "run").pretrained
    assert recorded["source"] == "hf://Helsinki-NLP/opus-mt-tiny-ko-ko" and recorded["revision"] == COMMIT
    assert recorded["files"]["model.safetensors"] == sha256(FIXTURES / "shared" / "model.safetensors")

    missing = subprocess.run(
        [*command, "hf://Helsinki-NLP/opus-mt-not-cached", "--output", str(tmp_path / "other")],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in missing.stderr.splitlines() if line.startswith("keras-transformer")]
    assert missing.returncode == 2 and lines and "hf://Helsinki-NLP/opus-mt-not-cached" in lines[-1]
    assert not (tmp_path / "other").exists()
