"""A SavedModel's signatures, and TF Serving's JSON request forms checked against them.

`ServedModel` loads a SavedModel with `tf.saved_model.load` and calls
`.signatures[name]`: the functions TF Serving itself would run. A request
(row format `{"instances": [...]}` or columnar `{"inputs": ...}`) is parsed
into a `Request`: its batched inputs as lists of `bytes`, one per instance,
and its scalar inputs (the `sample` signature's `temperature`, `top_k`,
`top_p`, `seed`). Every problem is a `RequestError` (HTTP 400 unless said)
whose message names it, before the request can join a batch.

The controls of a translation (`translators.controls`). A row-format
instance may be an object `{"sentence": ..., "source_lang": ...,
"target_lang": ..., "target_prefix": ...}` (each field but `sentence`
optional, a string or null; bare strings may stand beside such objects, each
row its own languages): the request then runs the signature with controls
(`CONTROLLED`: `with_controls` for `serving_default`, `greedy_with_controls`
for `greedy`), whose inputs `sentences`, `source_lang`, `target_lang` and
`target_prefix` a client may also give as TF Serving does, by name. An empty
or missing control is the model's default. The language codes are checked
here against the model's (`languages`): an unknown code (with three close
ones), a multilingual model without a target language, or a code sent to a
model of one language pair is a 400 naming the field.

Example:

>>> model = ServedModel("saved_models/en-de-export")            # doctest: +SKIP
>>> request = model.parse({"instances": ["A dog runs."]})        # doctest: +SKIP
>>> outputs = model.run(request.signature, request.inputs, request.scalars)  # doctest: +SKIP
>>> model.render(request, outputs)                               # doctest: +SKIP
{'predictions': [{'translations': 'Ein Hund rennt.', 'scores': -0.41, 'finished': True}]}
>>> nllb = ServedModel("saved_models/nllb-export", target_lang="fra_Latn")  # doctest: +SKIP
>>> body = {"instances": ["A dog runs.", {"sentence": "A cat.", "target_lang": "deu_Latn"}]}
>>> request = nllb.parse(body)                                   # doctest: +SKIP
>>> request.signature, request.inputs["target_lang"]            # doctest: +SKIP
('with_controls', [b'', b'deu_Latn'])
"""

import base64
import dataclasses
import math
import pathlib

import numpy as np
import tensorflow as tf

from keras_transformer.files import destinations, manifest
from keras_transformer.input_rules import sentence_error  # the one rule of every way in
from keras_transformer.kinds import close_matches
from keras_transformer.translators.controls import prefix_error

DEFAULT_SIGNATURE = "serving_default"
# The signatures that take the controls, by the signature a request names (`translators.controls`).
CONTROLLED = {"serving_default": "with_controls", "greedy": "greedy_with_controls"}
CONTROL_INPUTS = ("source_lang", "target_lang", "target_prefix")
LANGUAGE_INPUTS = ("source_lang", "target_lang")
INSTANCE_FIELDS = ("sentence", *CONTROL_INPUTS)  # an instance object's fields


class RequestError(ValueError):
    """A request that cannot be served; `status` is the HTTP status to answer with."""

    def __init__(self, message, status=400):
        super().__init__(message)
        self.status = status


@dataclasses.dataclass(frozen=True)
class Request:
    """A checked request: `inputs` maps each batched input to one `bytes` per instance."""

    signature: str
    inputs: dict
    scalars: tuple  # ((name, value), ...) of the scalar inputs, sorted by name
    columnar: bool

    @property
    def size(self):
        return len(next(iter(self.inputs.values())))


class ServedModel:
    """A SavedModel's signatures, served as TF Serving serves them.

    Args:
        path: a SavedModel directory.
        max_instances: the most instances (sentences) one request may hold.
        source_lang, target_lang: a multilingual model's default languages,
            for requests that name none (default: those it was exported
            with); a code it lacks is a `ValueError`.
    """

    warm_up_does = "compiling the decoders"  # what `warm_up` spends its time on, for the log

    def __init__(self, path, max_instances=64, source_lang=None, target_lang=None):
        import tensorflow_text  # noqa: F401  (registers the tokenizer ops the SavedModel uses)

        from keras_transformer.serving.export import exported_languages, exported_special_tokens

        self.path = pathlib.Path(path)
        self.max_instances = max_instances
        destinations.recover(self.path)
        manifest.verify_or_warn(self.path)  # a damaged or edited export is refused before it loads
        self.module = tf.saved_model.load(str(self.path))
        self.functions = dict(self.module.signatures)
        if not self.functions:
            raise ValueError(
                f"{self.path} has no serving signatures: export it again with this version of "
                "keras-transformer (`keras-transformer export`)."
            )
        specs = {name: fn.structured_input_signature[1] for name, fn in self.functions.items()}
        # A call's banned ids (`translators.banned_words`) are no REST field: every request bans none.
        self._takes_banned = {name for name, spec in specs.items() if "banned_ids" in spec}
        self.input_specs = {name: {k: v for k, v in spec.items() if k != "banned_ids"} for name, spec in specs.items()}
        self.languages = exported_languages(self.module).with_defaults(source_lang, target_lang)
        self.special_tokens = exported_special_tokens(self.module)  # what no `target_prefix` may hold
        if source_lang is not None or target_lang is not None:  # what the signatures read for "" (the default)
            self.module.default_languages.assign([self.languages.source_lang or "", self.languages.target_lang or ""])

    # -- parsing ---------------------------------------------------------------------------------

    def parse(self, body):
        """A `Request` from TF Serving's JSON body (already decoded), or a `RequestError`."""
        if not isinstance(body, dict):
            raise RequestError(f"JSON Value: {_short(body)} Is not an object: the body must be a JSON object")
        name = body.get("signature_name", DEFAULT_SIGNATURE)
        if not isinstance(name, str) or name not in self.functions:
            known = ", ".join(sorted(self.functions))
            raise RequestError(f"Serving signature name: {_short(name)} not found in signature def (known: {known})")
        has_rows, has_columns = "instances" in body, "inputs" in body
        if has_rows == has_columns:
            raise RequestError("Missing 'inputs' or 'instances' key: the body needs exactly one of them")
        if has_rows and _has_sentence_objects(body["instances"]):
            name = self._controlled(name)
            request = Request(name, self._sentence_rows(body["instances"]), (), columnar=False)
        else:
            specs = self.input_specs[name]
            if has_rows:
                inputs, scalars = self._rows(body["instances"], specs)
            else:
                inputs, scalars = self._columns(body["inputs"], _given_controls(name, specs, body["inputs"]))
                size = len(next(iter(inputs.values())))
                inputs.update({c: [b""] * size for c in CONTROL_INPUTS if c in specs and c not in inputs})
            request = Request(name, inputs, tuple(sorted(scalars.items())), columnar=has_columns)
        self._check_languages(request)
        self._check_prefixes(request)
        if request.size > self.max_instances:
            raise RequestError(
                f"Too many instances: {request.size} in one request; at most {self.max_instances} "
                "(send several requests)",
                status=413,
            )
        return request

    def _rows(self, instances, specs):
        if not isinstance(instances, list):
            raise RequestError(f"'instances' must be a JSON list. Received: {_short(instances)}")
        batched = _batched_names(specs)
        inputs = {input_name: [] for input_name in batched}
        rows_scalars = []
        for index, instance in enumerate(instances):
            if not isinstance(instance, dict) or _is_b64(instance):  # a bare value: the single input's
                if len(specs) != 1:
                    raise RequestError(
                        f"instances[{index}] must be an object with the named inputs {sorted(specs)}. "
                        f"Received: {_short(instance)}"
                    )
                instance = {batched[0]: instance}
            _check_names(instance, specs, f"instances[{index}]")
            for input_name in batched:
                inputs[input_name].append(_string(instance[input_name], f"instances[{index}].{input_name}"))
            rows_scalars.append(
                {s: _scalar(instance[s], specs[s], f"instances[{index}].{s}") for s in specs if s not in batched}
            )
        scalars = rows_scalars[0] if rows_scalars else {}
        for index, row in enumerate(rows_scalars):
            if row != scalars:
                raise RequestError(
                    f"instances[{index}] gives {row}, instances[0] gives {scalars}: in row format every instance "
                    "must give the same scalar inputs (or send them once, in columnar format)"
                )
        if not instances:
            raise RequestError("'instances' is empty: send at least one instance")
        return inputs, scalars

    def _controlled(self, name):
        """The signature with controls that runs instance objects sent to signature `name`."""
        controlled = CONTROLLED.get(name, name)
        if controlled not in CONTROLLED.values():
            names = ", ".join(sorted({*CONTROLLED, *CONTROLLED.values()}))
            raise RequestError(
                f"Instances with a 'sentence' field are decoded by the signatures {names}; "
                f"signature {name!r} takes its named inputs {sorted(self.input_specs[name])}"
            )
        if controlled not in self.functions:
            raise RequestError(
                f"This model has no {controlled!r} signature (it was exported before languages and prefixes "
                "existed): export it again to send instances with a 'sentence' field"
            )
        return controlled

    def _sentence_rows(self, instances):
        """The inputs of a signature with controls from instances that are strings or `INSTANCE_FIELDS` objects."""
        if len(instances) > self.max_instances:  # before checking each: the limit bounds the work too
            raise RequestError(
                f"Too many instances: {len(instances)} in one request; at most {self.max_instances} "
                "(send several requests)",
                status=413,
            )
        inputs = {name: [] for name in ("sentences", *CONTROL_INPUTS)}
        for index, instance in enumerate(instances):
            where = f"instances[{index}]"
            fields = instance if isinstance(instance, dict) and not _is_b64(instance) else {"sentence": instance}
            unknown = sorted(set(fields) - set(INSTANCE_FIELDS))
            if unknown:
                close = close_matches(unknown[0], INSTANCE_FIELDS, count=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise RequestError(
                    f"{where}: unknown field {_short(unknown[0])}{hint}; an instance is a string or an object with "
                    f"'sentence' and, optionally, {', '.join(repr(name) for name in CONTROL_INPUTS)}"
                )
            if "sentence" not in fields:
                raise RequestError(
                    f"{where} has no 'sentence' field: an instance object names the sentence to translate"
                )
            inputs["sentences"].append(
                _string(fields["sentence"], f"{where}.sentence" if fields is instance else where)
            )
            for name in CONTROL_INPUTS:
                value = fields.get(name)
                inputs[name].append(b"" if value is None else _string(value, f"{where}.{name}"))
        return inputs

    def _check_languages(self, request):
        """A `RequestError` naming the field of a language code the model lacks, or of a missing target language."""
        codes, default_target = self.languages.codes, self.languages.target_lang
        given = [name for name in LANGUAGE_INPUTS if name in request.inputs]
        if self.languages.target_in_source:  # MADLAD: the source's language is not told
            given = [name for name in given if name != "source_lang"]
        if not given:
            if codes and default_target is None:
                reason = _no_target(codes, request.signature)
                raise RequestError(reason[0].upper() + reason[1:])
            return
        known = frozenset(codes)
        for name in given:
            for index, value in enumerate(request.inputs[name]):
                where = f"inputs.{name}[{index}]" if request.columnar else f"instances[{index}].{name}"
                code = value.decode("utf-8")
                if not code:
                    if name == "target_lang" and codes and default_target is None:
                        raise RequestError(f"{where}: {_no_target(codes, request.signature)}")
                elif code not in known:
                    try:
                        self.languages.check(code, where)
                    except ValueError as error:
                        raise RequestError(str(error)) from None

    def _check_prefixes(self, request):
        """A `RequestError` naming the field of a `target_prefix` that holds a special token (`controls`' one rule)."""
        for index, value in enumerate(request.inputs.get("target_prefix", ())):
            reason = prefix_error(value.decode("utf-8"), self.special_tokens)
            if reason is not None:
                where = f"inputs.target_prefix[{index}]" if request.columnar else f"instances[{index}].target_prefix"
                raise RequestError(f"{where} {reason}")

    def _columns(self, columns, specs):
        batched = _batched_names(specs)
        if not isinstance(columns, dict) or _is_b64(columns):  # a bare value: the single input's
            if len(specs) != 1:
                raise RequestError(
                    f"'inputs' must be an object with the named inputs {sorted(specs)}. Received: {_short(columns)}"
                )
            columns = {batched[0]: columns}
        _check_names(columns, specs, "inputs")
        inputs = {}
        for input_name in batched:
            values = columns[input_name]
            if not isinstance(values, list):
                raise RequestError(
                    f"inputs.{input_name} must be a list of strings (shape [-1]). Received: {_short(values)}"
                )
            inputs[input_name] = [_string(v, f"inputs.{input_name}[{i}]") for i, v in enumerate(values)]
        sizes = {len(v) for v in inputs.values()}
        if len(sizes) > 1:
            raise RequestError(f"Batched inputs {batched} have different lengths {sorted(sizes)}")
        if sizes == {0}:
            raise RequestError("'inputs' is empty: send at least one sentence")
        scalars = {s: _scalar(columns[s], specs[s], f"inputs.{s}") for s in specs if s not in batched}
        return inputs, scalars

    # -- running and rendering ---------------------------------------------------------------------

    def run(self, signature, inputs, scalars=()):
        """The signature's outputs (a dict of numpy arrays) for `inputs` (lists of bytes) and `scalars`."""
        specs = self.input_specs[signature]
        arguments = {name: tf.constant(values, tf.string) for name, values in inputs.items()}
        arguments.update({name: tf.constant(value, specs[name].dtype) for name, value in scalars})
        if signature in self._takes_banned:
            arguments["banned_ids"] = tf.zeros([0], tf.int32)
        return {name: tensor.numpy() for name, tensor in self.functions[signature](**arguments).items()}

    def render(self, request, outputs):
        """TF Serving's JSON response: `{"predictions": [...]}` (row) or `{"outputs": ...}` (columnar).

        Beside them, `"warnings"`, one line per instance whose sentence was
        truncated to the model's source limit (`truncated`), where any was.
        """
        names = sorted(outputs)
        if request.columnar:
            columns = {name: _json_value(outputs[name]) for name in names}
            body = {"outputs": columns[names[0]] if len(names) == 1 else columns}
        else:
            rows = []
            for index in range(request.size):
                row = {name: _json_value(outputs[name][index]) for name in names}
                rows.append(row[names[0]] if len(names) == 1 else row)
            body = {"predictions": rows}
        warnings = self.truncated(request)
        return {**body, "warnings": list(warnings.values())} if warnings else body

    def truncated(self, request):
        """`{instance: line}` for each sentence (or `score` source) longer than the model reads: it was truncated.

        What `translate` warns of on the command line; a model that cannot
        count its source tokens (no `source_lengths`) says nothing.
        """
        from keras_transformer.serving.translation import truncated_sentences

        name = next((name for name in ("sentences", "sources") if name in request.inputs), None)
        if name is None or not all(hasattr(self.module, a) for a in ("source_lengths", "max_source_length")):
            return {}
        try:
            found = truncated_sentences(self.module, request.inputs[name])
        except NotImplementedError:  # a translator that cannot count its tokens (`TranslatorInterface`'s default)
            return {}
        where = f"inputs.{name}" if request.columnar else "instances"
        return {
            number - 1: f"{where}[{number - 1}] has {tokens} tokens: truncated to the model's first {limit}"
            for number, tokens, limit in found
        }

    # -- warm-up -------------------------------------------------------------------------------------

    def warm_up(self, max_batch_size, every_shape=False, workers=None, progress=None):
        """Compiles the decoders of the first requests before serving (`warm_up.warm_up`); returns the calls run."""
        from keras_transformer.serving import warm_up

        return warm_up.warm_up(self, max_batch_size, every_shape, workers, progress)

    # -- metadata ------------------------------------------------------------------------------------

    def metadata(self, model_name, version):
        """TF Serving's GetModelMetadataResponse as JSON: the SignatureDefs from saved_model.pb, and the languages.

        `metadata.languages` (a `google.protobuf.Struct`, which any client of
        the response reads) holds the model's language `codes` (none for a
        model of one language pair) and the defaults `source_lang` and
        `target_lang` of requests that name none (null where there is none).
        """
        from google.protobuf import json_format, struct_pb2
        from tensorflow_serving.apis import get_model_metadata_pb2

        signature_map = get_model_metadata_pb2.SignatureDefMap()
        for name, definition in self.signature_defs().items():
            if name != "__saved_model_init_op":
                signature_map.signature_def[name].CopyFrom(definition)
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        response.model_spec.name = model_name
        response.model_spec.version.value = version
        response.metadata["signature_def"].Pack(signature_map)
        languages = struct_pb2.Struct()
        codes, source, target = self.languages.codes, self.languages.source_lang, self.languages.target_lang
        languages.update({"codes": list(codes), "source_lang": source, "target_lang": target})
        response.metadata["languages"].Pack(languages)
        return json_format.MessageToDict(response, preserving_proto_field_name=True)

    def signature_defs(self):
        """The SignatureDefs of saved_model.pb, by name."""
        from tensorflow.core.protobuf import saved_model_pb2

        saved_model = saved_model_pb2.SavedModel()
        saved_model.ParseFromString((self.path / "saved_model.pb").read_bytes())
        return saved_model.meta_graphs[0].signature_def


def _has_sentence_objects(instances):
    """Whether row-format `instances` hold an instance object of `INSTANCE_FIELDS` ('sentence', ...).

    An object with a 'sentences' field names a signature's inputs, as TF Serving's rows do.
    """
    return isinstance(instances, list) and any(
        isinstance(instance, dict)
        and not _is_b64(instance)
        and "sentences" not in instance
        and not set(instance).isdisjoint(INSTANCE_FIELDS)
        for instance in instances
    )


def _given_controls(signature, specs, columns):
    """`specs` without the control inputs that columnar `columns` leave out (each then the model's default)."""
    if signature not in CONTROLLED.values() or not isinstance(columns, dict) or "sentences" not in columns:
        return specs
    return {name: spec for name, spec in specs.items() if name not in CONTROL_INPUTS or name in columns}


def _no_target(codes, signature):
    """Why a request to a multilingual model without a default target language cannot be answered, and what to send."""
    example = next((code for code in ("fra_Latn", "fr") if code in codes), codes[-1])
    what = f"no target language: this model translates into {len(codes)} languages and is served without a default"
    if signature == "score":
        return f"{what}; the score signature takes none: serve the model with a default target language"
    return (
        f"{what}; send each instance as an object with a 'target_lang' field, e.g. "
        f'{{"sentence": "...", "target_lang": "{example}"}}'
    )


def _batched_names(specs):
    return sorted(name for name, spec in specs.items() if spec.shape.rank)


def _check_names(given, specs, where):
    missing = sorted(set(specs) - set(given))
    unknown = sorted(set(given) - set(specs))
    if missing or unknown:
        raise RequestError(
            f"{where}: wrong input names: missing {missing}, unknown {unknown}; this signature takes {sorted(specs)}"
        )


def _is_b64(value):
    return isinstance(value, dict) and set(value) == {"b64"}


def _string(value, where):
    """One string input as UTF-8 `bytes`: a JSON string, or TF Serving's `{"b64": ...}` for raw bytes."""
    if _is_b64(value):
        try:
            data = base64.b64decode(value["b64"], validate=True)
        except (ValueError, TypeError):
            raise RequestError(f"{where}: 'b64' is not valid base64. Received: {_short(value['b64'])}") from None
        reason = sentence_error(data)
        if reason is not None:
            raise RequestError(f"{where}: the decoded bytes {reason}")
    elif isinstance(value, str):
        reason = sentence_error(value)
        if reason is not None:
            raise RequestError(f"{where} {reason}. Received: {_short(value)}")
        data = value.encode("utf-8")
    else:
        raise RequestError(f"{where} must be a string (DT_STRING). Received: {_short(value)}")
    return data


# The sampling scalars' own ranges, which the SavedModel's graph asserts: (low, high, low excluded).
# Other scalars, and the bounds these leave open, take their dtype's range.
SCALAR_RANGES = {"temperature": (0, None, False), "top_k": (0, None, False), "top_p": (0, 1, True)}


def _scalar(value, spec, where):
    """A scalar input as a Python number that its dtype holds and its range allows, or a `RequestError`.

    The error names `where` and the accepted range. Checked in Python before
    any TensorFlow call: a number that the dtype cannot hold (1e39 as float32
    is infinite, 1e-50 is 0) would otherwise fail inside the graph with a
    message that names no input, or overflow while converting. A number the
    dtype holds only as a subnormal counts as 0 (see `_as_float`).
    """
    name, dtype = where.rsplit(".", 1)[-1], spec.dtype
    if not (dtype.is_integer or dtype.is_floating):
        raise RequestError(f"{where}: scalar inputs of dtype {dtype.name} are not supported")
    low, high, low_excluded = _scalar_range(name, dtype)
    if dtype.is_integer:
        held = value if type(value) is int else None  # not bool, not a float, not a long integer's text
    else:
        held = _as_float(value, dtype)
    # The number the dtype holds must be in range, and so must the number sent, below: -1e-50 is no
    # temperature, though float32 holds it as -0.0. Above, rounding to the dtype's largest number is fine.
    allowed = held is not None and _within(held, low, high, low_excluded) and _within(value, low, None, low_excluded)
    if not allowed:
        described = _describe_range(dtype, low, high, low_excluded)
        raise RequestError(f"{where} must be {described}. Received: {_short(value)}")
    return value if dtype.is_integer else float(value)


def _within(number, low, high, low_excluded):
    """Whether `number` lies between `low` (excluded if `low_excluded`) and `high` (None: no bound); NaN never."""
    above = number > low if low_excluded else number >= low
    return above and (high is None or number <= high)


def _as_float(value, dtype):
    """`value` as the float `dtype` holds it inside a graph, or None if it is no number.

    Infinite if it overflows; 0 if it underflows, and also if it is subnormal:
    TensorFlow flushes subnormal floats to zero on the CPU (1e-45 reaches the
    graph's `top_p > 0` check as 0).
    """
    if type(value) not in (int, float):
        return None
    try:
        with np.errstate(over="ignore", under="ignore"):
            held = float(np.asarray(value, dtype.as_numpy_dtype))
    except OverflowError:  # an int beyond float64
        return math.copysign(math.inf, value)
    return held if abs(held) >= _float_info(dtype).tiny else 0.0


def _float_info(dtype):
    try:
        return np.finfo(dtype.as_numpy_dtype)
    except ValueError:  # bfloat16 and other types of ml_dtypes
        import ml_dtypes

        return ml_dtypes.finfo(dtype.as_numpy_dtype)


def _scalar_range(name, dtype):
    """(low, high, low excluded) of a scalar input: its own range (`SCALAR_RANGES`) within its dtype's."""
    low, high, low_excluded = SCALAR_RANGES.get(name, (None, None, False))
    low = dtype.min if low is None else max(low, dtype.min)
    high = dtype.max if high is None else min(high, dtype.max)
    return (int(low), int(high), low_excluded) if dtype.is_integer else (float(low), float(high), low_excluded)


def _describe_range(dtype, low, high, low_excluded):
    """E.g. "an integer from 0 to 2147483647 (int32)", "in (0, 1], at least 1.2e-38 (float32)".

    The bounds are the dtype's: a number it rounds past them is refused.
    """
    if dtype.is_integer:
        return f"an integer from {low} to {high} ({dtype.name})"
    if low_excluded:
        smallest = max(low, float(_float_info(dtype).tiny))
        return f"in ({low:g}, {high:g}], at least {smallest:.2g} ({dtype.name})"
    return f"a finite number from {low:g} to {dtype.as_numpy_dtype(high)!s} ({dtype.name})"


def _json_value(array):
    """A numpy value as JSON: strings decoded as UTF-8, numbers as Python numbers."""
    if isinstance(array, np.ndarray):
        return [_json_value(item) for item in array]
    if isinstance(array, bytes):
        return array.decode("utf-8", errors="replace")
    if isinstance(array, np.generic):
        return array.item()
    return array


def _short(value, limit=60):
    if type(value) is int and len(str(value)) > limit:
        return f"an integer of {len(str(abs(value)))} digits"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
