"""`greedy_decode`, `beam_decode` and `sample_decode`: one call from a model and source ids to output ids.

Each builds its search (`GreedySearch`, `BeamSearch`, `SamplingSearch`),
runs it over the model's cached step (`model_search.decode`) and returns
the tuple its flags ask for, as the README and the notebooks use them. The
searches themselves return one `SearchResult`: `decode(model, source_ids,
search)` gives it whole.

Example:

>>> source = keras.ops.convert_to_tensor([[5, 6, 7, 0]])
>>> tuple(greedy_decode(model, source, max_length=8).shape)
(1, 8)
>>> ids, scores = beam_decode(model, source, beam_size=4, max_length=8)
>>> tuple(ids.shape), tuple(scores.shape)
((1, 4, 8), (1, 4))
"""

import keras  # noqa: F401  (the examples)

from keras_transformer.config import END_ID, START_ID
from keras_transformer.decoding.beam_search import BeamSearch
from keras_transformer.decoding.greedy_search import GreedySearch
from keras_transformer.decoding.model_search import decode
from keras_transformer.decoding.sampling_search import SamplingSearch


def _flagged(result, return_scores, return_finished):
    """`ids`, or `(ids, *extras)` with the scores and/or finished flags asked for."""
    extras = (result.scores,) * return_scores + (result.finished,) * return_finished
    return (result.ids, *extras) if extras else result.ids


def greedy_decode(
    model, source_ids, max_length=None, start_id=START_ID, end_id=END_ID, return_finished=False, return_scores=False
):
    """Cached greedy decoding of `model` (from `build_transformer`): `GreedySearch` over its cache.

    An empty source row (all padding) decodes to all zeros (and counts as
    finished).

    Args:
        model: the Transformer, or a list of them: an ensemble, decoded by
            the mean of their distributions (`ensembles`).
        source_ids: int `(batch, src_len)`, 0 = padding.
        max_length: tokens to generate at most (END included); default and at
            most the model's `max_length`. A Python int: shapes stay static.
        start_id, end_id: the START and END token ids.
        return_finished: also return the boolean `finished` `(batch,)`,
            False where the output was cut off at `max_length` before END.
        return_scores: also return the float32 log-probability `(batch,)`
            of each output (its tokens' sum, END included).

    Returns:
        int32 ids `(batch, max_length)`, 0 after END; `(ids, finished)` with
        `return_finished=True`, `(ids, scores)` with `return_scores=True`,
        `(ids, scores, finished)` with both.

    Example:

    >>> ids = greedy_decode(model, [[5, 6, 7]], max_length=8)
    >>> ids, finished = greedy_decode(model, [[5, 6, 7]], max_length=8, return_finished=True)
    >>> ids, scores, finished = greedy_decode(model, [[5, 6, 7]], return_finished=True, return_scores=True)
    """
    search = GreedySearch(alpha=0.0, start_id=start_id, end_id=end_id)
    result = decode(model, source_ids, search, max_length=max_length)
    return _flagged(result.best(), return_scores, return_finished)


def beam_decode(
    model, source_ids, beam_size=4, alpha=0.6, max_length=None, start_id=START_ID, end_id=END_ID, return_finished=False
):
    """Cached beam search of `model` (or an ensemble, a list of models): `BeamSearch` over its cache.

    Returns `(ids (batch, beam_size, max_length), scores (batch, beam_size))`,
    best first (ended hypotheses before cut-off ones); `ids[:, 0]` is the
    translation. `beam_size=1` finds the greedy ids. With
    `return_finished=True`, also the boolean `finished` `(batch,
    beam_size)`: False for the hypotheses cut off at `max_length` before END.

    Example:

    >>> ids, scores = beam_decode(model, [[5, 6, 7]], beam_size=4, alpha=0.6)
    >>> ids, scores, finished = beam_decode(model, [[5, 6, 7]], return_finished=True)
    """
    search = BeamSearch(beam_size, alpha=alpha, start_id=start_id, end_id=end_id)
    result = decode(model, source_ids, search, max_length=max_length)
    return _flagged(result, True, return_finished)


def sample_decode(
    model,
    source_ids,
    temperature=1.0,
    top_k=0,
    top_p=1.0,
    seed=None,
    noise=None,
    max_length=None,
    start_id=START_ID,
    end_id=END_ID,
    return_finished=False,
    return_scores=False,
):
    """Cached sampling of `model` (or an ensemble): `SamplingSearch` over its cache; see `filter_logits`.

    `noise` `(batch, max_length)` (uniform in [0, 1)) fixes the draws; else
    it is drawn from `seed`. `return_finished` and `return_scores` as in
    `greedy_decode` (the scores are the model's log-probabilities of the
    sampled tokens, before temperature and filters).

    Example:

    >>> ids = sample_decode(model, [[5, 6, 7]], temperature=0.8, top_p=0.9, seed=1)
    """
    search = SamplingSearch(temperature, top_k, top_p, seed, alpha=0.0, start_id=start_id, end_id=end_id)
    result = decode(model, source_ids, search, noise, max_length=max_length)
    return _flagged(result.best(), return_scores, return_finished)
