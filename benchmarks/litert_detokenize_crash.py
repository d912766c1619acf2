"""Reproduces the crash of tensorflow-text's LiteRT `FastSentencepieceDetokenize` kernel on two sentences or more.

tensorflow-text 2.21.1's kernel writes its strings with
`DynamicBuffer::WriteToTensor(output, nullptr)`, which in today's TFLite
keeps the output's dims (the converter's placeholder `(1,)`) instead of
setting them to the number of strings. One sentence per call is exact;
with two, reading the output overruns and the process dies of a
segmentation fault (ai-edge-litert 2.3.0). This is why a LiteRT export's
`detokenize` signature takes one sentence (`docs/litert.md`).

The script trains a 25-piece SentencePiece model, converts a
`FastSentencepieceTokenizer.detokenize` over `(ids, row_splits)`, runs it on
one sentence, then on two, each in a new interpreter: while the bug is there
it dies on two, of SIGSEGV or of SIGABRT ("corrupted double-linked list"), or,
depending on the heap, prints `wrong` (one string for two sentences); it
prints `fixed` once a tensorflow-text release fixes it
(`tests/litert/test_litert.py` watches for that).

    python benchmarks/litert_detokenize_crash.py
"""

import io

import numpy as np
import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text
from ai_edge_litert.interpreter import InterpreterWithCustomOps
from tensorflow_text.core.pybinds import tflite_registrar

_LINES = ["a dog runs in the park", "two men play football", "the cat sleeps on a mat"] * 50


def tflite_detokenizer():
    """`(fast tokenizer, .tflite bytes of its detokenize over ids and row_splits)`."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(_LINES), model_writer=model, vocab_size=25)
    fast = tf_text.FastSentencepieceTokenizer(model.getvalue())

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.int32)])
    def detokenize(ids, row_splits):
        return fast.detokenize(tf.RaggedTensor.from_row_splits(ids, row_splits, validate=False))

    converter = tf.lite.TFLiteConverter.from_concrete_functions([detokenize.get_concrete_function()], fast)
    converter.allow_custom_ops = True
    return fast, converter.convert()


def main():
    fast, data = tflite_detokenizer()
    ids = fast.tokenize(tf.constant(["a dog runs", "the cat"]))
    flat, splits = ids.flat_values.numpy().astype(np.int32), ids.row_splits.numpy().astype(np.int32)
    one, two = fast.detokenize(ids[:1]).numpy().tolist(), fast.detokenize(ids).numpy().tolist()
    print("one sentence:", run(interpreter(data), flat[: splits[1]], splits[:2]), "tensorflow:", one, flush=True)
    got = run(interpreter(data), flat, splits)  # SIGSEGV, SIGABRT or 1 string of 2 while the bug is there
    print("two sentences:", got, "tensorflow:", two)
    print("fixed" if got == two else "wrong")


def interpreter(data):
    return InterpreterWithCustomOps(model_content=data, custom_op_registerers=list(tflite_registrar.SELECT_TFTEXT_OPS))


def run(interpreter, ids, row_splits):
    """The strings the `.tflite` gives for `ids` and `row_splits` (its two inputs, in this order)."""
    inputs = [detail["index"] for detail in interpreter.get_input_details()]
    for index, value in zip(inputs, (ids, row_splits)):
        interpreter.resize_tensor_input(index, value.shape)
    interpreter.allocate_tensors()
    for index, value in zip(inputs, (ids, row_splits)):
        interpreter.set_tensor(index, value)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"]).tolist()


if __name__ == "__main__":
    main()
