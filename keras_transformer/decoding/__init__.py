"""Decoding: searches over any decoder step (greedy, sampling, beam), the cached step of a model, ensembles.

A search is an object (`GreedySearch`, `SamplingSearch`, `BeamSearch`, all
`Search`es, whose base class owns the one loop) that runs over any
`step_fn(tokens, index, state) -> (logits, state)` and returns one
`SearchResult` `(ids, scores, finished)`; `search_for` maps user settings to
a search, the one place where a beam of 1 means greedy. `decode` runs a
search over the cached step of a model from `build_transformer` (`cache`)
or of an ensemble (`ensembles`), and `compile_search` compiles it into one
XLA program, or segments that drop the finished sources (`compaction`), with
the step traced once (`traced_step`); `SteppedSearch` compiles its step
alone, for a loop in Python that reads each id as it comes (`stepped`). `greedy_decode`, `beam_decode` and
`sample_decode` are the one-call forms. Decoding knows models and layers,
and nothing of training or serving.
"""

from keras_transformer.config import END_ID, PAD_ID, START_ID
from keras_transformer.decoding import rules
from keras_transformer.decoding.beam_search import BeamSearch
from keras_transformer.decoding.cache import (
    cached_step,
    initial_state,
    make_step_fn,
    reorder_beams,
    resize_cache,
)
from keras_transformer.decoding.ensembles import ensemble_members, make_ensemble_step_fn
from keras_transformer.decoding.functions import beam_decode, greedy_decode, sample_decode
from keras_transformer.decoding.greedy_search import GreedySearch
from keras_transformer.decoding.model_search import (
    BoundSearch,
    bind,
    compile_scores,
    compile_search,
    decode,
    resolve_max_length,
    sequence_scores,
)
from keras_transformer.decoding.sampling_search import SamplingSearch, filter_logits
from keras_transformer.decoding.search import (
    Search,
    SearchResult,
    Step,
    TruncatedOutputWarning,
    check_beam_size,
)
from keras_transformer.decoding.settings import search_for
from keras_transformer.decoding.stepped import SteppedSearch

__all__ = [
    "BeamSearch",
    "BoundSearch",
    "END_ID",
    "GreedySearch",
    "PAD_ID",
    "START_ID",
    "SamplingSearch",
    "Search",
    "SearchResult",
    "Step",
    "SteppedSearch",
    "TruncatedOutputWarning",
    "beam_decode",
    "bind",
    "cached_step",
    "check_beam_size",
    "compile_scores",
    "compile_search",
    "decode",
    "ensemble_members",
    "filter_logits",
    "greedy_decode",
    "initial_state",
    "rules",
    "make_ensemble_step_fn",
    "make_step_fn",
    "reorder_beams",
    "resize_cache",
    "resolve_max_length",
    "sample_decode",
    "search_for",
    "sequence_scores",
]
