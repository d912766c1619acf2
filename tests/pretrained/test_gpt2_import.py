"""GPT-2 checkpoints imported into the decoder-only model give transformers' numbers.

The fixture in tests/data/gpt2/ is a tiny `GPT2LMHeadModel` that transformers
wrote with `save_pretrained`, trained a little so that its continuations
differ, beside what transformers computed with it
(tests/data/make_gpt2_bert_fixtures.py rebuilds both; the tests need neither
torch nor transformers).
"""

import json
import pathlib
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import runs
from keras_transformer.decoding import decode, search_for
from keras_transformer.models import DecoderOnlyModel
from keras_transformer.pretrained import import_pretrained

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "data" / "gpt2"
REFERENCE = json.loads((FIXTURE / "reference.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpt2") / "run"
    import_pretrained(FIXTURE, path)
    return runs.open_run(path)


def continuations(run, beam_size):
    """`(ids, scores)` of every reference prompt continued as transformers' `generate` does, in one batch."""
    config = run.model.config
    prompts = REFERENCE["prompt_ids"]
    ids = np.full((len(prompts), max(map(len, prompts))), config.pad_id, "int32")
    for row, prompt in enumerate(prompts):
        ids[row, : len(prompt)] = prompt
    search = search_for(beam_size, alpha=1.0, **run.config.decoding.search_options())
    result = decode(run.model, ids, search, max_length=REFERENCE["max_new_tokens"])
    end = config.end_id
    rows = [[_until_end(row, end) for row in source] for source in keras.ops.convert_to_numpy(result.ids).tolist()]
    return rows, keras.ops.convert_to_numpy(result.scores)


def _until_end(row, end):
    return row[: row.index(end) + 1] if end in row else row


def test_logits_equal_transformers_through_the_saved_model(run):
    expected = np.load(FIXTURE / "reference_logits.npz")
    model = keras.saving.load_model(run.path / runs.MODEL, compile=False)
    assert isinstance(model, DecoderOnlyModel)
    for index in range(4):
        logits = keras.ops.convert_to_numpy(model(expected[f"ids_{index}"]))
        np.testing.assert_allclose(logits, expected[f"logits_{index}"], rtol=0, atol=1e-4)


def test_prompt_ids_and_strings_equal_transformers_tokenizer(run):
    tokenizer = run.tokenizers.source
    assert run.tokenizers.shared
    assert tokenizer.tokenize(REFERENCE["prompts"]).to_list() == REFERENCE["prompt_ids"]
    strings = tokenizer.detokenize(tf.ragged.constant(REFERENCE["greedy_ids"])).numpy()
    assert [s.decode("utf-8") for s in strings] == REFERENCE["greedy"]


def test_the_same_ids_come_from_vocab_json_and_merges_txt(tmp_path):
    folder = tmp_path / "gpt2"
    shutil.copytree(FIXTURE, folder, ignore=shutil.ignore_patterns("tokenizer.json"))
    import_pretrained(folder, tmp_path / "run")
    tokenizer = runs.open_run(tmp_path / "run", models=False).tokenizers.source
    assert tokenizer.tokenize(REFERENCE["prompts"]).to_list() == REFERENCE["prompt_ids"]


def test_greedy_continuations_equal_transformers_generate(run):
    rows, _ = continuations(run, beam_size=1)
    assert len({tuple(row[0]) for row in rows}) > len(rows) // 2  # the prompts continue differently
    assert [row[0] for row in rows] == REFERENCE["greedy_ids"]


def test_beam_4_finds_transformers_beams(run):
    rows, scores = continuations(run, beam_size=4)
    best = [row[0] for row in rows]
    same = sum(ours == theirs[0] for ours, theirs in zip(best, REFERENCE["beam_ids"]))
    assert same >= 0.95 * len(best), f"{same} of {len(best)} best beams equal"
    # Below the best, a beam cut off at max_new_tokens ranks after every ended one unless the version ranks it by
    # score among them as transformers does (`DecodingConfig.cut_off`): 56 of the 64 beams without, 64 with.
    hypotheses = [(ours, theirs) for row, ref in zip(rows, REFERENCE["beam_ids"]) for ours, theirs in zip(row, ref)]
    by_score = getattr(run.config.decoding, "cut_off", None) == "by_score"
    assert sum(ours == theirs for ours, theirs in hypotheses) >= (0.95 if by_score else 0.85) * len(hypotheses)
    equal = [i for i, (ours, theirs) in enumerate(zip(best, REFERENCE["beam_ids"])) if ours == theirs[0]]
    expected = np.array([REFERENCE["beam_scores"][i][0] for i in equal])
    np.testing.assert_allclose(scores[equal, 0], expected, atol=1e-4)


def test_the_run_records_gpt_2s_generation_settings(run):
    config = run.config
    assert config.pretrained["model_type"] == "gpt2" and not config.add_source_end
    assert config.model.architecture == "decoder_only" and config.model.activation == "gelu_tanh"
    assert config.model.pad_id == config.model.start_id == config.model.end_id == 699
    assert (config.decoding.beam_size, config.decoding.normalization, config.decoding.stopping) == (
        1,
        "length",
        "cannot_improve",
    )


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("n_layer", 1000, "`n_layer` is 1000, but .* holds 2 layers"),
        ("scale_attn_weights", False, "`scale_attn_weights` must be true"),
        ("activation_function", "mish", "activation_function"),
        ("n_embd", "32", "`n_embd` must be"),
    ],
)
def test_a_config_that_is_not_its_tensors_or_not_built_here_is_one_line(tmp_path, field, value, message):
    folder = tmp_path / "gpt2"
    shutil.copytree(FIXTURE, folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    (folder / "config.json").write_text(json.dumps({**config, field: value}), encoding="utf-8")
    with pytest.raises(ValueError, match=message) as error:
        import_pretrained(folder, tmp_path / "run")
    assert "\n" not in str(error.value) and not (tmp_path / "run").exists()


def test_add_bos_token_starts_every_prompt_from_vocab_files(tmp_path):
    folder = tmp_path / "gpt2"
    shutil.copytree(FIXTURE, folder, ignore=shutil.ignore_patterns("tokenizer.json"))
    settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    (folder / "tokenizer_config.json").write_text(json.dumps({**settings, "add_bos_token": True}), encoding="utf-8")
    import_pretrained(folder, tmp_path / "run")
    tokenizer = runs.open_run(tmp_path / "run", models=False).tokenizers.source
    ids = tokenizer.tokenize(REFERENCE["prompts"]).to_list()
    assert ids == [[tokenizer.start_id] + prompt for prompt in REFERENCE["prompt_ids"]]
