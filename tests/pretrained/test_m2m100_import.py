"""M2M100 and NLLB-200 checkpoints imported into this package's layers give transformers' numbers and ids.

The fixtures in tests/data/m2m100/ are a tiny `M2M100ForConditionalGeneration`
with an `M2M100Tokenizer` (`m2m100/`) and one with an `NllbTokenizer`
(`nllb/`), written by transformers' `save_pretrained`, beside what
transformers computed with them (tests/data/m2m100/make_fixtures.py rebuilds
both; the tests need neither torch nor transformers). Their configuration is
the real checkpoints' where size allows: 1024 positions, the ids `<s>` 0
`<pad>` 1 `</s>` 2 `<unk>` 3, the language tokens after the pieces.
"""

import json
import pathlib
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import runs
from keras_transformer.pretrained import import_pretrained
from keras_transformer.tokenizers import load_tokenizer

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "m2m100"
KINDS = ("m2m100", "nllb")


@pytest.fixture(scope="module", params=KINDS)
def imported(request, tmp_path_factory):
    """`(fixture folder, run directory, reference)` of each fixture, imported once."""
    folder = FIXTURES / request.param
    run = tmp_path_factory.mktemp(request.param) / "run"
    import_pretrained(folder, run)
    reference = json.loads((folder / "reference.json").read_text(encoding="utf-8"))
    return folder, run, reference


def test_teacher_forced_logits_equal_transformers_at_every_position(imported):
    folder, run, reference = imported
    expected = np.load(folder / "reference_logits.npz")
    model = keras.saving.load_model(run / runs.MODEL, compile=False)
    for target in reference["targets"]:
        decoder_inputs = expected[f"{target}_decoder_input_ids"]
        assert (decoder_inputs == 1).any()  # padded rows: their positions and attention are transformers' too
        logits = model({"encoder_inputs": expected[f"{target}_input_ids"], "decoder_inputs": decoder_inputs})
        np.testing.assert_allclose(keras.ops.convert_to_numpy(logits), expected[f"{target}_logits"], atol=1e-4)


def test_model_is_pre_norm_with_fairseq_positions_and_tied_embeddings(imported):
    _, run, _ = imported
    config = runs.open_run(run).config.model
    assert (config.norm_first, config.position_layout, config.tie_output_embedding) == (True, "fairseq", True)
    assert (config.start_id, config.end_id, config.pad_id, config.max_length) == (2, 2, 1, 1024)


def test_ids_equal_transformers_tokenizer_with_language_codes(imported):
    _, run, reference = imported
    tokenizer = load_tokenizer(run / runs.SOURCE_TOKENIZER)
    pieces = tokenizer.tokenize(tf.constant(reference["sentences"])).to_list()
    source = tokenizer.language_id(reference["source_lang"])
    assert [[source, *ids, tokenizer.end_id] for ids in pieces] == reference["source_ids"]
    for target, expected in reference["targets"].items():
        language = tokenizer.language_id(target)
        assert [[language, *ids, tokenizer.end_id] for ids in pieces] == expected["target_ids"]


def test_detokenize_gives_transformers_strings(imported):
    _, run, reference = imported
    tokenizer = load_tokenizer(run / runs.TARGET_TOKENIZER)
    for expected in reference["targets"].values():
        ids = tf.ragged.constant(expected["greedy_ids"], dtype=tf.int32)
        assert [s.decode("utf-8") for s in tokenizer.detokenize(ids).numpy()] == expected["greedy"]


def test_tokenizer_files_are_kept_byte_for_byte(imported):
    folder, run, _ = imported
    tokenizer = load_tokenizer(run / runs.SOURCE_TOKENIZER)
    for name, data in tokenizer.files.items():
        assert (folder / name).read_bytes() == data


def test_license_is_recorded(imported):
    folder, run, _ = imported
    recorded = json.loads((run / "config.json").read_text(encoding="utf-8"))["pretrained"]["license"]
    assert recorded == {"m2m100": "mit", "nllb": "cc-by-nc-4.0"}[folder.name]


def test_languages_listed_as_special_are_dropped_from_text(tmp_path):
    """The Hub's M2M100 tokenizer configs list `__xx__` as special tokens: decoding then drops them."""
    folder = tmp_path / "m2m100"
    shutil.copytree(FIXTURES / "m2m100", folder)
    settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    settings["additional_special_tokens"] = ["__ko__", "__en__"]
    (folder / "tokenizer_config.json").write_text(json.dumps(settings), encoding="utf-8")
    import_pretrained(folder, tmp_path / "run")
    tokenizer = load_tokenizer(tmp_path / "run" / runs.TARGET_TOKENIZER)
    ko, en, de = (tokenizer.language_id(code) for code in ("ko", "en", "de"))
    text = tokenizer.detokenize(tf.ragged.constant([[ko, 603], [en, 603], [de, 603]])).numpy()
    plain = tokenizer.detokenize(tf.ragged.constant([[603]])).numpy()[0]
    assert text[0] == text[1] == plain
    assert text[2].startswith(b"__de__")


def test_import_prints_the_license_once(tmp_path, capsys):
    from keras_transformer.commands.cli import main

    assert main(["import", str(FIXTURES / "nllb"), "--output", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    assert err.count("cc-by-nc-4.0") == 1 and "non-commercial" in err


def test_embedding_rows_beyond_the_tokenizers_ids_translate(tmp_path):
    """NLLB-200 has 256,206 embedding rows for its tokenizer's 256,204 ids: the translator takes such a run."""
    from safetensors.numpy import load_file, save_file

    from keras_transformer import export

    folder = _copy_with(tmp_path, "nllb")
    tensors = load_file(folder / "model.safetensors")
    rows = tensors["model.shared.weight"].shape[0]
    for name in [n for n in tensors if n.endswith(("shared.weight", "embed_tokens.weight", "lm_head.weight"))]:
        tensors[name] = np.concatenate([tensors[name], np.zeros((2, tensors[name].shape[1]), np.float32)])
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    settings = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    (folder / "config.json").write_text(json.dumps({**settings, "vocab_size": rows + 2}), encoding="utf-8")
    import_pretrained(folder, tmp_path / "run")
    translator = export.load(tmp_path / "run", beam_size=1, max_length=8, source_lang="eng_Latn")
    assert len(translator.greedy(["A dog runs."], target_lang="fra_Latn").numpy()) == 1


def _copy_with(tmp_path, kind, remove=(), config=None):
    folder = tmp_path / kind
    shutil.copytree(FIXTURES / kind, folder)
    for name in remove:
        (folder / name).unlink()
    if config:
        settings = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        (folder / "config.json").write_text(json.dumps({**settings, **config}), encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    "kind, remove, config, named",
    [
        ("nllb", ["tokenizer.json"], None, "tokenizer.json"),
        ("m2m100", ["sentencepiece.bpe.model"], None, "sentencepiece.bpe.model"),
        ("m2m100", ["vocab.json"], None, "vocab.json"),
        ("nllb", [], {"model_type": "bart"}, "'bart' is not one keras-transformer imports"),
        ("nllb", [], {"model_type": "marian"}, "that a Marian model does not have"),
        ("m2m100", [], {"d_model": 64}, "d_model"),
    ],
)
def test_bad_checkpoints_are_one_line_and_write_nothing(tmp_path, kind, remove, config, named):
    folder = _copy_with(tmp_path, kind, remove, config)
    output = tmp_path / "run"
    with pytest.raises(ValueError) as error:
        import_pretrained(folder, output)
    message = str(error.value)
    assert "\n" not in message and named in message, message
    assert not output.exists() and sorted(p.name for p in tmp_path.iterdir()) == [kind]


def test_a_marian_checkpoint_labelled_m2m_100_is_refused(tmp_path):
    folder = tmp_path / "marian"
    shutil.copytree(FIXTURES.parent / "marian" / "shared", folder)
    settings = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    (folder / "config.json").write_text(json.dumps({**settings, "model_type": "m2m_100"}), encoding="utf-8")
    with pytest.raises(ValueError) as error:
        import_pretrained(folder, tmp_path / "run")
    assert "\n" not in str(error.value) and "M2M100" in str(error.value)
    assert not (tmp_path / "run").exists()
