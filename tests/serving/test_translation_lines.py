"""`translators.translation` over a stand-in translator: order, batching, and bytes that are not UTF-8."""

import threading

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.translators.translation import nbest_lines, score_lines, translate_lines_with_status


class HalfCharacterTranslator:
    """Answers each sentence with its bytes, cut inside the last character (as a weak model's output can be)."""

    beam_size = tf.constant(2)

    def call_with_status(self, strings):
        outputs = [s.encode("utf-8")[:-1] for s in strings]
        return {"translations": tf.constant(outputs), "finished": tf.constant([True] * len(strings))}

    def nbest(self, strings):
        outputs = [[s.encode("utf-8")[:-1], s.encode("utf-8")] for s in strings]
        return {
            "translations": tf.constant(outputs),
            "scores": tf.constant([[-1.0, -2.0]] * len(strings)),
            "finished": tf.constant([[True, False]] * len(strings)),
        }

    def score(self, sources, targets):
        return {
            "log_probs": tf.constant([-float(len(t)) for t in targets]),
            "target_lengths": tf.constant([len(t) for t in targets]),
        }


def test_a_cut_character_becomes_a_replacement_character_not_a_crash():
    translations, finished = translate_lines_with_status(HalfCharacterTranslator(), ["가나", "a다"], batch_size=1)
    assert translations == ["가\ufffd", "a\ufffd"] and finished == [True, True]
    rows = nbest_lines(HalfCharacterTranslator(), ["가나"], n_best=2)
    assert rows == [[(-1.0, "가\ufffd", True), (-2.0, "가나", False)]]


def test_scores_come_back_in_input_order_whatever_the_batches():
    sources = ["a" * n for n in (5, 1, 3, 2)]
    targets = ["b" * n for n in (7, 2, 4, 1)]
    log_probs, lengths = score_lines(HalfCharacterTranslator(), sources, targets, batch_size=3)
    np.testing.assert_allclose(log_probs, [-7, -2, -4, -1])
    assert lengths == [7, 2, 4, 1]
    with pytest.raises(ValueError, match="as many sentences"):
        score_lines(HalfCharacterTranslator(), sources, targets[:2])
    with pytest.raises(ValueError, match="n_best=3 must be between 1 and the beam size, beam_size=2"):
        nbest_lines(HalfCharacterTranslator(), sources, n_best=3)


class SlowTranslator(HalfCharacterTranslator):
    """Records which threads translated, and waits so that batches overlap; fails on "boom"."""

    def __init__(self):
        self.threads, self.calls = set(), 0
        self.both_started = threading.Barrier(2, timeout=10)

    def call_with_status(self, strings):
        self.threads.add(threading.current_thread().name)
        self.calls += 1
        if "boom" in strings:
            raise RuntimeError("the model failed")
        if self.calls <= 2:
            self.both_started.wait()  # the first two batches run at the same time, or this times out
        return super().call_with_status(strings)


def test_workers_translate_batches_side_by_side_in_input_order():
    sentences = ["a" * n + "b" for n in (7, 1, 5, 3, 2, 6, 4)]
    translator = SlowTranslator()
    translations, finished = translate_lines_with_status(translator, sentences, batch_size=2, workers=2)
    assert translations == [s[:-1] for s in sentences] and finished == [True] * 7
    assert len(translator.threads) == 2 and threading.current_thread().name not in translator.threads
    assert translate_lines_with_status(HalfCharacterTranslator(), sentences, batch_size=2)[0] == translations


def test_a_failing_batch_fails_the_call_and_bad_workers_are_refused():
    with pytest.raises(RuntimeError, match="the model failed"):
        translate_lines_with_status(SlowTranslator(), ["x", "boom", "yy", "zz"], batch_size=1, workers=2)
    for workers in (0, 1.5, True):
        with pytest.raises(ValueError, match=f"`workers` must be a positive int. Received: workers={workers!r}"):
            score_lines(HalfCharacterTranslator(), ["a"], ["b"], workers=workers)
