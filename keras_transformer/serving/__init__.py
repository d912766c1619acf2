"""Translating with a trained model, and shipping it: translators, exports and the REST server.

- `translator`: `Translator`, strings in and strings out, a `tf.Module` that
  saves as a SavedModel with serving signatures, over the searches that
  `decoding.compile_search` compiles (a `translators.TranslatorInterface`,
  which checks its inputs in Python before any TensorFlow call);
  `translation` translates and scores many lines in length-sorted batches.
- `generator`, `encoder`: a decoder-only run's `Generator` (GPT-2) and an
  encoder-only run's `Encoder` (BERT: `embed`, `classify`, `fill_mask`;
  `pooling`, sentence-transformers' pooling modes).
- `export`: `load` (a run directory or a SavedModel) and `export_run`;
  `ctranslate2`: a run as a CTranslate2 model; `saved_model_cli`:
  TensorFlow's tool with the tokenizer ops registered.
- `signatures`, `batching`, `rest`, `connections`, `logs`, `page`: TF
  Serving's REST API over an export (`keras-transformer serve`; the REST
  parts need the `serve` extra: `pip install keras-transformer[serve]`).

Serving builds on decoding, models and files; nothing below it imports it.
"""

__all__ = ["LoadedTranslator", "Translator", "export_run", "load"]


def __getattr__(name):
    """`Translator`, `load`, ...: imported on first use, so that the REST parts import without TensorFlow's cost."""
    if name in __all__:
        from keras_transformer.serving import export

        return getattr(export, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
