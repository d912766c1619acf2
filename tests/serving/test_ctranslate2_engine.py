"""`--engine ctranslate2`: the XLA decoder's greedy strings and scores, a cache that converts once, clear refusals."""

import json
import pathlib
import shutil
import sys
import warnings

import keras
import numpy as np
import pytest

from keras_transformer import runs
from keras_transformer.commands import cli
from keras_transformer.decoding import TruncatedOutputWarning
from keras_transformer.engines.ctranslate2 import cache as ctranslate2_cache
from keras_transformer.engines.ctranslate2 import translator as ctranslate2_engine
from keras_transformer.files import destinations, user_cache
from keras_transformer.opener import open_translator
from keras_transformer.pretrained import import_pretrained

from serving_fixtures import Server, post
from trained_runs import DATA, MAX_LENGTH, tiny_run_dir

pytest.importorskip("ctranslate2", reason="the ctranslate2 engine needs the ctranslate2 extra")
MARIAN = pathlib.Path(__file__).resolve().parents[1] / "data" / "marian" / "separate"
# Scores: CTranslate2's score_batch takes each token's softmax over the whole vocabulary, the XLA decoder over
# the tokens it may generate (PAD and START left out). Per token, log p_vocab = log p_allowed + log(1 - p(PAD) -
# p(START)): never higher, and lower by what the model gives PAD and START. The tiny run, trained on 20 pairs,
# gives them ~5e-4 per token: measured 0.1-0.5% of each sum, so 1% bounds it (a wrong token or a lost END
# costs far more); float32 sums in another order add ~1e-6.
SCORE_RTOL = 1e-2


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A fresh conversion cache for this module, also seen by the `serve` subprocess."""
    with pytest.MonkeyPatch.context() as patch:
        folder = tmp_path_factory.mktemp("ct2-cache")
        patch.setenv(user_cache.CACHE_ENV, str(folder))
        yield folder


@pytest.fixture(scope="module")
def run(cache):
    """The tiny run, and its 20 training pairs then 10 unseen Multi30k pairs (sources, targets)."""
    path, pairs = tiny_run_dir()
    sources = [s for s, _ in pairs] + (DATA / "train.en").read_text(encoding="utf-8").splitlines()[1000:1010]
    targets = [t for _, t in pairs] + (DATA / "train.de").read_text(encoding="utf-8").splitlines()[1000:1010]
    return path, sources, targets


@pytest.fixture(scope="module")
def marian(tmp_path_factory, cache):
    """An imported OPUS-MT fixture, and the sentences whose reference ended before `max_new_tokens`."""
    path = tmp_path_factory.mktemp("marian") / "run"
    import_pretrained(MARIAN, path)
    reference = json.loads((MARIAN / "reference.json").read_text(encoding="utf-8"))
    ended = [
        sentence
        for sentence, ids in zip(reference["sentences"], reference["greedy_ids"])
        if len(ids) < reference["max_new_tokens"] and sentence.strip()
    ]
    return path, ended


def cli_output(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def translate(capsys, model, sentences, tmp_path, engine):
    source = tmp_path / f"input-{engine}.txt"
    source.write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
    argv = ["translate", "--model", model, "--input", source, "--beam", "1", "--quiet", "--engine", engine]
    return cli_output(capsys, *argv).splitlines()


@pytest.mark.parametrize(
    "which", [pytest.param("tiny run", marks=pytest.mark.slow), "imported Marian"]
)  # one is enough
def test_translate_gives_the_xla_greedy_strings(which, run, marian, capsys, tmp_path):
    model, sentences = (run[0], run[1]) if which == "tiny run" else marian
    ours = translate(capsys, model, sentences, tmp_path, "xla")
    theirs = translate(capsys, model, sentences, tmp_path, "ctranslate2")
    assert theirs == ours
    assert len(ours) == len(sentences) >= 10 and len(set(ours)) > len(ours) // 2  # real, varied translations


@pytest.mark.parametrize(
    "which, prefix", [pytest.param("tiny run", "Ein Hund", marks=pytest.mark.slow), ("imported Marian", "네 말이")]
)
def test_a_target_prefix_gives_the_xla_strings(which, prefix, run, marian):
    """The prefix's pieces as CTranslate2's `target_prefix`: greedy gives the XLA decoder's strings, beams begin so."""
    model, sentences = (run[0], run[1]) if which == "tiny run" else marian
    sentences = list(sentences[:6])
    xla, ct2 = (open_translator(model, engine, beam_size=4, max_length=20) for engine in ("xla", "ctranslate2"))
    prefixes = [prefix, "", prefix, None, prefix, prefix]  # one per sentence; none: decoding as usual
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedOutputWarning)
        ours = xla.greedy(sentences, target_prefix=prefixes).numpy().tolist()
        theirs = ct2.greedy(sentences, target_prefix=prefixes).numpy().tolist()
        plain = ct2.greedy(sentences).numpy().tolist()
        beams = ct2.nbest(sentences, target_prefix=prefix)["translations"].numpy()
    assert theirs == ours
    assert [theirs[1], theirs[3]] == [plain[1], plain[3]] and theirs != plain
    assert all(text.decode("utf-8").startswith(prefix) for text in [*theirs[::2], *beams.ravel()])


def test_score_gives_the_xla_log_probs(run, capsys, tmp_path):
    path, sources, targets = run
    (tmp_path / "src").write_text("".join(s + "\n" for s in sources), encoding="utf-8")
    (tmp_path / "tgt").write_text("".join(t + "\n" for t in targets), encoding="utf-8")
    reports = {}
    for engine in ("xla", "ctranslate2"):
        output = tmp_path / f"{engine}.json"
        argv = ["score", "--model", path, "--source", tmp_path / "src", "--target", tmp_path / "tgt"]
        cli_output(capsys, *argv, "--output", output, "--quiet", "--engine", engine)
        reports[engine] = json.loads(output.read_text(encoding="utf-8"))
    ours, theirs = reports["xla"], reports["ctranslate2"]
    assert theirs["target_lengths"] == ours["target_lengths"]
    short = [i for i, n in enumerate(ours["target_lengths"]) if n < MAX_LENGTH]  # see the engine's edge cases
    assert len(short) >= 20
    theirs, ours = (np.array([report["log_probs"][i] for i in short]) for report in (theirs, ours))
    assert np.all(theirs <= ours + 1e-5)  # the whole vocabulary's softmax never gives more
    np.testing.assert_allclose(theirs, ours, rtol=SCORE_RTOL)


def test_serve_answers_the_xla_greedy_strings(run, capsys, tmp_path):
    path, sentences = run[0], run[1]
    ours = translate(capsys, path, sentences, tmp_path, "xla")
    server = Server(path, "--engine", "ctranslate2", "--timeout", "300", name="tiny")
    try:
        answer = post(server, {"signature_name": "greedy", "instances": sentences})
        assert answer.status_code == 200, answer.text
        assert [row["translations"] for row in answer.json()["predictions"]] == ours
        scored = post(server, {"signature_name": "score", "inputs": {"sources": sentences, "targets": ours}})
        assert scored.status_code == 200 and len(scored.json()["outputs"]["log_probs"]) == len(sentences)
        import httpx

        metadata = httpx.get(f"{server.url}/v1/models/tiny/metadata", timeout=60).json()
        signatures = metadata["metadata"]["signature_def"]["signature_def"]
        assert {"serving_default", "greedy", "sample", "nbest", "score"} <= set(signatures)
    finally:
        assert server.stop() == 0, server.stderr()


# -- the cache ---------------------------------------------------------------------------------


def model_bin(folder):
    stat = (folder / "model.bin").stat()
    return stat.st_ino, stat.st_mtime_ns


def test_converts_once_and_again_when_the_model_changes(run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run[0], copy)
    folder = ctranslate2_cache.cached_model(copy, tmp_path / "cache")
    first = model_bin(folder)
    assert ctranslate2_cache.cached_model(copy, tmp_path / "cache") == folder
    assert model_bin(folder) == first  # reused: not written again
    model = keras.saving.load_model(copy / runs.MODEL, compile=False)
    model.weights[0].assign(model.weights[0] + 0.01)
    model.save(copy / runs.MODEL)
    assert ctranslate2_cache.cached_model(copy, tmp_path / "cache") == folder
    assert model_bin(folder) != first
    recorded = json.loads((folder / "keras_transformer.json").read_text(encoding="utf-8"))
    assert recorded["run_sha256"] == ctranslate2_cache.fingerprint(copy)
    assert destinations.is_own_ctranslate2(folder)


@pytest.mark.parametrize("name", ["model.bin", "shared_vocabulary.json", "config.json"])
def test_a_file_deleted_from_the_cache_is_converted_again(run, tmp_path, name):
    folder = ctranslate2_cache.cached_model(run[0], tmp_path / "cache")
    content = (folder / name).read_bytes()
    (folder / name).unlink()
    assert ctranslate2_cache.cached_model(run[0], tmp_path / "cache") == folder
    assert (folder / name).read_bytes() == content and destinations.is_own_ctranslate2(folder)
    translator = ctranslate2_engine.CTranslate2Translator(run[0], beam_size=1, cache_dir=tmp_path / "cache")
    assert translator.greedy(run[1][:2]).shape == (2,)


def test_never_touches_a_foreign_file_in_the_cache(run, tmp_path):
    folder = ctranslate2_cache.cached_model(run[0], tmp_path / "cache")
    (folder / "notes.txt").write_text("mine", encoding="utf-8")
    before = model_bin(folder)
    with pytest.raises(destinations.UnsafeDestinationError, match="notes.txt"):
        ctranslate2_cache.cached_model(run[0], tmp_path / "cache")
    assert (folder / "notes.txt").read_text(encoding="utf-8") == "mine" and model_bin(folder) == before
    shutil.rmtree(folder)
    folder.mkdir()
    (folder / "model.bin").write_bytes(b"someone else's model")
    with pytest.raises(destinations.UnsafeDestinationError, match="not a CTranslate2 export"):
        ctranslate2_cache.cached_model(run[0], tmp_path / "cache")
    assert (folder / "model.bin").read_bytes() == b"someone else's model"


def test_the_engine_maps_the_decoding_rules(run, tmp_path, monkeypatch):
    """`decoding.rules` changed: the ids CTranslate2 suppresses and the scores' normalisation follow."""
    from keras_transformer.decoding import rules

    original = rules.never_generated
    monkeypatch.setattr(rules, "never_generated", lambda *args: (*original(*args), 7))
    monkeypatch.setattr(rules, "length_penalty", lambda length, alpha, normalization="gnmt", xp=None: 2.0)
    translator = ctranslate2_engine.CTranslate2Translator(run[0], beam_size=1, cache_dir=tmp_path / "cache")
    assert [translator._target_pieces[7]] in translator._suppress
    result = translator.greedy_with_status(run[1][:3])
    raw = translator.translator.translate_batch(translator.source_pieces(run[1][:3]), **translator.translate_options(1))
    expected = [r.scores[0] / 2.0 for r in raw]  # greedy: CTranslate2's plain sum, over the rule's penalty
    np.testing.assert_allclose(result["scores"].numpy(), expected, rtol=1e-6)


# -- refusals --------------------------------------------------------------------------------------


def one_line_error(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("kind", ["SavedModel", "LiteRT export"])
def test_refuses_exports(kind, tmp_path, capsys):
    folder = tmp_path / "export"
    folder.mkdir()
    if kind == "SavedModel":
        (folder / "saved_model.pb").write_bytes(b"graph")
    else:
        (folder / "litert.json").write_text(json.dumps({"format": "litert"}), encoding="utf-8")
    err = one_line_error(capsys, "translate", "--model", folder, "--engine", "ctranslate2", "A dog runs.")
    assert f"is a {kind}" in err and "the ctranslate2 engine opens run directories" in err


def test_says_what_to_install(run, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # `import ctranslate2` now fails
    err = one_line_error(capsys, "translate", "--model", run[0], "--engine", "ctranslate2", "A dog runs.")
    assert ctranslate2_cache.INSTALL in err
