"""What a `.tflite` flatbuffer runs: its operators, checked for Flex ops and unregistered custom ops.

`operators(data)` reads the operator codes of a LiteRT (TFLite) flatbuffer
with the schema that TensorFlow ships; `check_operators(data)` accepts
builtins and the tensorflow-text custom ops that
`tensorflow_text.tflite_registrar` registers (`TEXT_CUSTOM_OPS`), and
raises a one-line `ValueError` naming any other op: a Flex op (a
TensorFlow kernel the LiteRT runtime lacks without the Flex delegate) or a
custom op nothing registers.

Example:

>>> sorted(operators(pathlib.Path("saved_models/en-de-litert/model.tflite").read_bytes()))[:3]
['ADD', 'BATCH_MATMUL', 'CONCATENATION']
>>> check_operators(data)  # ValueError: ... uses the Flex op FlexStridedSlice ...
"""

import pathlib  # noqa: F401  (the example above)

# The custom ops of tensorflow-text's LiteRT kernels (tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS).
TEXT_CUSTOM_OPS = frozenset(
    {
        "TFText>FastSentencepieceTokenize",
        "TFText>FastSentencepieceDetokenize",
        "TFText>FastWordpieceTokenizer",
        "TFText>FastWordpieceDetokenizer",
        "TFText>FastBertNormalize",
        "TFText>WhitespaceTokenizer",
        "TFText>NgramsStringJoin",
        "TFText>RaggedTensorToTensor",
        "TFText>ByteSplit",
        "TFText>ByteSplitByOffsets",
        "TFText>RoundRobinGenerateMasks",
        "TFText>RoundRobinTrim",
        "TFText>SentenceFragmenterV2",
        "TFText>Utf8Binarize",
    }
)


def operators(data):
    """The set of operator names in the flatbuffer `data`: builtin names, and `custom:NAME` for custom ops."""
    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.Model.GetRootAsModel(bytearray(data), 0)
    builtin_names = {code: name for name, code in vars(schema.BuiltinOperator).items() if not name.startswith("_")}
    found = set()
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        # Builtins past 127 keep 127 (PLACEHOLDER_FOR_GREATER_OP_CODES) in the old field.
        number = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        if number == schema.BuiltinOperator.CUSTOM:
            found.add("custom:" + code.CustomCode().decode("utf-8", "replace"))
        else:
            found.add(builtin_names.get(number, f"builtin#{number}"))
    return found


def check_operators(data, where="the LiteRT model"):
    """Raises a `ValueError` naming the first op of `data` that is neither a builtin nor a tensorflow-text op.

    Returns the sorted operator names.
    """
    names = sorted(operators(data))
    for name in names:
        if not name.startswith("custom:"):
            continue
        op = name[len("custom:") :]
        if op.startswith("Flex"):
            raise ValueError(
                f"{where} uses the Flex op {op} (a TensorFlow kernel that LiteRT runs only with the Flex "
                "delegate); the export allows LiteRT builtins and tensorflow-text's ops only"
            )
        if op not in TEXT_CUSTOM_OPS:
            raise ValueError(
                f"{where} uses the custom op {op}, which neither LiteRT nor tensorflow_text.tflite_registrar "
                "provides; the export allows LiteRT builtins and tensorflow-text's ops only"
            )
    return names
