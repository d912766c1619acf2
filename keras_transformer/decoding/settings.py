"""`search_for`: the one function that maps decoding settings (beam size, sampling) to a search.

The `Translator`, `export.load` and the `translate`, `evaluate` and
`chat` commands ask it which search the user's settings name, so that "a
beam of 1 is greedy search" is decided here and nowhere else.

Example:

>>> search_for(beam_size=1) == GreedySearch(alpha=0.6)
True
>>> search_for(beam_size=4, alpha=1.0).beam_size
4
>>> search_for() is None  # nothing asked for: the model's own default
True
"""

from keras_transformer.decoding.beam_search import BeamSearch
from keras_transformer.decoding.greedy_search import GreedySearch
from keras_transformer.decoding.sampling_search import SamplingSearch
from keras_transformer.decoding.search import check_beam_size


def search_for(
    beam_size=None,
    alpha=0.6,
    *,
    temperature=None,
    top_k=0,
    top_p=1.0,
    seed=None,
    start_id=None,
    end_id=None,
    pad_id=None,
    normalization="gnmt",
    stopping="beams_ended",
    cut_off="after_ended",
    force_end=False,
    banned_ids=None,
    softmax_over="allowed",
):
    """The search that the settings name, or None where they leave it to the model.

    - `temperature` given: `SamplingSearch(temperature, top_k, top_p, seed)`
      (`beam_size` must then be None or 1).
    - `beam_size=1`: `GreedySearch`. A beam search of one beam finds the same
      ids, so the cheaper greedy search runs instead (as transformers'
      `generate` does for `num_beams=1`).
    - `beam_size` > 1: `BeamSearch(beam_size, stopping, cut_off)`.
    - neither: None, the model's default (a run's `DecodingConfig`, an
      export's fixed beam size).

    Args:
        beam_size: None, or a positive int.
        alpha: the length penalty's exponent (`Search.normalise`) of every
            search's scores, and of beam search's ranking.
        temperature, top_k, top_p, seed: sampling (`SamplingSearch`).
        start_id, end_id, pad_id: the START, END and PAD token ids; None:
            the model's, once the search is bound to one (`bind`).
        normalization, banned_ids, force_end, softmax_over: passed on to
            the search (see `Search`).
        stopping, cut_off: beam search's (`BeamSearch`); greedy search and
            sampling stop once every source has ended, whatever they say.

    The defaults are this package's own models. A Hugging Face
    `generation_config` maps onto these names (see `docs/architecture.md`).
    """
    options = dict(alpha=alpha, start_id=start_id, end_id=end_id, pad_id=pad_id, normalization=normalization)
    options.update(banned_ids=banned_ids, force_end=force_end, softmax_over=softmax_over)
    if beam_size is not None:
        check_beam_size(beam_size)
    if temperature is not None:
        if beam_size not in (None, 1):
            raise ValueError(f"Sampling takes no beams. Received: temperature={temperature}, beam_size={beam_size}")
        return SamplingSearch(temperature, top_k, top_p, seed, **options)
    if beam_size is None:
        return None
    if beam_size == 1:
        return GreedySearch(**options)
    return BeamSearch(beam_size, stopping, cut_off, **options)
