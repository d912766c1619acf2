"""One module of decoding rules: a rule changed in `decoding.rules` changes every engine that decodes.

Each test patches one rule and checks what an engine returns: the XLA
searches, the LiteRT export's host search (`litert.search`); the CTranslate2
engine's option mapping is checked in `tests/serving/test_ctranslate2_engine.py`.
"""

import keras
import numpy as np
import pytest

from keras_transformer import build_transformer, decoding
from keras_transformer.decoding import rules
from keras_transformer.litert import search as host_search

SOURCE = np.array([[5, 6, 7, 8], [9, 10, 0, 0]], np.int32)


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(3)
    return build_transformer(40, 40, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_length=8)


def constant_penalty(length, alpha, normalization="gnmt", xp=np):
    return xp.maximum(length, 1.0) * 0.0 + 2.0


def test_the_xla_searches_score_by_the_rules_length_penalty(model, monkeypatch):
    raw = decoding.decode(model, SOURCE, decoding.GreedySearch(alpha=0.0), max_length=6).best()
    monkeypatch.setattr(rules, "length_penalty", constant_penalty)
    halved = decoding.decode(model, SOURCE, decoding.GreedySearch(alpha=1.0), max_length=6).best()
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(halved.ids), keras.ops.convert_to_numpy(raw.ids))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(halved.scores), keras.ops.convert_to_numpy(raw.scores) / 2)


def test_the_xla_searches_never_generate_what_the_rule_bans(model, monkeypatch):
    free = keras.ops.convert_to_numpy(decoding.decode(model, SOURCE, decoding.GreedySearch(), max_length=6).ids)
    chosen = int(free[0, 0, 0])
    original = rules.never_generated
    monkeypatch.setattr(rules, "never_generated", lambda *args: (*original(*args), chosen))
    banned = keras.ops.convert_to_numpy(decoding.decode(model, SOURCE, decoding.GreedySearch(), max_length=6).ids)
    assert chosen not in banned


@pytest.mark.parametrize(
    "search",
    [decoding.GreedySearch(), decoding.BeamSearch(3), decoding.SamplingSearch(temperature=1.0, seed=4)],
    ids=["greedy", "beam", "sampling"],
)
def test_a_calls_ban_mask_is_never_generated_by_any_search(model, search):
    """The ids of `ban_mask` (a call's banned words) go through `rules.ban`: each search chooses others."""
    free = keras.ops.convert_to_numpy(decoding.decode(model, SOURCE, search, max_length=6).ids)
    chosen = sorted({int(i) for i in free.ravel()} - {0, 3})[:3]  # END stays: the outputs end
    mask = rules.ids_mask(40, keras.ops.convert_to_tensor(chosen, "int32"), keras.ops)
    banned = keras.ops.convert_to_numpy(decoding.decode(model, SOURCE, search.replace(ban_mask=mask), max_length=6).ids)
    assert chosen and not set(chosen) & set(banned.ravel().tolist())
    none = rules.ids_mask(40, keras.ops.zeros((0,), "int32"), keras.ops)
    same = keras.ops.convert_to_numpy(decoding.decode(model, SOURCE, search.replace(ban_mask=none), max_length=6).ids)
    np.testing.assert_array_equal(same, free)


class ConstantSession:
    """A decoder step whose log-probabilities are the same at every step: token 4 likely, END (3) next."""

    steps = 0

    def step(self, tokens, index):
        self.steps += 1
        log_probs = np.log(np.full((len(tokens), 6), 0.02, np.float32))
        log_probs[:, 4], log_probs[:, 3] = np.log(0.5), np.log(0.4)
        return log_probs

    def reorder(self, rows):
        pass


def test_the_litert_host_search_scores_and_stops_by_the_rules(monkeypatch):
    done = np.zeros(1, bool)
    arguments = dict(beam_size=2, max_length=5, start_id=2, end_id=3, alpha=1.0)
    _, scores, _ = host_search.beam(ConstantSession(), done, **arguments)
    monkeypatch.setattr(rules, "length_penalty", constant_penalty)
    _, patched, _ = host_search.beam(ConstantSession(), done, **arguments)
    assert not np.allclose(patched, scores)
    np.testing.assert_allclose(patched[0, 0], np.log(0.4) / 2, rtol=1e-6)  # [END]: log 0.4 over the constant 2
    stopping = ConstantSession()
    host_search.beam(stopping, done, **arguments)
    assert stopping.steps < arguments["max_length"]  # two hypotheses ended early: done ("beams_ended")
    monkeypatch.setattr(rules, "stops", lambda *args, **kwargs: np.zeros(1, bool))  # never done
    never = ConstantSession()
    host_search.beam(never, done, **arguments)
    assert never.steps == arguments["max_length"]


def no_forcing(scores, tokens, xp=np):
    return scores


def test_both_searches_take_a_forced_beginning_by_the_rule(model, monkeypatch):
    """`rules.forced_token_scores` is how the XLA searches and the LiteRT host search take a forced token: the rule
    patched to force nothing, a forced beginning no longer begins the output."""
    free = keras.ops.convert_to_numpy(decoding.decode(model, SOURCE, decoding.GreedySearch(), max_length=6).ids)
    forced = sorted({17, 18, 19} - {int(free[0, 0, 0])})[0]  # a token greedy search does not choose first
    prefix = np.array([[forced], [-1]], np.int32)
    taken = decoding.decode(model, SOURCE, decoding.GreedySearch(), max_length=6, prefix=prefix).ids
    host = host_search.greedy(ConstantSession(), np.zeros(1, bool), 5, 2, 3, prefix=np.array([[5]]))[0]
    assert int(keras.ops.convert_to_numpy(taken)[0, 0, 0]) == forced and list(host[0])[:1] == [5]
    monkeypatch.setattr(rules, "forced_token_scores", no_forcing)
    ignored = decoding.decode(model, SOURCE, decoding.GreedySearch(), max_length=6, prefix=prefix).ids
    host = host_search.greedy(ConstantSession(), np.zeros(1, bool), 5, 2, 3, prefix=np.array([[5]]))[0]
    assert int(keras.ops.convert_to_numpy(ignored)[0, 0, 0]) == int(free[0, 0, 0]) and list(host[0])[:1] == [4]
