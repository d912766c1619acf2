"""GPT-2 and BERT checkpoints as older transformers laid them out import to transformers' numbers.

The folders in tests/data/layouts/ were rewritten by
tests/data/make_bert_gpt2_layouts.py into the layouts of 2019-2022 (a
`GPT2Model` without prefix or `lm_head`, causal-mask and `position_ids`
buffers, tied copies, generation settings in config.json, vocabulary files
alone, `BertForPreTraining`, `BertForSequenceClassification`, float16,
`pytorch_model.bin`), and transformers computed their references on each
folder as written. The tests need neither torch nor transformers.
"""

import json

import keras
import numpy as np
import pytest
from checkpoint_layouts import BIN_VARIANTS, LAYOUTS, assemble, legacy_norm_names, sbert_variant, to_float16
from safetensors.numpy import load_file, save_file

from keras_transformer import runs
from keras_transformer.decoding import decode, search_for
from keras_transformer.pretrained import import_pretrained

from fake_hub import FakeHub


def _reference(name):
    folder = LAYOUTS / name
    return json.loads((folder / "reference.json").read_text(encoding="utf-8")), np.load(
        folder / "reference_outputs.npz"
    )


VARIANTS = {
    "gpt2-model": ("gpt2-model", {}),
    "gpt2-lmhead": ("gpt2-lmhead", {}),
    "gpt2-lmhead-bin": ("gpt2-lmhead", BIN_VARIANTS["gpt2-lmhead"]),
    "gpt2-lmhead-float16": ("gpt2-lmhead", "float16"),
    "bert-pretraining": ("bert-pretraining", {}),
    "bert-pretraining-bin": ("bert-pretraining", BIN_VARIANTS["bert-pretraining"]),
    "bert-classifier": ("bert-classifier", {}),
    "bert-classifier-gamma": ("bert-classifier", "gamma"),  # LayerNorm.gamma and .beta, as the oldest files
}


class _Imports(dict):
    """`{variant: Run}` of the folders of `VARIANTS`, each imported the first time a test asks for it."""

    def __init__(self, work):
        super().__init__()
        self.work = work

    def __missing__(self, name):
        base, files = VARIANTS[name]
        folder = assemble(LAYOUTS / base, files if isinstance(files, dict) else {}, self.work / name)
        if files == "float16":
            to_float16(folder)
        if files == "gamma":
            legacy_norm_names(folder)
        import_pretrained(folder, self.work / f"{name}-run")
        self[name] = runs.open_run(self.work / f"{name}-run")
        return self[name]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    return _Imports(tmp_path_factory.mktemp("layouts"))


# The variants that test the checkpoint readers more than the families (float16, a second .bin, legacy norm
# names; tests/pretrained/test_checkpoint_files.py holds those readers): with `-m slow`.
SLOW = pytest.mark.slow


def _logits(run, ids):
    return keras.ops.convert_to_numpy(run.model(np.array([ids], "int32")))


@pytest.mark.parametrize(
    "name, reference, variant",
    [
        ("gpt2-model", "gpt2-model", "float32"),
        ("gpt2-lmhead", "gpt2-lmhead", "float32"),
        ("gpt2-lmhead-bin", "gpt2-lmhead", "float32"),
        pytest.param("gpt2-lmhead-float16", "gpt2-lmhead", "float16", marks=SLOW),
    ],
)
def test_gpt2_logits_equal_transformers_on_each_layout(imported, name, reference, variant):
    expected, outputs = _reference(reference)
    run = imported[name]
    assert run.tokenizers.source.tokenize(expected["prompts"]).to_list() == expected["prompt_ids"]
    for index in range(3):
        logits = _logits(run, expected["prompt_ids"][index])
        np.testing.assert_allclose(logits, outputs[f"{variant}_logits_{index}"], rtol=0, atol=1e-4)


@pytest.mark.parametrize("name, variant", [("gpt2-model", "float32"), ("gpt2-lmhead", "float32")])
def test_gpt2_generates_as_transformers_with_the_settings_in_config_json(imported, name, variant):
    expected, _ = _reference(name)
    run = imported[name]
    assert run.config.decoding.beam_size == expected[f"{variant}_num_beams"]  # gpt2-lmhead: 4, from config.json
    decoding = run.config.decoding
    search = search_for(decoding.beam_size, decoding.alpha, **decoding.search_options())
    prompts, end = expected["prompt_ids"], run.config.model.end_id
    ids = np.full((len(prompts), max(map(len, prompts))), run.config.model.pad_id, "int32")  # one batch, right-padded
    for row, prompt in enumerate(prompts):
        ids[row, : len(prompt)] = prompt
    best = keras.ops.convert_to_numpy(decode(run.model, ids, search, max_length=10).ids)[:, 0].tolist()
    assert [row[: row.index(end) + 1] if end in row else row for row in best] == expected[f"{variant}_generated_ids"]


@pytest.mark.parametrize("name", ["bert-pretraining", pytest.param("bert-pretraining-bin", marks=SLOW)])
def test_bert_for_pre_training_gives_transformers_masked_lm_logits(imported, name):
    expected, outputs = _reference("bert-pretraining")
    run = imported[name]
    assert run.config.model.encoder_head == "masked_lm"
    assert run.tokenizers.source.tokenize(expected["texts"]).to_list() == expected["ids"]  # from vocab.txt alone
    for index in range(3):
        np.testing.assert_allclose(_logits(run, expected["ids"][index]), outputs[f"logits_{index}"], rtol=0, atol=1e-4)


@pytest.mark.parametrize("name", ["bert-classifier", pytest.param("bert-classifier-gamma", marks=SLOW)])
def test_a_classifier_gives_transformers_logits_and_keeps_its_labels(imported, name):
    expected, outputs = _reference("bert-classifier")
    run = imported[name]
    model, tokenizer = run.config.model, run.tokenizers.source
    assert (model.encoder_head, model.num_classes) == ("classifier", 3)
    assert run.config.pretrained["labels"] == ["everyday", "parting", "love"]
    assert (model.start_id, model.end_id, model.pad_id) == (101, 102, 0)  # bert-base-uncased's ids
    ids = tokenizer.encode(expected["texts"])
    for index, row in enumerate(ids):
        np.testing.assert_allclose(_logits(run, row), outputs[f"logits_{index}"], rtol=0, atol=1e-4)


def _edited_tensors(tmp_path, name, edit):
    folder = assemble(LAYOUTS / name, {}, tmp_path / name)
    path = folder / "model.safetensors"
    tensors = load_file(str(path))
    edit(tensors)
    save_file(tensors, str(path))
    return folder


def _bump(tensors, name):
    tensors[name] = tensors[name].copy()
    tensors[name][3] += 0.5


@pytest.mark.parametrize(
    "name, edit, message",
    [
        ("gpt2-lmhead", lambda t: _bump(t, "lm_head.weight"), "`lm_head.weight` differs from `transformer.wte.weight`"),
        (
            "bert-pretraining",
            lambda t: _bump(t, "cls.predictions.decoder.weight"),
            "`cls.predictions.decoder.weight` differs from `bert.embeddings.word_embeddings.weight`",
        ),
        (
            "bert-pretraining",
            lambda t: _bump(t, "cls.predictions.decoder.bias"),
            "`cls.predictions.decoder.bias` differs from `cls.predictions.bias`",
        ),
        ("bert-classifier", lambda t: t.update(extra=np.zeros(3, np.float32)), "holds a tensor `extra`"),
    ],
)
def test_a_tied_copy_that_differs_or_an_unknown_tensor_is_one_line(tmp_path, name, edit, message):
    folder = _edited_tensors(tmp_path, name, edit)
    with pytest.raises(ValueError, match=message) as error:
        import_pretrained(folder, tmp_path / "run")
    assert "\n" not in str(error.value) and not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "id2label, message",
    [({"0": "a", "1": "b"}, "must name each of the classifier's 3 classes"), ({"0": "a", "1": "b", "2": 7}, "string")],
)
def test_labels_that_do_not_fit_the_classifier_are_one_line(tmp_path, id2label, message):
    folder = assemble(LAYOUTS / "bert-classifier", {}, tmp_path / "classifier")
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    (folder / "config.json").write_text(json.dumps({**config, "id2label": id2label}), encoding="utf-8")
    with pytest.raises(ValueError, match=message) as error:
        import_pretrained(folder, tmp_path / "run")
    assert "\n" not in str(error.value) and not (tmp_path / "run").exists()


def test_a_sentence_transformers_repository_imports_from_the_hub_with_its_pooling(tmp_path, monkeypatch):
    pytest.importorskip("huggingface_hub")
    import huggingface_hub.constants

    folder = sbert_variant("mean-normalize", tmp_path / "sbert")
    (tmp_path / "cache").mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    with FakeHub(sorted(p for p in folder.rglob("*") if p.is_file()), root=folder) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        record = import_pretrained("hf://org/sbert", tmp_path / "run").pretrained
    gets = [r.split("/", 5)[-1] for r in hub.requests if r.startswith("GET /org/sbert/resolve/")]  # its FILE
    fetched = sorted(set(gets))
    assert fetched == [  # what the import reads, the pooling's folder included; not config_sentence_transformers.json
        "1_Pooling/config.json",
        "config.json",
        "model.safetensors",
        "modules.json",
        "sentence_bert_config.json",
        "special_tokens_map.json",
        "tokenizer_config.json",
        "vocab.txt",
    ]
    settings = record["sentence_embedding"]
    assert (settings["pooling"], settings["normalize"], settings["max_length"]) == (["mean"], True, 256)
    assert "1_Pooling/config.json" in record["files"] and record["model_type"] == "bert"
