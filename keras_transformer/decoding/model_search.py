"""A search over a model: `decode`, `compile_search` (the one compile entry point) and `sequence_scores`.

`bind(model, search)` joins a search (`GreedySearch`, `SamplingSearch`,
`BeamSearch`) to the cached step of a model from `build_transformer` (or of
an ensemble, a list of models; or the uncached reference step): a
`BoundSearch`. `decode` runs it as one loop; `compile_search` compiles it,
as one XLA program per input shape (`tf.function` on TensorFlow, `jax.jit`
on JAX) or, with `compact=True`, in segments that drop the sources that are
done (`keras_transformer.decoding.compaction`). The `Translator`, the tests
and the benchmarks all compile through `compile_search`; `compile_scores`
compiles the teacher-forced `sequence_scores` the same way (`compiled`).
Every search returns a `SearchResult` `(ids, scores, finished)`; an empty
source row (all padding) decodes to nothing and counts as finished.

Example:

>>> source = keras.ops.convert_to_tensor([[5, 6, 7, 0]])
>>> result = decode(model, source, BeamSearch(4, alpha=0.6), max_length=8)
>>> tuple(result.ids.shape), tuple(result.scores.shape)
((1, 4, 8), (1, 4))
>>> best = compile_search(model, BeamSearch(4, alpha=0.6), max_length=8)(source).best()
>>> bool(keras.ops.all(best.ids == result.ids[:, 0]))
True
"""

import math
from collections.abc import Callable
from typing import NamedTuple

import keras
from keras import ops

from keras_transformer.config import PAD_ID
from keras_transformer.decoding.beam_search import BeamSearch  # noqa: F401  (the examples)
from keras_transformer.decoding.cache import (
    check_max_length,
    check_source_ids,
    initial_state,
    model_step,
    uncached_state,
    uncached_step,
)
from keras_transformer.decoding.ensembles import ensemble_members, ensemble_model_step, ensemble_state
from keras_transformer.decoding.greedy_search import GreedySearch  # noqa: F401  (the examples)
from keras_transformer.decoding.prompts import prompt_state, prompt_step, starts_from_padding
from keras_transformer.decoding.search import Search, Step
from keras_transformer.models import as_transformer, is_decoder_only

# A decode of at most this many tokens runs as one loop over the whole cache, not in `search.phases`:
# each phase is another copy of the step in the XLA program (compiled, and converted to HLO, once per phase),
# and a short cache saves little to attend a quarter of (docs/performance.md, "A translator's first call").
ONE_LOOP_UP_TO = 64

# XLA:CPU runs the products of a one-row step as matrix-vector products, which took a step 2.3-2.9 times as long
# as a step of two rows: a search of one hypothesis decodes at least this many rows, padding added
# (docs/performance.md, "One sentence decodes as two rows").
MIN_STEP_ROWS = 2


class BoundSearch(NamedTuple):
    """A search joined to a decoder step: what `decode` and `compaction.compacting` run.

    Attributes:
        search: the `Search`.
        step: the `Step` (the model's cached step, with its state functions).
        init: `init(search, source_ids, *inputs, prefix=None) -> (rows, state)`:
            the search's first rows (`search.initial_rows`, empty sources
            flagged finished, a forced `prefix` marked) and the step's first
            state (the encoder run once). `inputs` are the search's
            (`SamplingSearch`: the noise). `bind`'s also takes `sources`:
            the rows after the first `sources` are done from the start
            (`stepping_rows`' padding).
        max_length: tokens to generate at most.

    Every tensor of the rows and of the state has one row per source on axis 0.

    Example:

    >>> bound = bind(model, GreedySearch(), max_length=8)
    >>> tuple(bound.run([[5, 6, 7]]).ids.shape)
    (1, 1, 8)
    """

    search: Search
    step: Step
    init: Callable
    max_length: int
    pad_id: int = PAD_ID

    def start(self, source_ids, *inputs, prefix=None, sources=None):
        """`(rows, state)` before the first step; the rows after the first `sources` (if given) done."""
        added = {} if sources is None else {"sources": sources}
        return self.init(self.search, source_ids, *inputs, prefix=prefix, **added)

    def run(self, source_ids, *inputs, prefix=None):
        """The `SearchResult` for `source_ids`, as one loop per cache phase; `prefix`: see `Search.run`."""
        count, (source_ids, inputs, prefix), sources = self.stepping_rows(source_ids, inputs, prefix)
        rows, state = self.start(source_ids, *inputs, prefix=prefix, sources=sources)
        return first_rows(self.search.loop(self.step, rows, state, self.max_length), count)

    def stepping_rows(self, source_ids, inputs=(), prefix=None):
        """`(count, (source_ids, inputs, prefix), sources)`: `count` sources, empty rows added up to `MIN_STEP_ROWS`.

        A beam search steps `beam_size` rows a source already. The rows added
        are all padding, done from the start once `start` is given `sources`
        (`count`, or None where no row can have been added);
        `first_rows(result, count)` drops them again.
        """
        source_ids = check_source_ids(source_ids)
        count = ops.shape(source_ids)[0]
        if self.search.beam_size > 1 or (isinstance(count, int) and count >= MIN_STEP_ROWS):
            return count, (source_ids, tuple(inputs), prefix), None
        extra = MIN_STEP_ROWS - count if isinstance(count, int) else ops.maximum(MIN_STEP_ROWS - count, 0)
        padded = (
            _with_rows(source_ids, extra, self.pad_id),
            tuple(None if x is None else _with_rows(ops.convert_to_tensor(x), extra, 0) for x in inputs),
            None if prefix is None else _with_rows(ops.convert_to_tensor(prefix, "int32"), extra, -1),
        )
        return count, padded, count


def _full_size(initial, resize_state, max_length):
    """`initial(ids)`'s state resized once to `max_length`: a loop without phases starts from it."""
    return lambda ids: resize_state(initial(ids), max_length)


def resolve_max_length(model, max_length=None):
    """The number of tokens to generate: `max_length`, checked, or the model's `max_length`.

    `model` may be an ensemble (a list of models), whose members share it.
    """
    return check_max_length(ensemble_members(model)[0], max_length)


def empty_sources(source_ids, pad_id=PAD_ID):
    """Boolean `(batch,)`: the rows with no real token, all `pad_id` (they decode to nothing)."""
    return ops.logical_not(ops.any(ops.not_equal(source_ids, pad_id), axis=1))


def bind(model, search, max_length=None, *, cached=True):
    """`search` joined to the step of `model`: a `BoundSearch`.

    Args:
        model: a model from `build_transformer`, or a list of them: an
            ensemble (`keras_transformer.decoding.ensembles`).
        search: a `GreedySearch`, `SamplingSearch` or `BeamSearch`.
        max_length: tokens to generate at most (END included); default and
            at most the model's `max_length`. A Python int: shapes stay static.
            Up to `ONE_LOOP_UP_TO` tokens the search runs as one loop over
            the whole cache; a longer one grows its cache in `search.phases`.
        cached: the cached step; False: the uncached reference
            (`cache.uncached_step`, one model only).
    """
    if not isinstance(search, Search):
        raise ValueError(
            "`search` must be a `Search`: `GreedySearch`, `SamplingSearch` or `BeamSearch` (`search_for` maps "
            f"settings to one). Received: search={search!r}"
        )
    max_length = resolve_max_length(model, max_length)
    first = as_transformer(ensemble_members(model)[0])  # the members share vocabularies and ids
    search = search.with_ids(**first.config.special_ids())
    beams = search.beam_size
    if is_decoder_only(model):  # a language model continues its prompts (`decoding.prompts`)
        if not cached:
            raise ValueError("A decoder-only model decodes with its cached step only. Received: cached=False")
        step, initial = prompt_step(model, beams), lambda ids: prompt_state(model, ids, max_length, beams)
    elif not cached:
        as_transformer(model)  # one model: a `ValueError` for an ensemble
        step, initial = uncached_step(model), lambda ids: uncached_state(model, ids, max_length, beams)
    elif isinstance(model, (list, tuple)):
        members = ensemble_members(model)
        step, initial = ensemble_model_step(members, beams), lambda ids: ensemble_state(members, ids, max_length, beams)
    else:
        step, initial = model_step(model, beams), lambda ids: initial_state(model, ids, max_length, beams)

    if max_length <= ONE_LOOP_UP_TO and step.resize_state is not None:  # one loop: the state full-size at once
        step, initial = step._replace(resize_state=None), _full_size(initial, step.resize_state, max_length)
    source_pad = first.config.pad_id  # the source's (an import's own)
    # A row of padding is empty, but for a language model whose padding is its start id: GPT-2's empty text.
    never_empty = is_decoder_only(model) and starts_from_padding(first)

    def init(search, source_ids, *inputs, prefix=None, sources=None):
        ids = check_source_ids(source_ids)
        finished = empty_sources(ids, source_pad)
        if never_empty:
            finished = ops.zeros_like(finished)
        if sources is not None:  # the rows after the first `sources` are `stepping_rows`' padding: done
            finished = ops.logical_or(finished, ops.arange(ops.shape(ids)[0]) >= sources)
        rows = search.initial_rows(ops.shape(ids)[0], max_length, finished, *inputs, prefix=prefix)
        return rows, initial(ids)

    return BoundSearch(search, step, init, max_length, source_pad)


def first_rows(tensors, count):
    """The first `count` rows (axis 0) of each tensor of `tensors` (a `SearchResult`, a tuple)."""
    return keras.tree.map_structure(lambda x: x[:count], tensors)


def _with_rows(x, extra, value):
    """`x` with `extra` rows of `value` after its own (axis 0)."""
    shape = ops.shape(x)
    return ops.concatenate([x, ops.full((extra, *shape[1:]), value, x.dtype)], axis=0)


def decode(model, source_ids, search, *inputs, max_length=None, cached=True, prefix=None):
    """`search` over `model` for `source_ids` (int `(batch, src_len)`, 0 = padding): a `SearchResult`.

    `inputs` go to the search (`SamplingSearch`: the noise); `prefix` int
    `(batch, length)` (-1 where free) forces the first tokens of each output
    (a target language, the first words: `Search.run`); the other arguments
    are `bind`'s. Not compiled: inside a `tf.function` or
    `jax.jit` it is one loop per cache phase (see `compile_search`).

    Example:

    >>> result = decode(model, [[5, 6, 7]], GreedySearch(alpha=0.0), max_length=8)
    >>> tuple(result.best().ids.shape)
    (1, 8)
    """
    return bind(model, search, max_length, cached=cached).run(source_ids, *inputs, prefix=prefix)


def compile_search(model, search, max_length=None, *, cached=True, jit_compile=True, compact=False):
    """`decode(source_ids, *inputs, prefix=None, **settings) -> SearchResult`: `search` over `model`, compiled.

    The whole decode is one program: a `tf.function` (XLA with
    `jit_compile=True`) on TensorFlow, `jax.jit` on JAX. Pad sources to a
    few bucket lengths: every new shape compiles once. `inputs` go to the
    search (`SamplingSearch`: the noise); `settings` replace fields of the
    search for that call (`temperature=...`: scalar tensors compile once for
    every value).

    With `compact=True` (TensorFlow, the cached step) the decode drops the
    sources that are done from the batch as it goes
    (`keras_transformer.decoding.compaction`): the same result, with the
    encoder and each segment of steps an XLA program inside a `tf.function`
    (and no `settings`).

    Example:

    >>> decode = compile_search(model, BeamSearch(4, alpha=0.6), max_length=32)
    >>> ids = decode(keras.ops.convert_to_tensor([[5, 6, 7, 0]])).best().ids
    """
    bound = bind(model, search, max_length, cached=cached)
    if compact:
        backend = keras.backend.backend()
        if backend != "tensorflow" or not cached:
            raise ValueError(
                "`compact=True` needs the TensorFlow backend and the cached step. "
                f"Received: cached={cached} on {backend}"
            )
        return _compacting(bound, jit_compile)

    def decode(source_ids, *inputs, prefix=None, **settings):
        return bound._replace(search=bound.search.replace(**settings)).run(source_ids, *inputs, prefix=prefix)

    return compiled(decode, jit_compile)


def compiled(fn, jit_compile=True):
    """`fn` as one program: a `tf.function` (XLA with `jit_compile=True`) on TensorFlow, `jax.jit` on JAX.

    What `compile_search` and `compile_scores` compile with; elsewhere `fn`
    as it is.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        # autograph=False: the loops are explicit `while_loop`s, written for JAX too; converting the
        # source first took half of the first call of a compiled beam search.
        return tf.function(fn, jit_compile=jit_compile, reduce_retracing=True, autograph=False)
    if backend == "jax" and jit_compile:
        import jax

        return jax.jit(fn)
    return fn


def _compacting(bound, jit_compile):
    """`compile_search`'s `decode` over `compaction.compacting`: a graph around XLA segments."""
    import tensorflow as tf

    from keras_transformer.decoding.compaction import compacting

    decode_all = compacting(bound, jit_compile)

    def decode(source_ids, *inputs, prefix=None, **settings):
        if settings:
            raise ValueError(f"A compacting decode takes no settings. Received: {sorted(settings)}")
        return decode_all(source_ids, *inputs, prefix=prefix)

    return tf.function(decode, reduce_retracing=True, autograph=False)


def sequence_scores(model, source_ids, output_ids, alpha=0.0, start_id=None, end_id=None, *, search=None):
    """Teacher-forced score of decoded `output_ids` `(batch, length)` (PAD after END).

    The sum of the log-probabilities of the tokens up to and including END,
    divided by the length penalty of their count (`alpha=0`: the plain
    log-probability), under the decoding distribution (the searches' banned
    ids excluded; for an ensemble, the mean of its members' distributions).
    Comparable with the searches' scores. `search` (default
    `Search(alpha=alpha, start_id=start_id, end_id=end_id)`) gives the ids
    (those it leaves None are the model's), the banned ids, the log-softmax
    and the normalization (its `force_end` is not applied: a forced END
    scores as the model gives it).

    Example:

    >>> result = decode(model, [[5, 6, 7]], GreedySearch(alpha=0.0), max_length=8).best()
    >>> teacher_forced = sequence_scores(model, [[5, 6, 7]], result.ids)  # the same, from one forward pass
    >>> bool(keras.ops.all(keras.ops.abs(teacher_forced - result.scores) < 1e-4))
    True
    """
    search = Search(alpha=alpha, start_id=start_id, end_id=end_id) if search is None else search
    search = search.with_ids(**as_transformer(ensemble_members(model)[0]).config.special_ids())
    source_ids, output_ids = check_source_ids(source_ids), check_source_ids(output_ids, "output_ids")
    start = ops.full((ops.shape(output_ids)[0], 1), search.start_id, "int32")
    decoder_inputs = ops.concatenate([start, output_ids[:, :-1]], axis=1)
    members = ensemble_members(model)
    inputs = {"encoder_inputs": source_ids, "decoder_inputs": decoder_inputs}

    def member_log_probs(member):
        processed = search.processed(member(inputs, training=False))
        return processed if search.normalized else ops.log_softmax(processed, axis=-1)

    stacked = ops.stack([member_log_probs(member) for member in members])
    log_probs = ops.logsumexp(stacked, axis=0) - math.log(len(members))
    token_log_probs = ops.squeeze(ops.take_along_axis(log_probs, output_ids[:, :, None], axis=2), -1)
    real = ops.not_equal(output_ids, search.pad_id)
    total = ops.sum(ops.where(real, token_log_probs, 0.0), axis=1)
    return search.normalise(total, ops.sum(ops.cast(real, "int32"), axis=1))


def compile_scores(model, alpha=0.0, start_id=None, end_id=None, *, search=None, jit_compile=True):
    """`score(source_ids, output_ids) -> scores (batch,)`: `sequence_scores` of `model`, compiled as searches are.

    Example:

    >>> score = compile_scores(model)
    >>> tuple(score(keras.ops.convert_to_tensor([[5, 6, 7]]), keras.ops.convert_to_tensor([[9, 3, 0]])).shape)
    (1,)
    """

    def score(source_ids, output_ids):
        return sequence_scores(model, source_ids, output_ids, alpha, start_id, end_id, search=search)

    return compiled(score, jit_compile)
