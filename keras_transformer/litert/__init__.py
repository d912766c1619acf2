"""On-device translation: a training run as a LiteRT (TFLite) model, and the host loop that runs it.

`export_run(run, output, quantization=None)` writes a `.tflite` model with an
`encode` signature, a cached `decode_step` signature (the key/value cache
passed in and out as fixed-shape tensors), and, where tensorflow-text's
`FastSentencepieceTokenizer` (de)tokenizes exactly as the run does,
`tokenize` and `detokenize` signatures; every op is a LiteRT builtin or a
tensorflow-text custom op (no Flex ops), checked on the written file. The
litert engine (`keras_transformer.engines.litert`) runs it in the LiteRT
interpreter (`ai-edge-litert`) with greedy and beam search on the host
(`search`, `text`, `fast_text`), ranked as the package's searches rank:
`keras_transformer.export.load` opens an export folder with it.
`docs/litert.md` has the layout, the tokenizer fallback and the figures.

Example:

>>> from keras_transformer import export, litert
>>> litert.export_run("saved_models/chatbot-ko", "saved_models/chatbot-ko-litert")  # doctest: +SKIP
>>> export.load("saved_models/chatbot-ko-litert")(["오늘 너무 힘들었어"])  # doctest: +SKIP
"""


def export_run(run, output, **options):
    """`keras_transformer.litert.export.export_run` (imported on first use: it needs TensorFlow's converter)."""
    from keras_transformer.litert.export import export_run as export

    return export(run, output, **options)


__all__ = ["export_run"]
