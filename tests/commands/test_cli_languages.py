"""`--source-lang`, `--target-lang` and `--prefix` of `translate`, `evaluate`, `score` and `chat` on an NLLB run.

The run is the tiny NLLB-200 fixture (tests/data/m2m100/nllb), imported once
for the module; the expected strings are transformers' greedy outputs in its
reference.json (`max_new_tokens` 24), for sentences whose translation ended
before that limit, so that the run's own limit (199) decodes them the same.
The run decodes greedily (its generation settings: one beam).
"""

import io
import json
import pathlib
import sys

import numpy as np
import pytest

from keras_transformer import export
from keras_transformer.commands import arguments, cli
from keras_transformer.pretrained import import_pretrained

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
NLLB = DATA / "m2m100" / "nllb"
SOURCE, FIRST, SECOND = "kor_Hang", "eng_Latn", "kor_Hang"  # the fixture's source language and two targets


@pytest.fixture(scope="module")
def reference():
    return json.loads((NLLB / "reference.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("nllb") / "run"
    import_pretrained(NLLB, path)
    return path


@pytest.fixture(scope="module")
def one_pair_run(tmp_path_factory):
    """A Marian (OPUS-MT) run: one language pair, no language codes."""
    path = tmp_path_factory.mktemp("marian") / "run"
    import_pretrained(DATA / "marian" / "shared", path)
    return path


@pytest.fixture(scope="module")
def ended(reference):
    """Indices of four sentences whose greedy translations into both targets ended before transformers' limit."""
    limit = reference["max_new_tokens"]
    both = [
        i
        for i, sentence in enumerate(reference["sentences"])
        if sentence.strip() and all(len(t["greedy_ids"][i]) < limit for t in reference["targets"].values())
    ]
    return both[:4]


def _main(capsys, monkeypatch, argv, stdin=None):
    """Runs the command in-process: `(exit code, stdout, stderr)`."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _greedy(reference, target, indices):
    return [reference["targets"][target]["greedy"][i] for i in indices]


def test_translate_into_each_target_language_as_transformers_does(run, reference, ended, capsys, monkeypatch):
    sentences = [reference["sentences"][i] for i in ended]
    for target in (FIRST, SECOND):
        code, out, err = _main(
            capsys, monkeypatch, ["translate", "--model", str(run), "--target-lang", target, *sentences]
        )
        assert code == 0, err
        assert out.splitlines() == _greedy(reference, target, ended)
    # The source language named (the fixture's own default): the same translations, also read from stdin.
    stdin = "".join(s + "\n" for s in sentences).encode()
    argv = ["translate", "--model", str(run), "--source-lang", SOURCE, "--target-lang", FIRST, "--quiet"]
    code, out, err = _main(capsys, monkeypatch, argv, stdin)
    assert code == 0, err
    assert out.splitlines() == _greedy(reference, FIRST, ended)


def test_translate_source_lang_reaches_the_model(run, reference, ended, capsys, monkeypatch):
    sentences = [reference["sentences"][i] for i in ended]
    argv = ["translate", "--model", str(run), "--source-lang", "fra_Latn", "--target-lang", FIRST, *sentences]
    code, out, err = _main(capsys, monkeypatch, argv)  # another source language token: other encoder inputs
    assert code == 0, err
    python = export.load(run, source_lang="fra_Latn", target_lang=FIRST).greedy(sentences).numpy()
    assert out.splitlines() == [text.decode("utf-8") for text in python]
    assert out.splitlines() != _greedy(reference, FIRST, ended)


@pytest.mark.slow  # prefixes: one-pair prefix test here, every engine in test_serving_languages
def test_translate_prefix_begins_every_translation(run, reference, ended, capsys, monkeypatch):
    sentences = [reference["sentences"][i] for i in ended]
    expected = _greedy(reference, FIRST, ended)
    argv = ["translate", "--model", str(run), "--target-lang", FIRST]
    # Forcing the word greedy search chose anyway changes nothing.
    first_word = expected[0].split()[0]
    code, out, err = _main(capsys, monkeypatch, [*argv, "--prefix", first_word, sentences[0]])
    assert code == 0, err
    assert out.splitlines() == expected[:1]
    # Another beginning: every translation starts with it, and decoding goes on after it.
    prefix = "네 말이"
    code, out, err = _main(capsys, monkeypatch, [*argv, "--prefix", prefix, *sentences])
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == len(sentences) and all(line.startswith(prefix) for line in lines), lines
    assert lines != expected
    # --n-best goes through the same prefix.
    code, out, err = _main(capsys, monkeypatch, [*argv, "--prefix", prefix, "--n-best", "1", *sentences])
    assert code == 0, err
    rows = [line.split("\t") for line in out.splitlines()]
    assert [text for _, _, text in rows] == lines


@pytest.mark.slow  # evaluate's language flags: the translate tests cover their parsing
def test_evaluate_translates_into_target_lang_and_records_it(run, reference, ended, capsys, monkeypatch, tmp_path):
    sources, hypotheses = tmp_path / "src.ko", tmp_path / "hyp.en"
    sources.write_text("".join(reference["sentences"][i] + "\n" for i in ended), encoding="utf-8")
    references = tmp_path / "ref.en"
    references.write_text("".join(t + "\n" for t in _greedy(reference, FIRST, ended)), encoding="utf-8")
    argv = ["evaluate", "--model", str(run), "--source", str(sources), "--reference", str(references)]
    argv += ["--source-lang", SOURCE, "--target-lang", FIRST, "--hypotheses", str(hypotheses), "--quiet"]
    code, out, err = _main(capsys, monkeypatch, argv)
    assert code == 0, err
    scores = json.loads(out)
    assert scores["bleu"] == pytest.approx(100.0) and scores["chrf"] == pytest.approx(100.0)
    assert (scores["source_lang"], scores["target_lang"]) == (SOURCE, FIRST)
    assert hypotheses.read_text(encoding="utf-8").splitlines() == _greedy(reference, FIRST, ended)
    # Into the other language, the same references no longer match.
    argv[argv.index(FIRST)] = SECOND
    code, out, err = _main(capsys, monkeypatch, argv)
    assert code == 0, err
    assert json.loads(out)["bleu"] < 100 and json.loads(out)["target_lang"] == SECOND


@pytest.mark.slow  # the same language flags as translate's test, on score
def test_score_scores_targets_in_target_lang(run, reference, ended, capsys, monkeypatch, tmp_path):
    sources, targets = tmp_path / "src.ko", tmp_path / "tgt.en"
    sentences = [reference["sentences"][i] for i in ended]
    texts = _greedy(reference, FIRST, ended)
    sources.write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
    targets.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    translator = export.load(run, source_lang=SOURCE)
    printed = {}
    for target in (FIRST, SECOND):
        output = tmp_path / f"{target}.json"
        argv = ["score", "--model", str(run), "--source", str(sources), "--target", str(targets), "--quiet"]
        code, out, err = _main(capsys, monkeypatch, [*argv, "--target-lang", target])
        assert code == 0, err
        printed[target] = [float(line) for line in out.splitlines()]
        code, _, err = _main(capsys, monkeypatch, [*argv, "--target-lang", target, "--output", str(output)])
        assert code == 0, err
        report = json.loads(output.read_text(encoding="utf-8"))
        python = translator.score(sentences, texts, target_lang=target)
        np.testing.assert_allclose(printed[target], python["log_probs"].numpy(), atol=1e-5)
        assert report["target_lengths"] == python["target_lengths"].numpy().tolist()
        assert report["target_lang"] == target
    assert printed[FIRST] != printed[SECOND]  # the target's language token is scored


@pytest.mark.slow  # chat's language flags: the translate tests cover their parsing
def test_chat_replies_in_target_lang_with_prefix(run, reference, ended, capsys, monkeypatch):
    sentences = [reference["sentences"][i] for i in ended[:2]]
    stdin = "".join(s + "\n" for s in sentences).encode() + b"\n"
    argv = ["chat", "--model", str(run), "--beam", "1", "--target-lang", SECOND]
    code, out, err = _main(capsys, monkeypatch, argv, stdin)
    assert code == 0, err
    assert out.splitlines() == _greedy(reference, SECOND, ended[:2])
    prefix = "네 말이"
    code, out, err = _main(capsys, monkeypatch, [*argv, "--prefix", prefix], stdin)
    assert code == 0, err
    assert len(out.splitlines()) == 2 and all(line.startswith(prefix) for line in out.splitlines())
    # Sampling (the default) takes the same controls.
    sampling = ["chat", "--model", str(run), "--target-lang", SECOND, "--prefix", prefix, "--seed", "3"]
    code, out, err = _main(capsys, monkeypatch, sampling, stdin)
    assert code == 0, err
    assert len(out.splitlines()) == 2 and all(line.startswith(prefix) for line in out.splitlines())


@pytest.mark.parametrize(
    "command, flags, message",
    [
        ("translate", [], "translates into 202 languages; choose one with --target-lang"),
        ("translate", ["--target-lang", "eng_latn"], "--target-lang 'eng_latn' is not a language of this model; "),
        ("translate", ["--target-lang", FIRST, "--source-lang", "kor"], "--source-lang 'kor' is not a language"),
        ("score", [], "choose one with --target-lang (e.g. 'fra_Latn')"),
        ("evaluate", ["--target-lang", "xx_Yyyy"], "--target-lang 'xx_Yyyy' is not a language of this model"),
        ("chat", ["--beam", "1"], "choose one with --target-lang"),
    ],
)
def test_language_errors_are_one_line(run, tmp_path, capsys, monkeypatch, command, flags, message):
    (tmp_path / "a.txt").write_text("안녕\n", encoding="utf-8")
    files = {
        "translate": ["안녕"],
        "chat": [],
        "score": ["--source", str(tmp_path / "a.txt"), "--target", str(tmp_path / "a.txt")],
        "evaluate": ["--source", str(tmp_path / "a.txt"), "--reference", str(tmp_path / "a.txt")],
    }[command]
    code, out, err = _main(capsys, monkeypatch, [command, "--model", str(run), *flags, *files], stdin=b"")
    assert code == 2 and out == ""
    assert err.startswith(f"keras-transformer {command}: error: ") and message in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_close_codes_are_named(run, capsys, monkeypatch):
    code, _, err = _main(capsys, monkeypatch, ["translate", "--model", str(run), "--target-lang", "eng_latn", "hi"])
    assert code == 2 and "close: eng_Latn" in err


@pytest.mark.parametrize("flag", ["--source-lang", "--target-lang"])
def test_a_language_for_a_model_of_one_pair_is_one_line(one_pair_run, capsys, monkeypatch, flag):
    code, out, err = _main(capsys, monkeypatch, ["translate", "--model", str(one_pair_run), flag, "de", "Hallo"])
    assert code == 2 and out == ""
    assert f"error: {flag} applies to multilingual models; this one translates one language pair" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_model_of_one_pair_takes_a_prefix(one_pair_run, capsys, monkeypatch):
    reference = json.loads((DATA / "marian" / "shared" / "reference.json").read_text(encoding="utf-8"))
    sentence, expected = reference["sentences"][1], reference["greedy"][1]
    argv = ["translate", "--model", str(one_pair_run), "--beam", "1"]
    code, out, err = _main(capsys, monkeypatch, [*argv, "--prefix", expected.split()[0], sentence])
    assert code == 0 and out == expected + "\n", err  # forcing the word greedy chose changes nothing
    code, out, err = _main(capsys, monkeypatch, [*argv, "--prefix", "좋아하", sentence])
    assert code == 0 and out.startswith("좋아하") and out != expected + "\n", err


@pytest.mark.parametrize("command", ["translate", "evaluate", "score", "chat", "serve"])
def test_help_explains_the_language_flags_with_a_code_of_each_family(command, capsys):
    with pytest.raises(SystemExit) as stopped:
        cli.main([command, "--help"])
    assert stopped.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--source-lang CODE", "--target-lang CODE"):
        assert flag in text
    assert arguments.SOURCE_EXAMPLE in text and arguments.TARGET_EXAMPLE in text
    assert "eng_Latn (NLLB-200) or en (M2M100)" in text and "fra_Latn (NLLB-200) or fr (M2M100)" in text
    assert ("--prefix TEXT" in text) == (command in ("translate", "chat"))


def test_a_language_for_a_decoder_only_run_is_one_line(tmp_path, capsys, monkeypatch):
    run = tmp_path / "gpt2"
    import_pretrained(DATA / "gpt2", run)
    code, out, err = _main(capsys, monkeypatch, ["translate", "--model", str(run), "--target-lang", "de", "Hallo"])
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.strip().endswith(f"error: --target-lang applies to multilingual models; {run} takes no language codes")
