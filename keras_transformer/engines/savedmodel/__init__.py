"""The savedmodel engine: a SavedModel export's own functions (`translator.LoadedTranslator`).

It answers to `engine="xla"`, as the export holds the xla engine's compiled
searches; its search, beam size and length penalty were fixed at export.
"""

from keras_transformer.engines.engine import Engine
from keras_transformer.files.folders import SAVED_MODEL


def open_folder(path, **options):
    """The `LoadedTranslator` of the SavedModel export at `path`."""
    from keras_transformer.engines.savedmodel.translator import open_saved_model

    return open_saved_model(path, **options)


ENGINE = Engine(
    name="xla",
    opens=(SAVED_MODEL,),
    open=open_folder,
    what="a SavedModel",
    takes=("beam_size", "source_lang", "target_lang"),
    drops=("threads", "jit_compile"),
    refuses=("alpha", "max_length", "compact"),
    because="fixed at export",
    precision_facts=lambda path: {"saved_model": True},
    serves_signatures=lambda path: True,
)
