"""One configuration: `ModelConfig` in the model and its `.keras` file, presets by part, a run's typed config.json."""

import dataclasses
import json
import pathlib
import shutil

import keras
import pytest

import keras_transformer as kt
from keras_transformer import runs
from keras_transformer.config import DataConfig, DecodingConfig, ModelConfig, TrainingConfig
from keras_transformer.files import atomic
from keras_transformer.presets import PRESETS, Preset, get_preset

DATA = pathlib.Path(__file__).resolve().parent / "data"
SMALL = dict(source_vocab_size=40, target_vocab_size=40, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_length=8)


def test_the_model_keeps_its_config_and_a_keras_file_stores_it(tmp_path):
    config = ModelConfig(**SMALL, activation="gelu", layer_norm_epsilon=1e-5, num_decoder_layers=2)
    model = kt.build_transformer(config=config)
    assert model.config == config
    assert len(model.decoder_layers) == 2 and model.encoder_layers[0].layer_norm_epsilon == 1e-5
    model.save(tmp_path / "model.keras")
    reloaded = keras.saving.load_model(tmp_path / "model.keras")
    assert reloaded.config == config
    assert kt.build_transformer(**SMALL).config == ModelConfig(**SMALL)


def test_an_earlier_versions_keras_file_gets_its_config_from_its_layers():
    model = keras.saving.load_model(DATA / "transformer_0.1.0.keras")
    assert model.config == ModelConfig(
        30, 30, num_layers=1, d_model=8, num_heads=2, d_ff=16, max_length=8, norm_first=True
    )
    run_model = keras.saving.load_model(DATA / "run_11d2bb5" / runs.MODEL)
    assert run_model.config.share_embeddings and run_model.config.tie_output_embedding


def test_config_and_options_together_are_refused():
    with pytest.raises(ValueError, match="Pass `config` or the model's options, not both"):
        kt.build_transformer(d_model=64, config=ModelConfig(**SMALL))


def test_input_vocab_size_still_builds_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="`input_vocab_size` is now `source_vocab_size`"):
        model = kt.build_transformer(
            input_vocab_size=40, **{k: v for k, v in SMALL.items() if k != "source_vocab_size"}
        )
    assert model.config.source_vocab_size == 40


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(num_heads=0), "`num_heads` must be a positive int. Received: num_heads=0"),
        (dict(d_model=15), "`d_model` must be divisible by `num_heads`"),
        (dict(dropout=1.0), "`dropout`"),
        (dict(layer_norm_epsilon=0.0), "`layer_norm_epsilon`"),
        (dict(share_embeddings=True, target_vocab_size=41), "needs one shared vocabulary"),
    ],
)
def test_a_bad_model_config_is_a_value_error_naming_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(**SMALL).replace(**changes).check()


@pytest.mark.parametrize("part", [ModelConfig, DecodingConfig, DataConfig, TrainingConfig])
def test_each_field_is_checked_when_a_config_is_made(part):
    """A value a field's kind refuses is a `ValueError` naming it at once, not at `check()` or `build_model`."""
    for field in dataclasses.fields(part):
        with pytest.raises(ValueError, match=f"`{field.name}`"):
            part(**{field.name: object()})
    with pytest.raises(ValueError, match="`key_block_size` must be a positive int. Received: key_block_size=0"):
        ModelConfig(**SMALL, key_block_size=0)
    with pytest.raises(ValueError, match="key_block_size=-1"):
        PRESETS["tiny"].replace(key_block_size=-1)
    with pytest.raises(ValueError, match="^model.json: `key_block_size`"):
        ModelConfig.from_dict({"key_block_size": 0}, "model.json")
    assert ModelConfig(**SMALL, key_block_size=4).key_block_size == 4


def test_every_setting_has_one_name_and_earlier_names_still_read():
    assert ModelConfig.from_dict({"input_vocab_size": 9, "target_vocab_size": 9}).source_vocab_size == 9
    assert DecodingConfig.from_dict({"beam_size": 5, "length_penalty": 1.5}).alpha == 1.5
    with pytest.raises(ValueError, match="ModelConfig has no field 'd_modle'"):
        ModelConfig.from_dict({"d_modle": 3})
    with pytest.raises(ValueError, match="has no field 'beam'"):
        PRESETS["tiny"].replace(beam=3)


def test_a_preset_is_its_parts_and_replace_routes_each_setting():
    preset = PRESETS["multi30k-en-de"].replace(d_model=512, vocab_size=8000, epochs=3, alpha=1.0, name="mine")
    assert (preset.name, preset.model.d_model, preset.data.vocab_size) == ("mine", 512, 8000)
    assert (preset.training.epochs, preset.decoding.alpha, preset.decoding.beam_size) == (3, 1.0, 5)
    assert PRESETS["multi30k-en-de"].model.d_model == 128  # the preset itself is unchanged
    assert Preset.from_dict(preset.to_dict()) == preset
    config = preset.model_config(8000)
    assert (config.source_vocab_size, config.target_vocab_size, config.share_embeddings) == (8000, 8000, True)


def test_a_preset_sets_every_option_of_the_builder():
    preset = get_preset("tiny").replace(activation="gelu", activation_dropout=0.1, num_decoder_layers=2)
    model = kt.build_transformer(config=preset.model_config(50))
    assert model.config.activation == "gelu" and len(model.decoder_layers) == 2


def test_an_earlier_versions_flat_preset_reads():
    recorded = json.loads((DATA / "run_11d2bb5" / runs.CONFIG).read_text(encoding="utf-8"))["preset"]
    assert "length_penalty" in recorded and "alpha" not in recorded
    preset = Preset.from_dict(recorded)
    assert preset == PRESETS["tiny"].replace(max_examples=300)  # trained on 300 pairs


def test_a_run_config_reads_types_and_writes_back_what_it_does_not_know(tmp_path):
    run = pathlib.Path(shutil.copytree(DATA / "run_11d2bb5", tmp_path / "run"))
    config = runs.RunConfig.read(run)
    assert config.preset == PRESETS["tiny"].replace(max_examples=300) and config.model.source_vocab_size == 976
    assert config.decoding == DecodingConfig(beam_size=4, alpha=0.6, max_new_tokens=32)
    assert config.finished is True and config.completed_epochs == 1
    raw = runs.read_config(run)
    atomic.write_json(run / runs.CONFIG, {**raw, "written_by_a_later_version": {"x": 1}})
    runs.update_config(run, finished=False)
    written = runs.read_config(run)
    assert written["written_by_a_later_version"] == {"x": 1} and written["finished"] is False
    assert written["decoding"]["alpha"] == 0.6 and written["model"]["source_vocab_size"] == 976
    assert runs.RunConfig.read(run).replace(finished=True) == config.replace(
        extra={"written_by_a_later_version": {"x": 1}}
    )


def test_a_malformed_run_config_names_the_file_and_the_field(tmp_path):
    run = pathlib.Path(shutil.copytree(DATA / "run_11d2bb5", tmp_path / "run"))
    raw = runs.read_config(run)
    atomic.write_json(run / runs.CONFIG, {**raw, "preset": {**raw["preset"], "epoch": 3}})
    with pytest.raises(ValueError, match=r"config.json: `preset`: .*has no field 'epoch'"):
        runs.RunConfig.read(run)
