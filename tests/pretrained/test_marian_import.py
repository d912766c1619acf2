"""OPUS-MT (Marian) checkpoints imported into this package's layers give transformers' numbers.

The fixtures in tests/data/marian/ are two tiny `MarianMTModel`s that
transformers wrote with `save_pretrained`, beside what transformers computed
with them (tests/data/marian/make_fixtures.py rebuilds both; the tests need
neither torch nor transformers): `shared/` has one vocabulary, `separate/` a
source and a target vocabulary of their own.
"""

import json
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import runs
from keras_transformer.files import destinations
from keras_transformer.pretrained import import_pretrained
from keras_transformer.tokenizers import load_tokenizer

import checkpoint_edits as edits

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "marian"
KINDS = ("shared", "separate")


@pytest.fixture(scope="module", params=KINDS)
def imported(request, tmp_path_factory):
    """`(fixture folder, run directory, reference)` of each fixture, imported once."""
    folder = FIXTURES / request.param
    run = tmp_path_factory.mktemp(request.param) / "run"
    import_pretrained(folder, run)
    reference = json.loads((folder / "reference.json").read_text(encoding="utf-8"))
    return folder, run, reference


def test_teacher_forced_logits_equal_transformers(imported):
    folder, run, _ = imported
    expected = np.load(folder / "reference_logits.npz")
    model = keras.saving.load_model(run / runs.MODEL, compile=False)
    logits = model({"encoder_inputs": expected["input_ids"], "decoder_inputs": expected["decoder_input_ids"]})
    np.testing.assert_allclose(keras.ops.convert_to_numpy(logits), expected["logits"], rtol=0, atol=1e-4)


def test_source_and_target_ids_equal_marian_tokenizers(imported):
    _, run, reference = imported
    source = load_tokenizer(run / runs.SOURCE_TOKENIZER)
    target = load_tokenizer(run / runs.TARGET_TOKENIZER)
    sentences = tf.constant(reference["sentences"])
    source_ids = [ids + [source.end_id] for ids in source.tokenize(sentences).to_list()]
    target_ids = [ids + [target.end_id] for ids in target.tokenize(sentences).to_list()]
    assert source_ids == reference["source_ids"]
    assert target_ids == reference["target_ids"]


def test_detokenize_gives_transformers_strings(imported):
    _, run, reference = imported
    target = load_tokenizer(run / runs.TARGET_TOKENIZER)
    ids = tf.ragged.constant(reference["greedy_ids"], dtype=tf.int32)
    assert [s.decode("utf-8") for s in target.detokenize(ids).numpy()] == reference["greedy"]


def test_the_run_records_its_source_and_the_files_it_read(imported):
    folder, run, _ = imported
    config = runs.RunConfig.read(run)
    assert config.pretrained["source"] == str(folder) and config.pretrained["model_type"] == "marian"
    assert {"config.json", "model.safetensors", "source.spm", "target.spm", "vocab.json"} <= set(
        config.pretrained["files"]
    )
    assert config.finished and config.add_source_end and destinations.is_own_run(run)
    # What an export back needs: the JSON files as they were, the names beyond the layers', the card's license.
    for name, text in config.pretrained["json_files"].items():
        assert text.encode("utf-8") == (folder / name).read_bytes(), name
    assert sorted(config.pretrained["json_files"]) == ["config.json", "generation_config.json", "tokenizer_config.json"]
    assert "model.encoder.embed_positions.weight" in config.pretrained["tensors"]
    assert not any(".layers." in name for name in config.pretrained["tensors"])
    assert config.pretrained["license"] == "apache-2.0"
    assert config.decoding.normalization == "length" and config.decoding.softmax_over == "allowed"  # renormalized
    assert config.model.max_length == 512 and config.decoding.max_new_tokens == 511  # OPUS-MT's values


@pytest.mark.parametrize(
    "generation, softmax_over",
    [(dict(renormalize_logits=False), "vocabulary"), (dict(renormalize_logits=True), "allowed")],
)
def test_renormalize_logits_chooses_what_the_log_softmax_is_taken_over(tmp_path, generation, softmax_over):
    folder = edits.copy_fixture(tmp_path)
    edits.edit_json(folder, "generation_config.json", **generation)
    import_pretrained(folder, tmp_path / "run")
    assert runs.RunConfig.read(tmp_path / "run").decoding.softmax_over == softmax_over


def test_renormalizing_logits_without_banning_pad_is_refused_in_one_line(tmp_path):
    folder = edits.copy_fixture(tmp_path)
    edits.edit_json(folder, "generation_config.json", bad_words_ids=[[5]], renormalize_logits=True)
    with pytest.raises(ValueError, match=r"generation_config.json: renormalize_logits .* do not ban .* PAD \(865\)"):
        import_pretrained(folder, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_decoder_start_other_than_pad_is_the_target_tokenizers_start(tmp_path):
    """The data pipeline starts the decoder inputs from the target tokenizer's `start_id`: the checkpoint's."""
    folder = edits.copy_fixture(tmp_path)
    edits.edit_json(folder, "config.json", decoder_start_token_id=1)
    edits.edit_json(folder, "generation_config.json", decoder_start_token_id=1, bad_words_ids=[[1], [865]])
    import_pretrained(folder, tmp_path / "run")
    tokenizers = runs.load_tokenizers(tmp_path / "run")
    assert (tokenizers.source.start_id, tokenizers.target.start_id) == (865, 1)
    assert runs.RunConfig.read(tmp_path / "run").model.start_id == 1
