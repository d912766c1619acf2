"""The litert engine: a LiteRT export (`litert.export_run`) in the LiteRT interpreter, the search on the host.

`translator.Translator` runs it (docs/litert.md); its maximum length was
fixed at export, and so was its precision (`export --quantization`).
"""

from keras_transformer.engines.engine import Engine
from keras_transformer.files.folders import LITERT


def open_folder(path, **options):
    """The host `Translator` of the LiteRT export at `path`."""
    from keras_transformer.engines.litert.translator import Translator

    return Translator(path, **options)


ENGINE = Engine(
    name="litert",
    opens=(LITERT,),
    open=open_folder,
    what="a LiteRT export",
    takes=("beam_size", "alpha", "num_threads", "source_lang", "target_lang"),
    drops=("jit_compile", "threads"),
    refuses=("max_length", "compact"),
    because="fixed at export",
)
