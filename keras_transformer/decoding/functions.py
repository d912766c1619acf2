"""`greedy_decode`, `beam_decode` and `sample_decode`: one call from a model and source ids to output ids.

Each builds its search (`GreedySearch`, `BeamSearch`, `SamplingSearch`),
runs it over the model's cached step (`model_search.decode`) and returns
the tuple its flags ask for, as the README and the notebooks use them.
Everything not given comes from the model: its START, END and PAD ids
(`model.config`), and, for a model with decoding settings of its own (an
imported checkpoint's `model.decoding_config`), its length rule, banned
ids, forced END and output length, so that an imported OPUS-MT model
decodes as its translator does. The
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

from keras_transformer.decoding.beam_search import BeamSearch
from keras_transformer.decoding.ensembles import ensemble_members
from keras_transformer.decoding.greedy_search import GreedySearch
from keras_transformer.decoding.model_search import decode
from keras_transformer.decoding.sampling_search import SamplingSearch


def _model_settings(model, search_class):
    """The options of `search_class` that the model's own decoding settings name (an import's), else none."""
    decoding_config = getattr(ensemble_members(model)[0], "decoding_config", None)
    if decoding_config is None:
        return {}
    options = decoding_config.search_options()
    if search_class is not BeamSearch:
        options.pop("stopping")
    return options


def _max_length(model, max_length):
    """`max_length`, else the model's own decoding length (an import's), else the model's `max_length`."""
    decoding_config = getattr(ensemble_members(model)[0], "decoding_config", None)
    return max_length or (decoding_config and decoding_config.max_new_tokens) or None


def _flagged(result, return_scores, return_finished):
    """`ids`, or `(ids, *extras)` with the scores and/or finished flags asked for."""
    extras = (result.scores,) * return_scores + (result.finished,) * return_finished
    return (result.ids, *extras) if extras else result.ids


def greedy_decode(
    model, source_ids, max_length=None, start_id=None, end_id=None, return_finished=False, return_scores=False
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
        start_id, end_id: the START and END token ids; default the model's
            (`model.config`: an imported OPUS-MT model starts from its
            padding id and ends with id 0).
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
    search = GreedySearch(alpha=0.0, start_id=start_id, end_id=end_id, **_model_settings(model, GreedySearch))
    result = decode(model, source_ids, search, max_length=_max_length(model, max_length))
    return _flagged(result.best(), return_scores, return_finished)


def beam_decode(
    model, source_ids, beam_size=4, alpha=None, max_length=None, start_id=None, end_id=None, return_finished=False
):
    """Cached beam search of `model` (or an ensemble, a list of models): `BeamSearch` over its cache.

    Returns `(ids (batch, beam_size, max_length), scores (batch, beam_size))`,
    best first (ended hypotheses before cut-off ones); `ids[:, 0]` is the
    translation. `beam_size=1` finds the greedy ids. `alpha` defaults to
    the model's own (an import's `length_penalty`), else 0.6. With
    `return_finished=True`, also the boolean `finished` `(batch,
    beam_size)`: False for the hypotheses cut off at `max_length` before END.

    Example:

    >>> ids, scores = beam_decode(model, [[5, 6, 7]], beam_size=4, alpha=0.6)
    >>> ids, scores, finished = beam_decode(model, [[5, 6, 7]], return_finished=True)
    """
    options = _model_settings(model, BeamSearch)
    decoding_config = getattr(ensemble_members(model)[0], "decoding_config", None)
    alpha = alpha if alpha is not None else decoding_config.alpha if decoding_config else 0.6
    search = BeamSearch(
        beam_size, options.pop("stopping", "beams_ended"), alpha=alpha, start_id=start_id, end_id=end_id, **options
    )
    result = decode(model, source_ids, search, max_length=_max_length(model, max_length))
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
    start_id=None,
    end_id=None,
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
    options = _model_settings(model, SamplingSearch)
    search = SamplingSearch(temperature, top_k, top_p, seed, alpha=0.0, start_id=start_id, end_id=end_id, **options)
    result = decode(model, source_ids, search, noise, max_length=_max_length(model, max_length))
    return _flagged(result.best(), return_scores, return_finished)
