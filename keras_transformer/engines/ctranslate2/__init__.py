"""The ctranslate2 engine: a run directory converted once to a CTranslate2 model (cached) and decoded by it.

`translator.CTranslate2Translator` decodes; `cache.py` keeps the converted
model, keyed by the run's files. It takes `threads` (the batches CTranslate2
decodes side by side) and a `precision`: int8 where this CPU has the kernels
and the model is wide enough to gain from them (`precision_facts`).
"""

from keras_transformer.engines.engine import Engine
from keras_transformer.files.folders import RUN


def open_folder(path, threads=1, precision="float32", **options):
    """The `CTranslate2Translator` of the run directory at `path`."""
    from keras_transformer.engines.ctranslate2.translator import CTranslate2Translator

    return CTranslate2Translator(path, inter_threads=threads, precision=precision, **options)


def precision_facts(path):
    """CTranslate2's kernels on this CPU and the model's width (`translator.precision_facts`)."""
    from keras_transformer.engines.ctranslate2.translator import precision_facts as facts

    return facts(path)


ENGINE = Engine(
    name="ctranslate2",
    opens=(RUN,),
    open=open_folder,
    what="the ctranslate2 engine",
    takes=("beam_size", "alpha", "max_length", "threads", "cache_dir", "source_lang", "target_lang"),
    refuses=("compact", "jit_compile"),
    because="CTranslate2 batches as it likes",
    takes_precision=True,
    precision_facts=precision_facts,
)
