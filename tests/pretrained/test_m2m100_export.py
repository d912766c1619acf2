"""`export --format transformers` of an M2M100 or NLLB-200 run: its checkpoint again, and a fine-tuned run's pair.

An import exported again is its source checkpoint file for file and
tensor for tensor, and imports back bit for bit; a run fine-tuned on one
pair (`train --source-lang --target-lang`) is written with the same
tokenizer files and that pair as the checkpoint's defaults (tokenizer_config.json's
`src_lang`/`tgt_lang`, generation_config.json's `forced_bos_token_id`).
transformers itself loads these exports in
tests/data/m2m100/check_transformers_export.py (not run here: it needs torch).
"""

import json
import pathlib
import shutil

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from keras_transformer import runs
from keras_transformer.commands import cli
from keras_transformer.config import ModelConfig
from keras_transformer.export import load
from keras_transformer.pretrained import export_checkpoint, import_pretrained
from keras_transformer.pretrained.families import m2m100_export

import own_runs

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "m2m100"
REFERENCES = ("reference.json", "reference_logits.npz")
PAIR = {"m2m100": ("ko", "en"), "nllb": ("kor_Hang", "eng_Latn")}


def checkpoint_files(folder):
    """The names of a fixture's checkpoint files (its reference outputs left out)."""
    return sorted(path.name for path in folder.iterdir() if path.name not in REFERENCES)


def weights(run):
    return [keras.ops.convert_to_numpy(w) for w in keras.saving.load_model(run / runs.MODEL, compile=False).weights]


@pytest.fixture(scope="module", params=["m2m100", "nllb"])
def round_trip(request, tmp_path_factory):
    """`(fixture folder, imported run, its export, the export imported)` of each fixture."""
    folder, work = FIXTURES / request.param, tmp_path_factory.mktemp(request.param)
    import_pretrained(folder, work / "run")
    export_checkpoint(work / "run", work / "hf")
    import_pretrained(work / "hf", work / "again")
    return folder, work / "run", work / "hf", work / "again"


def test_an_import_exported_again_is_its_checkpoint_file_for_file(round_trip):
    folder, _, hf, _ = round_trip
    for name in checkpoint_files(folder):
        assert (hf / name).read_bytes() == (folder / name).read_bytes(), name
    extra = {"README.md", "MANIFEST.sha256", "keras_transformer.json"}
    assert {path.name for path in hf.iterdir()} == {*checkpoint_files(folder), *extra}
    source, ours = load_file(str(folder / "model.safetensors")), load_file(str(hf / "model.safetensors"))
    assert sorted(ours) == sorted(source)
    assert all(np.array_equal(ours[name], value) for name, value in source.items())


def test_the_export_imports_back_bit_for_bit(round_trip):
    _, run, _, again = round_trip
    assert all(np.array_equal(a, b) for a, b in zip(weights(run), weights(again), strict=True))
    before, after = runs.RunConfig.read(run), runs.RunConfig.read(again)
    assert (before.model, before.decoding) == (after.model, after.decoding)
    texts = ["오늘 너무 힘들었어", "", "English words, 123 and émojis 😀"]
    tokenizers = [runs.load_tokenizers(path).source for path in (run, again)]
    assert tokenizers[0].tokenize(texts).to_list() == tokenizers[1].tokenize(texts).to_list()


def test_the_model_card_names_the_family_and_its_languages(round_trip):
    folder, _, hf, _ = round_trip
    card = (hf / "README.md").read_text(encoding="utf-8")
    tokenizer = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))["tokenizer_class"]
    assert "M2M100ForConditionalGeneration" in card and f"{tokenizer}.from_pretrained" in card
    assert ("NLLB-200" in card) == (tokenizer == "NllbTokenizer")


def test_a_source_with_its_embedding_under_several_names_gets_them_back(tmp_path):
    """transformers 4 wrote the tied embedding as the encoder's, the decoder's and lm_head's too."""
    folder = tmp_path / "checkpoint"
    shutil.copytree(FIXTURES / "m2m100", folder, ignore=shutil.ignore_patterns(*REFERENCES))
    tensors = load_file(str(folder / "model.safetensors"))
    for name in ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"):
        tensors[name] = tensors["model.shared.weight"].copy()
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    import_pretrained(folder, tmp_path / "run")
    export_checkpoint(tmp_path / "run", tmp_path / "hf")
    written = load_file(str(tmp_path / "hf" / "model.safetensors"))
    assert sorted(written) == sorted(tensors)
    assert all(np.array_equal(written[name], value) for name, value in tensors.items())


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """`(imported M2M100 run, that run fine-tuned on Korean -> English from two files, its export, re-imported)`."""
    work = tmp_path_factory.mktemp("m2m100-tuned")
    import_pretrained(FIXTURES / "m2m100", work / "imported")
    argv = ["train", "--init-from", str(work / "imported"), "--epochs", "1", "--output", str(work / "tuned")]
    for split, pairs in (("train", own_runs.chatbot_pairs(48, skip=3000)), ("valid", own_runs.chatbot_pairs(8))):
        for side, texts in zip(("source", "target"), zip(*pairs)):
            (work / f"{split}.{side}").write_text("".join(f"{text}\n" for text in texts), encoding="utf-8")
            argv += [f"--{split}-{side}", str(work / f"{split}.{side}")]
    assert cli.main([*argv, "--source-lang", "ko", "--target-lang", "en"]) == 0
    export_checkpoint(work / "tuned", work / "hf")
    import_pretrained(work / "hf", work / "again")
    return work / "imported", work / "tuned", work / "hf", work / "again"


@pytest.mark.slow  # fine-tunes a run: a minute; the import's round trip stays
def test_a_tuned_run_is_written_with_its_pair_and_the_same_tokenizer_files(tuned):
    _, run, hf, _ = tuned
    assert runs.RunConfig.read(run).languages == {"source_lang": "ko", "target_lang": "en"}
    for name in ("vocab.json", "sentencepiece.bpe.model", "config.json"):
        assert (hf / name).read_bytes() == (FIXTURES / "m2m100" / name).read_bytes(), name
    tokenizer = json.loads((hf / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert [tokenizer[key] for key in ("src_lang", "tgt_lang", "tokenizer_class")] == ["ko", "en", "M2M100Tokenizer"]
    generation = json.loads((hf / "generation_config.json").read_text(encoding="utf-8"))
    vocab = json.loads((hf / "vocab.json").read_text(encoding="utf-8"))
    english = runs.load_tokenizers(run).target.languages["en"]  # `__en__`, after the pieces
    assert generation["forced_bos_token_id"] == english >= len(vocab) and generation["decoder_start_token_id"] == 2
    assert "from `ko` into `en`" in (hf / "README.md").read_text(encoding="utf-8")


@pytest.mark.slow  # fine-tunes a run: a minute; the import's round trip stays
def test_a_tuned_run_imports_back_bit_for_bit_into_its_pair(tuned):
    imported, run, _, again = tuned
    assert all(np.array_equal(a, b) for a, b in zip(weights(run), weights(again), strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(weights(run), weights(imported), strict=True))
    assert runs.RunConfig.read(again).decoding == runs.RunConfig.read(run).decoding
    sentences = ["오늘 너무 힘들었어", "배고파", ""]
    translators = [load(path, beam_size=1, max_length=24) for path in (run, again)]
    assert (translators[1].languages.source_lang, translators[1].languages.target_lang) == ("ko", "en")
    outputs = [translator.greedy(sentences).numpy().tolist() for translator in translators]
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize(
    "option, named",
    [
        (dict(norm_first=False), "`norm_first`=False"),
        (dict(layer_norm_epsilon=1e-6), "`layer_norm_epsilon`=1e-06"),
        (dict(output_bias=True), "`output_bias`=True"),
    ],
)
def test_an_option_m2m100_cannot_hold_is_named(option, named):
    config = ModelConfig(
        source_vocab_size=20,
        target_vocab_size=20,
        d_model=8,
        num_heads=2,
        norm_first=True,
        position_layout="fairseq",
        share_embeddings=True,
        tie_output_embedding=True,
        layer_norm_epsilon=1e-5,
    )
    m2m100_export.check_model(config)
    with pytest.raises(ValueError, match=f"^{named}.* has no M2M100 equivalent"):
        m2m100_export.check_model(config.replace(**option))


def test_a_setting_transformers_cannot_hold_is_refused_in_one_line(round_trip, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(round_trip[1], run)
    data = json.loads((run / runs.CONFIG).read_text(encoding="utf-8"))
    data["decoding"] = {"beam_size": 4, "alpha": 0.6, "normalization": "gnmt"}
    (run / runs.CONFIG).write_text(json.dumps(data), encoding="utf-8")
    status = cli.main(["export", "--model", str(run), "--output", str(tmp_path / "hf"), "--format", "transformers"])
    err = capsys.readouterr().err
    assert status == 2 and "`normalization`='gnmt'" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "hf").exists()
