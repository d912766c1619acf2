"""A SavedModel's signatures, and TF Serving's JSON request forms checked against them.

`ServedModel` loads a SavedModel with `tf.saved_model.load` and calls
`.signatures[name]`: the functions TF Serving itself would run. A request
(row format `{"instances": [...]}` or columnar `{"inputs": ...}`) is parsed
into a `Request`: its batched inputs as lists of `bytes`, one per instance,
and its scalar inputs (the `sample` signature's `temperature`, `top_k`,
`top_p`, `seed`), each checked against its input's dtype
(`request_values`). Every problem is a `RequestError` (HTTP 400 unless
said) whose message names it, before the request can join a batch.

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

import dataclasses
import pathlib

import tensorflow as tf

from keras_transformer.files import destinations, manifest
from keras_transformer.kinds import close_matches
from keras_transformer.serving.request_values import RequestError, is_b64, json_value, scalar_value, short, string_value
from keras_transformer.translators.controls import prefix_error

DEFAULT_SIGNATURE = "serving_default"
# The signatures that take the controls, by the signature a request names (`translators.controls`).
CONTROLLED = {"serving_default": "with_controls", "greedy": "greedy_with_controls"}
CONTROL_INPUTS = ("source_lang", "target_lang", "target_prefix")
LANGUAGE_INPUTS = ("source_lang", "target_lang")
INSTANCE_FIELDS = ("sentence", *CONTROL_INPUTS)  # an instance object's fields


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

        from keras_transformer.translators.exported import exported_languages, exported_special_tokens

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
            raise RequestError(f"JSON Value: {short(body)} Is not an object: the body must be a JSON object")
        name = body.get("signature_name", DEFAULT_SIGNATURE)
        if not isinstance(name, str) or name not in self.functions:
            known = ", ".join(sorted(self.functions))
            raise RequestError(f"Serving signature name: {short(name)} not found in signature def (known: {known})")
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
            raise RequestError(f"'instances' must be a JSON list. Received: {short(instances)}")
        batched = _batched_names(specs)
        inputs = {input_name: [] for input_name in batched}
        rows_scalars = []
        for index, instance in enumerate(instances):
            if not isinstance(instance, dict) or is_b64(instance):  # a bare value: the single input's
                if len(specs) != 1:
                    raise RequestError(
                        f"instances[{index}] must be an object with the named inputs {sorted(specs)}. "
                        f"Received: {short(instance)}"
                    )
                instance = {batched[0]: instance}
            _check_names(instance, specs, f"instances[{index}]")
            for input_name in batched:
                inputs[input_name].append(string_value(instance[input_name], f"instances[{index}].{input_name}"))
            rows_scalars.append(
                {s: scalar_value(instance[s], specs[s], f"instances[{index}].{s}") for s in specs if s not in batched}
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
            fields = instance if isinstance(instance, dict) and not is_b64(instance) else {"sentence": instance}
            unknown = sorted(set(fields) - set(INSTANCE_FIELDS))
            if unknown:
                close = close_matches(unknown[0], INSTANCE_FIELDS, count=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise RequestError(
                    f"{where}: unknown field {short(unknown[0])}{hint}; an instance is a string or an object with "
                    f"'sentence' and, optionally, {', '.join(repr(name) for name in CONTROL_INPUTS)}"
                )
            if "sentence" not in fields:
                raise RequestError(
                    f"{where} has no 'sentence' field: an instance object names the sentence to translate"
                )
            inputs["sentences"].append(
                string_value(fields["sentence"], f"{where}.sentence" if fields is instance else where)
            )
            for name in CONTROL_INPUTS:
                value = fields.get(name)
                inputs[name].append(b"" if value is None else string_value(value, f"{where}.{name}"))
        return inputs

    def _check_languages(self, request):
        """A `RequestError` naming the field of a language code the model lacks, or of a missing target language."""
        codes, default_target = self.languages.codes, self.languages.target_lang
        given = [name for name in LANGUAGE_INPUTS if name in request.inputs]
        if self.languages.target_in_source:  # MADLAD: the source's language is not told
            given = [name for name in given if name != "source_lang"]
        if not given:
            if codes and default_target is None:
                raise RequestError(_no_target(self.languages, request.signature))
            return
        known = frozenset(codes)
        for name in given:
            for index, value in enumerate(request.inputs[name]):
                where = f"inputs.{name}[{index}]" if request.columnar else f"instances[{index}].{name}"
                code = value.decode("utf-8")
                if not code:
                    if name == "target_lang" and codes and default_target is None:
                        raise RequestError(f"{where}: {_no_target(self.languages, request.signature)}")
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
        if not isinstance(columns, dict) or is_b64(columns):  # a bare value: the single input's
            if len(specs) != 1:
                raise RequestError(
                    f"'inputs' must be an object with the named inputs {sorted(specs)}. Received: {short(columns)}"
                )
            columns = {batched[0]: columns}
        _check_names(columns, specs, "inputs")
        inputs = {}
        for input_name in batched:
            values = columns[input_name]
            if not isinstance(values, list):
                raise RequestError(
                    f"inputs.{input_name} must be a list of strings (shape [-1]). Received: {short(values)}"
                )
            inputs[input_name] = [string_value(v, f"inputs.{input_name}[{i}]") for i, v in enumerate(values)]
        sizes = {len(v) for v in inputs.values()}
        if len(sizes) > 1:
            raise RequestError(f"Batched inputs {batched} have different lengths {sorted(sizes)}")
        if sizes == {0}:
            raise RequestError("'inputs' is empty: send at least one sentence")
        scalars = {s: scalar_value(columns[s], specs[s], f"inputs.{s}") for s in specs if s not in batched}
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
            columns = {name: json_value(outputs[name]) for name in names}
            body = {"outputs": columns[names[0]] if len(names) == 1 else columns}
        else:
            rows = []
            for index in range(request.size):
                row = {name: json_value(outputs[name][index]) for name in names}
                rows.append(row[names[0]] if len(names) == 1 else row)
            body = {"predictions": rows}
        warnings = self.truncated(request)
        return {**body, "warnings": list(warnings.values())} if warnings else body

    def truncated(self, request):
        """`{instance: line}` for each sentence (or `score` source) longer than the model reads: it was truncated.

        What `translate` warns of on the command line; a model that cannot
        count its source tokens (no `source_lengths`) says nothing.
        """
        from keras_transformer.translators.translation import truncated_sentences

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
        and not is_b64(instance)
        and "sentences" not in instance
        and not set(instance).isdisjoint(INSTANCE_FIELDS)
        for instance in instances
    )


def _given_controls(signature, specs, columns):
    """`specs` without the control inputs that columnar `columns` leave out (each then the model's default)."""
    if signature not in CONTROLLED.values() or not isinstance(columns, dict) or "sentences" not in columns:
        return specs
    return {name: spec for name, spec in specs.items() if name not in CONTROL_INPUTS or name in columns}


def _no_target(languages, signature):
    """Why a request to a multilingual model without a default target language cannot be answered, and what to send."""
    how = (
        "the score signature takes none: serve the model with a default target language"
        if signature == "score"
        else "send each instance as an object with a 'target_lang' field"
    )
    return languages.missing_target(how, model="this model, served without a default,")


def _batched_names(specs):
    return sorted(name for name, spec in specs.items() if spec.shape.rank)


def _check_names(given, specs, where):
    missing = sorted(set(specs) - set(given))
    unknown = sorted(set(given) - set(specs))
    if missing or unknown:
        raise RequestError(
            f"{where}: wrong input names: missing {missing}, unknown {unknown}; this signature takes {sorted(specs)}"
        )
