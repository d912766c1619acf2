"""Languages and prefixes over REST: instance objects, mixed with strings, through every served engine.

The tiny NLLB-200 fixture (tests/data/m2m100/nllb) is imported and exported
once for the module, without a default target language. The expected
strings are transformers' greedy outputs in its reference.json for sentences
whose translations into both targets ended before its `max_new_tokens`
(the fixture decodes with one beam), and the Python translator's own
outputs. Bad fields are 400s checked before any decoding, in process; the
translators of the other engines answer the same instances through
`ServedTranslator`; one server process checks the same over HTTP.
"""

import json
import pathlib
import re
import warnings

import httpx
import pytest
import tensorflow as tf

from keras_transformer import export, runs
from keras_transformer.files import user_cache
from keras_transformer.pretrained import import_pretrained
from keras_transformer.serving.served_translator import ServedTranslator
from keras_transformer.serving.signatures import RequestError, ServedModel

from serving_fixtures import Server, ok, post

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
NLLB = DATA / "m2m100" / "nllb"
SOURCE, FIRST, SECOND = "kor_Hang", "eng_Latn", "kor_Hang"  # the fixture's source language and two targets


@pytest.fixture(scope="module")
def reference():
    return json.loads((NLLB / "reference.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def ended(reference):
    """Three sentences whose greedy translations into both targets ended before transformers' limit."""
    limit = reference["max_new_tokens"]
    return [
        i
        for i, sentence in enumerate(reference["sentences"])
        if sentence.strip() and all(len(t["greedy_ids"][i]) < limit for t in reference["targets"].values())
    ][:3]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("nllb") / "run"
    import_pretrained(NLLB, path)
    return path


@pytest.fixture(scope="module")
def exported(run, reference, tmp_path_factory):
    """The SavedModel, decoding at most transformers' `max_new_tokens`, as the other engines here do."""
    path = tmp_path_factory.mktemp("nllb-export") / "export"
    export.export_run(run, path, max_length=reference["max_new_tokens"])
    return path


@pytest.fixture(scope="module")
def model(exported):
    """The export served without a default target language: each request names its own."""
    return ServedModel(exported)


def _predict(model, body):
    request = model.parse(body)
    return request, model.render(request, model.run(request.signature, request.inputs, request.scalars))


def _greedy(reference, target, i):
    return reference["targets"][target]["greedy"][i]


def test_instance_objects_translate_into_their_own_languages(model, exported, reference, ended):
    sentences = [reference["sentences"][i] for i in ended]
    targets = [FIRST, SECOND, FIRST]
    body = {"instances": [{"sentence": s, "target_lang": t} for s, t in zip(sentences, targets)]}
    request, answer = _predict(model, body)
    assert request.signature == "with_controls"
    texts = [prediction["translations"] for prediction in answer["predictions"]]
    assert texts == [_greedy(reference, t, i) for t, i in zip(targets, ended)]
    python = export.load(exported)(sentences, target_lang=targets).numpy()
    assert texts == [text.decode("utf-8") for text in python]
    # The greedy signature, and TF Serving's columnar form naming the inputs, give the same strings.
    request, answer = _predict(model, {"signature_name": "greedy", **body})
    assert request.signature == "greedy_with_controls"
    assert [prediction["translations"] for prediction in answer["predictions"]] == texts
    columns = {"sentences": sentences, "target_lang": targets}
    request, answer = _predict(model, {"signature_name": "with_controls", "inputs": columns})
    assert answer["outputs"]["translations"] == texts


@pytest.mark.slow  # each form alone is checked by the other tests
def test_strings_and_objects_mix_under_a_served_default(exported, reference, ended):
    served = ServedModel(exported, target_lang=FIRST)  # the default of `serve --target-lang`
    a, b, c = (reference["sentences"][i] for i in ended)
    body = {"instances": [a, {"sentence": b, "target_lang": SECOND}, {"sentence": c, "source_lang": None}]}
    _, answer = _predict(served, body)
    texts = [prediction["translations"] for prediction in answer["predictions"]]
    assert texts == [_greedy(reference, FIRST, ended[0]), _greedy(reference, SECOND, ended[1])] + [
        _greedy(reference, FIRST, ended[2])
    ]
    _, answer = _predict(served, {"instances": [a]})  # bare strings alone: the plain signature, the default
    assert answer["predictions"][0]["translations"] == texts[0]


def test_a_prefix_begins_the_translation_as_in_python(model, exported, reference, ended):
    sentence, prefix = reference["sentences"][ended[0]], "네 말이"
    body = {"instances": [{"sentence": sentence, "target_lang": SECOND, "target_prefix": prefix}]}
    _, answer = _predict(model, body)
    text = answer["predictions"][0]["translations"]
    python = export.load(exported)([sentence], target_lang=SECOND, target_prefix=prefix).numpy()[0]
    assert text == python.decode("utf-8") and text.startswith(prefix)


def test_metadata_lists_the_languages(exported):
    served = ServedModel(exported, target_lang=FIRST)
    languages = served.metadata("nllb", 1)["metadata"]["languages"]
    assert languages["@type"].endswith("google.protobuf.Struct")
    value = languages["value"]
    assert len(value["codes"]) == 202 and FIRST in value["codes"] and SECOND in value["codes"]
    assert (value["source_lang"], value["target_lang"]) == (SOURCE, FIRST)


@pytest.mark.parametrize(
    "instances, message",
    [
        (["안녕"], "No target language: this model, served without a default, translates into 202 languages"),
        (
            [{"sentence": "안녕", "target_lang": FIRST}, {"sentence": "안녕", "target_lang": "eng_latn"}],
            "`instances[1].target_lang` 'eng_latn' is not a language of this model; close: eng_Latn",
        ),
        (
            [{"sentence": "안녕", "target_lang": FIRST, "source_lang": "kor"}],
            "`instances[0].source_lang` 'kor' is not a language of this model; close: ",
        ),
        (
            ["안녕", {"sentence": "안녕", "target_lang": FIRST}],
            "instances[0].target_lang: No target language: this model, served without a default, translates into 202",
        ),
        ([{"sentence": "안녕", "target_lang": 3}], "instances[0].target_lang"),
        ([{"sentence": "안녕", "target_lang": FIRST, "target_prefix": ["a"]}], "instances[0].target_prefix"),
        ([{"sentence": "안녕", "targetlang": FIRST}], "instances[0]: unknown field 'targetlang' (did you mean"),
        ([{"target_lang": FIRST}], "instances[0] has no 'sentence' field"),
    ],
)
def test_bad_fields_are_400s_naming_the_instance_and_field(model, instances, message):
    with pytest.raises(RequestError) as refused:
        model.parse({"instances": instances})
    assert refused.value.status == 400 and message in str(refused.value), str(refused.value)
    assert len(str(refused.value).splitlines()) == 1


@pytest.fixture(scope="module", params=["xla", "ctranslate2", "litert"])
def engine_translator(request, run, reference, tmp_path_factory):
    """A translator of each engine that `serve` serves through `ServedTranslator`, greedy, with the source language."""
    options = dict(beam_size=1, max_length=reference["max_new_tokens"], source_lang=SOURCE)
    if request.param == "xla":
        from keras_transformer.opener import open_translator

        return open_translator(run, "xla", **options)
    if request.param == "ctranslate2":
        pytest.importorskip("ctranslate2")
        from keras_transformer.opener import open_translator

        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(user_cache.CACHE_ENV, str(tmp_path_factory.mktemp("ct2-cache")))
            return open_translator(run, "ctranslate2", **options)
    pytest.importorskip("ai_edge_litert")
    from keras_transformer import litert
    from keras_transformer.litert.export import TokenizerOutsideWarning
    from keras_transformer.opener import open_translator

    folder = tmp_path_factory.mktemp("litert") / "export"
    with pytest.warns(TokenizerOutsideWarning):
        litert.export_run(run, folder, **options)
    return open_translator(folder, "litert")


def test_every_served_engine_takes_the_same_instances(engine_translator, run, reference, ended):
    """`ServedTranslator` (how `serve` serves the CTranslate2 and LiteRT engines): transformers' strings."""
    served = ServedTranslator(engine_translator, run)
    assert {"with_controls", "greedy_with_controls"} <= set(served.functions)
    sentences = [reference["sentences"][i] for i in ended]
    body = {"instances": [sentences[0], {"sentence": sentences[1], "target_lang": SECOND}]}
    with pytest.raises(RequestError, match=r"instances\[0\].target_lang: No target language"):
        served.parse(body)
    body["instances"][0] = {"sentence": sentences[0], "target_lang": FIRST}
    body["instances"].append({"sentence": sentences[2], "target_lang": SECOND, "target_prefix": "네 말이"})
    _, answer = _predict(served, body)
    texts = [prediction["translations"] for prediction in answer["predictions"]]
    assert texts[:2] == [_greedy(reference, FIRST, ended[0]), _greedy(reference, SECOND, ended[1])]
    assert texts[2].startswith("네 말이")
    languages = served.metadata("nllb", 1)["metadata"]["languages"]["value"]
    assert len(languages["codes"]) == 202 and (languages["source_lang"], languages["target_lang"]) == (SOURCE, None)


# Slow: its bounds on wall time and on the server's peak memory failed once in the full default run (two workers on
# two busy cores) and pass alone (74 s); the cause is not known yet, so it runs with the long checks.
@pytest.mark.slow
def test_over_http_after_a_bounded_warm_up(exported, reference, ended):
    """The warm-up of this 1,024-position model compiled 64 source buckets x 6 batch sizes: > 5 min and 2.85 GB.

    Now the first requests' shapes, one line each: its time and the server's peak memory are bounded here.
    """
    server = Server(exported, "--target-lang", FIRST, "--timeout", "300", name="nllb", startup_s=600)
    try:
        log = "".join(server.lines)
        warmed = re.search(r"Warmed up: (\d+) signature calls in ([\d.]+) s", log)
        assert warmed and int(warmed[1]) == 3 and log.count("  warmed up ") == 3, log  # serving_default, greedy, nbest
        assert float(warmed[2]) < 150, log
        a, b = (reference["sentences"][i] for i in ended[:2])
        answer = ok(post(server, {"instances": [a, {"sentence": b, "target_lang": SECOND}]}))
        texts = [prediction["translations"] for prediction in answer["predictions"]]
        assert texts == [_greedy(reference, FIRST, ended[0]), _greedy(reference, SECOND, ended[1])]
        refused = post(server, {"instances": [a, {"sentence": b, "target_lang": "kor_hang"}]})
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert error.startswith("`instances[1].target_lang` 'kor_hang' is not a language of this model; close: ")
        assert "kor_Hang" in error
        metadata = ok(httpx.get(f"{server.url}/v1/models/nllb/metadata"))
        assert metadata["metadata"]["languages"]["value"]["target_lang"] == FIRST
    finally:
        server.stop()
    assert server.peak_rss_mb < 2500, server.peak_rss_mb  # TensorFlow, the model and three programs


# -- a forced prefix is text: a special token in it is refused alike everywhere (issue 77) ----------------------


def _special_tokens():
    """The fixture's special tokens as its tokenizer.json lists them: <s>, <pad>, </s>, <unk>, <mask>, 202 codes."""
    added = json.loads((NLLB / "tokenizer.json").read_text(encoding="utf-8"))["added_tokens"]
    return sorted({token["content"] for token in added if token.get("special")})


def _refused_prefixes():
    """`{prefix: the special token its refusal names}`: each token alone and within words, and the issue's cases."""
    cases = {token: token for token in _special_tokens()}
    cases.update({f"비 {token}와": token for token in ("</s>", "<pad>", "fra_Latn", "<mask>")})
    cases.update({"비 와 </s> 비": "</s>", "<s><unk>": "<s>", "<pad> <pad>": "<pad>", "fra_Latn kor_Hang": "fra_Latn"})
    cases.update({"비 ＜/s＞ 비": "</s>", "ｆｒａ_Ｌａｔｎ": "fra_Latn"})  # full-width: "</s>" once normalized (NFKC)
    return cases


def test_text_never_tokenizes_to_a_special_token(run):
    """SentencePiece returns an unknown run whole ("</s>"), which was looked up by its text: END in a source."""
    tokenizer = runs.load_tokenizers(run).target
    special = {tokenizer.vocab[token] for token in tokenizer.special_tokens} - {tokenizer.unk_id}
    texts = ["비 와 </s> 비", "<pad> <mask>", "fra_Latn 비", "＜/s＞", "</s>"]
    rows = tokenizer.tokenize(tf.constant(texts)).to_list()
    assert not special & {i for row in rows for i in row} and all(tokenizer.unk_id in row for row in rows), rows


PLAIN_PREFIXES = ("비 와", "네 말이", "비 와 " * 30)  # the last: more tokens than the 24 any engine here decodes


@pytest.fixture(scope="module")
def loaded(exported):
    """The SavedModel, loaded once."""
    return export.load(exported)


@pytest.fixture(scope="module")
def saved_outputs(loaded, reference, ended):
    """The SavedModel's greedy strings for each plain prefix: what every engine must give."""
    translator = loaded
    sentences = [reference["sentences"][i] for i in ended]  # the shapes the tests above compiled
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the long prefix is cut off at the limit
        return {p: _texts(translator.greedy(sentences, target_lang=SECOND, target_prefix=p)) for p in PLAIN_PREFIXES}


def _texts(values):
    return [value.decode("utf-8") for value in values.numpy().tolist()]


def _refusal(call, *args, **kwargs):
    with pytest.raises(ValueError) as refused:
        call(*args, **kwargs)
    message = str(refused.value)
    assert len(message.splitlines()) == 1, message
    return message


def test_a_prefix_with_a_special_token_is_refused_on_every_engine(engine_translator, loaded, reference, ended):
    """Each engine, and the SavedModel, refuses each one in one line naming the token; plain prefixes agree."""
    sentences = [reference["sentences"][i] for i in ended]  # the shapes the tests above compiled
    for translator in (engine_translator, loaded):
        for prefix, token in _refused_prefixes().items():
            message = _refusal(translator.greedy, sentences, target_lang=SECOND, target_prefix=prefix)
            assert message.startswith(f"`target_prefix` holds the special token {token!r}:"), (prefix, message)
            message = _refusal(translator, sentences, target_lang=SECOND, target_prefix=[None, prefix, None])
            assert message.startswith(f"`target_prefix[1]` holds the special token {token!r}:"), (prefix, message)


def test_plain_prefixes_give_the_same_strings_on_every_engine(engine_translator, saved_outputs, reference, ended):
    sentences = [reference["sentences"][i] for i in ended]  # the shapes the tests above compiled
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for prefix, expected in saved_outputs.items():
            texts = _texts(engine_translator.greedy(sentences, target_lang=SECOND, target_prefix=prefix))
            assert texts == expected, prefix
            assert all(text.startswith(prefix.strip()[:20]) for text in texts)
            streamed = engine_translator.stream(sentences[0], "greedy", target_lang=SECOND, target_prefix=prefix)
            assert "".join(streamed) == expected[0], prefix


def test_rest_refuses_a_special_token_in_a_prefix_with_a_400(
    model, engine_translator, run, saved_outputs, reference, ended
):
    """`:predict` and `:stream`, the SavedModel's signatures and the engines' translators: 400 naming the field."""
    served = ServedTranslator(engine_translator, run)
    for prefix, token in _refused_prefixes().items():
        instance = {"sentence": "안녕", "target_lang": FIRST, "target_prefix": prefix}
        for server in (model, served):
            with pytest.raises(RequestError) as refused:
                server.parse({"instances": [{"sentence": "x", "target_lang": FIRST}, instance]})
            assert str(refused.value).startswith(f"instances[1].target_prefix holds the special token {token!r}:")
            assert refused.value.status == 400
    with pytest.raises(RequestError, match=r"^inputs.target_prefix\[0\] holds the special token '</s>'"):
        served.parse(
            {
                "signature_name": "greedy_with_controls",
                "inputs": {"sentences": ["x"], "target_lang": [FIRST], "target_prefix": ["</s>"]},
            }
        )
    _check_over_rest(served, saved_outputs, reference, ended, streams=engine_translator)


def test_rest_of_the_saved_model_refuses_a_special_token_in_a_prefix(model, saved_outputs, reference, ended):
    _check_over_rest(model, saved_outputs, reference, ended)


def _check_over_rest(served, saved_outputs, reference, ended, streams=None):
    """`:predict` and `:stream` of an app serving `served`: a 400 for a special token, the plain prefix's strings."""
    from fastapi.testclient import TestClient

    from keras_transformer.serving import rest, sse

    streams = sse.Streams(streams) if streams is not None else None
    prefix, expected = PLAIN_PREFIXES[0], saved_outputs[PLAIN_PREFIXES[0]]
    sentences = [reference["sentences"][i] for i in ended]
    with TestClient(rest.create_app(served, rest.build_batcher(served), "nllb", streams=streams)) as client:
        for action in (":predict", ":stream"):
            instances = [{"sentence": s, "target_lang": SECOND, "target_prefix": prefix} for s in sentences]
            body = {"signature_name": "greedy", "instances": instances}
            answer = client.post(f"/v1/models/nllb{action}", json=body)
            assert answer.status_code == 200, (action, answer.text)
            if action == ":predict":
                texts = [prediction["translations"] for prediction in answer.json()["predictions"]]
            else:
                events = [json.loads(block[len("data: ") :]) for block in answer.text.split("\n\n") if block]
                texts = [event["generated_text"] for event in events if event["generated_text"] is not None]
            assert texts == expected, action
            instances[1]["target_prefix"] = "비 와 </s> 비"
            answer = client.post(f"/v1/models/nllb{action}", json=body)
            assert answer.status_code == 400, (action, answer.text)
            assert answer.json()["error"].startswith("instances[1].target_prefix holds the special token '</s>'")


def test_translate_refuses_a_special_token_in_its_prefix_with_exit_2(run, capsys):
    from keras_transformer.commands import cli

    argv = ["translate", "--model", str(run), "--target-lang", FIRST, "--prefix", "비 와 </s> 비", "오늘 너무 힘들었어"]
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip() == (
        "keras-transformer translate: error: --prefix holds the special token '</s>': "
        "a prefix is the text a translation begins with; remove it"
    )
