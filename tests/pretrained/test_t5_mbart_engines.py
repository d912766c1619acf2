"""Imported T5, MADLAD-400 and mBART-50 runs on the CTranslate2 engine and as SavedModels; LiteRT says why not.

The references are transformers' (tests/data/t5_mbart/*/reference.json).
CTranslate2 gives transformers' greedy strings for every sentence that
ends before the length limit (transformers forces mBART's END at the last
step, CTranslate2 does not; and it translates an empty source to "" unread),
in both languages of MADLAD and mBART-50, the target language as MADLAD's
`<2xx>` source token or mBART's forced first token. The SavedModel (the XLA
translator saved) gives its translator's strings. T5's CTranslate2 check, the
SavedModel and the REST and command-line checks run with the long ones
(`-m slow`): about two minutes on 2 cores.
"""

import json
import pathlib
import warnings

import numpy as np
import pytest

from keras_transformer import export, litert
from keras_transformer.decoding import TruncatedOutputWarning
from keras_transformer.files import user_cache
from keras_transformer.opener import open_translator
from keras_transformer.pretrained import import_pretrained

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "t5_mbart"
SOURCE_LANG = {"mbart50": "ko_KR"}


@pytest.fixture(scope="module", params=["t5", "madlad", "mbart50"])
def imported(request, tmp_path_factory):
    """`(kind, run directory, reference)` of each fixture, imported once."""
    run = tmp_path_factory.mktemp(request.param) / "run"
    import_pretrained(FIXTURES / request.param, run)
    return request.param, run, json.loads((FIXTURES / request.param / "reference.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A fresh CTranslate2 conversion cache for this module."""
    with pytest.MonkeyPatch.context() as patch:
        folder = tmp_path_factory.mktemp("ct2-cache")
        patch.setenv(user_cache.CACHE_ENV, str(folder))
        yield folder


def strings(values):
    return [text.decode("utf-8") for text in np.asarray(values).tolist()]


def quietly(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedOutputWarning)
        return function(*args, **kwargs)


def ended(ids, reference, sentence):
    """Whether transformers' output ended before the limit (and the source is not empty)."""
    return bool(sentence) and len(ids) < reference["max_new_tokens"]


@pytest.mark.parametrize("imported", [pytest.param("t5", marks=pytest.mark.slow), "madlad", "mbart50"], indirect=True)
def test_ctranslate2_gives_transformers_greedy_and_beam_strings(imported, cache):
    pytest.importorskip("ctranslate2")
    kind, run, reference = imported
    options = dict(beam_size=4, alpha=1.0, max_length=reference["max_new_tokens"], source_lang=SOURCE_LANG.get(kind))
    translator = open_translator(run, "ctranslate2", **options)
    for key, expected in reference["targets"].items():
        controls = {} if key == "default" else {"target_lang": key}
        greedy = strings(quietly(translator.greedy, reference["sentences"], **controls))
        for sentence, ours, theirs, ids in zip(
            reference["sentences"], greedy, expected["greedy"], expected["greedy_ids"]
        ):
            if ended(ids, reference, sentence):
                assert ours == theirs, sentence
        nbest = quietly(translator.nbest, reference["sentences"], **controls)
        best = [strings(row)[0] for row in np.asarray(nbest["translations"])]
        compared = [
            ours == beams[0]
            for sentence, ours, beams, ids in zip(reference["sentences"], best, expected["beam"], expected["beam_ids"])
            if ended(ids[0], reference, sentence)
        ]
        assert sum(compared) >= 0.7 * len(compared), (key, sum(compared), len(compared))  # its stopping rule differs


@pytest.fixture(scope="module")
def saved(imported, tmp_path_factory):
    """MADLAD's SavedModel (one beam, transformers' limit): its target language in the source is the new part;
    mBART-50's languages are M2M100's, which their own tests export."""
    kind, run, reference = imported
    if kind != "madlad":
        pytest.skip("MADLAD's SavedModel carries its target language into the source")
    folder = tmp_path_factory.mktemp("saved") / "export"
    export.export_run(run, folder, beam_size=1, max_length=reference["max_new_tokens"])
    return folder


MADLAD_SLOW = [pytest.param("madlad", marks=pytest.mark.slow)]


@pytest.mark.parametrize("imported", MADLAD_SLOW, indirect=True)
def test_the_savedmodel_translates_as_the_run(imported, saved):
    _, _, reference = imported
    loaded = export.load(saved)
    sentences = reference["sentences"][:5]
    assert strings(quietly(loaded.greedy, sentences, target_lang="en")) == reference["targets"]["en"]["greedy"][:5]
    assert loaded.languages.target_in_source


@pytest.mark.parametrize("imported", MADLAD_SLOW, indirect=True)
def test_rest_instances_and_the_command_line_take_the_languages(imported, saved, capsys):
    from keras_transformer.commands import cli
    from keras_transformer.serving.signatures import RequestError, ServedModel

    _, run, reference = imported
    served, sentence = ServedModel(saved), reference["sentences"][0]
    instances = [{"sentence": sentence, "target_lang": code, "source_lang": "kor"} for code in ("en", "ko")]
    request = served.parse({"signature_name": "greedy_with_controls", "instances": instances})
    rendered = served.render(request, served.run(request.signature, request.inputs, request.scalars))
    got = [row["translations"] for row in rendered["predictions"]]
    assert got == [reference["targets"][code]["greedy"][0] for code in ("en", "ko")]
    with pytest.raises(RequestError, match=r"instances\[0\].target_lang"):
        served.parse({"instances": [{"sentence": sentence, "target_lang": "xx"}]})
    argv = ["translate", "--model", str(run), "--target-lang", "en", "--source-lang", "kor"]
    assert cli.main([*argv, sentence]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == reference["targets"]["en"]["greedy"][0]


@pytest.mark.parametrize("imported", ["madlad", "mbart50"], indirect=True)  # madlad: the T5 family's message
def test_litert_says_in_one_line_why_not(imported, tmp_path):
    kind, run, _ = imported
    with pytest.raises(ValueError) as error:
        litert.export_run(run, tmp_path / "litert")
    family = "T5-family" if kind in ("t5", "madlad") else "mBART"
    assert "\n" not in str(error.value) and f"{family} model, which a LiteRT export does not hold" in str(error.value)
    assert not (tmp_path / "litert").exists()
