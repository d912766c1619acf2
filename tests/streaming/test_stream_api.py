"""`translator.stream`: words as they are decoded, joined the plain output's string, the step compiled once."""

import json
import pathlib
import warnings

import pytest

from keras_transformer.decoding import TruncatedOutputWarning
from keras_transformer.opener import open_translator
from keras_transformer.pretrained import import_pretrained

from trained_runs import tiny_run_dir

MARIAN = pathlib.Path(__file__).resolve().parents[1] / "data" / "marian" / "separate"
SAMPLING = dict(temperature=0.9, top_k=0, top_p=0.95, seed=7)


@pytest.fixture(scope="module")
def tiny():
    path, pairs = tiny_run_dir()
    sentences = [source for source, _ in pairs[:6]] + ["A man in a blue shirt and a dog in the snow near a tree."]
    return open_translator(path, beam_size=1), sentences


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    path = tmp_path_factory.mktemp("marian") / "run"
    import_pretrained(MARIAN, path)
    sentences = json.loads((MARIAN / "reference.json").read_text(encoding="utf-8"))["sentences"][:6]
    return open_translator(path, beam_size=1), sentences


def plain(translator, sentences, search, **controls):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedOutputWarning)
        if search == "sample":
            options = (SAMPLING["temperature"], SAMPLING["top_k"], SAMPLING["top_p"], SAMPLING["seed"])
            result = translator.sample(sentences, *options, **controls)
        else:
            result = translator.greedy(sentences, **controls)
    return [text.decode("utf-8") for text in result.numpy()]


def streamed(translator, sentence, search, **controls):
    options = SAMPLING if search == "sample" else {}
    return list(translator.stream(sentence, search, **options, **controls))


@pytest.mark.parametrize(
    "which, search",
    [
        ("imported Marian", "greedy"),
        ("tiny run", "sample"),
        pytest.param("tiny run", "greedy", marks=pytest.mark.slow),  # the same stream as Marian's greedy one
        pytest.param("imported Marian", "sample", marks=pytest.mark.slow),  # the same as the tiny run's sampling
    ],
)
def test_the_joined_stream_is_the_plain_output(which, search, tiny, marian):
    translator, sentences = tiny if which == "tiny run" else marian
    expected = [plain(translator, [sentence], search)[0] for sentence in sentences]  # a seed draws per batch
    pieces = [streamed(translator, sentence, search) for sentence in sentences]
    assert ["".join(p) for p in pieces] == expected
    assert sum(len(p) > 2 for p in pieces) >= 3  # word by word, not the whole text once
    for piece in [piece for p in pieces for piece in p[1:]]:
        assert piece.startswith(" ") or not any(c.isspace() for c in piece)  # cut where a word begins


def test_a_stream_takes_the_controls(tiny):
    translator, sentences = tiny
    prefixed = streamed(translator, sentences[0], "greedy", target_prefix="Zwei Katzen")
    assert "".join(prefixed) == plain(translator, sentences[:1], "greedy", target_prefix="Zwei Katzen")[0]
    assert prefixed[0] == "Zwei"
    banned = streamed(translator, sentences[0], "greedy", banned=["Hund"])
    assert "".join(banned) == plain(translator, sentences[:1], "greedy", banned=["Hund"])[0]
    assert "Hund" not in "".join(banned) and "Hund" in "".join(streamed(translator, sentences[0], "greedy"))
    with pytest.raises(ValueError, match="target_lang"):
        translator.stream(sentences[0], target_lang="de")


def test_the_first_words_come_before_half_the_steps(marian):
    """Counted in decoder steps: the first piece is out while most of a long output is still to decode."""
    translator, _ = marian
    sentence = "영화 보러 갈까?"  # 18 tokens (the fixture's reference), words from the 6th
    list(translator.stream(sentence, "greedy"))  # compiled
    stepped = translator._stream_decoder.searches["greedy"]
    calls = []
    step = stepped._step

    def counted(*args):
        calls.append(1)
        return step(*args)

    stepped._step = counted
    try:
        pieces = translator.stream_pieces(sentence, "greedy")
        next(pieces)
        first = len(calls)
        rest = list(pieces)
    finally:
        stepped._step = step
    assert len(calls) >= 16 and first < len(calls) / 2, (first, len(calls), rest)


def test_the_step_is_traced_once_per_shape_not_per_token(tiny):
    """Two source widths (16 and 32 tokens): each part traced for each at most, whatever the steps."""
    translator, sentences = tiny
    first = [streamed(translator, sentence, "greedy") for sentence in sentences]
    greedy = translator._stream_decoder.searches["greedy"]
    traced = greedy.traces
    assert [streamed(translator, sentence, "greedy") for sentence in sentences] == first
    assert greedy.traces == traced <= 2 * (1 + 3 + 1)  # start, the step (one per cache phase at most), finish
    assert sum(len(words) for words in first) > 3 * traced


def test_beam_search_gives_the_whole_text_once(tiny):
    path, _ = tiny_run_dir()
    translator = open_translator(path, beam_size=4)
    sentence = tiny[1][0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedOutputWarning)
        best = translator([sentence]).numpy()[0].decode("utf-8")
    assert list(translator.stream(sentence)) == [best]
    assert [p.finish_reason for p in translator.stream_pieces(sentence)] == ["end"]


def test_an_empty_sentence_and_bad_inputs(tiny):
    translator, _ = tiny
    assert list(translator.stream_pieces("", "greedy"))[-1].finish_reason == "end"
    assert list(translator.stream("  ", "greedy")) == []
    for bad, match in ((["a", "b"], "one str"), ("a\0b", "NUL")):
        with pytest.raises(ValueError, match=match):
            translator.stream(bad)
    with pytest.raises(ValueError, match="search"):
        translator.stream("a", "beam")
    with pytest.raises(ValueError, match="top_p"):
        translator.stream("a", "sample", top_p=2.0)
