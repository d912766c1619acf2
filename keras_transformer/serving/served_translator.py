"""A translator object served as a SavedModel's signatures are: TF Serving's REST API over any engine.

`ServedTranslator` answers what `signatures.ServedModel` answers (`parse`,
`run`, `render`, `warm_up`, `metadata`) for a translator that is not a
SavedModel, such as `ctranslate2_engine.CTranslate2Translator`: the same
signature names, inputs and outputs as a `Translator` export (`SIGNATURES`),
so a client of `keras-transformer serve` sees no difference.

Example:

>>> from keras_transformer.serving.ctranslate2_engine import load_engine
>>> model = ServedTranslator(load_engine("saved_models/multi30k-en-de", "ctranslate2"), "multi30k-en-de")
>>> request = model.parse({"signature_name": "greedy", "instances": ["A dog runs."]})
>>> model.render(request, model.run(request.signature, request.inputs, request.scalars))
{'predictions': [{'finished': True, 'scores': -0.41, 'translations': 'Ein Hund rennt.'}]}
"""

import pathlib

import tensorflow as tf

from keras_transformer.serving.signatures import ServedModel

_STRINGS = tf.TensorSpec([None], tf.string)
_SAMPLING = {
    "temperature": tf.TensorSpec([], tf.float32),
    "top_k": tf.TensorSpec([], tf.int32),
    "top_p": tf.TensorSpec([], tf.float32),
    "seed": tf.TensorSpec([], tf.int64),
}
# signature -> (the translator's method, its inputs); the outputs are `_outputs`'.
SIGNATURES = {
    "serving_default": ("call_with_status", {"sentences": _STRINGS}),
    "greedy": ("greedy_with_status", {"sentences": _STRINGS}),
    "sample": ("sample_with_status", {"sentences": _STRINGS, **_SAMPLING}),
    "nbest": ("nbest", {"sentences": _STRINGS}),
    "score": ("score", {"sources": _STRINGS, "targets": _STRINGS}),
}


class ServedTranslator(ServedModel):
    """`translator`'s methods as the signatures of a `Translator` export, for `rest.create_app`.

    Args:
        translator: what `ctranslate2_engine.load_engine` returns (any object
            with the methods of `export.load`'s translators).
        path: the model folder it was loaded from (its name is the default
            model name in URLs).
        max_instances: the most instances (sentences) one request may hold.
    """

    def __init__(self, translator, path, max_instances=64):  # noqa: D107  (no SavedModel to load)
        self.path = pathlib.Path(path)
        self.max_instances = max_instances
        self.module = translator  # `warm_up` reads its `source_lengths` and `max_source_length`
        self.functions = {name: getattr(translator, method) for name, (method, _) in SIGNATURES.items()}
        self.input_specs = {name: specs for name, (_, specs) in SIGNATURES.items()}

    def run(self, signature, inputs, scalars=()):
        """The signature's outputs (a dict of numpy arrays) for `inputs` (lists of bytes) and `scalars`."""
        return {name: tensor.numpy() for name, tensor in self.functions[signature](**inputs, **dict(scalars)).items()}

    def signature_defs(self):
        """SignatureDefs as a `Translator` export's `saved_model.pb` holds them (tensor names aside)."""
        from tensorflow.core.protobuf import meta_graph_pb2

        beams = int(self.module.beam_size.numpy())
        definitions = {}
        for name, (_, inputs) in SIGNATURES.items():
            definition = meta_graph_pb2.SignatureDef(method_name="tensorflow/serving/predict")
            for key, spec in {**inputs}.items():
                definition.inputs[key].CopyFrom(_tensor_info(f"{name}_{key}:0", spec))
            for key, spec in _outputs(name, beams).items():
                definition.outputs[key].CopyFrom(_tensor_info(f"StatefulPartitionedCall:{key}", spec))
            definitions[name] = definition
        return definitions


def _outputs(signature, beams):
    if signature == "score":
        return {"log_probs": tf.TensorSpec([None], tf.float32), "target_lengths": tf.TensorSpec([None], tf.int32)}
    shape = [None, beams] if signature == "nbest" else [None]
    return {
        "translations": tf.TensorSpec(shape, tf.string),
        "scores": tf.TensorSpec(shape, tf.float32),
        "finished": tf.TensorSpec(shape, tf.bool),
    }


def _tensor_info(name, spec):
    from tensorflow.core.protobuf import meta_graph_pb2

    return meta_graph_pb2.TensorInfo(name=name, dtype=spec.dtype.as_datatype_enum, tensor_shape=spec.shape.as_proto())
