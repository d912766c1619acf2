"""The xla engine: a run directory decoded by this package's compiled searches (TensorFlow's XLA).

A translation run opens as a `Translator` (`translator.py`, its graph side
and the SavedModel it saves in `translator_graph.py`, the rows its model
reads in `model_inputs.py`, its compiled searches in `compiled_searches.py`;
`opening.open_run_translator`), a decoder-only run (GPT) as a `Generator`
(`generator.py`, its streams in `generator_stream.py`), an encoder-only run
(BERT) as an `Encoder` (`encoder.py`, `pooling.py`). `export.export_run`
writes a run as a SavedModel, which the savedmodel engine opens. Imported on
first use: declaring the engine costs no TensorFlow import.
"""

from keras_transformer.engines.engine import Engine, refuse_options
from keras_transformer.files.folders import RUN


def open_folder(path, **options):
    """A run directory's translator: a `Generator` for a decoder-only run (GPT), else a `Translator`."""
    from keras_transformer.engines.xla.generator import is_generator_run, open_generator
    from keras_transformer.engines.xla.opening import open_run_translator

    if is_generator_run(path):  # a decoder-only model (GPT): a `Generator`, which continues prompts
        refuse_options(path, "a decoder-only model", options, ("compact",), "it decodes prompts by their widths")
        return open_generator(path, **options)
    return open_run_translator(path, **options)


def generate(path, **options):
    """The `Generator` of the decoder-only run at `path` (a one-line `ValueError` for any other run)."""
    from keras_transformer.engines.xla.generator import open_generator

    return open_generator(path, **options)


def encode(path, batch_size=None):
    """The `Encoder` of the encoder-only run at `path` (BERT; a one-line `ValueError` for any other folder)."""
    from keras_transformer.engines.xla.encoder import open_encoder

    return open_encoder(path, batch_size=batch_size)


def serves_signatures(path):
    """Whether `serve` serves the run at `path` as a SavedModel's signatures: all but an imported GPT-2's.

    An imported GPT-2's tokenizer runs in Python, which no SavedModel holds:
    its `Generator` is served instead.
    """
    from keras_transformer.engines.xla.generator import tokenizes_in_python

    return not tokenizes_in_python(path)


ENGINE = Engine(
    name="xla",
    opens=(RUN,),
    open=open_folder,
    what="a run directory",
    takes=("beam_size", "alpha", "max_length", "jit_compile", "compact", "source_lang", "target_lang"),
    drops=("threads",),
    generate=generate,
    encode=encode,
    serves_signatures=serves_signatures,
    # Two batches side by side decoded 1.16x faster greedy and 1.06x in beam 4 on an OPUS-MT-base-sized run, 2 cores
    # (docs/performance.md, "Two batches side by side by default").
    workers=2,
)
