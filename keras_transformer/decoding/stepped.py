"""A token search run one compiled step at a time: each source's next id as soon as the decoder gives it.

`compile_search` compiles a whole decode into one program, which returns
when every source has ended. `SteppedSearch` compiles the same search's
parts instead, each once per shape: `start` (the encoder and the search's
first rows), `step` (the search's loop body, `Search.body`, over the cached
step of `cache.py`, returning the ids it chose and which sources are done)
and `finish`; Python loops over `step` and reads one small array per step.
The state (the key/value cache) never leaves the compiled functions'
tensors, the step is traced once per cache phase (`search.phases`: three
shapes) and batch shape, and a `SteppedSearch` counts its traces
(`traces`), so tests can check that nothing re-traces per step.

It runs the searches that keep one hypothesis per source (`GreedySearch`,
`SamplingSearch`): their ids, scores and `finished` flags are those of
`compile_search` for the same inputs (the same loop body, step for step).
Beam search reorders its hypotheses until the end, so no id is final before
the search is: a `BeamSearch` is a `ValueError`.

Example:

>>> stepped = SteppedSearch(model, GreedySearch(alpha=0.0), max_length=8)
>>> steps = stepped.run(keras.ops.convert_to_tensor([[5, 6, 7, 0]]))
>>> [int(ids[0]) for ids in steps]  # doctest: +SKIP
[12, 40, 3]
>>> steps.result.ids.shape  # doctest: +SKIP
TensorShape([1, 1, 8])
"""

import keras  # noqa: F401  (the example)
from keras import ops

from keras_transformer.decoding.greedy_search import TokenSearch
from keras_transformer.decoding.model_search import bind, compiled, first_rows
from keras_transformer.decoding.search import phases


class SteppedSearch:
    """`search` over `model`, compiled step by step (see the module docstring).

    Args:
        model: a model from `build_transformer` (or an ensemble, a list).
        search: a `GreedySearch` or `SamplingSearch`.
        max_length: tokens to generate at most (default the model's).
        jit_compile: compile each part with XLA.
    """

    def __init__(self, model, search, max_length=None, jit_compile=True):
        if not isinstance(search, TokenSearch):
            raise ValueError(
                "`search` must keep one hypothesis per source (`GreedySearch`, `SamplingSearch`) to be run step "
                f"by step: beam search reorders its hypotheses until it ends. Received: search={search!r}"
            )
        self.bound = bind(model, search, max_length)
        self.traces = 0  # how many times a part was traced (Python ran its body into a graph)
        self._start = compiled(self._start_fn, jit_compile)
        self._step = compiled(self._step_fn, jit_compile)
        self._finish = compiled(self._finish_fn, jit_compile)

    def run(self, source_ids, *inputs, prefix=None, **settings):
        """`Steps`: iterate it for each step's chosen ids `(batch,)` (NumPy); then its `result`.

        `inputs`, `prefix` and `settings` are `compile_search`'s decode's
        (settings as scalar tensors: one trace serves every value). A source
        that is done gives PAD at the later steps of the others.
        """
        return Steps(self, source_ids, inputs, prefix, settings)

    def _search(self, settings):
        return self.bound.search.replace(**settings)

    def _start_fn(self, source_ids, inputs, prefix, sources, settings):
        self.traces += 1
        rows, state = self.bound.init(self._search(settings), source_ids, *inputs, prefix=prefix, sources=sources)
        return rows, state, ops.any(ops.logical_not(self._search(settings).done(rows)))

    def _step_fn(self, index, rows, state, settings):
        self.traces += 1
        search = self._search(settings)
        index, rows, state = search.body(self.bound.step)(index, rows, state)
        chosen = search.tokens(index, rows)  # the ids this step wrote, at `index` of the ids after START
        return index, rows, state, ops.stack([chosen, ops.cast(search.done(rows), "int32")])

    def _finish_fn(self, index, rows, settings):
        self.traces += 1
        return self._search(settings).finish(index, rows)


class Steps:
    """The steps of one `SteppedSearch.run`: an iterator of each step's ids; `result` once it is exhausted."""

    def __init__(self, stepped, source_ids, inputs, prefix, settings):
        self.stepped, self.settings = stepped, settings
        self.count, (source_ids, inputs, prefix), sources = stepped.bound.stepping_rows(source_ids, inputs, prefix)
        sources = None if sources is None else ops.convert_to_tensor(sources, "int32")
        self.rows, self.state, live = stepped._start(source_ids, inputs, prefix, sources, settings)
        self.live = bool(live)
        self.index = ops.convert_to_tensor(0, "int32")
        self.steps = 0
        self.result = None
        self._phases = iter(phases(stepped.bound.max_length, stepped.bound.step.resize_state))
        self._stop = 0

    def __iter__(self):
        return self

    def __next__(self):
        while self.live and self.steps >= self._stop:  # the next cache phase, or the end
            self._stop = next(self._phases, None)
            if self._stop is None:
                self.live = False
            elif self.stepped.bound.step.resize_state is not None:
                self.state = self.stepped.bound.step.resize_state(self.state, self._stop)
        if not self.live:
            if self.result is None:
                self.result = first_rows(self.stepped._finish(self.index, self.rows, self.settings), self.count)
            raise StopIteration
        self.index, self.rows, self.state, report = self.stepped._step(self.index, self.rows, self.state, self.settings)
        chosen, done = ops.convert_to_numpy(report)  # the one read of each step
        self.steps += 1
        self.live = not done.all()
        return chosen[: self.count]
