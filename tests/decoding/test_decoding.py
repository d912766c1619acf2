"""Cached decoding: equal to the uncached reference, beam search rules, sampling filters, XLA."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from keras_transformer import build_transformer, decoding

VOCAB, MAX_LENGTH, STEPS = 64, 16, 10
SOURCES = np.array([[5, 6, 7, 8, 9, 0, 0], [10, 11, 12, 13, 14, 15, 16], [20, 0, 0, 0, 0, 0, 0], [0] * 7], "int32")


@pytest.fixture(scope="module", params=["post_norm_untied", "pre_norm_tied"])
def model(request):
    """Two untrained tiny models (dropout on, so decoding must pass training=False)."""
    keras.utils.set_random_seed(1)
    tied = request.param == "pre_norm_tied"
    return build_transformer(
        VOCAB,
        VOCAB,
        num_layers=2,
        d_model=32,
        num_heads=4,
        d_ff=64,
        dropout=0.1,
        max_length=MAX_LENGTH,
        norm_first=tied,
        share_embeddings=tied,
        tie_output_embedding=tied,
    )


# What does not depend on the layers' arrangement (the searches, the flags, the ensemble's mean) runs on one
# of the two models: the cached step, which does, is checked on both.
ONE_MODEL = pytest.mark.parametrize("model", ["post_norm_untied"], indirect=True)
TIED_MODEL = pytest.mark.parametrize("model", ["pre_norm_tied"], indirect=True)


def _graph(function, *args, **kwargs):
    """Runs `function` as a (non-XLA) graph: the same ops as eager, far fewer Python dispatches."""
    return tf.nest.map_structure(ops.convert_to_numpy, tf.function(lambda: function(*args, **kwargs))())


@pytest.fixture(scope="module")
def greedy(model):
    return _graph(decoding.greedy_decode, model, SOURCES, max_length=STEPS)


def test_cached_greedy_equals_uncached_token_for_token(model, greedy):
    uncached = _graph(lambda: _uncached(model, SOURCES, decoding.GreedySearch()).best().ids)
    np.testing.assert_array_equal(greedy, uncached)
    assert greedy.shape == (4, STEPS) and greedy.dtype == np.int32
    np.testing.assert_array_equal(greedy[3], 0)  # an empty source decodes to nothing
    assert not np.isin(greedy[:3], [0, decoding.START_ID]).any()  # untrained: never ends early
    eager = decoding.greedy_decode(model, SOURCES[:1], max_length=3)
    np.testing.assert_array_equal(ops.convert_to_numpy(eager), greedy[:1, :3])


def test_cached_step_logits_match_the_full_model(model, greedy):
    decoder_inputs = np.concatenate([np.full((4, 1), decoding.START_ID), greedy[:, :-1]], 1).astype("int32")
    full = ops.convert_to_numpy(model({"encoder_inputs": SOURCES, "decoder_inputs": decoder_inputs}))
    step_fn, state = decoding.make_step_fn(model, SOURCES, max_length=STEPS)
    for index in range(STEPS):
        logits, state = step_fn(ops.convert_to_tensor(decoder_inputs[:, index]), index, state)
        np.testing.assert_allclose(ops.convert_to_numpy(logits)[:3], full[:3, index], atol=1e-4)


@ONE_MODEL
def test_beam_size_one_is_greedy(model, greedy):
    ids, _ = _graph(decoding.beam_decode, model, SOURCES, beam_size=1, alpha=0.6, max_length=STEPS)
    np.testing.assert_array_equal(ids[:, 0], greedy)


@pytest.mark.parametrize(
    "model, alpha",
    [pytest.param("post_norm_untied", 0.6, marks=pytest.mark.slow), ("pre_norm_tied", 0.6), ("pre_norm_tied", 0.0)],
    indirect=["model"],
)
def test_beam_score_is_at_least_greedy_score(model, greedy, alpha):
    sources = SOURCES[:3]
    ids, scores = _graph(decoding.beam_decode, model, sources, beam_size=4, alpha=alpha, max_length=STEPS)
    greedy_score = ops.convert_to_numpy(decoding.sequence_scores(model, sources, greedy[:3], alpha))
    beam_score = ops.convert_to_numpy(decoding.sequence_scores(model, sources, ids[:, 0], alpha))
    assert (beam_score >= greedy_score - 1e-4).all(), (beam_score, greedy_score)
    uncached, uncached_scores, _ = _graph(lambda: _uncached(model, sources, decoding.BeamSearch(4, alpha=alpha)))
    np.testing.assert_array_equal(uncached, ids)
    np.testing.assert_allclose(uncached_scores, scores, atol=1e-4)
    # The search's own scores are the teacher-forced ones, best first: ended
    # hypotheses by score, then cut-off ones by score.
    np.testing.assert_allclose(scores[:, 0], beam_score, atol=1e-4)
    _, _, finished = _graph(
        decoding.beam_decode, model, sources, beam_size=4, alpha=alpha, max_length=STEPS, return_finished=True
    )
    assert (np.diff(finished.astype(int), axis=1) <= 0).all()  # finished first
    same_kind = finished[:, 1:] == finished[:, :-1]
    assert (np.diff(scores, axis=1)[same_kind] <= 1e-6).all()


def _uncached(model, sources, search):
    """`search` over the uncached reference step: the whole model at every step."""
    return decoding.decode(model, sources, search, max_length=STEPS, cached=False)


@pytest.fixture(scope="module")
def never_ends():
    """A tiny untrained model that never emits END: its output bias for END is -1e4."""
    keras.utils.set_random_seed(3)
    model = build_transformer(VOCAB, VOCAB, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_length=8)
    kernel, bias = model.get_layer("logits").get_weights()
    bias[decoding.END_ID] = -1e4
    model.get_layer("logits").set_weights([kernel, bias])
    return model


def test_cut_off_outputs_are_flagged_unfinished(never_ends):
    sources = SOURCES[[0, 3]]  # a sentence and an empty source
    ids, finished = _graph(decoding.greedy_decode, never_ends, sources, max_length=4, return_finished=True)
    assert not np.isin(ids[0], [0, decoding.END_ID]).any()  # 4 tokens, no END: cut off
    np.testing.assert_array_equal(finished, [False, True])  # an empty source has nothing to finish
    np.testing.assert_array_equal(ids, _graph(decoding.greedy_decode, never_ends, sources, max_length=4))
    _, _, beam_finished = _graph(
        decoding.beam_decode, never_ends, sources, beam_size=2, max_length=4, return_finished=True
    )
    np.testing.assert_array_equal(beam_finished, [[False, False], [True, True]])
    _, sample_finished = _graph(decoding.sample_decode, never_ends, sources, seed=1, max_length=4, return_finished=True)
    np.testing.assert_array_equal(sample_finished, [False, True])
    decode = decoding.compile_search(never_ends, decoding.BeamSearch(2), max_length=4)
    finished = decode(ops.convert_to_tensor(sources)).best().finished
    np.testing.assert_array_equal(ops.convert_to_numpy(finished), [False, True])


@ONE_MODEL
def test_finished_flags_agree_with_the_ids(model):
    """Untrained models end sometimes: the flag is True where END was generated or the source is empty."""
    ids, finished = _graph(decoding.greedy_decode, model, SOURCES, max_length=STEPS, return_finished=True)
    np.testing.assert_array_equal(finished, (ids == decoding.END_ID).any(1) | (SOURCES == 0).all(1))
    ids, _, finished = _graph(decoding.beam_decode, model, SOURCES, beam_size=3, max_length=STEPS, return_finished=True)
    empty = (SOURCES == 0).all(1)[:, None]
    np.testing.assert_array_equal(finished, (ids == decoding.END_ID).any(2) | empty)


@ONE_MODEL
def test_sample_with_temperature_zero_or_top_k_one_is_greedy(model, greedy):
    for options in (dict(temperature=0.0), dict(top_k=1)):
        sampled = _graph(decoding.sample_decode, model, SOURCES, seed=3, max_length=STEPS, **options)
        np.testing.assert_array_equal(sampled, greedy)


@pytest.mark.parametrize(
    "model", ["pre_norm_tied", pytest.param("post_norm_untied", marks=pytest.mark.slow)], indirect=True
)
def test_compiled_xla_decoders_match_graph(model, greedy):
    source = ops.convert_to_tensor(SOURCES)
    xla_greedy = decoding.compile_search(model, decoding.GreedySearch(), max_length=STEPS)(source).best().ids
    np.testing.assert_array_equal(ops.convert_to_numpy(xla_greedy), greedy)
    options = dict(beam_size=3, alpha=0.6, max_length=STEPS)
    xla_beam = decoding.compile_search(model, decoding.BeamSearch(3, alpha=0.6), max_length=STEPS)(source).best().ids
    ids, _ = _graph(decoding.beam_decode, model, SOURCES, **options)
    np.testing.assert_array_equal(ops.convert_to_numpy(xla_beam), ids[:, 0])


@ONE_MODEL
@pytest.mark.parametrize("shape", ["static", "dynamic"])
def test_one_source_steps_as_two_rows_and_returns_its_own(model, greedy, monkeypatch, shape):
    """XLA:CPU steps one row as matrix-vector products, slower than two: a search of one hypothesis pads to two."""
    stepped_rows = []
    bound = decoding.bind(model, decoding.GreedySearch(), max_length=STEPS)
    model_step = bound.step.fn

    def step(tokens, index, state):
        stepped_rows.append(tokens.shape[0])
        return model_step(tokens, index, state)

    bound = bound._replace(step=bound.step._replace(fn=step))
    spec = tf.TensorSpec([None if shape == "dynamic" else 1, SOURCES.shape[1]], tf.int32)
    run = tf.function(lambda ids: bound.run(ids), input_signature=[spec], autograph=False)
    result = tf.nest.map_structure(ops.convert_to_numpy, run(SOURCES[:1]))
    assert result.ids.shape == (1, 1, STEPS) and result.scores.shape == (1, 1)
    np.testing.assert_array_equal(result.ids[:, 0], greedy[:1])
    assert set(stepped_rows) == ({2} if shape == "static" else {None})  # dynamic: two rows once XLA knows the shape
    source = ops.convert_to_tensor(SOURCES[:1])
    xla = decoding.compile_search(model, decoding.GreedySearch(), max_length=STEPS)(source).best().ids
    np.testing.assert_array_equal(ops.convert_to_numpy(xla), greedy[:1])


@ONE_MODEL
def test_the_rows_added_to_one_source_are_done_from_the_start(model):
    """Also where a row of padding is a prompt (GPT-2's empty text): the added rows never hold the loop open."""
    bound = decoding.bind(model, decoding.GreedySearch(), max_length=STEPS)
    count, (ids, _, prefix), sources = bound.stepping_rows(SOURCES[2:3], prefix=[[30]])
    assert count == 1 and sources == 1 and tuple(ids.shape) == (2, SOURCES.shape[1])
    np.testing.assert_array_equal(ops.convert_to_numpy(prefix), [[30], [-1]])
    rows, _ = bound.start(ids, prefix=prefix, sources=sources)
    np.testing.assert_array_equal(ops.convert_to_numpy(bound.search.done(rows)), [False, True])
    beam = decoding.bind(model, decoding.BeamSearch(2), max_length=STEPS)
    assert beam.stepping_rows(SOURCES[2:3])[2] is None  # two beams are two rows already


@ONE_MODEL
def test_the_decoding_loop_has_no_python_per_token(model):
    """The traced program is the same size for 4 and 16 steps: while loops (one per cache phase), not unrolled."""
    spec = tf.TensorSpec([None, None], tf.int32)
    sizes = []
    for steps in (4, 16):
        graph = (
            decoding.compile_search(model, decoding.BeamSearch(2), max_length=steps, jit_compile=False)
            .get_concrete_function(spec)
            .graph
        )
        sizes.append(len(graph.as_graph_def().node))
        assert any(op.type in ("While", "StatelessWhile") for op in graph.get_operations())
    assert sizes[0] == sizes[1]


def test_clear_errors(model):
    with pytest.raises(ValueError, match="max_length"):
        decoding.greedy_decode(model, SOURCES, max_length=MAX_LENGTH + 1)
    with pytest.raises(ValueError, match="source_ids"):
        decoding.greedy_decode(model, SOURCES.astype("float32"))
    with pytest.raises(ValueError, match="beam_size"):
        decoding.beam_decode(model, SOURCES, beam_size=0, max_length=4)
    with pytest.raises(ValueError, match="search"):
        decoding.compile_search(model, "nucleus")
    dense = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="build_transformer"):
        decoding.greedy_decode(dense, SOURCES)


@pytest.fixture(scope="module")
def other(model):
    """A second model of the same shape with other weights: an ensemble's member."""
    keras.utils.set_random_seed(2)
    return keras.models.clone_model(model)


@pytest.mark.slow  # the ensemble's mean is checked by the argmax test
@TIED_MODEL
def test_an_ensemble_of_one_model_decodes_as_that_model(model, greedy):
    np.testing.assert_array_equal(_graph(decoding.greedy_decode, [model], SOURCES, max_length=STEPS), greedy)
    options = dict(beam_size=3, alpha=0.6, max_length=STEPS)
    ids, scores = _graph(decoding.beam_decode, model, SOURCES[:3], **options)
    ensemble_ids, ensemble_scores = _graph(decoding.beam_decode, [model], SOURCES[:3], **options)
    np.testing.assert_array_equal(ensemble_ids, ids)
    np.testing.assert_allclose(ensemble_scores, scores, atol=1e-4)


@TIED_MODEL
def test_an_ensemble_picks_the_argmax_of_its_members_mean_distribution(model, other):
    ids = _graph(decoding.greedy_decode, [model, other], SOURCES[:3], max_length=STEPS)
    assert not np.array_equal(ids, _graph(decoding.greedy_decode, model, SOURCES[:3], max_length=STEPS))
    # Teacher-force both members on the ensemble's output: every token is the
    # argmax of the mean of their probabilities (PAD and START excluded).
    inputs = np.concatenate([np.full((3, 1), decoding.START_ID), ids[:, :-1]], 1).astype("int32")
    probs = [
        ops.convert_to_numpy(ops.softmax(member({"encoder_inputs": SOURCES[:3], "decoder_inputs": inputs})))
        for member in (model, other)
    ]
    mean = (probs[0] + probs[1]) / 2
    mean[..., [0, decoding.START_ID]] = -1
    np.testing.assert_array_equal(ids, mean.argmax(-1))
    # The ensemble's step returns the log of that mean.
    step_fn, state = decoding.make_ensemble_step_fn([model, other], SOURCES[:3], max_length=STEPS)
    logits, _ = step_fn(ops.convert_to_tensor(inputs[:, 0]), 0, state)
    np.testing.assert_allclose(np.exp(ops.convert_to_numpy(logits)), (probs[0] + probs[1])[:, 0] / 2, atol=1e-5)


@TIED_MODEL
@pytest.mark.slow  # XLA compiles of two members' beam search: half a minute, with the long checks
def test_an_ensemble_beam_search_compiles_with_xla(model, other):
    options = dict(beam_size=3, alpha=0.6, max_length=STEPS)
    decode = decoding.compile_search([model, other], decoding.BeamSearch(3, alpha=0.6), max_length=STEPS)
    xla = decode(ops.convert_to_tensor(SOURCES)).best().ids
    ids, _ = _graph(decoding.beam_decode, [model, other], SOURCES, **options)
    np.testing.assert_array_equal(ops.convert_to_numpy(xla), ids[:, 0])
    np.testing.assert_array_equal(ids[3], 0)  # an empty source still decodes to nothing


def test_ensemble_errors_name_the_member(model):
    wider = build_transformer(
        VOCAB + 1, VOCAB + 1, num_layers=1, d_model=32, num_heads=4, d_ff=64, max_length=MAX_LENGTH
    )
    with pytest.raises(ValueError, match=r"must share .*model 1"):
        decoding.greedy_decode([model, wider], SOURCES)
    with pytest.raises(ValueError, match="at least one model"):
        decoding.greedy_decode([], SOURCES)
    with pytest.raises(ValueError, match="takes one model"):
        decoding.decode([model, model], SOURCES, decoding.GreedySearch(), cached=False)
