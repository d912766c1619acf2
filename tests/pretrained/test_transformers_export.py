"""`export --format transformers`: a run as a Hugging Face checkpoint, with nothing lost on the way back.

An import exported again is its source checkpoint, file for file and tensor
for tensor; the files written from the run itself (where it changed) read
as the same model and settings, field by field. A run of this package,
trained from scratch (`own_runs.py`), becomes a Marian checkpoint whose
import gives its outputs; an option Marian cannot hold is one line naming
it. transformers itself loads these exports in
tests/data/marian/check_transformers_export.py (not run here: it needs torch).
"""

import json
import pathlib
import re
import shutil

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file

from keras_transformer import runs
from keras_transformer.commands import cli
from keras_transformer.config import ModelConfig
from keras_transformer.decoding import greedy_decode
from keras_transformer.export import export_run, load
from keras_transformer.files import destinations, manifest
from keras_transformer.pretrained import export_checkpoint, import_pretrained
from keras_transformer.pretrained.families import marian_export

import checkpoint_edits as edits
import own_runs

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "marian"
CHECKPOINT_FILES = ("config.json", "generation_config.json", "tokenizer_config.json", "model.safetensors")


@pytest.fixture(scope="module", params=["shared", "separate"])
def exported(request, tmp_path_factory):
    """`(fixture folder, imported run, its export)` of each Marian fixture."""
    folder, work = FIXTURES / request.param, tmp_path_factory.mktemp(request.param)
    import_pretrained(folder, work / "run")
    export_checkpoint(work / "run", work / "hf")
    return folder, work / "run", work / "hf"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """`(run, pairs, its export, the export imported)`: a tiny run of this package trained from scratch."""
    work = tmp_path_factory.mktemp("scratch")
    run, pairs = own_runs.scratch_run(work / "run")
    export_checkpoint(run, work / "hf")
    import_pretrained(work / "hf", work / "again")
    return run, pairs, work / "hf", work / "again"


@pytest.mark.parametrize("exported", [pytest.param("shared", marks=pytest.mark.slow), "separate"], indirect=True)
def test_an_import_exported_again_is_its_checkpoint_file_for_file(exported):
    folder, _, hf = exported
    tokenizer_files = [
        path.name for path in folder.iterdir() if path.suffix == ".spm" or path.name.endswith("vocab.json")
    ]
    for name in (*CHECKPOINT_FILES, *tokenizer_files):
        assert (hf / name).read_bytes() == (folder / name).read_bytes(), name
    assert manifest.verify_manifest(hf) and destinations.is_own(hf, destinations.TRANSFORMERS)
    written = {path.name for path in hf.iterdir()}
    assert written == {*CHECKPOINT_FILES, *tokenizer_files, "README.md", "MANIFEST.sha256", "keras_transformer.json"}


def test_a_folder_meant_for_the_hub_records_no_local_path(exported):
    """`keras_transformer.json` recorded `"run": "/absolute/path"`, and the card the source checkpoint's folder."""
    folder, run, hf = exported
    local = [str(run.resolve()), str(run), str(folder.resolve()), str(folder.resolve().parent), str(run.parent)]
    for path in hf.iterdir():
        data = path.read_bytes()
        assert not any(name.encode() in data for name in local), path.name
    assert f"a local checkpoint, `{folder.name}`" in (hf / "README.md").read_text(encoding="utf-8")


def test_its_tensors_are_the_checkpoints_bit_for_bit(exported):
    folder, _, hf = exported
    source, ours = load_file(str(folder / "model.safetensors")), load_file(str(hf / "model.safetensors"))
    assert sorted(ours) == sorted(source)  # the position tables too, as OPUS-MT's files hold them
    for name, value in source.items():
        assert ours[name].dtype == value.dtype and np.array_equal(ours[name], value), name


@pytest.mark.parametrize(
    "layout",
    [
        ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"),  # transformers 4
        pytest.param(
            ("-model.shared.weight", "model.encoder.embed_tokens.weight", "-model.decoder.embed_positions.weight"),
            marks=pytest.mark.slow,  # the same renaming as the first layout's
        ),
    ],
)
def test_a_source_of_another_layout_gets_its_own_tensor_names_back(tmp_path, layout):
    """An embedding held under several names, or under the encoder's alone; a position table left out."""
    folder = edits.copy_fixture(tmp_path)
    tensors = edits.read_tensors(folder)
    shared = tensors["model.shared.weight"]
    for name in layout:
        if name.startswith("-"):
            del tensors[name[1:]]
        else:
            tensors[name] = shared.copy()
    edits.write_tensors(folder, tensors)
    import_pretrained(folder, tmp_path / "run")
    export_checkpoint(tmp_path / "run", tmp_path / "hf")
    written = load_file(str(tmp_path / "hf" / "model.safetensors"))
    assert sorted(written) == sorted(tensors)
    for name, value in tensors.items():
        assert np.array_equal(written[name], value), name


def test_the_files_written_from_the_run_read_as_the_checkpoints_field_by_field(exported):
    """config.json and generation_config.json made from the run alone hold the source's values for every field."""
    folder, run, _ = exported
    opened = runs.open_run(run)
    model_config, decoding = opened.model.config, opened.config.decoding
    original = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    written = marian_export.hf_config(model_config)
    assert {key: original[key] for key in written} == written
    assert marian_export.reads_as_model(written, model_config)
    generation = json.loads((folder / "generation_config.json").read_text(encoding="utf-8"))
    written = marian_export.generation_config(decoding, model_config)
    assert {key: generation.get(key) for key in written if key != "length_penalty"} == {
        key: value for key, value in written.items() if key != "length_penalty"
    }
    assert written["length_penalty"] == 1.0  # transformers' default, which the source leaves out
    assert marian_export.reads_as_decoding(written, decoding, model_config)


@pytest.mark.parametrize("exported", [pytest.param("shared", marks=pytest.mark.slow), "separate"], indirect=True)
def test_other_generation_settings_rewrite_generation_config_json_alone(exported, tmp_path):
    folder, run, _ = exported
    export_run(run, tmp_path / "hf", "transformers", beam_size=1, max_length=24)
    generation = json.loads((tmp_path / "hf" / "generation_config.json").read_text(encoding="utf-8"))
    original = json.loads((folder / "generation_config.json").read_text(encoding="utf-8"))
    assert generation.pop("num_beams") == 1 and generation.pop("max_length") == 25  # with the start token
    assert {key: original[key] for key in generation if key != "length_penalty"} == {
        key: value for key, value in generation.items() if key != "length_penalty"
    }
    assert (tmp_path / "hf" / "config.json").read_bytes() == (folder / "config.json").read_bytes()
    import_pretrained(tmp_path / "hf", tmp_path / "again")
    decoding = runs.RunConfig.read(tmp_path / "again").decoding
    assert decoding == runs.RunConfig.read(run).decoding.replace(beam_size=1, max_new_tokens=24)


def test_a_scratch_trained_run_round_trips_to_its_outputs(scratch):
    run, pairs, _, again = scratch
    models = [keras.saving.load_model(path / runs.MODEL, compile=False) for path in (run, again)]
    assert models[0].config.position_layout == "interleaved" and models[1].config.position_layout == "concatenated"
    ids = np.array([[5, 9, 40, 7, 3, 0], [11, 12, 3, 0, 0, 0]], np.int32)
    inputs = {"encoder_inputs": ids, "decoder_inputs": np.array([[2, 8, 30, 6, 0, 0], [2, 19, 0, 0, 0, 0]], np.int32)}
    logits = [keras.ops.convert_to_numpy(model(inputs)) for model in models]
    np.testing.assert_allclose(logits[1], logits[0], rtol=0, atol=1e-5)  # the same sums in another order
    sentences = [source for source, _ in pairs] + ["", "오늘 뭐 하지?"]
    tokenizer = runs.load_tokenizers(run).source
    source = tokenizer.tokenize(sentences).to_list()
    source_ids = np.array([row + [3] + [0] * (31 - len(row)) for row in source], np.int32)  # END, then PAD
    greedy = [keras.ops.convert_to_numpy(greedy_decode(model, source_ids)) for model in models]
    np.testing.assert_array_equal(greedy[0], greedy[1])
    translators = [load(path, beam_size=4, alpha=1.0) for path in (run, again)]
    beams = [translator.nbest(sentences)["translations"].numpy().tolist() for translator in translators]
    # The two tokenizers write an output of broken UTF-8 (a byte piece alone) differently: the ids are the same.
    strings = [[[text.decode("utf-8", "replace") for text in row] for row in rows] for rows in beams]
    assert strings[0] == strings[1]
    texts = [row[0] for row in strings[0]]
    assert sum(text == target for text, (_, target) in zip(texts, pairs)) >= 20  # it learnt them


def test_a_scratch_trained_run_keeps_its_ids_and_pieces(scratch):
    run, _, hf, again = scratch
    config = json.loads((hf / "config.json").read_text(encoding="utf-8"))
    assert (config["pad_token_id"], config["decoder_start_token_id"], config["eos_token_id"]) == (0, 2, 3)
    vocab = json.loads((hf / "vocab.json").read_text(encoding="utf-8"))
    assert [piece for piece, index in sorted(vocab.items(), key=lambda item: item[1])][:4] == [
        "<pad>",
        "<unk>",
        "<s>",
        "</s>",
    ]
    ours, theirs = runs.load_tokenizers(run).source, runs.load_tokenizers(again).source
    assert runs.load_tokenizers(again).target.start_id == 2  # what fine-tuning the import would start from
    sentences = ["오늘 뭐 하지?", "English words, 123 and émojis 😀", ""]
    assert ours.tokenize(sentences).to_list() == theirs.tokenize(sentences).to_list()
    assert (hf / "source.spm").read_bytes() == (hf / "target.spm").read_bytes() == ours.model_proto
    generation = json.loads((hf / "generation_config.json").read_text(encoding="utf-8"))
    assert generation["bad_words_ids"] == [[0], [2]] and generation["renormalize_logits"] is True
    assert "trained from scratch" in (hf / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "option, named",
    [
        (dict(norm_first=True), "`norm_first`=True"),
        (dict(layer_norm_epsilon=1e-6), "`layer_norm_epsilon`=1e-06"),
        (dict(activation="elu"), "`activation`='elu'"),
    ],
)
def test_an_option_marian_cannot_hold_is_named(option, named):
    config = ModelConfig(source_vocab_size=20, target_vocab_size=20, d_model=8, num_heads=2, layer_norm_epsilon=1e-5)
    with pytest.raises(ValueError, match=f"^{re.escape(named)}.* has no Marian equivalent"):
        marian_export.check_model(config.replace(**option))


@pytest.mark.parametrize(
    "change, named",
    [
        (dict(add_source_end=False), "add_source_end=False"),
        (dict(decoding={"beam_size": 4, "alpha": 0.6, "normalization": "gnmt"}), "`normalization`='gnmt'"),
    ],
)
def test_the_command_refuses_a_run_marian_cannot_express_in_one_line(scratch, tmp_path, capsys, change, named):
    run = tmp_path / "run"
    shutil.copytree(scratch[0], run)
    runs.update_config(run, **{key: value for key, value in change.items() if key != "decoding"})
    if "decoding" in change:
        data = json.loads((run / runs.CONFIG).read_text(encoding="utf-8"))
        data["decoding"] = change["decoding"]
        (run / runs.CONFIG).write_text(json.dumps(data), encoding="utf-8")
    status = cli.main(["export", "--model", str(run), "--output", str(tmp_path / "hf"), "--format", "transformers"])
    err = capsys.readouterr().err
    assert status == 2 and named in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "hf").exists()


def test_the_command_writes_the_scores_in_the_card_and_replaces_only_its_own_export(scratch, tmp_path, capsys):
    run, hf = scratch[0], tmp_path / "hf"
    scores = tmp_path / "scores.json"
    scores.write_text(json.dumps({"bleu": 31.25, "chrf": 58.5, "source": "/data/test.ko", "beam_size": 4}))
    argv = ["export", "--model", str(run), "--output", str(hf), "--format", "transformers", "--scores", str(scores)]
    assert cli.main(argv) == 0
    count = len(list(hf.iterdir()))  # it said "8 files" for a folder of 10: the manifest and its record left out
    assert f"checkpoint: {count} files" in capsys.readouterr().err
    card = (hf / "README.md").read_text(encoding="utf-8")
    assert "BLEU 31.25 chrF 58.50 on `test.ko`" in card and "keras-transformer" in card
    assert cli.main(argv) == 2 and "--overwrite" in capsys.readouterr().err
    assert cli.main([*argv, "--overwrite"]) == 0
    (hf / "notes.txt").write_text("mine")
    assert cli.main([*argv, "--overwrite"]) == 2 and "notes.txt" in capsys.readouterr().err
    assert (hf / "notes.txt").read_text() == "mine"
    assert cli.main([*argv[:-2], "--quantization", "int8"]) == 2
    assert "--quantization int8 does not apply to the transformers format" in capsys.readouterr().err


def test_a_foreign_folder_and_a_folder_inside_the_run_are_refused(scratch, tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep me")
    with pytest.raises(destinations.UnsafeDestinationError, match="not a Hugging Face checkpoint export"):
        export_checkpoint(scratch[0], tmp_path / "notes")
    with pytest.raises(destinations.UnsafeDestinationError, match="overlaps"):
        export_checkpoint(scratch[0], scratch[0] / "hf")
    assert (tmp_path / "notes" / "todo.txt").read_text() == "keep me"
