"""`POST /v1/models/NAME:stream`: SSE events joined are `:predict`'s strings; a client gone stops its decoding."""

import json
import re
import socket
import threading
import time

import httpx
import pytest
import tensorflow as tf

from keras_transformer.serving import connections, rest, sse
from keras_transformer.serving.served_translator import ServedTranslator
from keras_transformer.translators import TranslatorInterface
from keras_transformer.translators.streaming import Piece

from serving_fixtures import Server, browser, ok, post  # noqa: F401  (browser: a fixture)
from trained_runs import tiny_run_dir

STEPS = 400  # the slow translator's words, one a step


def sse_events(response):
    assert response.headers["content-type"].startswith("text/event-stream"), response.text
    return [json.loads(block[len("data: ") :]) for block in response.text.split("\n\n") if block]


def joined(events):
    return ["".join(e["token"]["text"] for e in events if e["token"] and e["instance"] == i) for i in range(2)]


@pytest.fixture(scope="module")
def server():
    path, pairs = tiny_run_dir()
    served = Server(path, "--max-batch-size", "2", name="tiny")
    yield served, [source for source, _ in pairs[:2]]
    served.stop()


@pytest.mark.parametrize(
    "signature, numbers", [("greedy", {}), ("sample", dict(temperature=0.9, top_k=0, top_p=0.95, seed=3))]
)
def test_the_joined_events_are_the_predict_strings(server, signature, numbers):
    served, sentences = server
    url = served.predict_url.replace(":predict", ":stream")
    expected = []
    for sentence in sentences:  # one instance a request: a seed's draws depend on the batch
        body = {"signature_name": signature, "instances": [{"sentences": sentence, **numbers} if numbers else sentence]}
        expected.append(ok(post(served, body))["predictions"][0]["translations"])
    instances = [{"sentences": s, **numbers} for s in sentences] if numbers else sentences
    events = sse_events(post(served, {"signature_name": signature, "instances": instances}, url=url))
    assert joined(events) == expected
    finals = [e for e in events if e["generated_text"] is not None]
    assert [(e["instance"], e["generated_text"], e["details"]["finish_reason"]) for e in finals] == [
        (0, expected[0], "end"),
        (1, expected[1], "end"),
    ]
    pieces = [e for e in events if e["token"]]
    assert len(pieces) > 4 and all(e["token"]["ids"] for e in pieces)
    assert [e["index"] for e in events] == list(range(len(events)))


def test_a_request_error_is_one_json_line(server):
    served, _ = server
    url = served.predict_url.replace(":predict", ":stream")
    response = post(served, {"signature_name": "nbest", "instances": ["a"]}, url=url)
    assert response.status_code == 400 and "does not stream" in response.json()["error"]


@pytest.mark.browser
def test_the_page_shows_the_words_as_they_arrive(server, browser):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    served, sentences = server
    browser.get(served.url + "/")
    browser.find_element(By.ID, "sentence").send_keys(sentences[0])
    browser.find_element(By.ID, "translate").click()
    WebDriverWait(browser, 60).until(
        lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-state") in ("done", "error")
    )
    assert browser.find_element(By.ID, "error").text == ""
    words = [span.get_attribute("textContent") for span in browser.find_elements(By.CSS_SELECTOR, "#translation span")]
    greedy = ok(post(served, {"signature_name": "greedy", "instances": [sentences[0]]}))["predictions"][0]
    assert len(words) > 2 and "".join(words) == greedy["translations"]


def test_the_shutdown_line_counts_the_streamed_sentences(server):
    """It said "2 sentences answered" after about 100 `:stream` requests: streams do not go through the batcher.

    Stops the module's server: the last test to use it.
    """
    served, sentences = server
    url = served.predict_url.replace(":predict", ":stream")
    for _ in range(5):
        assert sse_events(post(served, {"signature_name": "greedy", "instances": [sentences[0]]}, url=url))
    assert served.stop() == 0
    counts = re.search(r"(\d+) sentences in \d+ signature calls, and (\d+) streamed sentences\)", served.stderr())
    assert counts and int(counts[2]) >= 5, served.stderr()


class Slow(TranslatorInterface):
    """A translator whose stream gives a word a step, `STEPS` of them, 20 ms each; it counts the steps it ran."""

    beam_size, max_source_length = tf.constant(1), tf.constant(64)

    def __init__(self):
        self.steps = 0

    def _decode(self, search, sentences, controls, *sampling):
        count = len(sentences.numpy())
        return {"translations": tf.fill([count], "w"), "scores": tf.zeros([count]), "finished": tf.ones([count], bool)}

    def _stream(self, search, sentences, controls, *sampling, cancel=None):
        for step in range(STEPS):
            if cancel is not None and cancel.is_set():
                yield Piece("", (), "cancelled")
                return
            self.steps += 1
            time.sleep(0.02)
            yield Piece(" w", (step,))
        yield Piece("", (), "end")


@pytest.fixture
def slow_server():
    translator = Slow()
    model = ServedTranslator(translator, "slow")
    batcher = rest.build_batcher(model)
    app = rest.create_app(model, batcher, "slow", limits=rest.Limits(timeout_s=30), streams=sse.Streams(translator))
    import uvicorn

    limits = connections.budget(1, open_files=1024)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        connections.track_requests(app), http=connections.ConnectionGuard(limits), log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    yield translator, f"http://127.0.0.1:{sock.getsockname()[1]}/v1/models/slow"
    server.should_exit = True
    thread.join(10)


def test_a_client_that_leaves_stops_its_decoding(slow_server):
    translator, url = slow_server
    with httpx.Client(timeout=30) as client:
        with client.stream("POST", url + ":stream", json={"instances": ["a"]}) as response:
            lines = response.iter_lines()
            assert next(line for line in lines if line.startswith("data:"))
            # One connection at most (--max-connections 1): a second client is refused while this one streams.
            assert httpx.post(url + ":predict", json={"instances": ["a"]}, timeout=30).status_code == 503
    time.sleep(0.5)
    stopped = translator.steps
    time.sleep(0.5)
    assert translator.steps == stopped < STEPS / 4  # the decoding stopped soon after the client left
    answer = httpx.post(url + ":predict", json={"instances": ["a"]}, timeout=30)  # and the server goes on
    assert answer.status_code == 200 and answer.json()["predictions"][0]["translations"] == "w"


def test_a_stream_past_the_timeout_ends_cancelled(slow_server, monkeypatch):
    translator, url = slow_server
    monkeypatch.setattr(sse, "POLL_S", 0.01)
    app_limits = rest.Limits(timeout_s=0.3)
    events = []

    async def collect():
        class Request:
            async def is_disconnected(self):
                return False

        request = sse.check(ServedTranslator(translator, "slow").parse({"instances": ["a"]}))
        async for line in sse.events(Request(), request, sse.Streams(translator), app_limits.timeout_s):
            events.append(json.loads(line[len("data: ") :]))

    import asyncio

    asyncio.run(collect())
    assert events[-1]["details"]["finish_reason"] == "cancelled" and "Deadline" in events[-1]["error"]
    assert 3 < len(events) < STEPS / 4
