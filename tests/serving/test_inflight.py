"""In-flight batching: each request, joining a running decode at its own time, gets the string it gets alone.

The tiny trained run (`trained_runs.tiny_run_dir`) served by an
`InflightBatcher` of 2 rows and segments of 2 steps: requests of mixed
lengths and searches (beam, greedy, seeded sampling, a forced prefix), sent
from three threads at random times, and streams beside them, must get the
translator's own answer for the request alone: the same strings and
`finished` flags, scores within float noise.
"""

import random
import threading
import time

import numpy as np
import pytest

from keras_transformer import opener
from keras_transformer.serving.batching import QueueFull
from keras_transformer.serving.inflight import InflightBatcher

from trained_runs import tiny_run_dir

SAMPLE = (("temperature", 0.8), ("top_k", 0), ("top_p", 0.9))


@pytest.fixture(scope="module")
def served():
    path, pairs = tiny_run_dir()
    translator = opener.open_translator(path)
    batcher = InflightBatcher(translator, max_rows=2, segment_steps=2)
    sentences = [source for source, _ in pairs[:5]] + ["", "A man with a dog " * 4]
    yield translator, batcher, sentences
    batcher.close()


def alone(translator, signature, sentences, scalars=(), prefix=None):
    """The translator's own outputs for one request."""
    numbers = dict(scalars)
    if signature == "sample":
        return translator.sample_with_status(sentences, **numbers)
    method = translator.greedy_with_status if signature.startswith("greedy") else translator.call_with_status
    return method(sentences, **({} if prefix is None else {"target_prefix": prefix}))


def requests(sentences):
    """`(signature, scalars, sentences, prefix)` of every kind: searches, lengths, two sentences, a prefix."""
    plans = []
    for index, sentence in enumerate(sentences):
        plans.append(("serving_default", (), [sentence], None))
        plans.append(("greedy", (), [sentence], None))
        plans.append(("sample", (*SAMPLE, ("seed", index)), [sentence], None))
    plans.append(("greedy", (), sentences[:2], None))
    plans.append(("greedy_with_controls", (), sentences[2:4], ["Ein Mann", ""]))
    return plans


def test_each_request_gets_its_answer_alone(served):
    translator, batcher, sentences = served
    plans = requests(sentences)
    futures = [None] * len(plans)

    def client(offset):
        rng = random.Random(offset)
        for index in range(offset, len(plans), 3):
            signature, scalars, texts, prefix = plans[index]
            inputs = {"sentences": [text.encode() for text in texts]}
            if prefix is not None:
                inputs.update(target_prefix=[text.encode() for text in prefix])
            futures[index] = batcher.submit((signature, scalars), inputs)
            time.sleep(rng.random() * 0.05)

    threads = [threading.Thread(target=client, args=(offset,)) for offset in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for (signature, scalars, texts, prefix), future in zip(plans, futures):
        outputs = future.result(600)
        expected = alone(translator, signature, texts, scalars, prefix)
        assert list(outputs["translations"]) == list(expected["translations"].numpy()), (signature, texts)
        assert list(outputs["finished"]) == list(expected["finished"].numpy()), (signature, texts)
        np.testing.assert_allclose(outputs["scores"], expected["scores"].numpy(), atol=1e-4)
    assert max(batcher.segments) > 1 and sum(batcher.admissions.values()) > 1  # side by side, joined apart
    assert all(pool.occupied == 0 for pool in batcher.pools.values())


def test_warm_up_compiles_each_row_count_of_a_model_shorter_than_a_pool(served):
    translator, batcher, sentences = served  # sources of at most 32 tokens, pools 64 wide: the encoder at 32
    assert batcher.warm_up(searches=("greedy",)) == 1  # 2 rows (`max_rows`): one row steps as two
    traces = batcher.pools["greedy", ()].traces
    for texts in ([sentences[0]], sentences[:2]):  # the shapes it warmed are those decoded: nothing more is traced
        batcher.submit(("greedy", ()), {"sentences": [text.encode() for text in texts]}).result(600)
    assert batcher.pools["greedy", ()].traces == traces


def test_streams_give_the_strings_of_their_requests(served):
    translator, batcher, sentences = served
    searches = [("greedy", {}), ("best", {}), ("sample", dict(SAMPLE, seed=7))]
    results = {}

    def stream(search, numbers):
        results[search] = list(batcher.stream_pieces(sentences[3], search, **numbers))

    threads = [threading.Thread(target=stream, args=plan) for plan in searches]
    for thread in threads:
        thread.start()
    future = batcher.submit(("greedy", ()), {"sentences": [sentences[-1].encode()]})  # a long one beside them
    for thread in threads:
        thread.join()
    for search, numbers in searches:
        signature = {"best": "serving_default"}.get(search, search)
        scalars = tuple(numbers.items())
        expected = alone(translator, signature, [sentences[3]], scalars)["translations"].numpy()[0].decode()
        pieces = results[search]
        assert "".join(piece.text for piece in pieces) == expected
        assert pieces[-1].finish_reason == "end" and all(piece.finish_reason is None for piece in pieces[:-1])
    assert len(results["greedy"]) > 2  # word by word; beam search: the whole text once
    assert len(results["best"]) == 1
    assert future.result(600)["translations"][0] == translator.greedy([sentences[-1]]).numpy()[0]


def test_a_cancelled_stream_or_request_leaves_its_rows(served):
    translator, batcher, sentences = served
    cancel = threading.Event()
    pieces = batcher.stream_pieces(sentences[-1], "greedy", cancel=cancel)
    first = next(pieces)
    cancel.set()
    rest = list(pieces)
    assert first.finish_reason is None and rest[-1].finish_reason == "cancelled"
    future = batcher.submit(("serving_default", ()), {"sentences": [sentences[-1].encode()] * 3})
    assert future.cancel()  # the server's timeout does this: a request not answered yet can be
    other = batcher.submit(("greedy", ()), {"sentences": [sentences[0].encode()]})
    assert other.result(600)["translations"][0] == translator.greedy([sentences[0]]).numpy()[0]
    deadline = time.monotonic() + 60
    while any(pool.occupied for pool in batcher.pools.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(pool.occupied for pool in batcher.pools.values())


def test_a_source_longer_than_the_limit_is_truncated_as_alone(served):
    translator, batcher, sentences = served
    long = " ".join(sentences) * 2  # past the source limit (32 tokens): truncated, as the translator does
    futures = [batcher.submit(("greedy", ()), {"sentences": [text.encode()]}) for text in (long, sentences[0])]
    expected = translator.greedy_with_status([long, sentences[0]])["translations"].numpy()
    assert [future.result(600)["translations"][0] for future in futures] == list(expected)


def test_a_row_that_cannot_join_fails_only_its_request(served, monkeypatch):
    translator, batcher, sentences = served
    search_inputs, expected = translator.search_inputs, translator.greedy([sentences[0]]).numpy()[0]

    def refusing(texts, *controls):
        if b"bad" in texts.numpy().tolist():
            raise ValueError("a bad sentence")
        return search_inputs(texts, *controls)

    monkeypatch.setattr(translator, "search_inputs", refusing)
    with batcher._condition:  # the worker waits: both requests join in one admission, which fails
        bad, good = (batcher.submit(("greedy", ()), {"sentences": [text]}) for text in (b"bad", sentences[0].encode()))
    with pytest.raises(ValueError, match="a bad sentence"):
        bad.result(600)
    assert good.result(600)["translations"][0] == expected


def test_a_failed_segment_fails_its_requests_and_a_new_pool_serves_the_next(served, monkeypatch):
    translator, batcher, sentences = served

    def broken():
        raise RuntimeError("a segment failed")

    monkeypatch.setattr(batcher.pools["greedy", ()], "advance", broken)
    failed = batcher.submit(("greedy", ()), {"sentences": [sentences[0].encode()]})
    with pytest.raises(RuntimeError, match="a segment failed"):
        failed.result(600)
    answered = batcher.submit(("greedy", ()), {"sentences": [sentences[0].encode()]})
    assert answered.result(600)["translations"][0] == translator.greedy([sentences[0]]).numpy()[0]


def test_a_full_queue_refuses_and_close_answers_what_was_accepted(served):
    translator, batcher, sentences = served
    batcher.max_queue = 2
    with pytest.raises(QueueFull, match="queue holds"):
        batcher.submit(("greedy", ()), {"sentences": [b"a", b"b", b"c"]})
    futures = [batcher.submit(("greedy", ()), {"sentences": [text.encode()]}) for text in sentences[:2]]
    batcher.close()  # the last test: answers both, then refuses
    assert [future.result(0)["translations"][0] for future in futures] == list(translator.greedy(sentences[:2]).numpy())
    with pytest.raises(QueueFull, match="shutting down"):
        batcher.submit(("greedy", ()), {"sentences": [b"a"]})
