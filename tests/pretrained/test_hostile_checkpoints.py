"""A checkpoint is untrusted input: a hostile config, tensor, tokenizer file or Hub answer is one line, nothing written.

Each case edits a copy of a tiny Marian fixture and runs `keras-transformer
import` on it. The cases that would allocate without limit run in one
subprocess under a bounded address space (`bounded_imports.py`), so that a
regression fails fast instead of exhausting the machine. The Hub cases run
against a stand-in on 127.0.0.1 (`fake_hub.py`).
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from child_signals import default_sigint

from keras_transformer.commands import cli
from keras_transformer.pretrained import sources

import checkpoint_edits as edits
from fake_hub import COMMIT, FakeHub

HERE = pathlib.Path(__file__).resolve().parent


def refusal(capsys, folder, output, *names):
    """Runs the import; asserts one line, exit 2, nothing written, and each of `names` in the line."""
    status = cli.main(["import", str(folder), "--output", str(output)])
    message = capsys.readouterr().err.strip()
    assert status == 2, message
    assert message.startswith("keras-transformer import: error: ") and "\n" not in message, message
    for name in names:
        assert name in message, message
    assert not pathlib.Path(output).exists()
    return message


# -- config.json -------------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["scale_embedding", "share_encoder_decoder_embeddings", "tie_word_embeddings"])
def test_a_boolean_written_as_a_string_is_refused_naming_the_field(tmp_path, capsys, field):
    folder = edits.copy_fixture(tmp_path)
    edits.edit_json(folder, "config.json", **{field: "false"})
    refusal(capsys, folder, tmp_path / "run", "config.json", f"`{field}`", "true or false")


@pytest.mark.parametrize(
    "changes, names",
    [
        (dict(model_type=["marian"]), ["config.json", "`model_type`", "['marian']"]),
        (dict(d_model="32"), ["config.json", "`d_model`"]),
        (dict(vocab_size=900), ["config.json", "`vocab_size` is 900", "866 rows"]),
        (dict(encoder_ffn_dim=128, decoder_ffn_dim=128), ["config.json", "`encoder_ffn_dim` is 128", "64 values"]),
        (dict(encoder_attention_heads=5, decoder_attention_heads=5), ["`d_model` must be divisible by `num_heads`"]),
        (dict(pad_token_id=866), ["config.json", "`pad_token_id`"]),
        (dict(eos_token_id=-1), ["config.json", "`eos_token_id`"]),
        (dict(dropout=float("nan")), ["config.json", "`dropout`"]),
        (dict(activation_function="rm -rf"), ["config.json", "`activation_function`"]),
        (dict(max_position_embeddings=0), ["config.json", "`max_position_embeddings`"]),
    ],
    ids=lambda value: "-".join(map(str, value)) if isinstance(value, dict) else None,
)
def test_config_fields_of_the_wrong_kind_or_against_the_tensors_name_the_field(tmp_path, capsys, changes, names):
    folder = edits.copy_fixture(tmp_path)
    edits.edit_json(folder, "config.json", **changes)
    refusal(capsys, folder, tmp_path / "run", *names)


def test_deeply_nested_json_is_refused_naming_the_file(tmp_path, capsys):
    folder = edits.copy_fixture(tmp_path)
    (folder / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    refusal(capsys, folder, tmp_path / "run", "config.json", "nested too deeply")


# -- generation_config.json --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, field",
    [
        (dict(num_beams=10**9), "`num_beams`"),
        (dict(num_beams="abc"), "`num_beams`"),
        (dict(length_penalty=float("nan")), "`length_penalty`"),
        (dict(length_penalty=float("inf")), "`length_penalty`"),
        (dict(bad_words_ids=[[-5]]), "`bad_words_ids`"),
        (dict(bad_words_ids=[[99999]]), "`bad_words_ids`"),
        (dict(bad_words_ids=[["x"]]), "`bad_words_ids`"),
        (dict(max_length=10**12), "`max_length`"),
        (dict(forced_eos_token_id=10**6), "`forced_eos_token_id`"),
        (dict(early_stopping="never"), "early_stopping"),
    ],
    ids=lambda value: "-".join(map(str, value)) if isinstance(value, dict) else None,
)
def test_generation_settings_out_of_range_are_refused_naming_the_file(tmp_path, capsys, changes, field):
    folder = edits.copy_fixture(tmp_path)
    edits.edit_json(folder, "generation_config.json", **changes)
    refusal(capsys, folder, tmp_path / "run", "generation_config.json", field)


# -- tensors -----------------------------------------------------------------------------------------

FC1 = "model.encoder.layers.0.fc1.weight"


@pytest.mark.parametrize(
    "change, names",
    [
        (lambda value: value.T.copy(), [FC1, "(32, 64)", "(64, 32)"]),  # transposed: the same element count
        (lambda value: value[:32], [FC1, "(32, 32)"]),
        (lambda value: value.astype(np.int32), [FC1, "dtype I32"]),
        (lambda value: np.where(np.eye(64, 32) > 0, np.nan, value).astype(np.float32), [FC1, "NaN or infinite"]),
        (lambda value: np.full_like(value, np.inf), [FC1, "NaN or infinite"]),
        (lambda value: None, [FC1, "has no tensor"]),
    ],
    ids=["transposed", "wrong-size", "int", "nan", "inf", "missing"],
)
def test_a_tensor_of_another_shape_dtype_or_value_is_refused_naming_it(tmp_path, capsys, change, names):
    folder = edits.copy_fixture(tmp_path)
    edits.edit_tensor(folder, FC1, change)
    refusal(capsys, folder, tmp_path / "run", "model.safetensors", *names)


def test_an_unknown_tensor_is_refused_naming_it(tmp_path, capsys):
    folder = edits.copy_fixture(tmp_path)
    tensors = edits.read_tensors(folder)
    tensors["model.encoder.layers.0.backdoor.weight"] = np.zeros((2, 2), np.float32)
    edits.write_tensors(folder, tensors)
    refusal(capsys, folder, tmp_path / "run", "model.safetensors", "backdoor", "does not have")


def test_a_broken_safetensors_header_is_refused_naming_the_file(tmp_path, capsys):
    folder = edits.copy_fixture(tmp_path)
    data = bytearray((folder / "model.safetensors").read_bytes())
    data[8:20] = b"not a header"
    (folder / "model.safetensors").write_bytes(bytes(data))
    refusal(capsys, folder, tmp_path / "run", "model.safetensors", "not a readable safetensors file")


def test_float16_float64_and_bfloat16_tensors_import_as_their_float32_values(tmp_path, capsys):
    from keras_transformer.pretrained.checkpoints import Checkpoint

    folder = edits.copy_fixture(tmp_path)
    original = edits.read_tensors(folder)
    tensors = dict(original)
    tensors[FC1] = original[FC1].astype(np.float64)
    tensors["model.encoder.layers.0.fc2.weight"] = original["model.encoder.layers.0.fc2.weight"].astype(np.float16)
    edits.write_tensors(folder, tensors)
    checkpoint = Checkpoint(folder)
    assert checkpoint.tensors()[FC1].dtype == "F64"
    np.testing.assert_array_equal(checkpoint.tensor(FC1), original[FC1])
    half = checkpoint.tensor("model.encoder.layers.0.fc2.weight")
    np.testing.assert_array_equal(half, original["model.encoder.layers.0.fc2.weight"].astype(np.float16))
    bfloat16 = _bfloat16_safetensors(tmp_path / "bf16.safetensors", original[FC1])
    checkpoint = Checkpoint(bfloat16.parent)
    np.testing.assert_allclose(checkpoint.tensor("x"), original[FC1], rtol=2**-7)
    assert cli.main(["import", str(folder), "--output", str(tmp_path / "run")]) == 0, capsys.readouterr().err


def _bfloat16_safetensors(path, value):
    """A model.safetensors holding `value` as BF16 (its float32 bits' upper halves) under the name "x"."""
    raw = (np.ascontiguousarray(value, np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
    header = json.dumps({"x": {"dtype": "BF16", "shape": list(value.shape), "data_offsets": [0, len(raw)]}}).encode()
    folder = path.parent / "bf16"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + raw)
    return folder / "model.safetensors"


# -- tokenizer files ---------------------------------------------------------------------------------


def test_a_garbage_sentencepiece_model_is_refused_naming_it(tmp_path, capsys):
    folder = edits.copy_fixture(tmp_path)
    (folder / "target.spm").write_bytes(b"\x00garbage" * 100)
    refusal(capsys, folder, tmp_path / "run", "target.spm", "not a SentencePiece model")


@pytest.mark.parametrize(
    "content, words",
    [
        (b"\xff\xfe{bad", ["not a JSON vocabulary"]),
        (json.dumps({"</s>": 0, "<unk>": 1, "a": 2}).encode(), ["<pad>"]),
        (json.dumps({"</s>": 0, "<unk>": 1, "<pad>": True}).encode(), ["integer id"]),
        (json.dumps({"</s>": 0, "<unk>": 1, "<pad>": 2**40}).encode(), ["integer id"]),
    ],
    ids=["not-utf8", "no-pad", "bool-id", "huge-id"],
)
def test_a_broken_vocabulary_is_refused_naming_it(tmp_path, capsys, content, words):
    folder = edits.copy_fixture(tmp_path)
    (folder / "vocab.json").write_bytes(content)
    refusal(capsys, folder, tmp_path / "run", "vocab.json", *words)


def test_a_vocabulary_too_large_for_the_embedding_is_refused_before_it_is_read(tmp_path, capsys):
    folder = edits.copy_fixture(tmp_path)
    with open(folder / "vocab.json", "r+b") as handle:  # 200 MB, sparse: refused by its size alone
        handle.truncate(200 * 2**20)
    started = time.monotonic()
    refusal(capsys, folder, tmp_path / "run", "vocab.json", "too large")
    assert time.monotonic() - started < 10


# -- sizes that would exhaust memory, under a bounded address space ----------------------------------


def test_sizes_that_would_exhaust_memory_are_refused_before_anything_is_built(tmp_path):
    """Each case in a child process whose address space is bounded to 3 GB above what TensorFlow takes."""
    cases = {
        "layers": dict(encoder_layers=10**6, decoder_layers=10**6),
        "width": dict(d_model=10**9, max_position_embeddings=10**9),
        "ffn": dict(d_model=65536, encoder_ffn_dim=10**9, decoder_ffn_dim=10**9),
        "positions": dict(max_position_embeddings=10**9),
        "vocab": dict(vocab_size=10**9, decoder_vocab_size=10**9),
    }
    expected = {
        "layers": "`encoder_layers` is 1000000",
        "width": "`d_model`",
        "ffn": "`d_model` is 65536",
        "positions": "`max_position_embeddings`",
        "vocab": "`vocab_size` is 1000000000",
    }
    plan = {"control": str(edits.copy_fixture(tmp_path, name="control"))}
    for name, changes in cases.items():
        folder = edits.copy_fixture(tmp_path, name=name)
        edits.edit_json(folder, "config.json", **changes)
        plan[name] = str(folder)
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, str(HERE / "bounded_imports.py"), json.dumps(plan), str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        timeout=600,
        env=environment,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results["control"]["status"] == 0, results["control"]  # the bound leaves room for a real import
    for name, words in expected.items():
        status, message, seconds = results[name]["status"], results[name]["message"], results[name]["seconds"]
        assert status == 2 and "\n" not in message, (name, message)
        assert "config.json" in message and words in message, (name, message)
        assert seconds < 20, (name, seconds)
        assert not (tmp_path / "runs" / name).exists()


# -- the Hub -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "revision",
    ["../../../../../notes.txt", "/etc/passwd", "main/../../x", "a\\b", "main\n", "ma\x00in", ".hidden", "x.lock"],
)
def test_a_revision_that_is_not_a_ref_is_refused_before_any_request(revision):
    with pytest.raises(ValueError, match="`revision` must be a branch, a tag or a commit id"):
        sources.check_revision(revision)


@pytest.mark.parametrize("revision", ["main", "v1.0", "refs/pr/1", COMMIT, "release-2024_01"])
def test_branches_tags_and_commit_ids_are_revisions(revision):
    assert sources.check_revision(revision) == revision


@pytest.fixture
def hub_home(tmp_path, monkeypatch):
    """A fake home whose huggingface_hub cache is `~/.cache/huggingface/hub`, and a user's file beside it."""
    pytest.importorskip("huggingface_hub")
    import huggingface_hub.constants

    home = tmp_path / "home"
    cache = home / ".cache" / "huggingface" / "hub"
    cache.mkdir(parents=True)
    (home / "notes.txt").write_text("my notes")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HOME", str(home))
    return home


def _hub_files():
    return sorted(p for p in (edits.FIXTURES / "shared").iterdir() if p.name not in edits.REFERENCE_FILES)


def test_a_revision_with_dots_writes_nothing_outside_the_cache_and_a_good_one_imports(
    tmp_path, capsys, monkeypatch, hub_home
):
    with FakeHub(_hub_files()) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        hostile = "hf://org/name@../../../../../notes.txt"  # from the cache's refs/ up to the home folder
        status = cli.main(["import", hostile, "--output", str(tmp_path / "run")])
        message = capsys.readouterr().err.strip()
        assert status == 2 and "`revision`" in message and "\n" not in message, message
        assert (hub_home / "notes.txt").read_text() == "my notes"
        assert not any("/api/models" in r or "/resolve/" in r for r in hub.requests), hub.requests

        status = cli.main(["import", "hf://org/name@main", "--output", str(tmp_path / "run")])
        assert status == 0, capsys.readouterr().err
    assert (hub_home / "notes.txt").read_text() == "my notes"
    snapshot = hub_home / ".cache" / "huggingface" / "hub" / "models--org--name" / "snapshots" / COMMIT
    assert (snapshot / "model.safetensors").is_file()
    assert (snapshot.parents[1] / "refs" / "main").read_text() == COMMIT


def test_a_silent_hub_fails_within_the_timeout_naming_it(tmp_path, capsys, monkeypatch, hub_home):
    monkeypatch.setenv("KERAS_TRANSFORMER_DOWNLOAD_TIMEOUT", "1")
    with FakeHub(silent=True) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        started = time.monotonic()
        status = cli.main(["import", "hf://org/name", "--output", str(tmp_path / "run")])
        seconds = time.monotonic() - started
    message = capsys.readouterr().err.strip()
    assert status == 2 and "\n" not in message, message
    assert "hf://org/name cannot be fetched" in message and "KERAS_TRANSFORMER_DOWNLOAD_TIMEOUT" in message
    assert seconds < 15, seconds
    assert not (tmp_path / "run").exists()


def test_ctrl_c_stops_an_import_waiting_on_a_silent_hub_at_once(tmp_path):
    pytest.importorskip("huggingface_hub")
    with FakeHub(silent=True) as hub:
        environment = {
            **os.environ,
            "HF_ENDPOINT": hub.url,
            "HF_HUB_CACHE": str(tmp_path / "cache"),
            "TF_CPP_MIN_LOG_LEVEL": "3",
            "KERAS_TRANSFORMER_DOWNLOAD_TIMEOUT": "120",
        }
        command = [sys.executable, "-m", "keras_transformer_cli", "import", "hf://org/name"]
        process = subprocess.Popen(
            [*command, "--output", str(tmp_path / "run")],
            env=environment,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=default_sigint,  # Ctrl-C as a terminal delivers it, whatever earlier tests left
        )
        deadline = time.monotonic() + 120
        while not hub.requests and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        assert hub.requests, "the import never reached the Hub"
        time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        started = time.monotonic()
        _, stderr = process.communicate(timeout=60)
        seconds = time.monotonic() - started
    assert process.returncode in (130, -signal.SIGINT), stderr[-2000:]
    assert seconds < 10, seconds
    assert "Traceback" not in stderr
    assert not (tmp_path / "run").exists()
