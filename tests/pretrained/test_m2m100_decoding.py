"""An imported M2M100 or NLLB run decodes into a chosen language as transformers' `generate` does.

The references in tests/data/m2m100/*/reference.json are transformers'
greedy and beam-4 outputs (`length_penalty` 1.0, `forced_bos_token_id` the
target language, `max_new_tokens` 24) into two target languages.
"""

import json
import pathlib
import warnings

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import export
from keras_transformer.decoding import TruncatedOutputWarning
from keras_transformer.pretrained import import_pretrained
from keras_transformer.translators.controls import Controls

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "m2m100"


@pytest.fixture(scope="module", params=["m2m100", "nllb"])
def imported(request, tmp_path_factory):
    """`(run directory, translator, reference)` of each fixture: imported once, beam 4, transformers' limits."""
    run = tmp_path_factory.mktemp(request.param) / "run"
    import_pretrained(FIXTURES / request.param, run)
    reference = json.loads((FIXTURES / request.param / "reference.json").read_text(encoding="utf-8"))
    options = dict(beam_size=4, alpha=1.0, max_length=reference["max_new_tokens"])
    translator = export.load(run, source_lang=reference["source_lang"], **options)
    return run, translator, reference


def strings(tensor):
    return [text.decode("utf-8") for text in np.asarray(tensor).tolist()]


def quietly(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedOutputWarning)  # transformers cut some off too
        return function(*args, **kwargs)


def test_greedy_strings_equal_transformers_in_both_languages(imported):
    _, translator, reference = imported
    for target, expected in reference["targets"].items():
        assert strings(quietly(translator.greedy, reference["sentences"], target_lang=target)) == expected["greedy"]


@pytest.mark.parametrize("imported", ["nllb", pytest.param("m2m100", marks=pytest.mark.slow)], indirect=True)
def test_beam_4_best_strings_equal_transformers_in_both_languages(imported):
    _, translator, reference = imported
    for target, expected in reference["targets"].items():
        nbest = translator.nbest(reference["sentences"], target_lang=target)
        ours = [strings(row)[0] for row in np.asarray(nbest["translations"])]
        equal = [a == beams[0] for a, beams in zip(ours, expected["beam"])]
        assert sum(equal) >= 0.95 * len(equal), target
        for row, scores, same in zip(np.asarray(nbest["scores"]), expected["beam_scores"], equal):
            if same:  # transformers' score: log p / length ** length_penalty
                np.testing.assert_allclose(row[0], scores[0], atol=1e-4)


def test_each_sentence_may_name_its_own_target(imported):
    _, translator, reference = imported
    first, second = reference["targets"]
    sentences = reference["sentences"][:4]
    mixed = quietly(translator.greedy, sentences, target_lang=[first, second, first, second])
    one = strings(quietly(translator.greedy, sentences, target_lang=first))
    other = strings(quietly(translator.greedy, sentences, target_lang=second))
    assert strings(mixed) == [one[0], other[1], one[2], other[3]]


def test_the_forced_beginning_is_built_by_the_one_rule(imported, forced_rows_languages):
    """The XLA engine's forced rows come from `rules.forced_rows` (the other engines': `test_m2m100_engines`)."""
    _, translator, reference = imported
    target = next(iter(reference["targets"]))
    calls = forced_rows_languages
    controls = Controls(tf.constant(["", ""]), tf.constant([target, target]), tf.constant(["", ""]))
    _, prefix = translator.search_inputs(tf.constant(["a", "b"]), controls)
    language = translator.target_tokenizer.languages[target]
    assert len(calls) == 1 and calls[0] is not None
    assert np.asarray(prefix)[:2, :2].tolist() == [[language, -1], [language, -1]]


@pytest.mark.parametrize("imported", ["nllb", pytest.param("m2m100", marks=pytest.mark.slow)], indirect=True)
def test_a_target_prefix_begins_every_search_and_decoding_continues_from_it(imported):
    _, translator, reference = imported
    target = list(reference["targets"])[1]
    plain = strings(quietly(translator.greedy, reference["sentences"][:3], target_lang=target))
    words = [text.split()[1] if text.startswith("__") else text.split()[0] for text in plain]
    again = strings(quietly(translator.greedy, reference["sentences"][:3], target_lang=target, target_prefix=words))
    assert again == plain  # forcing what greedy chose anyway changes nothing
    prefix = "네 말이"
    for search in (translator.greedy, translator):
        for text in strings(quietly(search, reference["sentences"][:3], target_lang=target, target_prefix=prefix)):
            assert text.split("__ ", 1)[-1].startswith(prefix)
    sampled = quietly(
        translator.sample, reference["sentences"][:3], 0.8, 0, 1.0, 7, target_lang=target, target_prefix=prefix
    )
    assert all(text.split("__ ", 1)[-1].startswith(prefix) for text in strings(sampled))


@pytest.mark.parametrize(
    "controls, named",
    [
        (dict(target_lang="xx_Yyyy"), "`target_lang` 'xx_Yyyy' is not a language of this model"),
        (dict(target_lang=["en", "ko"]), "one entry per sentence"),
        (dict(source_lang=3), "`source_lang` must be a str or a list"),
        (dict(target_prefix="a\x00b"), "`target_prefix`"),
    ],
)
def test_bad_controls_are_one_line(imported, controls, named):
    _, translator, reference = imported
    controls = {"target_lang": list(reference["targets"])[0], **controls}
    with pytest.raises(ValueError) as error:
        translator.greedy(["안녕"], **controls)
    assert "\n" not in str(error.value) and named in str(error.value)


def test_a_close_code_is_suggested_and_no_target_is_explained(imported):
    run, translator, reference = imported
    target = list(reference["targets"])[1]
    with pytest.raises(ValueError, match=f"close: {target}"):
        translator.greedy(["안녕"], target_lang=target.swapcase())
    with pytest.raises(ValueError) as error:
        translator(["안녕"])
    assert "\n" not in str(error.value) and "target_lang=" in str(error.value) and "--target-lang" in str(error.value)


@pytest.mark.slow  # an export: a minute; NLLB's SavedModel takes each instance's language in test_serving_languages.py
def test_the_savedmodel_takes_the_target_language(imported, tmp_path):
    run, translator, reference = imported
    target = list(reference["targets"])[0]
    export.export_run(
        run,
        tmp_path / "export",
        beam_size=4,
        alpha=1.0,
        max_length=reference["max_new_tokens"],
        source_lang=reference["source_lang"],
    )
    loaded = export.load(tmp_path / "export")
    assert loaded.languages == translator.languages
    for name, expected in reference["targets"].items():
        assert strings(quietly(loaded.greedy, reference["sentences"], target_lang=name)) == expected["greedy"]
    beams = strings(quietly(loaded, reference["sentences"], target_lang=target))
    assert sum(a == b[0] for a, b in zip(beams, reference["targets"][target]["beam"])) >= 19
    # TF Serving's view: a signature with an input for the target language.
    module = tf.saved_model.load(str(tmp_path / "export"))
    signature = module.signatures["with_controls"]
    outputs = signature(
        sentences=tf.constant(reference["sentences"][:2]),
        source_lang=tf.constant(["", ""]),
        target_lang=tf.constant([target, target]),
        target_prefix=tf.constant(["", ""]),
        banned_ids=tf.zeros([0], tf.int32),
    )
    assert strings(outputs["translations"]) == beams[:2]
