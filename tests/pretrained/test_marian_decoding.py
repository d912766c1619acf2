"""An imported OPUS-MT run decodes as transformers' `generate` does, through every path.

The references in tests/data/marian/*/reference.json are transformers'
greedy and beam-4 outputs (`length_penalty` 1.0, the checkpoint's other
generation settings, `max_new_tokens`) for the same sentences.
"""

import json
import pathlib
import warnings

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import export, runs
from keras_transformer.decoding import TruncatedOutputWarning
from keras_transformer.pretrained import import_pretrained

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "marian"


@pytest.fixture(scope="module", params=["shared", "separate"])
def imported(request, tmp_path_factory):
    """`(run directory, reference)` of each fixture, imported once."""
    run = tmp_path_factory.mktemp(request.param) / "run"
    import_pretrained(FIXTURES / request.param, run)
    return run, json.loads((FIXTURES / request.param / "reference.json").read_text(encoding="utf-8"))


def strings(tensor):
    return [text.decode("utf-8") for text in np.asarray(tensor).tolist()]


def quietly(function, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedOutputWarning)  # transformers cut some off too
        return function(*args)


def test_greedy_strings_equal_transformers(imported):
    run, reference = imported
    translator = export.load(run, beam_size=1, max_length=reference["max_new_tokens"])
    assert strings(quietly(translator.greedy, reference["sentences"])) == reference["greedy"]
    assert strings(quietly(translator, reference["sentences"])) == reference["greedy"]


@pytest.mark.parametrize("imported", [pytest.param("shared", marks=pytest.mark.slow), "separate"], indirect=True)
def test_the_one_call_decoders_take_the_models_ids(imported):
    """`greedy_decode(model, ids)` without ids decodes from Marian's start (its PAD) and stops at its END (0)."""
    import keras

    from keras_transformer.decoding import beam_decode, greedy_decode

    run, reference = imported
    model = keras.saving.load_model(run / runs.MODEL, compile=False)
    pad = model.config.pad_id
    width = max(len(row) for row in reference["source_ids"])
    source = np.array([row + [pad] * (width - len(row)) for row in reference["source_ids"]], np.int32)
    length = reference["max_new_tokens"]
    ids = keras.ops.convert_to_numpy(greedy_decode(model, source, max_length=length))
    for row, expected in zip(ids.tolist(), reference["greedy_ids"]):
        assert row[: len(expected)] == expected
    beams = keras.ops.convert_to_numpy(beam_decode(model, source[:4], beam_size=1, max_length=length)[0])
    np.testing.assert_array_equal(beams[:, 0], ids[:4])
    # Without a length either: the model's own (its generation settings), as its translator decodes.
    target = runs.load_tokenizers(run).target
    ours = strings(target.detokenize(keras.ops.convert_to_numpy(greedy_decode(model, source))))
    assert ours == strings(quietly(export.load(run, beam_size=1).greedy, reference["sentences"]))


@pytest.mark.parametrize("imported", [pytest.param("shared", marks=pytest.mark.slow), "separate"], indirect=True)
def test_beam_4_best_strings_equal_transformers_but_for_ties(imported):
    run, reference = imported
    translator = export.load(run, beam_size=4, alpha=1.0, max_length=reference["max_new_tokens"])
    nbest = translator.nbest(reference["sentences"])
    ours = [strings(row)[0] for row in np.asarray(nbest["translations"])]
    scores = np.asarray(nbest["scores"])[:, 0]
    expected = [beams[0] for beams in reference["beam"]]
    expected_scores = [beam_scores[0] for beam_scores in reference["beam_scores"]]
    equal = [a == b for a, b in zip(ours, expected)]
    assert sum(equal) >= 0.95 * len(equal)
    for same, score, expected_score in zip(equal, scores, expected_scores):
        assert abs(score - expected_score) <= (1e-4 if same else 1e-5)


@pytest.mark.parametrize("imported", [pytest.param("shared", marks=pytest.mark.slow), "separate"], indirect=True)
def test_scores_of_the_greedy_outputs_equal_transformers_log_probabilities(imported):
    run, reference = imported
    translator = export.load(run, beam_size=1, max_length=reference["max_new_tokens"])
    target = runs.load_tokenizers(run).target
    retokenized = [ids + [target.end_id] for ids in target.tokenize(tf.constant(reference["greedy"])).to_list()]
    same = [ids == expected for ids, expected in zip(retokenized, reference["greedy_ids"])]
    scored = translator.score(reference["sentences"], reference["greedy"])
    log_probs = np.asarray(scored["log_probs"])
    compared = [(ours, theirs) for ours, theirs, ok in zip(log_probs, reference["greedy_log_probs"], same) if ok]
    assert len(compared) >= len(same) // 2  # the strings whose pieces come back the same
    np.testing.assert_allclose(*zip(*compared), rtol=0, atol=1e-4)


# About a minute each on 2 cores, with the long checks: the signatures are checked on a tiny run in tests/serving,
# and on an imported NLLB in test_m2m100_decoding.py.
@pytest.mark.slow
def test_the_saved_model_signatures_give_the_runs_strings(imported, tmp_path):
    run, reference = imported
    length = reference["max_new_tokens"]
    export.export_run(run, tmp_path / "export", beam_size=4, alpha=1.0, max_length=length)
    loaded = tf.saved_model.load(str(tmp_path / "export"))
    sentences = tf.constant(reference["sentences"])
    live = export.load(run, beam_size=4, alpha=1.0, max_length=length)
    assert strings(loaded.signatures["greedy"](sentences=sentences)["translations"]) == reference["greedy"]
    assert strings(loaded.signatures["serving_default"](sentences=sentences)["translations"]) == strings(
        quietly(live, reference["sentences"])
    )


@pytest.mark.parametrize("imported", [pytest.param("shared", marks=pytest.mark.slow), "separate"], indirect=True)
def test_plot_attention_follows_transformers_greedy_output(imported):
    from keras_transformer.commands.plot import load_run
    from keras_transformer.plotting.attention_maps import sentence_attention

    run, reference = imported
    model, source, target = load_run(run)
    ended = next(i for i, ids in enumerate(reference["greedy_ids"]) if len(ids) < reference["max_new_tokens"])
    result = sentence_attention(model, source, reference["sentences"][ended], target, add_source_end=True)
    assert list(result["target_ids"][1:]) + [0] == reference["greedy_ids"][ended]
    assert result["weights"]["decoder_cross"][-1].shape[-1] == len(reference["source_ids"][ended])
