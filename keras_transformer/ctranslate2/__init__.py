"""A run written as a CTranslate2 model, for `export --format ctranslate2` and the ctranslate2 engine's cache.

- `conversion`: `convert_run(run, output)`, the model directory with its
  vocabularies, provenance (`keras_transformer.json`) and manifest;
  `read_pieces`, the vocabularies back.
- `spec`: `transformer_spec(model, ...)`, CTranslate2's `TransformerSpec` of
  a model, built from its configuration.

The `ctranslate2` package is an extra: `pip install keras-transformer[ctranslate2]`.
"""
