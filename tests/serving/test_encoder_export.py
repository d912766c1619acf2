"""`export` of an imported BERT: a SavedModel of strings with classify, fill_mask and embed, and `serve` of it.

The SavedModel holds the tokenizer as TensorFlow ops (`wordpiece_graph`),
checked here against Hugging Face's `tokenizers` (what transformers runs) on
the whole bundled chatbot corpus and on texts that exercise its
normalization; its signatures are checked against transformers' pipelines
(the references of tests/data/make_bert_gpt2_layouts.py) and against the
run's `Encoder`.
"""

import csv
import json
import warnings

import numpy as np
import pytest
import tensorflow as tf
from checkpoint_layouts import LAYOUTS, assemble

from keras_transformer import export, runs
from keras_transformer.errors import KerasTransformerWarning
from keras_transformer.export_formats import export_run
from keras_transformer.pretrained import import_pretrained
from keras_transformer.tokenizers.huggingface import HuggingFaceTokenizer
from keras_transformer.tokenizers.wordpiece_graph import graph_form

CHATBOT = runs.__file__.rsplit("/", 2)[0] + "/data/korean_chatbot/ChatbotData.csv"
TRICKY = [
    "The Quick brown fox, Émile said. 😀",  # capitals and accents, lower-cased and stripped
    "ÀÉÎÕÜ ñ ç ß ẞ Σίσυφος ΣΑΣ",  # Rust's lower-casing, not case folding: ß stays, ẞ becomes ß
    "ﬁ ① ｆｕｌｌ　ｗｉｄｔｈ …",  # no NFKC: ligatures, circled digits, full-width letters stay themselves
    "ㅠㅠ ㅋㅋ 나는 좋은데 ….",  # compatibility jamo, which NFKC would change
    "中文字符 日本語 한국어",  # CJK ideographs each a word
    "a\tb\nc\u00a0d\u200be tab\u0085next",  # whitespace and control characters
    "x" * 150 + " " + "한" * 101 + " " + "ㅋ" * 34,  # words over 100 characters (not bytes) are [UNK]
    "a[MASK]b [CLS][SEP] [mask] [MASK ]",  # special tokens cut from the raw text first
    "",
    "don't stop!! émile's café-au-lait",
]


def _tokenizer(folder, name):
    size = len((LAYOUTS / "bert-classifier" / "vocab.txt").read_text(encoding="utf-8").splitlines())
    ids = dict(pad_id=0, start_id=101, end_id=102, mask_id=103)
    if name == "tokenizer.json":
        return HuggingFaceTokenizer.from_tokenizer_file(folder / name, size, **ids)
    return HuggingFaceTokenizer.from_wordpiece_file(folder / name, size, **ids)


@pytest.fixture(scope="module", params=["tokenizer.json", "vocab.txt"])
def tokenizer(request):
    """The fixtures' WordPiece as read from a tokenizer.json and from a vocab.txt (a BertProcessing frame)."""
    return _tokenizer(LAYOUTS / "bert-classifier", request.param)


def test_the_graph_tokenizer_gives_the_hugging_face_ids_on_the_corpus_and_hard_texts(tokenizer):
    with open(CHATBOT, encoding="utf-8") as handle:
        rows = list(csv.reader(handle))[1:]
    texts = TRICKY + [question for question, _, _ in rows] + [answer for _, answer, _ in rows]
    graph = graph_form(tokenizer)
    ids, segments = graph.encode(tf.constant(texts))
    expected = tokenizer.encode(texts)
    assert ids.to_list() == expected  # 23,656 texts
    assert set(segments.flat_values.numpy().tolist()) == {0}
    assert expected[6][1:4] == [100, 100, 100] and 103 in expected[7]  # the long words, the mask


def test_pairs_and_truncation_are_framed_as_transformers_frames_them(tokenizer):
    graph = graph_form(tokenizer)
    pairs = [("오늘 너무 힘들었어", "많이 힘들었겠어요"), ("a [MASK] b", "c")]
    ids, segments = graph.encode(tf.constant([a for a, _ in pairs]), tf.constant([b for _, b in pairs]))
    assert (ids.to_list(), segments.to_list()) == tuple(tokenizer.encode(pairs, segments=True))
    single, _ = graph.encode(tf.constant(["커피 마시고 싶다"]), tf.constant([""]))  # no second text: one segment
    assert single.to_list() == tokenizer.encode(["커피 마시고 싶다"])
    cut, _ = graph.encode(tf.constant(["오늘 너무 힘들었어 주말에 뭐 하지?"]), max_pieces=4)
    assert cut.to_list() == tokenizer.encode(["오늘 너무 힘들었어 주말에 뭐 하지?"], max_length=6)


def test_decoding_is_the_tokenizers_own(tokenizer):
    graph = graph_form(tokenizer)
    rows = tokenizer.encode(TRICKY + ["don 't do not go , ok ? I 'm here"])
    for skip in (True, False):
        ours = [text.decode("utf-8") for text in graph.decode(tf.ragged.constant(rows), skip).numpy().tolist()]
        assert ours == tokenizer.decode(rows, skip_special_tokens=skip)


def test_a_tokenizer_without_a_tensorflow_form_is_one_line(tokenizer):
    data = json.loads(tokenizer.tokenizer_json)
    data["normalizer"] = {"type": "NFKC"}
    other = HuggingFaceTokenizer(json.dumps(data), 0, 101, 102)
    with pytest.raises(ValueError, match="its normalizer is a NFKC, not BERT's: it has no TensorFlow form"):
        graph_form(other)


# -- the SavedModel --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """`{name: (run, loaded SavedModel, export's line, ServedModel)}` of the classifier and BertForPreTraining fixtures.

    Each export is loaded once, by `ServedModel` (which `serve` serves), and its module tested directly too.
    """
    from keras_transformer.serving.signatures import ServedModel

    work, out = tmp_path_factory.mktemp("encoder-exports"), {}
    for name in ("bert-classifier", "bert-pretraining"):
        run = work / f"{name}-run"
        import_pretrained(assemble(LAYOUTS / name, {}, work / name), run)
        line = export_run(run, work / f"{name}-export")
        served = ServedModel(work / f"{name}-export")
        out[name] = (run, served.module, line, served)
    return out


def _reference(name):
    folder = LAYOUTS / name
    return json.loads((folder / "reference.json").read_text(encoding="utf-8")), np.load(
        folder / "reference_outputs.npz"
    )


def _strings(tensor):
    return [[value.decode("utf-8") for value in row] for row in tensor.numpy().tolist()]


def test_an_export_has_the_signatures_of_its_head(exported):
    for name, names in (("bert-classifier", "classify, classify_pairs, embed"), ("bert-pretraining", "fill_mask")):
        _, module, line, _ = exported[name]
        assert f"(signatures {names}" in line
        default = "classify" if name == "bert-classifier" else "fill_mask"
        assert module.signatures["serving_default"].structured_outputs.keys() == (
            module.signatures[default].structured_outputs.keys()
        )
    assert sorted(exported["bert-pretraining"][1].signatures) == ["embed", "fill_mask", "serving_default"]


def test_classify_equals_the_text_classification_pipeline(exported):
    expected, _ = _reference("bert-classifier")
    module = exported["bert-classifier"][1]
    single = module.signatures["classify"](texts=tf.constant(expected["texts"]))
    first, second = zip(*expected["pairs"])
    pairs = module.signatures["classify_pairs"](texts=tf.constant(first), text_pairs=tf.constant(second))
    labels = _strings(single["labels"]) + _strings(pairs["labels"])
    scores = np.concatenate([single["scores"].numpy(), pairs["scores"].numpy()])
    assert labels == [[row["label"] for row in result] for result in expected["classify"]]
    wanted = [[row["score"] for row in result] for result in expected["classify"]]
    np.testing.assert_allclose(scores, wanted, rtol=0, atol=1e-4)


def test_fill_mask_equals_the_fill_mask_pipeline_at_every_mask(exported):
    expected, _ = _reference("bert-pretraining")
    out = exported["bert-pretraining"][1].signatures["fill_mask"](texts=tf.constant(expected["texts"]))
    assert out["scores"].shape[1:] == (2, 5)  # the most masks of a text, then the top 5
    for index, want in enumerate(expected["fill_mask"]):
        rows = [want] if isinstance(want[0], dict) else want
        assert int(out["mask_counts"][index]) == len(rows)
        for mask, candidates in enumerate(rows):
            got = {key: _strings(out[key][index])[mask] for key in ("token_strs", "sequences")}
            assert out["tokens"][index, mask].numpy().tolist() == [c["token"] for c in candidates]
            assert got["token_strs"] == [c["token_str"] for c in candidates]
            assert got["sequences"] == [c["sequence"] for c in candidates]
            np.testing.assert_allclose(out["scores"][index, mask], [c["score"] for c in candidates], atol=1e-5)
        if len(rows) == 1:  # a text of one mask: the second row is padding
            assert out["tokens"][index, 1].numpy().tolist() == [-1] * 5


def test_embed_equals_the_runs_encoder_and_sentence_transformers(exported):
    expected, outputs = _reference("bert-pretraining")
    run, module, _, _ = exported["bert-pretraining"]
    embeddings = module.signatures["embed"](texts=tf.constant(expected["embedded"]))["embeddings"].numpy()
    np.testing.assert_allclose(embeddings, outputs["embeddings"], rtol=0, atol=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KerasTransformerWarning)
        np.testing.assert_allclose(embeddings, export.load(run).embed(expected["embedded"]), rtol=0, atol=1e-5)


def test_bad_calls_fail_with_a_message_that_says_why(exported):
    module = exported["bert-pretraining"][1]
    with pytest.raises(tf.errors.InvalidArgumentError, match="a text holds no mask token"):
        module.signatures["fill_mask"](texts=tf.constant(["[MASK] here", "no mask here"]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="longer than the 512 tokens the model reads"):
        exported["bert-classifier"][1].signatures["classify"](texts=tf.constant(["가 " * 600]))
    run = exported["bert-classifier"][0]
    with pytest.raises(ValueError, match="it has no search, so `beam_size` does not apply") as error:
        export_run(run, run.parent / "never", beam_size=4)
    assert "\n" not in str(error.value) and not (run.parent / "never").exists()


def test_serve_answers_predict_in_tf_servings_shapes(exported):
    from fastapi.testclient import TestClient

    from keras_transformer.serving import rest

    served = exported["bert-classifier"][3]
    batcher = rest.build_batcher(served, max_batch_size=8, timeout_ms=1.0)
    with TestClient(rest.create_app(served, batcher, "bert")) as client:
        url = "/v1/models/bert:predict"
        rows = client.post(url, json={"instances": ["오늘 너무 힘들었어", "고마워 정말"]}).json()["predictions"]
        assert [sorted(row) for row in rows] == [["labels", "scores"]] * 2 and len(rows[0]["labels"]) == 3
        pair = {"texts": "오늘 너무 힘들었어", "text_pairs": "많이 힘들었겠어요"}
        answer = client.post(url, json={"signature_name": "classify_pairs", "instances": [pair]}).json()
        wanted = [row["label"] for row in _reference("bert-classifier")[0]["classify"][5]]
        assert answer["predictions"][0]["labels"] == wanted
        columns = client.post(url, json={"signature_name": "embed", "inputs": ["a", "b"]}).json()["outputs"]
        assert np.asarray(columns).shape == (2, 32)
        too_long = client.post(url, json={"instances": ["가 " * 600]})
        assert too_long.status_code == 400 and "longer than the 512 tokens" in too_long.json()["error"]
