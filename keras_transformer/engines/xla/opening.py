"""`open_run_translator`: the XLA `Translator` of a run directory, with the run's decoding settings unless given.

(`runs.open_run` opens the run's files: its config, models and tokenizers;
this is the translator made of them.)

Example:

>>> translator = open_run_translator("saved_models/multi30k-en-de", beam_size=1)  # doctest: +SKIP
>>> translator.greedy(["A dog runs."])  # doctest: +SKIP
"""

import pathlib

from keras_transformer import decoding, runs
from keras_transformer.config import DecodingConfig
from keras_transformer.engines.engine import guarded
from keras_transformer.engines.xla.translator import Translator
from keras_transformer.translators import decoding_defaults


def open_run_translator(
    path,
    beam_size=None,
    alpha=None,
    max_length=None,
    jit_compile=True,
    compact=False,
    source_lang=None,
    target_lang=None,
):
    """The XLA `Translator` of the run directory at `path`, with its decoding settings unless given.

    Defaults are the run's `decoding` section (`beam_size`, `alpha`,
    `max_length`), else beam 4 and alpha 0.6; `compact=True` drops finished
    sentences between segments (see `Translator`). `source_lang` and
    `target_lang` set a multilingual model's default languages.
    """
    path = pathlib.Path(path)
    run = runs.open_run(path)
    config, model, (source, target) = run.config, run.model, run.tokenizers
    defaults = config.decoding or DecodingConfig()  # written by `keras-transformer train`
    beam_size, alpha = decoding_defaults(config.decoding, beam_size, alpha)
    if max_length is None and defaults.max_new_tokens:
        max_length = min(int(defaults.max_new_tokens), decoding.resolve_max_length(model))
    return guarded(
        path,
        "run",
        lambda: Translator(
            model,
            source,
            target,
            beam_size=beam_size,
            alpha=alpha,
            max_length=max_length,
            add_source_end=config.add_source_end,
            search_options=defaults.search_options(),
            source_lang=source_lang,
            target_lang=target_lang,
            jit_compile=jit_compile,
            compact=compact,
        ),
        passthrough=(ValueError,),
    )
