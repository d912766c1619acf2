"""Banned words hold on every engine: a word the plain output holds is absent once banned.

The tests' tiny Multi30k run (`trained_runs.tiny_run_dir`) on the XLA
translator (greedy, beam, sampling, n-best), its SavedModel, the CTranslate2
engine and a LiteRT export (greedy and beam: it does not sample). The rule
that maps a word to ids is `translators.banned_words`; its searches' side
is `tests/decoding/test_rules.py`.
"""

import collections
import warnings

import pytest

from keras_transformer.export import load
from keras_transformer.translators import banned_words

from trained_runs import tiny_run_dir


def _strings(values):
    values = values.numpy() if hasattr(values, "numpy") else values
    return [v.decode("utf-8") if isinstance(v, bytes) else v for v in values.ravel().tolist()]


@pytest.fixture(scope="module")
def run():
    path, pairs = tiny_run_dir()
    return path, [source for source, _ in pairs[:8]]


@pytest.fixture(scope="module")
def xla(run):
    return load(run[0])


@pytest.fixture(scope="module")
def word(xla, run):
    """The longest word of the plain greedy outputs (the tiny model's most reliable one)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        words = collections.Counter(w.strip(".,") for t in _strings(xla.greedy(run[1])) for w in t.split())
    return max(words, key=lambda w: (len(w), words[w]))


def _check(translate, sentences, word, **extra):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny model runs on to max_length once its words are banned
        before = _strings(translate(sentences, **extra))
        after = _strings(translate(sentences, banned=[word], **extra))
    assert any(word in text for text in before), (word, before)
    assert not any(word in text for text in after), (word, after)
    return after


SLOW = pytest.mark.slow  # the same banned-ids input as greedy's, through other programs


@pytest.mark.parametrize(
    "method", ["greedy", pytest.param("__call__", marks=SLOW), pytest.param("nbest", marks=SLOW), "sample"]
)
def test_the_xla_translator_never_produces_a_banned_word(xla, run, word, method):
    sample = dict(temperature=0.3, top_k=0, top_p=1.0, seed=7) if method == "sample" else {}

    def translate(sentences, **controls):
        result = getattr(xla, method)(sentences, **controls, **sample)
        return result["translations"] if method == "nbest" else result

    _check(translate, run[1], word)


def test_the_savedmodel_takes_the_banned_ids_as_a_signature_input(xla, run, word, tmp_path):
    loaded = load(xla.save(tmp_path / "export"))
    assert loaded.banned_ids_of([word]) == xla.banned_ids_of([word])
    for method in ("greedy", "__call__"):
        after = _check(getattr(loaded, method), run[1], word)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert after == _strings(getattr(xla, method)(run[1], banned=[word]))


def test_the_ctranslate2_engine_suppresses_the_banned_ids(run, word, tmp_path):
    pytest.importorskip("ctranslate2")
    from keras_transformer.opener import open_translator

    ct2 = open_translator(run[0], "ctranslate2", cache_dir=tmp_path)
    _check(ct2.greedy, run[1], word)
    _check(ct2, run[1], word)
    _check(ct2.sample, run[1], word, temperature=0.3, top_k=0, top_p=1.0, seed=7)


@pytest.mark.slow  # a LiteRT export: half a minute
def test_the_litert_host_search_never_produces_a_banned_word(run, word, tmp_path):
    pytest.importorskip("ai_edge_litert")
    from keras_transformer import litert
    from keras_transformer.engines.litert.translator import Translator as LiteRTTranslator

    litert.export_run(run[0], tmp_path / "litert")
    translator = LiteRTTranslator(tmp_path / "litert")
    _check(translator.greedy, run[1], word)
    _check(translator, run[1], word)


def test_bad_banned_words_are_one_line(xla, run):
    for banned, message in (("Hund", "a list of words"), ([""], "banned[0]"), ([3], "banned[0]")):
        with pytest.raises(ValueError, match=message.replace("[", r"\[")) as error:
            xla.greedy(run[1][:1], banned=banned)
        assert "\n" not in str(error.value)


def test_a_word_of_special_pieces_only_has_nothing_to_ban():
    pieces = ["<pad>", "<unk>", "<s>", "</s>", "\u2581", "a"]
    with pytest.raises(ValueError, match="'\u00a7' has no piece this model could produce"):
        banned_words.banned_ids(("\u00a7",), lambda words: [[4, 1] for _ in words], pieces, specials=(0, 1, 2, 3))


def test_a_word_bans_its_pieces_with_and_without_the_word_boundary():
    pieces = ["<pad>", "<unk>", "<s>", "</s>", "\u2581Hund", "Hund", "\u2581Kat", "ze", "Kat"]
    tokenize = {"Hund": [4], "Katze": [6, 7]}
    ids = banned_words.banned_ids(("Hund", "Katze"), lambda ws: [tokenize[w] for w in ws], pieces, (0, 1, 2, 3))
    assert ids == (4, 5, 6, 7, 8)
    assert banned_words.check_words(["New York", "Hund", "Hund"]) == ("New", "York", "Hund")


@pytest.mark.slow  # two commands end to end: the translators' bans are checked here
def test_translate_and_evaluate_take_ban_flags(run, word, tmp_path, capsys):
    from keras_transformer.commands import cli

    source = tmp_path / "source.txt"
    source.write_text("".join(s + "\n" for s in run[1]), encoding="utf-8")
    argv = ["translate", "--model", str(run[0]), "--input", str(source), "--beam", "1", "--quiet"]
    assert cli.main(argv) == 0
    assert word in capsys.readouterr().out
    assert cli.main([*argv, "--ban", word, "--ban", "Hund"]) == 0
    assert word not in capsys.readouterr().out
    hypotheses = tmp_path / "hypotheses.txt"
    evaluate = ["evaluate", "--model", str(run[0]), "--source", str(source), "--reference", str(source)]
    assert cli.main([*evaluate, "--beam", "1", "--quiet", "--ban", word, "--hypotheses", str(hypotheses)]) == 0
    assert word not in hypotheses.read_text(encoding="utf-8")
    capsys.readouterr()
    assert cli.main([*argv, "--ban", "\u00a7\u00a7"]) in (0, 2)  # a byte-fallback word bans its bytes, or is refused
    err = capsys.readouterr().err
    assert "Traceback" not in err and all(
        line.startswith(("warning:", "keras-transformer")) for line in err.splitlines()
    )
