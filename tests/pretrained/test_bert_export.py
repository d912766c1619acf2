"""`export --format transformers` of a BERT run: its checkpoint again, file for file where nothing changed.

An import exported again imports back bit for bit (weights, model config,
labels, sentence-embedding settings); tests/data/bert/ (a BertForMaskedLM
that transformers 5 saved) comes back byte for byte, model.safetensors
included; a BertForSequenceClassification of 2021 gets its tokenizer files
and config.json back as they were, without the buffers transformers skips;
a sentence-transformers model gets its module files back. transformers
itself loads these exports, and a fine-tuned classifier's, in
tests/data/bert/check_transformers_export.py (not run here: it needs torch).
"""

import json
import pathlib

import keras
import numpy as np
import pytest
from checkpoint_layouts import LAYOUTS
from safetensors.numpy import load_file

from keras_transformer import runs
from keras_transformer.pretrained import export_checkpoint, import_pretrained

FIXTURES = {
    "masked-lm": pathlib.Path(__file__).resolve().parents[1] / "data" / "bert",
    "classifier": LAYOUTS / "bert-classifier",
    "sentence-transformers": LAYOUTS / "sbert",
}
REFERENCES = ("reference.json", "reference_outputs.npz", "reference_logits.npz")
OURS = {"README.md", "MANIFEST.sha256", "keras_transformer.json"}


def checkpoint_files(folder):
    return sorted(
        path.relative_to(folder).as_posix()
        for path in folder.rglob("*")
        if path.is_file() and path.name not in REFERENCES and path.suffix != ".py"  # not the fixture's scripts
    )


def weights(run):
    model = keras.saving.load_model(run / runs.MODEL, compile=False)
    return [keras.ops.convert_to_numpy(weight) for weight in model.weights]


@pytest.fixture(scope="module", params=sorted(FIXTURES))
def round_trip(request, tmp_path_factory):
    """`(name, fixture folder, imported run, its export, the export imported)`."""
    folder, work = FIXTURES[request.param], tmp_path_factory.mktemp(request.param)
    import_pretrained(folder, work / "run")
    written = export_checkpoint(work / "run", work / "hf")
    import_pretrained(work / "hf", work / "again")
    return request.param, folder, work / "run", work / "hf", work / "again", written


def test_the_export_imports_back_bit_for_bit(round_trip):
    _, _, run, _, again, _ = round_trip
    assert all(np.array_equal(a, b) for a, b in zip(weights(run), weights(again), strict=True))
    before, after = runs.RunConfig.read(run), runs.RunConfig.read(again)
    assert (before.model, before.decoding) == (after.model, after.decoding)
    for field in ("labels", "problem_type", "sentence_embedding"):
        assert before.pretrained.get(field) == after.pretrained.get(field), field
    texts = ["오늘 너무 힘들었어", "", "English words, 123 and émojis 😀 [MASK]"]
    tokenizers = [runs.load_tokenizers(path).source for path in (run, again)]
    assert tokenizers[0].encode(texts) == tokenizers[1].encode(texts)


def test_what_the_run_did_not_change_is_written_back_byte_for_byte(round_trip):
    name, folder, _, hf, _, written = round_trip
    source, ours = load_file(str(folder / "model.safetensors")), load_file(str(hf / "model.safetensors"))
    dropped = sorted(set(source) - set(ours))
    kept = [file for file in checkpoint_files(folder) if file != "model.safetensors" or not dropped]
    assert sorted(written["unchanged"]) == sorted(kept)
    for file in kept:
        assert (hf / file).read_bytes() == (folder / file).read_bytes(), file
    assert set(checkpoint_files(hf)) == set(checkpoint_files(folder)) | OURS
    assert all(np.array_equal(ours[tensor], source[tensor]) for tensor in ours)
    assert not set(ours) - set(source)
    expected = {  # what the import does not keep: buffers, and the pooler no sentence embedding reads
        "masked-lm": [],
        "classifier": ["bert.embeddings.position_ids", "bert.embeddings.token_type_ids"],
        "sentence-transformers": ["embeddings.position_ids", "pooler.dense.bias", "pooler.dense.weight"],
    }
    assert dropped == expected[name]


def test_the_model_card_says_what_the_checkpoint_does(round_trip):
    name, _, _, hf, _, _ = round_trip
    card = (hf / "README.md").read_text(encoding="utf-8")
    pipeline = {
        "masked-lm": "fill-mask",
        "classifier": "text-classification",
        "sentence-transformers": "feature-extraction",
    }
    assert f"pipeline_tag: {pipeline[name]}" in card and "- bert" in card
    assert "generation_config.json" not in card and not (hf / "generation_config.json").exists()
    if name == "classifier":
        config = json.loads((hf / "config.json").read_text(encoding="utf-8"))
        assert config["id2label"] == {"0": "everyday", "1": "parting", "2": "love"}


def test_new_labels_are_written_into_config_json(round_trip, tmp_path):
    name, _, run, _, _, _ = round_trip
    if name != "classifier":
        pytest.skip("a classifier's labels")
    config = runs.RunConfig.read(run)
    relabelled = dict(config.pretrained, labels=["a", "b", "c"], problem_type="single_label_classification")
    config.replace(pretrained=relabelled).write(run)
    try:
        written = export_checkpoint(run, tmp_path / "hf")
    finally:
        config.write(run)
    data = json.loads((tmp_path / "hf" / "config.json").read_text(encoding="utf-8"))
    assert "config.json" not in written["unchanged"]
    assert data["id2label"] == {"0": "a", "1": "b", "2": "c"} and data["label2id"] == {"a": 0, "b": 1, "c": 2}
    assert data["problem_type"] == "single_label_classification" and data["transformers_version"] == "4.8.2"
