"""`export.load` of an imported BERT: an `Encoder` that embeds, classifies and fills masks as the Python libraries do.

References: sentence-transformers' `encode` and transformers' fill-mask and
text-classification pipelines, run by tests/data/make_bert_gpt2_layouts.py
on the folders of tests/data/layouts/ (a sentence-transformers BertModel of
2021 and its pooling variants, a BertForPreTraining, a
BertForSequenceClassification). The tests need none of those libraries.
"""

import json
import warnings

import numpy as np
import pytest
from checkpoint_layouts import LAYOUTS, SBERT_VARIANTS, assemble, sbert_variant, to_float16

from keras_transformer import export
from keras_transformer.engines.xla.encoder import Encoder
from keras_transformer.errors import KerasTransformerWarning
from keras_transformer.pretrained import import_pretrained, sentence_embedding
from keras_transformer.pretrained.checkpoints import Checkpoint


def _reference(name):
    folder = LAYOUTS / name
    return json.loads((folder / "reference.json").read_text(encoding="utf-8")), np.load(
        folder / "reference_outputs.npz"
    )


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("encoders")


@pytest.fixture(scope="module")
def sbert(work):
    """`{variant: Encoder}` of each sentence-transformers variant (and float16).

    The variants differ from `mean-normalize` in their pooling files alone:
    imported, it gives the model and the tokenizer, and each other variant's
    settings are what the import reads of its own folder
    (`sentence_embedding.settings`, which the import records). float16 has
    weights of its own: it is imported whole.
    """
    out = {}
    for name in ("mean-normalize", "float16"):
        folder = sbert_variant("mean-normalize", work / name)
        if name == "float16":
            to_float16(folder)
        import_pretrained(folder, work / f"{name}-run")
        out[name] = export.load(work / f"{name}-run")
    base = out["mean-normalize"]
    for name in SBERT_VARIANTS:
        folder = sbert_variant(name, work / f"{name}-folder")
        record = {"sentence_embedding": sentence_embedding.settings(Checkpoint(folder), base.model.config)}
        out.setdefault(name, Encoder(base.model, base.tokenizer, record, name=folder))
    return out


@pytest.fixture(scope="module")
def head_runs(work):
    out = {}
    for name in ("bert-pretraining", "bert-classifier"):
        import_pretrained(assemble(LAYOUTS / name, {}, work / name), work / f"{name}-run")
        out[name] = work / f"{name}-run"
    return out


@pytest.fixture(scope="module")
def heads(head_runs):
    return {name: export.load(path) for name, path in head_runs.items()}


@pytest.mark.parametrize("variant", [*SBERT_VARIANTS, "float16"])
def test_embeddings_equal_sentence_transformers(sbert, variant):
    expected, outputs = _reference("sbert")
    encoder = sbert[variant]
    assert isinstance(encoder, Encoder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KerasTransformerWarning)  # the plain checkpoint's, tested below
        embeddings = encoder.embed(expected["texts"])
    assert embeddings.dtype == np.float32 and embeddings.shape == outputs[f"{variant}_embeddings"].shape
    np.testing.assert_allclose(embeddings, outputs[f"{variant}_embeddings"], rtol=0, atol=1e-4)
    assert encoder.embedding["max_length"] == expected[f"{variant}_max_seq_length"]


def test_the_run_records_the_folders_pooling_and_truncates_as_it_says(sbert):
    expected, _ = _reference("sbert")
    encoder = sbert["mean-normalize"]
    assert encoder.head == "none"
    settings = {key: encoder.embedding[key] for key in ("pooling", "normalize", "max_length", "source")}
    assert settings == {"pooling": ["mean"], "normalize": True, "max_length": 256, "source": "modules.json"}
    assert encoder.tokenizer.encode(expected["texts"], max_length=256) == expected["ids"]
    assert len(expected["ids"][-1]) == 256  # the long text, cut as sentence-transformers cuts it
    norms = np.linalg.norm(encoder.embed(expected["texts"][:3]), axis=-1)
    np.testing.assert_allclose(norms, 1.0, rtol=0, atol=1e-6)


def test_a_plain_checkpoint_embeds_by_mean_pooling_and_says_so_once(sbert):
    plain = sbert["plain"]
    assert plain.embedding["source"] is None
    encoder = Encoder(plain.model, plain.tokenizer, {"sentence_embedding": plain.embedding})  # not warned yet
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = encoder.embed(["오늘 너무 힘들었어"])
        encoder.embed(["고마워 정말"])
    messages = [str(w.message) for w in caught if issubclass(w.category, KerasTransformerWarning)]
    assert len(messages) == 1 and "mean of its token states" in messages[0]
    assert first.shape == (1, 32)


def test_an_empty_list_embeds_to_no_rows_and_a_string_is_refused(sbert):
    encoder = sbert["mean-normalize"]
    assert encoder.embed([]).shape == (0, 32)
    with pytest.raises(ValueError, match="a list of strings"):
        encoder.embed("one string")
    with pytest.raises(ValueError, match=r"texts\[1\] contains a NUL byte"):
        encoder.embed(["fine", "a\0b"])


def test_a_run_with_a_head_embeds_its_hidden_states_as_sentence_transformers(heads):
    expected, outputs = _reference("bert-pretraining")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KerasTransformerWarning)  # no sentence-transformers folder: mean pooling
        embeddings = heads["bert-pretraining"].embed(expected["embedded"])
    np.testing.assert_allclose(embeddings, outputs["embeddings"], rtol=0, atol=1e-4)


def test_classify_equals_the_text_classification_pipeline(heads):
    expected, _ = _reference("bert-classifier")
    encoder = heads["bert-classifier"]
    results = encoder.classify(expected["texts"] + [tuple(pair) for pair in expected["pairs"]])
    assert len(results) == len(expected["classify"]) == 7
    for got, want in zip(results, expected["classify"]):
        assert [row["label"] for row in got] == [row["label"] for row in want]
        np.testing.assert_allclose([row["score"] for row in got], [row["score"] for row in want], rtol=0, atol=1e-4)
    assert len({tuple(row["label"] for row in result) for result in results}) > 1  # not one ranking for all


def test_fill_mask_equals_the_fill_mask_pipeline(heads):
    expected, _ = _reference("bert-pretraining")
    encoder = heads["bert-pretraining"]
    results = encoder.fill_mask(expected["texts"], top_k=5)
    for got, want in zip(results, expected["fill_mask"], strict=True):
        rows = [got] if isinstance(got[0], dict) else got
        wanted = [want] if isinstance(want[0], dict) else want
        assert len(rows) == len(wanted)
        for candidates, reference in zip(rows, wanted):
            assert [{k: c[k] for k in ("token", "token_str", "sequence")} for c in candidates] == [
                {k: r[k] for k in ("token", "token_str", "sequence")} for r in reference
            ]
            np.testing.assert_allclose([c["score"] for c in candidates], [r["score"] for r in reference], atol=1e-5)
    assert any(not isinstance(row[0], dict) for row in results)  # a text of two masks: a list per mask


@pytest.mark.parametrize(
    "run, call, message",
    [
        ("bert-pretraining", lambda e: e.fill_mask(["no mask here"]), r"texts\[0\] holds no \[MASK\]"),
        ("bert-classifier", lambda e: e.fill_mask(["[MASK]"]), "has a classifier head: fill_mask needs"),
        ("bert-pretraining", lambda e: e.classify(["a text"]), "has a masked-LM head: classify needs"),
        ("bert-pretraining", lambda e: e.fill_mask(["[MASK]"], top_k=0), "top_k=0 must be an int from 1"),
        ("bert-classifier", lambda e: e.classify([("a", "b", "c")]), r"texts\[0\] must be a text or a pair"),
        ("bert-classifier", lambda e: e.classify(["x " * 600]), r"texts\[0\] is 602 tokens long; the model reads 512"),
    ],
)
def test_what_a_run_cannot_answer_is_one_line(heads, run, call, message):
    with pytest.raises(ValueError, match=message) as error:
        call(heads[run])
    assert "\n" not in str(error.value)


def test_export_load_refuses_decoding_options_and_other_engines_for_an_encoder(head_runs):
    with pytest.raises(ValueError, match="`beam_size` applies to translators and generators"):
        export.load(head_runs["bert-classifier"], beam_size=4)
    with pytest.raises(ValueError, match="opens with the xla engine"):
        export.load(head_runs["bert-classifier"], "ctranslate2")
    assert export.load(head_runs["bert-classifier"], batch_size=2).batch_size == 2
