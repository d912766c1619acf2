"""Translators from model folders, and exports of runs: the way in from Python.

- `load(path, engine=None, **options)`: a run directory, a SavedModel or a
  LiteRT export as a translator (`keras_transformer.opener.open_translator`,
  the one opener every command uses too), a decoder-only run (GPT-2) as a
  `Generator`, an encoder-only one (BERT) as an `Encoder`
  (`keras_transformer.opener.open_model`);
- `export_run(run, output, format="savedmodel", **options)`: a run written
  in one of the registered formats (`keras_transformer.export_formats`);
- `Translator`: the XLA translator of a model and its tokenizers, to build
  by hand; `SIGNATURES`, the SavedModel's signatures; `LoadedTranslator`, a
  loaded SavedModel's (the xla and savedmodel engines' classes, re-exported:
  the one module besides the opener that names an engine's).

Every translator answers the methods of `translators.TranslatorInterface`.

Example:

>>> from keras_transformer import export
>>> translator = export.load("saved_models/chatbot-ko")  # doctest: +SKIP
>>> translator(["오늘 너무 힘들었어"])  # doctest: +SKIP
>>> export.export_run("saved_models/chatbot-ko", "saved_models/chatbot-ko-export")  # doctest: +SKIP
"""

from keras_transformer.engines.savedmodel.translator import LoadedTranslator
from keras_transformer.engines.xla.translator import Translator
from keras_transformer.engines.xla.translator_graph import SIGNATURES
from keras_transformer.export_formats import FORMATS, export_run
from keras_transformer.opener import ENGINES
from keras_transformer.opener import open_model as load

__all__ = ["ENGINES", "FORMATS", "SIGNATURES", "LoadedTranslator", "Translator", "export_run", "load"]
