"""A translator object served as a SavedModel's signatures are: TF Serving's REST API over any translator.

`keras-transformer serve` serves a SavedModel's own signatures
(`signatures.ServedModel`). A translator that is not a SavedModel (the
`--engine ctranslate2` translator, a `CTranslate2Translator`, or a LiteRT
export's host `Translator`: `opener.open_served` gives it) is served through
`ServedTranslator` under the same signature names, inputs and outputs
(`SIGNATURES`), so a client of `keras-transformer serve` sees no difference.
A signature whose method the translator lacks is left out, and `sample`
where the translator's `supports_sampling` is False (a LiteRT export's): a
request for it is answered as for any unknown signature. The signatures with
controls (`with_controls`, `greedy_with_controls`) call the translator's
method with `source_lang`, `target_lang` and `target_prefix`, one per
sentence (an empty one: the translator's default).

Example:

>>> from keras_transformer import open_translator
>>> model = ServedTranslator(open_translator("saved_models/multi30k-en-de", "ctranslate2"), "multi30k-en-de")
>>> request = model.parse({"signature_name": "greedy", "instances": ["A dog runs."]})
>>> model.render(request, model.run(request.signature, request.inputs, request.scalars))
{'predictions': [{'finished': True, 'scores': -0.41, 'translations': 'Ein Hund rennt.'}]}
"""

import pathlib

import numpy as np
import tensorflow as tf

from keras_transformer.serving.signatures import CONTROL_INPUTS, ServedModel
from keras_transformer.translators.controls import Languages

_STRINGS = tf.TensorSpec([None], tf.string)
_SAMPLING = {
    "temperature": tf.TensorSpec([], tf.float32),
    "top_k": tf.TensorSpec([], tf.int32),
    "top_p": tf.TensorSpec([], tf.float32),
    "seed": tf.TensorSpec([], tf.int64),
}
_CONTROLS = {"sentences": _STRINGS, **{name: _STRINGS for name in CONTROL_INPUTS}}
# signature -> (the translator's method, its inputs); the outputs are `_outputs`'.
SIGNATURES = {
    "serving_default": ("call_with_status", {"sentences": _STRINGS}),
    "greedy": ("greedy_with_status", {"sentences": _STRINGS}),
    "with_controls": ("call_with_status", _CONTROLS),
    "greedy_with_controls": ("greedy_with_status", _CONTROLS),
    "sample": ("sample_with_status", {"sentences": _STRINGS, **_SAMPLING}),
    "nbest": ("nbest", {"sentences": _STRINGS}),
    "score": ("score", {"sources": _STRINGS, "targets": _STRINGS}),
}


class ServedTranslator(ServedModel):
    """`translator`'s methods as the signatures of a `Translator` export, for `rest.create_app`.

    Args:
        translator: what `keras_transformer.export.load` or
            `keras_transformer.open_translator` returns (any object with the
            methods `SIGNATURES` names, taking lists of str).
        path: the model folder it was loaded from (its name is the default
            model name in URLs).
        max_instances: the most instances (sentences) one request may hold.
    """

    warm_up_does = "one call of each signature"

    def __init__(self, translator, path, max_instances=64):  # noqa: D107  (no SavedModel to load)
        self.path = pathlib.Path(path)
        self.max_instances = max_instances
        self.module = translator  # what `ServedModel` reads: `beam_size`, `source_lengths`, `max_source_length`
        self.languages = getattr(translator, "languages", Languages())
        self.special_tokens = getattr(translator, "special_tokens", ())
        present = {name: method for name, (method, _) in SIGNATURES.items() if hasattr(translator, method)}
        if not getattr(translator, "supports_sampling", True):
            present.pop("sample", None)
        self.functions = {name: getattr(translator, method) for name, method in present.items()}
        self.input_specs = {name: SIGNATURES[name][1] for name in present}

    def run(self, signature, inputs, scalars=()):
        """The signature's outputs (a dict of numpy arrays) for `inputs` (lists of bytes) and `scalars`."""
        texts = {name: [value.decode("utf-8") for value in values] for name, values in inputs.items()}
        for name in CONTROL_INPUTS:  # "" is the translator's default (None); none given: the control is left out
            controls = [text or None for text in texts.pop(name, [])]
            if any(control is not None for control in controls):
                texts[name] = controls
        outputs = self.functions[signature](**texts, **dict(scalars))
        return {name: np.asarray(getattr(value, "numpy", lambda v=value: v)()) for name, value in outputs.items()}

    def warm_up(self, max_batch_size, every_shape=False, workers=None, progress=None):
        """One call of each sentence-only signature (nothing to compile); returns how many calls ran.

        A multilingual model without a default target language: its
        signatures with controls, with a target language, instead.
        """
        from keras_transformer.serving.warm_up import warm_up_call

        names = self._warmed_signatures()
        for done, name in enumerate(names, 1):
            self.run(*warm_up_call(self, name, [b"a"]))
            if progress is not None:
                progress(f"warmed up {done} of {len(names)}: {name}")
        return len(names)

    def _warmed_signatures(self):
        plain = [name for name in self.functions if list(self.input_specs[name]) == ["sentences"]]
        if self.languages.codes and self.languages.target_lang is None:
            return [name for name in self.functions if name.endswith("with_controls")]
        return plain

    def signature_defs(self):
        """SignatureDefs as a `Translator` export's `saved_model.pb` holds them (tensor names aside)."""
        from tensorflow.core.protobuf import meta_graph_pb2

        beams = int(np.asarray(self.module.beam_size))
        definitions = {}
        for name, inputs in self.input_specs.items():
            definition = meta_graph_pb2.SignatureDef(method_name="tensorflow/serving/predict")
            for key, spec in inputs.items():
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
