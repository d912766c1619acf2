"""On-device translation: a training run as a LiteRT (TFLite) model, and the host loop that runs it.

`export_run(run, output, quantization=None)` writes a `.tflite` model with an
`encode` signature, a cached `decode_step` signature (the key/value cache
passed in and out as fixed-shape tensors), and, where tensorflow-text's
`FastSentencepieceTokenizer` (de)tokenizes exactly as the run does,
`tokenize` and `detokenize` signatures; every op is a LiteRT builtin or a
tensorflow-text custom op (no Flex ops), checked on the written file.
`Translator(folder)` runs it in the LiteRT interpreter (`ai-edge-litert`)
with greedy and beam search on the host, ranked as the package's searches
rank, and answers the methods of `keras_transformer.serving.export.load`'s
translators (`load` returns one for an export folder). `docs/litert.md` has the layout, the tokenizer fallback and the
figures.

Example:

>>> from keras_transformer import litert
>>> litert.export_run("saved_models/chatbot-ko", "saved_models/chatbot-ko-litert")  # doctest: +SKIP
>>> litert.Translator("saved_models/chatbot-ko-litert")(["오늘 너무 힘들었어"])  # doctest: +SKIP
"""

from keras_transformer.litert.translator import Translator, is_export


def export_run(run, output, **options):
    """`keras_transformer.litert.export.export_run` (imported on first use: it needs TensorFlow's converter)."""
    from keras_transformer.litert.export import export_run as export

    return export(run, output, **options)


__all__ = ["Translator", "export_run", "is_export"]
