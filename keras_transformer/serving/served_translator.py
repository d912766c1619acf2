"""A translator object served as `ServedModel` serves a SavedModel: TF Serving's signatures over its methods.

`keras-transformer serve` serves a SavedModel's own signatures
(`ServedModel`). A translator that is not a SavedModel (a LiteRT export's
`keras_transformer.litert.Translator`) is served through
`ServedTranslator` under the same signature names, inputs and outputs, so a
client sees the same REST API; a signature whose method the translator
lacks or refuses (a LiteRT export does not `sample`) is left out.

Example:

>>> from keras_transformer import litert
>>> model = ServedTranslator(litert.Translator("saved_models/en-de-litert"), "saved_models/en-de-litert")
>>> sorted(model.functions)
['greedy', 'nbest', 'score', 'serving_default']
>>> model.run("greedy", {"sentences": [b"A dog runs."]})["translations"]  # doctest: +SKIP
array([b'Ein Hund rennt.'], dtype=object)
"""

import pathlib

import numpy as np
import tensorflow as tf

from keras_transformer.serving.signatures import ServedModel

_STRINGS = tf.TensorSpec([None], tf.string)
# name: (the translator's method, its inputs, its outputs), as the SavedModel export's signatures.
SIGNATURES = {
    "serving_default": (
        "call_with_status",
        {"sentences": _STRINGS},
        {"translations": ([None], tf.string), "scores": ([None], tf.float32), "finished": ([None], tf.bool)},
    ),
    "greedy": (
        "greedy_with_status",
        {"sentences": _STRINGS},
        {"translations": ([None], tf.string), "scores": ([None], tf.float32), "finished": ([None], tf.bool)},
    ),
    "nbest": (
        "nbest",
        {"sentences": _STRINGS},
        {
            "translations": ([None, None], tf.string),
            "scores": ([None, None], tf.float32),
            "finished": ([None, None], tf.bool),
        },
    ),
    "score": (
        "score",
        {"sources": _STRINGS, "targets": _STRINGS},
        {"log_probs": ([None], tf.float32), "target_lengths": ([None], tf.int32)},
    ),
}


class ServedTranslator(ServedModel):
    """`translator`'s methods served as the SavedModel export's signatures (`SIGNATURES`).

    Args:
        translator: an object with the methods `SIGNATURES` names (as
            `keras_transformer.serving.export.load` returns), taking lists of
            str and returning arrays.
        path: where it was loaded from (for messages).
        max_instances: the most instances (sentences) one request may hold.
    """

    def __init__(self, translator, path, max_instances=64):  # noqa: D107  (ServedModel's, without a SavedModel)
        self.translator = translator
        self.path = pathlib.Path(path)
        self.max_instances = max_instances
        self.module = translator
        self.functions = {
            name: getattr(translator, method)
            for name, (method, _, _) in SIGNATURES.items()
            if hasattr(translator, method)
        }
        self.input_specs = {name: SIGNATURES[name][1] for name in self.functions}

    def run(self, signature, inputs, scalars=()):
        """The signature's outputs (a dict of numpy arrays) for `inputs` (lists of bytes); no scalars here."""
        arguments = {name: [value.decode("utf-8") for value in values] for name, values in inputs.items()}
        return {name: np.asarray(value) for name, value in self.functions[signature](**arguments).items()}

    def warm_up(self, max_batch_size, workers=None):
        """One call of each sentence signature: no program to compile; returns how many calls ran."""
        names = [name for name in self.functions if list(self.input_specs[name]) == ["sentences"]]
        for name in names:
            self.run(name, {"sentences": [b"a"]})
        return len(names)

    def metadata(self, model_name, version):
        """TF Serving's GetModelMetadataResponse as JSON: SignatureDefs built from `SIGNATURES`."""
        from google.protobuf import json_format
        from tensorflow.core.protobuf import meta_graph_pb2
        from tensorflow_serving.apis import get_model_metadata_pb2

        def info(name, shape, dtype):
            return meta_graph_pb2.TensorInfo(
                name=name, dtype=dtype.as_datatype_enum, tensor_shape=tf.TensorShape(shape).as_proto()
            )

        signature_map = get_model_metadata_pb2.SignatureDefMap()
        for name in self.functions:
            _, inputs, outputs = SIGNATURES[name]
            definition = signature_map.signature_def[name]
            definition.method_name = "tensorflow/serving/predict"
            for key, spec in inputs.items():
                definition.inputs[key].CopyFrom(info(key, spec.shape, spec.dtype))
            for key, (shape, dtype) in outputs.items():
                definition.outputs[key].CopyFrom(info(key, shape, dtype))
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        response.model_spec.name = model_name
        response.model_spec.version.value = version
        response.metadata["signature_def"].Pack(signature_map)
        return json_format.MessageToDict(response, preserving_proto_field_name=True)
