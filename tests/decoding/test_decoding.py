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
    uncached = _graph(decoding.greedy_decode_uncached, model, SOURCES, max_length=STEPS)
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
    "model, alpha", [("post_norm_untied", 0.6), ("pre_norm_tied", 0.6), ("pre_norm_tied", 0.0)], indirect=["model"]
)
def test_beam_score_is_at_least_greedy_score(model, greedy, alpha):
    sources = SOURCES[:3]
    ids, scores = _graph(decoding.beam_decode, model, sources, beam_size=4, alpha=alpha, max_length=STEPS)
    greedy_score = ops.convert_to_numpy(decoding.sequence_scores(model, sources, greedy[:3], alpha))
    beam_score = ops.convert_to_numpy(decoding.sequence_scores(model, sources, ids[:, 0], alpha))
    assert (beam_score >= greedy_score - 1e-4).all(), (beam_score, greedy_score)
    uncached, uncached_scores = _graph(
        decoding.beam_decode_uncached, model, sources, beam_size=4, alpha=alpha, max_length=STEPS
    )
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


def _constructed_step(index_logits):
    """A step function whose next-token log-probs depend only on the step index."""
    table = ops.convert_to_tensor(np.log(np.array(index_logits, "float32") + 1e-9))

    def step_fn(tokens, index, state):
        row = ops.take(table, ops.minimum(index, len(index_logits) - 1), axis=0)
        return ops.tile(row[None], (ops.shape(tokens)[0], 1)), state

    return step_fn


# Tokens 0-3 are reserved (3 = END); 4 = "a". Step 0: END 0.4, "a" 0.6; then END 0.6, "a" 0.4.
# Short [END]: log 0.4 = -0.92. Long [a, END]: log 0.36 = -1.02, but lp(2) = (7/6)^alpha.
LENGTH_CASE = [[0, 0, 0, 0.4, 0.6], [0, 0, 0, 0.6, 0.4]]


@pytest.mark.parametrize("alpha, expected", [(0.0, [3, 0, 0]), (2.0, [4, 3, 0])])
def test_length_penalty_changes_the_ranking(alpha, expected):
    ids, scores = decoding.beam_search(_constructed_step(LENGTH_CASE), (), 1, 3, beam_size=2, alpha=alpha)
    np.testing.assert_array_equal(ops.convert_to_numpy(ids[0, 0]), expected)
    short, long = np.log(0.4), np.log(0.6 * 0.6) / (7 / 6) ** alpha
    np.testing.assert_allclose(ops.convert_to_numpy(scores[0]), sorted([short, long])[::-1], rtol=1e-5)
    assert float(ops.convert_to_numpy(decoding.length_penalty(1, alpha))) == pytest.approx(1.0)


# Step 0: "a" (4) 0.6, END 0.3, "b" (5) 0.1; then "a" 0.999, "b" 9e-4, END 1e-4. With 2 beams, [END]
# ends at step 0 (log 0.3 = -1.20) and nothing else ends in 3 steps, while the cut-off [a, a, a]
# scores log(0.6 * 0.999^2) = -0.51: higher, but unfinished.
FINISHED_CASE = [[0, 0, 0, 0.3, 0.6, 0.1], [0, 0, 0, 1e-4, 0.999, 9e-4]]


def test_a_finished_hypothesis_outranks_a_cut_off_one_with_a_higher_score():
    ids, scores, finished = decoding.beam_search(
        _constructed_step(FINISHED_CASE), (), 1, 3, beam_size=2, alpha=0.0, return_finished=True
    )
    ids, scores, finished = map(ops.convert_to_numpy, (ids, scores, finished))
    np.testing.assert_array_equal(ids[0], [[3, 0, 0], [4, 4, 4]])
    np.testing.assert_array_equal(finished[0], [True, False])
    np.testing.assert_allclose(scores[0], [np.log(0.3), np.log(0.6 * 0.999**2)], rtol=1e-4)
    assert scores[0, 1] > scores[0, 0]  # the cut-off one scores higher, and still ranks second
    two = decoding.beam_search(_constructed_step(FINISHED_CASE), (), 1, 3, beam_size=2, alpha=0.0)
    np.testing.assert_array_equal(ops.convert_to_numpy(two[0]), ids)  # the same without the flag


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
    decode = decoding.compile_decoder(never_ends, "beam", return_finished=True, beam_size=2, max_length=4)
    np.testing.assert_array_equal(ops.convert_to_numpy(decode(ops.convert_to_tensor(sources))[1]), [False, True])


@ONE_MODEL
def test_finished_flags_agree_with_the_ids(model):
    """Untrained models end sometimes: the flag is True where END was generated or the source is empty."""
    ids, finished = _graph(decoding.greedy_decode, model, SOURCES, max_length=STEPS, return_finished=True)
    np.testing.assert_array_equal(finished, (ids == decoding.END_ID).any(1) | (SOURCES == 0).all(1))
    ids, _, finished = _graph(decoding.beam_decode, model, SOURCES, beam_size=3, max_length=STEPS, return_finished=True)
    empty = (SOURCES == 0).all(1)[:, None]
    np.testing.assert_array_equal(finished, (ids == decoding.END_ID).any(2) | empty)


def test_filter_logits_known_values():
    logits = ops.log(ops.convert_to_tensor([[0.5, 0.3, 0.15, 0.05]]))
    kept = lambda filtered: np.isfinite(ops.convert_to_numpy(filtered))[0].tolist()  # noqa: E731
    assert kept(decoding.filter_logits(logits, top_p=0.7)) == [True, True, False, False]
    assert kept(decoding.filter_logits(logits, top_p=0.2)) == [True, False, False, False]
    assert kept(decoding.filter_logits(logits, top_k=3)) == [True, True, True, False]
    assert kept(decoding.filter_logits(logits, top_k=3, top_p=0.7)) == [True, True, False, False]
    assert kept(decoding.filter_logits(logits, top_k=ops.convert_to_tensor(1))) == [True, False, False, False]
    halved = ops.convert_to_numpy(decoding.filter_logits(logits, temperature=0.5))
    np.testing.assert_allclose(halved, 2 * ops.convert_to_numpy(logits))


@pytest.mark.parametrize("jit_compile", [False, True])
def test_greedy_choice_and_its_log_prob_equal_argmax_and_log_softmax(jit_compile):
    from keras_transformer.decoding.searches import chosen_log_probs, greedy_choice

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(64, 300)).astype("float32")
    logits[:8, 40:43] = 50.0  # ties: the first one wins, as with argmax
    logits[8, :] = -np.inf
    logits[8, 299] = 1.0  # the only finite one is last

    @tf.function(jit_compile=jit_compile)
    def choose(logits):
        tokens = greedy_choice(logits, 0)
        return tokens, chosen_log_probs(logits, tokens), tf.nn.log_softmax(logits)

    tokens, log_probs, log_softmax = map(ops.convert_to_numpy, choose(tf.constant(logits)))
    np.testing.assert_array_equal(tokens, logits.argmax(-1))
    assert tokens[:8].tolist() == [40] * 8 and tokens[8] == 299
    np.testing.assert_allclose(log_probs, log_softmax[np.arange(64), tokens], rtol=0, atol=1e-6)
    assert log_probs[8] == 0.0


@pytest.mark.parametrize("vocab", [12_000, 64])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_best_candidates_equal_top_k_of_all_scores(jit_compile, vocab):
    from keras_transformer.decoding.searches import best_candidates

    rng = np.random.default_rng(0)
    sources, beams = 12, 4
    logits = rng.normal(size=(sources, beams, vocab)).astype("float32")
    logits[:4] = np.round(logits[:4])  # many equal scores, within and across blocks
    logits[:, :, [0, 2]] = -np.inf  # PAD and START are never chosen
    logits[4, :, 130:400] = 9.0  # the best all in a few blocks
    logits[5, :, -8:] = 9.0  # in the last block
    log_probs = rng.normal(size=(sources, beams)).astype("float32") - 5.0
    log_probs[:4] = -1.0  # equal beams: equal scores across beams
    log_probs[6, 1:] = -np.inf  # the first step: one live beam
    block = 128 if vocab > 64 else 8  # about best_candidates' block size (125 and 8)
    last = vocab - 2 * block  # nine equal scores: four in early blocks, five in the best one's
    logits[7] = -5.0
    logits[7, 0, [block, 2 * block, 3 * block, 4 * block, last + 1, last + 2, last + 3, last + 4, last + 5]] = 3.0
    logits[7, 0, last] = 9.0
    log_probs[7, 1:] = -np.inf

    @tf.function(jit_compile=jit_compile)
    def both(logits, log_probs):
        expected = log_probs[:, :, None] + tf.nn.log_softmax(logits)
        flat = tf.reshape(logits, (sources * beams, vocab))
        return best_candidates(flat, log_probs, 2 * beams), tf.math.top_k(
            tf.reshape(expected, (sources, -1)), 2 * beams
        )

    (scores, index), (expected_scores, expected_index) = both(tf.constant(logits), tf.constant(log_probs))
    np.testing.assert_array_equal(ops.convert_to_numpy(index), expected_index.numpy())
    np.testing.assert_allclose(ops.convert_to_numpy(scores), expected_scores.numpy(), rtol=0, atol=2e-5)
    assert (ops.convert_to_numpy(index)[6] < vocab).all()  # all from the live beam


def test_sampling_inverts_the_filtered_cdf():
    step_fn = _constructed_step([[0, 0, 0, 0.05, 0.5, 0.3, 0.15]])
    noise = np.array([[0.1], [0.5], [0.7], [0.99]], "float32")  # one step
    sample = lambda **kw: ops.convert_to_numpy(  # noqa: E731
        decoding.sample_search(step_fn, (), 4, 1, noise=noise, **kw)
    )[:, 0].tolist()
    assert sample(top_k=2) == [4, 4, 5, 5]  # p = (0.625, 0.375) over tokens 4 and 5
    assert sample(top_p=0.9) == [4, 4, 5, 6]
    assert sample(temperature=0.0) == [4, 4, 4, 4]  # greedy
    seeded = [decoding.sample_search(step_fn, (), 4, 3, seed=7) for _ in range(2)]
    np.testing.assert_array_equal(*map(ops.convert_to_numpy, seeded))


@ONE_MODEL
def test_sample_with_temperature_zero_or_top_k_one_is_greedy(model, greedy):
    for options in (dict(temperature=0.0), dict(top_k=1)):
        sampled = _graph(decoding.sample_decode, model, SOURCES, seed=3, max_length=STEPS, **options)
        np.testing.assert_array_equal(sampled, greedy)


def test_compiled_xla_decoders_match_graph(model, greedy):
    source = ops.convert_to_tensor(SOURCES)
    xla_greedy = decoding.compile_decoder(model, "greedy", max_length=STEPS)(source)
    np.testing.assert_array_equal(ops.convert_to_numpy(xla_greedy), greedy)
    options = dict(beam_size=3, alpha=0.6, max_length=STEPS)
    xla_beam = decoding.compile_decoder(model, "beam", **options)(source)
    ids, _ = _graph(decoding.beam_decode, model, SOURCES, **options)
    np.testing.assert_array_equal(ops.convert_to_numpy(xla_beam), ids[:, 0])


@ONE_MODEL
def test_the_decoding_loop_has_no_python_per_token(model):
    """The traced program is the same size for 4 and 16 steps: while loops (one per cache phase), not unrolled."""
    spec = tf.TensorSpec([None, None], tf.int32)
    sizes = []
    for steps in (4, 16):
        graph = (
            decoding.compile_decoder(model, "beam", jit_compile=False, beam_size=2, max_length=steps)
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
    with pytest.raises(ValueError, match="method"):
        decoding.compile_decoder(model, "nucleus")
    dense = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="build_transformer"):
        decoding.greedy_decode(dense, SOURCES)


@pytest.fixture(scope="module")
def other(model):
    """A second model of the same shape with other weights: an ensemble's member."""
    keras.utils.set_random_seed(2)
    return keras.models.clone_model(model)


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
def test_an_ensemble_beam_search_compiles_with_xla(model, other):
    options = dict(beam_size=3, alpha=0.6, max_length=STEPS)
    xla = decoding.compile_decoder([model, other], "beam", **options)(ops.convert_to_tensor(SOURCES))
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
        decoding.greedy_decode_uncached([model, model], SOURCES)
