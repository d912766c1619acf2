"""An imported M2M100 or NLLB run on the CTranslate2 and LiteRT engines decodes as transformers' `generate` does.

The references in tests/data/m2m100/*/reference.json are transformers'
greedy and beam-4 outputs (`length_penalty` 1.0, `forced_bos_token_id` the
target language, `max_new_tokens` 24) into two target languages, and
reference_logits.npz its teacher-forced logits of four pairs. Each engine
opens each fixture once (a LiteRT export of a fixture takes 9-17 s on
2 cores). Needs ctranslate2 and ai-edge-litert.
"""

import json
import pathlib
import warnings

import numpy as np
import pytest

from keras_transformer.decoding import TruncatedOutputWarning
from keras_transformer.engines.ctranslate2 import translator as ctranslate2_engine
from keras_transformer.files import user_cache
from keras_transformer.opener import open_translator
from keras_transformer.pretrained import import_pretrained

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "m2m100"
PREFIX = "네 말이"  # pieces of both fixtures' vocabulary, which neither output begins with unforced


@pytest.fixture(scope="module", params=["m2m100", "nllb"])
def imported(request, tmp_path_factory):
    """`(run directory, reference)` of each fixture, imported once."""
    run = tmp_path_factory.mktemp(request.param) / "run"
    import_pretrained(FIXTURES / request.param, run)
    return run, json.loads((FIXTURES / request.param / "reference.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A fresh CTranslate2 conversion cache for this module."""
    with pytest.MonkeyPatch.context() as patch:
        folder = tmp_path_factory.mktemp("ct2-cache")
        patch.setenv(user_cache.CACHE_ENV, str(folder))
        yield folder


@pytest.fixture(scope="module")
def translators(imported, cache, tmp_path_factory):
    """`{engine: translator}` of a fixture: beam 4, transformers' length rule and limit, the source language."""
    pytest.importorskip("ctranslate2")
    pytest.importorskip("ai_edge_litert")
    from keras_transformer import litert
    from keras_transformer.litert.export import TokenizerOutsideWarning

    run, reference = imported
    options = dict(beam_size=4, alpha=1.0, source_lang=reference["source_lang"])
    folder = tmp_path_factory.mktemp("litert") / "export"
    with pytest.warns(TokenizerOutsideWarning, match="M2M100 or NLLB"):
        litert.export_run(run, folder, max_length=reference["max_new_tokens"], **options)
    return {
        "ctranslate2": open_translator(run, "ctranslate2", max_length=reference["max_new_tokens"], **options),
        "litert": open_translator(folder, "litert"),
    }


@pytest.fixture(params=["ctranslate2", "litert"])
def engine(request, imported, translators):
    """`(engine name, translator, reference)`."""
    return request.param, translators[request.param], imported[1]


def strings(values):
    return [text.decode("utf-8") for text in np.asarray(values).tolist()]


def quietly(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedOutputWarning)  # transformers cut some off too
        return function(*args, **kwargs)


def test_greedy_strings_equal_transformers_in_both_languages(engine):
    _, translator, reference = engine
    for target, expected in reference["targets"].items():
        assert strings(quietly(translator.greedy, reference["sentences"], target_lang=target)) == expected["greedy"]


def test_beam_4_best_strings_equal_transformers_in_both_languages(engine):
    _, translator, reference = engine
    for target, expected in reference["targets"].items():
        nbest = quietly(translator.nbest, reference["sentences"], target_lang=target)
        ours = [strings(row)[0] for row in np.asarray(nbest["translations"])]
        equal = [a == beams[0] for a, beams in zip(ours, expected["beam"])]
        assert sum(equal) >= 0.95 * len(equal), target
        for row, scores, same in zip(np.asarray(nbest["scores"]), expected["beam_scores"], equal):
            if same:  # transformers' score: log p / length ** length_penalty, the forced language adding 0
                np.testing.assert_allclose(row[0], scores[0], atol=1e-4)


def test_a_target_prefix_begins_every_output_and_decoding_continues_from_it(engine):
    _, translator, reference = engine
    target = list(reference["targets"])[1]
    sentences = reference["sentences"][:4]
    plain = strings(quietly(translator.greedy, sentences, target_lang=target))
    words = [text.split()[1] if text.startswith("__") else text.split()[0] for text in plain]
    again = strings(quietly(translator.greedy, sentences, target_lang=target, target_prefix=words))
    assert again == plain  # forcing what greedy chose anyway changes nothing
    for search in (translator.greedy, translator):
        forced = strings(quietly(search, sentences, target_lang=target, target_prefix=PREFIX))
        assert all(text.split("__ ", 1)[-1].startswith(PREFIX) for text in forced)
        assert forced != plain
    mixed = strings(quietly(translator.greedy, sentences, target_lang=target, target_prefix=[PREFIX, None, "", PREFIX]))
    assert mixed[1:3] == plain[1:3] and mixed[0].split("__ ", 1)[-1].startswith(PREFIX)


def test_each_engine_builds_its_forced_rows_by_the_one_rule(engine, forced_rows_languages):
    """Both engines build the forced beginning (the target language's token) with `rules.forced_rows`, one
    language per sentence, and still decode as transformers (the XLA engine's: `test_m2m100_decoding`)."""
    _, translator, reference = engine
    target, expected = next(iter(reference["targets"].items()))
    calls = forced_rows_languages
    sentences = reference["sentences"]
    assert strings(quietly(translator.greedy, sentences, target_lang=target)) == expected["greedy"]
    assert calls and all(language is not None and len(language) == len(sentences) for language in calls)


def test_both_engines_force_a_prefix_alike(imported, translators):
    """Two engines, one rule (`Search.processed`'s, which `test_m2m100_decoding` checks on the XLA decoder)."""
    reference = imported[1]
    target = list(reference["targets"])[0]
    for name in ("greedy", "__call__"):
        ours, theirs = (
            strings(quietly(getattr(t, name), reference["sentences"], target_lang=target, target_prefix=PREFIX))
            for t in translators.values()
        )
        assert ours == theirs


def test_score_gives_transformers_teacher_forced_log_probs(engine):
    """The four pairs of reference_logits.npz: the target is `[tgt_lang] pieces </s>`, each token's log-softmax."""
    name, translator, reference = engine
    folder = FIXTURES / ("nllb" if "_" in reference["source_lang"] else "m2m100")
    logits = np.load(folder / "reference_logits.npz")
    sources, targets = reference["sentences"][:4], reference["sentences"][4:8]
    for target, expected in reference["targets"].items():
        labels = expected["target_ids"][4:8]
        table = logits[f"{target}_logits"]
        log_softmax = table - np.log(np.exp(table).sum(-1, keepdims=True))
        sums = [log_softmax[i, np.arange(len(row)), row].sum() for i, row in enumerate(labels)]
        scored = translator.score(sources, targets, target_lang=target)
        assert np.asarray(scored["target_lengths"]).tolist() == [len(row) for row in labels]
        np.testing.assert_allclose(np.asarray(scored["log_probs"]), sums, rtol=1e-4, err_msg=name)


def test_a_default_target_language_serves_plain_calls(imported, translators):
    run, reference = imported
    target, expected = list(reference["targets"].items())[1]
    translator = open_translator(
        run, "ctranslate2", beam_size=1, max_length=reference["max_new_tokens"], target_lang=target
    )
    assert translator.languages.target_lang == target
    assert strings(quietly(translator, reference["sentences"])) == expected["greedy"]


@pytest.mark.parametrize(
    "controls, named",
    [
        (dict(target_lang="xx_Yyyy"), "`target_lang` 'xx_Yyyy' is not a language of this model"),
        (dict(source_lang="xx_Yyyy"), "`source_lang` 'xx_Yyyy' is not a language of this model"),
        (dict(target_lang=["en", "ko"]), "one entry per sentence"),
        (dict(target_prefix="a\x00b"), "`target_prefix`"),
    ],
)
def test_bad_controls_are_one_line(engine, controls, named):
    _, translator, reference = engine
    controls = {"target_lang": list(reference["targets"])[0], **controls}
    with pytest.raises(ValueError) as error:
        translator.greedy(["안녕"], **controls)
    assert "\n" not in str(error.value) and named in str(error.value)


def test_a_close_code_is_suggested_and_no_target_is_explained(engine):
    _, translator, reference = engine
    target = list(reference["targets"])[1]
    with pytest.raises(ValueError, match=f"close: {target}"):
        translator.greedy(["안녕"], target_lang=target.swapcase())
    with pytest.raises(ValueError) as error:
        translator(["안녕"])  # the fixtures name no default target
    assert "\n" not in str(error.value) and "target_lang=" in str(error.value) and "--target-lang" in str(error.value)


def test_an_unknown_default_language_is_refused_when_opening(imported, translators, tmp_path):
    run, reference = imported
    with pytest.raises(ValueError, match="`target_lang` 'xx' is not a language of this model") as error:
        ctranslate2_engine.CTranslate2Translator(run, target_lang="xx", cache_dir=tmp_path / "cache")
    assert "\n" not in str(error.value)
    assert not (tmp_path / "cache").exists()  # refused before any conversion
    folder = translators["litert"].path
    with pytest.raises(ValueError, match="`source_lang` 'xx' is not a language of this model"):
        open_translator(folder, "litert", source_lang="xx")


def test_the_ctranslate2_export_decodes_as_its_docstring_says(imported, tmp_path):
    """`export --format ctranslate2`: sources framed `[src_lang] pieces </s>`, the target language as target_prefix."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    from keras_transformer import runs
    from keras_transformer.ctranslate2.conversion import read_pieces
    from keras_transformer.export_formats import export_run

    run, reference = imported
    said = export_run(run, tmp_path / "ct2", "ctranslate2")
    assert "`[src_lang] pieces </s>`" in said and "target_prefix=[[tgt_lang]]" in said
    recorded = json.loads((tmp_path / "ct2" / "keras_transformer.json").read_text(encoding="utf-8"))
    assert recorded["source_language"] == "first" and recorded["add_source_end"] is False
    pieces = read_pieces(run / runs.SOURCE_TOKENIZER, runs.RunConfig.read(run).model.target_vocab_size)
    ids = {piece: index for index, piece in enumerate(pieces)}
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), intra_threads=1)
    sources = [[pieces[i] for i in row] for row in reference["source_ids"]]  # transformers' framing, as it is
    for expected in reference["targets"].values():
        prefix = [[pieces[expected["forced_bos_token_id"]]]] * len(sources)
        results = translator.translate_batch(
            sources, target_prefix=prefix, beam_size=1, max_decoding_length=reference["max_new_tokens"]
        )
        ours = [[ids[piece] for piece in result.hypotheses[0]] for result in results]
        assert ours == [row[:-1] if row[-1] == 2 else row for row in expected["greedy_ids"]]  # END (2) not returned
