"""`export --format transformers` of a GPT-2 run: its checkpoint again, bit for bit, and the files a run rewrites.

An import exported again is its source checkpoint file for file (the
fixture in tests/data/gpt2 was written by transformers' `save_pretrained`),
and imports back tensor for tensor and field for field; the files written
from the run alone hold the fixture's values. transformers itself loads
these exports in tests/data/gpt2/check_transformers_export.py (not run
here: it needs torch); a fine-tuned run's export is in
tests/training/test_gpt2_fine_tuning.py.
"""

import json
import pathlib

import keras
import numpy as np
import pytest
from checkpoint_layouts import LAYOUTS, assemble
from safetensors.numpy import load_file

from keras_transformer import runs
from keras_transformer.commands import cli
from keras_transformer.pretrained import export_checkpoint, import_pretrained
from keras_transformer.pretrained.families import gpt2, gpt2_export

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "data" / "gpt2"
CHECKPOINT_FILES = (
    "config.json",
    "generation_config.json",
    "merges.txt",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.json",
)
WRITTEN_TOO = {"README.md", "MANIFEST.sha256", "keras_transformer.json"}


def weights(run):
    return [keras.ops.convert_to_numpy(w) for w in keras.saving.load_model(run / runs.MODEL, compile=False).weights]


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory):
    """`(imported run, its export, the export imported)`."""
    work = tmp_path_factory.mktemp("gpt2-export")
    import_pretrained(FIXTURE, work / "run")
    export_checkpoint(work / "run", work / "hf")
    import_pretrained(work / "hf", work / "again")
    return work / "run", work / "hf", work / "again"


def test_an_import_exported_again_is_its_checkpoint_file_for_file(round_trip):
    _, hf, _ = round_trip
    for name in CHECKPOINT_FILES:
        assert (hf / name).read_bytes() == (FIXTURE / name).read_bytes(), name
    assert {path.name for path in hf.iterdir()} == {*CHECKPOINT_FILES, *WRITTEN_TOO}
    card = (hf / "README.md").read_text(encoding="utf-8")
    assert "pipeline_tag: text-generation" in card and "GPT2LMHeadModel.from_pretrained" in card


def test_the_export_imports_back_tensor_for_tensor_and_field_for_field(round_trip):
    run, _, again = round_trip
    for ours, back in zip(weights(run), weights(again), strict=True):
        np.testing.assert_array_equal(ours, back)
    first, second = runs.RunConfig.read(run), runs.RunConfig.read(again)
    assert first.model == second.model and first.decoding == second.decoding
    assert first.preset == second.preset.replace(name=first.preset.name)  # named after the folder
    reference = json.loads((FIXTURE / "reference.json").read_text(encoding="utf-8"))
    tokenizer = runs.open_run(again, models=False).tokenizers.source
    assert tokenizer.tokenize(reference["prompts"]).to_list() == reference["prompt_ids"]


def test_the_files_written_from_the_run_alone_hold_the_fixtures_values(round_trip):
    run, _, _ = round_trip
    opened = runs.open_run(run)
    config, decoding = opened.model.config, opened.config.decoding
    fixture = json.loads((FIXTURE / "config.json").read_text(encoding="utf-8"))
    written = gpt2_export.hf_config(config)
    assert {key: fixture[key] for key in written} == written  # every field written is the fixture's
    assert gpt2_export.reads_as_model(written, config)
    generation = gpt2_export.generation_config(decoding, config)
    assert generation == {"bos_token_id": 699, "eos_token_id": 699}  # GPT-2's: greedy, its lengths its callers'
    assert gpt2.decoding_config(generation, config) == decoding
    tensors, source = gpt2_export.checkpoint_tensors(opened.model), load_file(str(FIXTURE / "model.safetensors"))
    assert sorted(tensors) == sorted(source)
    for name, value in source.items():
        np.testing.assert_array_equal(tensors[name], value, err_msg=name)
    files, state = gpt2_export.tokenizer_files(opened.tokenizers, config)
    assert {name: files[name] for name in ("vocab.json", "merges.txt")} == {
        name: (FIXTURE / name).read_bytes() for name in ("vocab.json", "merges.txt")
    }
    tokenizer_config = gpt2_export.tokenizer_config(config, state)
    assert tokenizer_config["eos_token"] == tokenizer_config["bos_token"] == "<|endoftext|>"


def test_beams_and_a_length_penalty_are_written_as_generate_reads_them(round_trip, tmp_path):
    run, _, _ = round_trip
    export_checkpoint(run, tmp_path / "hf", beam_size=4, alpha=0.8, max_length=12)
    generation = json.loads((tmp_path / "hf" / "generation_config.json").read_text(encoding="utf-8"))
    assert (generation["num_beams"], generation["length_penalty"], generation["max_new_tokens"]) == (4, 0.8, 12)
    assert generation["_from_model_config"] is True  # the source's other fields kept
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        assert (tmp_path / "hf" / name).read_bytes() == (FIXTURE / name).read_bytes()
    import_pretrained(tmp_path / "hf", tmp_path / "again")
    decoding = runs.RunConfig.read(tmp_path / "again").decoding
    assert (decoding.beam_size, decoding.alpha, decoding.max_new_tokens) == (4, 0.8, 12)


def test_a_gpt2_model_of_2019_is_written_as_today_and_reads_back_the_same(tmp_path):
    folder = assemble(LAYOUTS / "gpt2-model", {}, tmp_path / "gpt2-model")
    import_pretrained(folder, tmp_path / "run")
    export_checkpoint(tmp_path / "run", tmp_path / "hf")
    names = set(load_file(str(tmp_path / "hf" / "model.safetensors")))
    assert all(name.startswith("transformer.") for name in names) and not any(
        n.endswith((".attn.bias", ".masked_bias")) for n in names
    )
    import_pretrained(tmp_path / "hf", tmp_path / "again")
    for ours, back in zip(weights(tmp_path / "run"), weights(tmp_path / "again"), strict=True):
        np.testing.assert_array_equal(ours, back)
    assert runs.RunConfig.read(tmp_path / "again").decoding == runs.RunConfig.read(tmp_path / "run").decoding
    for name in ("vocab.json", "merges.txt", "config.json"):  # its generation settings stay in config.json
        assert (tmp_path / "hf" / name).read_bytes() == (folder / name).read_bytes(), name


def test_a_gpt_run_of_this_package_is_refused_in_one_line(round_trip, tmp_path, capsys):
    run, _, _ = round_trip
    own = tmp_path / "own"
    own.mkdir()
    for path in run.rglob("*"):
        if path.is_file():
            (own / path.relative_to(run)).parent.mkdir(parents=True, exist_ok=True)
            (own / path.relative_to(run)).write_bytes(path.read_bytes())
    runs.update_config(own, pretrained=None)  # as if trained here (gpt-ko): its tokenizer is this package's
    code = cli.main(["export", "--format", "transformers", "--model", str(own), "--output", str(tmp_path / "hf")])
    err = capsys.readouterr().err
    assert code == 2 and "decoder_only run of this package" in err and err.count("\n") == 1
    assert not (tmp_path / "hf").exists()
