"""`--engine ctranslate2` streams through CTranslate2's `generate_tokens`: joined, the engine's own strings."""

import json
import pathlib

import pytest

from keras_transformer.files import user_cache
from keras_transformer.opener import open_translator
from keras_transformer.pretrained import import_pretrained

from trained_runs import tiny_run_dir

pytest.importorskip("ctranslate2", reason="the ctranslate2 engine needs the ctranslate2 extra")
MARIAN = pathlib.Path(__file__).resolve().parents[1] / "data" / "marian" / "separate"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(user_cache.CACHE_ENV, str(tmp_path_factory.mktemp("ct2-cache")))
        tiny, pairs = tiny_run_dir()
        marian = tmp_path_factory.mktemp("marian") / "run"
        import_pretrained(MARIAN, marian)
        korean = json.loads((MARIAN / "reference.json").read_text(encoding="utf-8"))["sentences"][:8]
        yield {"tiny run": (tiny, [s for s, _ in pairs[:8]]), "imported Marian": (marian, korean)}


@pytest.mark.parametrize("which", ["tiny run", "imported Marian"])
def test_the_joined_stream_is_the_engines_output(which, runs):
    path, sentences = runs[which]
    translator = open_translator(path, "ctranslate2", beam_size=1)
    greedy = [text.decode("utf-8") for text in translator.greedy_with_status(sentences)["translations"].numpy()]
    streams = [list(translator.stream(sentence, "greedy")) for sentence in sentences]
    assert ["".join(words) for words in streams] == greedy
    assert sum(len(words) > 2 for words in streams) >= 3
    # Sampling is not compared: `generate_tokens` decodes on CTranslate2's own thread, whose random generator
    # `set_random_seed` does not seed as it seeds `translate_batch`'s (docs/serving.md).
    prefixed = translator.greedy_with_status(sentences[:1], target_prefix="Ein")["translations"].numpy()[0]
    assert "".join(translator.stream(sentences[0], "greedy", target_prefix="Ein")) == prefixed.decode("utf-8")
    if which == "tiny run":  # German words to ban
        banned = translator.greedy_with_status(sentences[:1], banned=["Hund"])["translations"].numpy()[0]
        assert "".join(translator.stream(sentences[0], "greedy", banned=["Hund"])) == banned.decode("utf-8")


def test_beam_search_streams_once(runs):
    path, sentences = runs["tiny run"]
    translator = open_translator(path, "ctranslate2", beam_size=4)
    best = translator.call_with_status(sentences[:1])["translations"].numpy()[0].decode("utf-8")
    assert [(p.text, p.finish_reason) for p in translator.stream_pieces(sentences[0])] == [(best, "end")]
