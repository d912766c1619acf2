"""`keras-transformer serve` on the real tiny model: batched answers equal single answers, the page agrees.

The tiny preset trained 1 epoch on 300 pairs (`test_load.trained_export`,
shared with the load and fault tests) is served from its run directory,
which the server exports to a temporary folder first. 16 clients x 50
requests, mixed with bad requests, must get exactly the translations that
the same requests get alone; scores may differ by float noise between batch
shapes (the batch changes the padded shapes and the order of float sums), so
they are compared within 1e-4.
"""

import json
import random
import re

import pytest

from serving_fixtures import Server, browser, check_page_against_predict, ok, post, run_clients  # noqa: F401
from test_load import mixed_inputs
from trained_runs import trained_export

SIGNATURES = ["serving_default", "greedy", "nbest"]
SCORE_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def server():
    run, _ = trained_export()
    # Without warmup every new batch shape compiles while requests wait: on two loaded cores (the test run's
    # two workers) that took more than serve's default 30 s; these tests check answers, not latency.
    flags = ("--no-warmup", "--max-batch-size", "4", "--batch-timeout-ms", "20", "--timeout", "300")
    server = Server(run, *flags, name="tiny")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def singles(server):
    """{(signature, sentence): prediction} of each request sent alone."""
    inputs = mixed_inputs()
    return {
        (signature, text): post(server, {"signature_name": signature, "instances": [text]}).json()["predictions"][0]
        for signature in SIGNATURES
        for text in inputs
    }


def test_nbest_row_0_is_the_translation_and_scores_are_sorted(singles):
    for (signature, text), prediction in singles.items():
        if signature == "nbest":
            assert prediction["translations"][0] == singles["serving_default", text]["translations"]
            assert prediction["scores"] == sorted(prediction["scores"], reverse=True)


def test_score_signature_over_http(server):
    pairs = [{"sources": "안녕", "targets": "안녕하세요"}, {"sources": "뭐해", "targets": ""}]
    rows = post(server, {"signature_name": "score", "instances": pairs}).json()["predictions"]
    assert [row["target_lengths"] > 0 for row in rows] == [True, True]  # END counts, also for an empty target
    assert all(row["log_probs"] < 0 for row in rows)


def test_a_truncated_source_says_so_in_the_response(server):
    """REST cut a 10,000-character source to the model's limit without a word, where `translate` warns."""
    long, short = "안녕 " * 2000, "안녕"
    body = ok(post(server, {"instances": [short, long]}))
    assert len(body["predictions"]) == 2 and len(body["warnings"]) == 1, body["warnings"]
    assert re.fullmatch(r"instances\[1\] has \d+ tokens: truncated to the model's first \d+", body["warnings"][0])
    columns = ok(post(server, {"signature_name": "greedy", "inputs": {"sentences": [long]}}))
    assert columns["warnings"][0].startswith("inputs.sentences[0] has ")
    assert "warnings" not in ok(post(server, {"instances": [short]}))
    stream = post(
        server,
        {"signature_name": "greedy", "instances": [long]},
        url=server.predict_url[: -len(":predict")] + ":stream",
    )
    last = json.loads(stream.text.strip().split("\n\n")[-1][len("data: ") :])
    assert last["generated_text"] is not None and last["warning"].startswith("instances[0] has ")


LIMITS = {"temperature": 3.4028235e38, "top_k": 2**31 - 1, "top_p": 1.2e-38, "seed": -(2**63)}


@pytest.mark.parametrize(
    "numbers",
    [LIMITS, {**LIMITS, "temperature": 1e-40, "seed": 2**63 - 1}, {**LIMITS, "temperature": 0, "top_p": 1}],
    ids=["largest-temperature", "subnormal-temperature", "greedy"],
)
def test_sampling_numbers_at_their_dtypes_limits_are_decoded(server, numbers):
    # Each passes the server's checks, so each must pass the graph's assertions too: no graph error.
    answer = post(server, {"signature_name": "sample", "inputs": {"sentences": ["안녕", "뭐해"], **numbers}})
    assert answer.status_code == 200, answer.text
    outputs = answer.json()["outputs"]
    assert [type(text) for text in outputs["translations"]] == [str, str] and len(outputs["finished"]) == 2


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("temperature", 1e39, "inputs.temperature must be a finite number from 0 to 3.4028235e+38 (float32)"),
        ("top_p", 1e-50, "inputs.top_p must be in (0, 1], at least 1.2e-38 (float32)"),
        ("top_p", 1e-45, "inputs.top_p must be in (0, 1], at least 1.2e-38 (float32)"),
    ],
)
def test_sampling_numbers_the_graph_would_refuse_are_400_naming_the_field(server, field, value, message):
    # Before: they passed the checks and the graph answered 400 "InvalidArgumentError: Graph execution error:".
    numbers = {**LIMITS, field: value}
    answer = post(server, {"signature_name": "sample", "inputs": {"sentences": ["안녕"], **numbers}})
    assert answer.status_code == 400 and answer.json()["error"].startswith(message), answer.text


@pytest.mark.browser
def test_page_shows_what_predict_returns(browser, server):  # noqa: F811  (browser: the fixture)
    check_page_against_predict(browser, server, mixed_inputs()[7])


def plans(singles, clients=16, requests=50):
    keys = sorted(singles)
    bad = [b"{bad", b'{"instances": [1]}', b'{"instances": ["a\\u0000"]}', b'{"signature_name": "x", "inputs": []}']
    plans = []
    for seed in range(clients):
        rng = random.Random(seed)
        plan = []
        for index in range(requests):
            if index % 7 == 3:
                plan.append((None, rng.choice(bad)))
            else:
                signature, text = rng.choice(keys)
                plan.append((signature, [text]))
        plans.append(plan)
    return plans


def test_16_concurrent_clients_get_what_single_requests_get_then_sigterm(server, singles):
    client_plans = plans(singles)
    results = run_clients(server.predict_url, client_plans)
    largest = 0.0
    for plan, answers in zip(client_plans, results):
        for (signature, payload), (status, answer) in zip(plan, answers):
            if signature is None:
                assert status == 400 and "error" in answer
                continue
            assert status == 200, answer
            (prediction,) = answer["predictions"]
            alone = singles[signature, payload[0]]
            assert prediction["translations"] == alone["translations"]
            assert prediction["finished"] == alone["finished"]
            assert prediction["scores"] == pytest.approx(alone["scores"], abs=SCORE_TOLERANCE)
            largest = max(largest, max(abs(a - b) for a, b in zip(_list(prediction["scores"]), _list(alone["scores"]))))
    assert server.stop() == 0
    counted = r"\((\d+) sentences in (\d+) signature calls(?:, and \d+ streamed sentences?)?\)"  # a stream test ran
    sentences, calls = map(int, re.search(counted, server.stderr()).groups())
    assert calls < sentences  # concurrent requests were batched
    print(f"largest score difference from the single answers: {largest:.2e}; {sentences} sentences in {calls} calls")


def _list(value):
    return value if isinstance(value, list) else [value]
