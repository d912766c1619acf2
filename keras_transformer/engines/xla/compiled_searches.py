"""A `Translator`'s searches, compiled once (`decoding.compile_search`): source ids -> `SearchResult`.

`CompiledSearches` compiles the translator's own search (what
`decoding.search_for(beam_size, alpha, **options)` names: beam search, or
greedy search for a beam of 1), greedy search and sampling with the same
options, and the teacher-forced scores. `SearchSettings` is what they were
compiled from, which a translator's streams (`stream_decoder`) and
in-flight rows (`inflight`) compile their own searches from.

Example:

>>> search = decoding.search_for(4, 0.6)  # doctest: +SKIP
>>> searches = CompiledSearches(model, search, {}, max_length=64, jit_compile=True)  # doctest: +SKIP
>>> searches.best(source_ids, prefix, ban_mask).ids  # doctest: +SKIP
"""

import dataclasses
import functools

from keras_transformer import decoding


@dataclasses.dataclass(frozen=True)
class SearchSettings:
    """What a translator's searches are compiled from.

    `model` (one, or an ensemble's list), `search` (its own: what `nbest`
    runs), `options` (`decoding.search_for`'s keywords beside the beam and
    alpha, which greedy search and sampling share), `max_length` (tokens
    generated at most) and `jit_compile`.
    """

    model: object
    search: object
    options: dict
    max_length: int
    jit_compile: bool


class CompiledSearches:
    """A `Translator`'s compiled searches (`decoding.compile_search`): source ids -> `SearchResult`.

    `scores` are log-probabilities normalised by the search's length penalty
    (`Search.normalise`, length counting END), the quantity the beam search
    ranks by, for every search alike. `nbest` runs `search`; greedy search
    and sampling share its `options`. With `compact`, greedy and beam
    search drop finished sentences between segments, and take no banned ids
    (`Translator` refuses them).
    """

    def __init__(self, model, search, options, max_length, jit_compile, compact=False):
        compile_search = functools.partial(decoding.compile_search, model, max_length=max_length)
        compile_search = functools.partial(compile_search, jit_compile=jit_compile)
        greedy = decoding.search_for(1, search.alpha, **options)
        self.beam_size, self._compact = search.beam_size, compact
        self.start_id = search.start_id
        self.settings = SearchSettings(model, search, options, max_length, jit_compile)
        self._greedy = compile_search(greedy, compact=compact)
        self._nbest = self._greedy if search == greedy else compile_search(search, compact=compact)
        self._sample = compile_search(decoding.search_for(None, search.alpha, temperature=1.0, **options))
        scoring = decoding.search_for(1, 0.0, **options)  # plain log-probabilities, with the search's ids and bans
        self.score = decoding.compile_scores(model, search=scoring, jit_compile=jit_compile)

    def greedy(self, source_ids, prefix, ban_mask):
        return self._greedy(source_ids, prefix=prefix, **self._ban(ban_mask)).best()

    def nbest(self, source_ids, prefix, ban_mask):
        return self._nbest(source_ids, prefix=prefix, **self._ban(ban_mask))

    def best(self, source_ids, prefix, ban_mask):
        """The best hypothesis of `nbest`."""
        return self.nbest(source_ids, prefix, ban_mask).best()

    def sample(self, source_ids, noise, temperature, top_k, top_p, prefix, ban_mask):
        settings = dict(temperature=temperature, top_k=top_k, top_p=top_p, ban_mask=ban_mask)
        return self._sample(source_ids, noise, prefix=prefix, **settings).best()

    def _ban(self, ban_mask):
        """The setting of a call's banned ids; none for a compacting decode."""
        return {} if self._compact else {"ban_mask": ban_mask}
