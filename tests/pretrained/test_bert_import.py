"""BERT checkpoints imported into the encoder-only model give transformers' numbers.

The fixture in tests/data/bert/ is a tiny random `BertForMaskedLM` that
transformers wrote with `save_pretrained`, with a lower-casing WordPiece
vocabulary, beside what transformers computed with it
(tests/data/make_gpt2_bert_fixtures.py rebuilds both; the tests need neither
torch nor transformers).
"""

import json
import pathlib
import shutil

import keras
import numpy as np
import pytest

from keras_transformer import runs
from keras_transformer.models import EncoderOnlyModel
from keras_transformer.pretrained import import_pretrained

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "data" / "bert"
REFERENCE = json.loads((FIXTURE / "reference.json").read_text(encoding="utf-8"))
LOGITS = np.load(FIXTURE / "reference_logits.npz")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("bert") / "run"
    import_pretrained(FIXTURE, path)
    return runs.open_run(path)


@pytest.fixture(scope="module")
def saved(run):
    return keras.saving.load_model(run.path / runs.MODEL, compile=False)


def test_masked_lm_logits_equal_transformers_through_the_saved_model(saved):
    assert isinstance(saved, EncoderOnlyModel)
    for index in range(len(REFERENCE["texts"])):
        logits = keras.ops.convert_to_numpy(saved(LOGITS[f"ids_{index}"]))
        np.testing.assert_allclose(logits, LOGITS[f"logits_{index}"], rtol=0, atol=1e-4)


def test_a_pair_of_segments_gives_transformers_logits(saved):
    logits = saved({"token_ids": LOGITS["pair_ids"], "segment_ids": LOGITS["pair_segments"]})
    np.testing.assert_allclose(keras.ops.convert_to_numpy(logits), LOGITS["pair_logits"], rtol=0, atol=1e-4)


def test_the_top_1_at_every_mask_equals_transformers(run, saved):
    tokenizer = run.tokenizers.source
    ids = tokenizer.tokenize(REFERENCE["texts"]).to_list()
    assert ids == REFERENCE["ids"]
    top = []
    for row in ids:
        logits = keras.ops.convert_to_numpy(saved(np.array([row], "int32")))[0]
        top.append([int(logits[i].argmax()) for i, token in enumerate(row) if token == tokenizer.mask_id])
    assert top == REFERENCE["top1_at_masks"] and sum(map(len, top)) >= 5


def test_the_same_ids_come_from_vocab_txt(tmp_path):
    folder = tmp_path / "bert"
    shutil.copytree(FIXTURE, folder, ignore=shutil.ignore_patterns("tokenizer.json"))
    import_pretrained(folder, tmp_path / "run")
    tokenizer = runs.open_run(tmp_path / "run", models=False).tokenizers.source
    assert tokenizer.tokenize(REFERENCE["texts"]).to_list() == REFERENCE["ids"]
    strings = [s.decode("utf-8") for s in tokenizer.detokenize(np.array([REFERENCE["ids"][4]])).numpy()]
    assert strings == REFERENCE["decoded"][4:5]


def test_the_run_records_berts_special_ids_and_head(run):
    model = run.config.model
    vocab = run.tokenizers.source.vocab
    assert (model.architecture, model.encoder_head, model.segment_vocab_size) == ("encoder_only", "masked_lm", 2)
    assert (model.start_id, model.end_id, model.pad_id) == (vocab["[CLS]"], vocab["[SEP]"], vocab["[PAD]"])
    assert run.config.pretrained["model_type"] == "bert"


def _with_model_type(text, kind):
    data = json.loads(text)
    return json.dumps({**data, "model": {**data["model"], "type": kind}})


def _edited(tmp_path, name, edit, drop=()):
    folder = tmp_path / "bert"
    shutil.copytree(FIXTURE, folder, ignore=shutil.ignore_patterns(*drop))
    path = folder / name
    path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    "name, edit, drop, message",
    [
        ("config.json", lambda t: t.replace('"hidden_size": 32', '"hidden_size": 64'), (), "`hidden_size` is 64"),
        (
            "config.json",
            lambda t: t.replace(
                '"model_type": "bert"', '"model_type": "bert", "position_embedding_type": "relative_key"'
            ),
            (),
            "position_embedding_type",
        ),
        (
            "vocab.txt",
            lambda t: "\n".join(t.splitlines()[:-5]) + "\n",
            ("tokenizer.json",),
            "does not give the model's 900",
        ),
        ("tokenizer.json", lambda t: _with_model_type(t, "Unigram"), (), "'Unigram'"),
    ],
)
def test_a_checkpoint_that_does_not_hold_together_is_one_line(tmp_path, name, edit, drop, message):
    folder = _edited(tmp_path, name, edit, drop)
    with pytest.raises(ValueError, match=message) as error:
        import_pretrained(folder, tmp_path / "run")
    assert "\n" not in str(error.value) and not (tmp_path / "run").exists()
