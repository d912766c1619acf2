"""`keras-transformer serve` on an imported OPUS-MT run answers with transformers' greedy strings."""

import json
import pathlib

import pytest

from keras_transformer.pretrained import import_pretrained

from serving_fixtures import Server, post

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "marian"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    run = tmp_path_factory.mktemp("separate") / "run"
    import_pretrained(FIXTURES / "separate", run)
    server = Server(run, "--no-warmup", "--timeout", "300", name="opus")
    yield server, json.loads((FIXTURES / "separate" / "reference.json").read_text(encoding="utf-8"))
    server.stop()


@pytest.mark.slow  # the signatures: test_marian_decoding; HTTP: tests/serving
def test_the_greedy_signature_over_http_gives_transformers_strings(served):
    server, reference = served
    # The run decodes up to its checkpoint's max_length; the references stopped at max_new_tokens, where
    # transformers forced END. The outputs that ended before that are the same at any longer limit.
    ended = [
        (sentence, text)
        for sentence, text, ids in zip(reference["sentences"], reference["greedy"], reference["greedy_ids"])
        if len(ids) < reference["max_new_tokens"]
    ]
    answer = post(server, {"signature_name": "greedy", "instances": [sentence for sentence, _ in ended]})
    assert answer.status_code == 200, answer.text
    assert [row["translations"] for row in answer.json()["predictions"]] == [text for _, text in ended]
    assert len(ended) >= len(reference["sentences"]) // 2
