"""Serving translators: TF Serving's REST API and Server-Sent Events, batching, and what they read of a model.

- `signatures`, `request_values`: a SavedModel's signatures and the JSON
  requests checked against them (`ServedModel`); `served_translator`: any
  engine's translator served with the same signatures.
- `batching` (dynamic batches, as TF Serving) and `inflight` (sentences
  joining and leaving a running decode, their words cut as a translator's
  streams cut them: `translators.stream_text`).
- `rest`, `sse`, `connections`, `logs`, `page`, `warm_up`: the server
  (`keras-transformer serve`; the REST parts need the `serve` extra:
  `pip install keras-transformer[serve]`).
- `saved_model_cli`: TensorFlow's tool with the tokenizer ops registered.

The translators themselves are the engines' (`keras_transformer.engines`),
which nothing here imports: the server is given one by the opener
(`keras_transformer.opener.open_served`).
"""
