"""A SavedModel's signatures, and TF Serving's JSON request forms checked against them.

`ServedModel` loads a SavedModel with `tf.saved_model.load` and calls
`.signatures[name]`: the functions TF Serving itself would run. A request
(row format `{"instances": [...]}` or columnar `{"inputs": ...}`) is parsed
into a `Request`: its batched inputs as lists of `bytes`, one per instance,
and its scalar inputs (the `sample` signature's `temperature`, `top_k`,
`top_p`, `seed`). Every problem is a `RequestError` (HTTP 400 unless said)
whose message names it, before the request can join a batch.

Example:

>>> model = ServedModel("saved_models/en-de-export")            # doctest: +SKIP
>>> request = model.parse({"instances": ["A dog runs."]})        # doctest: +SKIP
>>> outputs = model.run(request.signature, request.inputs, request.scalars)  # doctest: +SKIP
>>> model.render(request, outputs)                               # doctest: +SKIP
{'predictions': [{'translations': 'Ein Hund rennt.', 'scores': -0.41, 'finished': True}]}
"""

import base64
import dataclasses
import math
import os
import pathlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import tensorflow as tf

from keras_transformer.files import destinations, manifest
from keras_transformer.input_rules import sentence_error  # the one rule of every way in

DEFAULT_SIGNATURE = "serving_default"
WARMED_SIGNATURES = ("serving_default", "greedy", "nbest")  # XLA decoders: one program per shape
WARM_UP_WORKERS = 4  # compiles side by side at most (each holds its own memory while it compiles)


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
    """

    warm_up_does = "compiling the decoders"  # what `warm_up` spends its time on, for the log

    def __init__(self, path, max_instances=64):
        import tensorflow_text  # noqa: F401  (registers the tokenizer ops the SavedModel uses)

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
        self.input_specs = {name: fn.structured_input_signature[1] for name, fn in self.functions.items()}

    # -- parsing ---------------------------------------------------------------------------------

    def parse(self, body):
        """A `Request` from TF Serving's JSON body (already decoded), or a `RequestError`."""
        if not isinstance(body, dict):
            raise RequestError(f"JSON Value: {_short(body)} Is not an object: the body must be a JSON object")
        name = body.get("signature_name", DEFAULT_SIGNATURE)
        if not isinstance(name, str) or name not in self.functions:
            known = ", ".join(sorted(self.functions))
            raise RequestError(f"Serving signature name: {_short(name)} not found in signature def (known: {known})")
        specs = self.input_specs[name]
        has_rows, has_columns = "instances" in body, "inputs" in body
        if has_rows == has_columns:
            raise RequestError("Missing 'inputs' or 'instances' key: the body needs exactly one of them")
        if has_rows:
            inputs, scalars = self._rows(body["instances"], specs)
        else:
            inputs, scalars = self._columns(body["inputs"], specs)
        request = Request(name, inputs, tuple(sorted(scalars.items())), columnar=has_columns)
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
        return {name: tensor.numpy() for name, tensor in self.functions[signature](**arguments).items()}

    @staticmethod
    def render(request, outputs):
        """TF Serving's JSON response: `{"predictions": [...]}` (row) or `{"outputs": ...}` (columnar)."""
        names = sorted(outputs)
        if request.columnar:
            columns = {name: _json_value(outputs[name]) for name in names}
            return {"outputs": columns[names[0]] if len(names) == 1 else columns}
        rows = []
        for index in range(request.size):
            row = {name: _json_value(outputs[name][index]) for name in names}
            rows.append(row[names[0]] if len(names) == 1 else row)
        return {"predictions": rows}

    # -- warm-up -------------------------------------------------------------------------------------

    def warm_up(self, max_batch_size, workers=None):
        """Runs the decoding signatures once per batch and source bucket; returns how many calls ran.

        The SavedModel's XLA decoder compiles one program per (batch bucket,
        source bucket) shape: batches are padded to a power of two, sources
        to a multiple of 16 tokens. Without a warm-up, the first batch of each
        new shape waits seconds for its compile while the others queue behind
        it. Sources of each bucket are found with the SavedModel's
        `source_lengths` function when it has one (this package's exports),
        else only the shortest bucket is warmed. `workers` calls (default: one
        per CPU core, at most `WARM_UP_WORKERS`) compile side by side: an XLA
        compile is mostly one thread's work.
        """
        sizes = [1 << n for n in range(max_batch_size.bit_length()) if 1 << n <= max_batch_size]
        if sizes[-1] < max_batch_size:
            sizes.append(max_batch_size)
        calls = [
            (signature, [sentence] * size)
            for signature in WARMED_SIGNATURES
            if signature in self.functions and _batched_names(self.input_specs[signature]) == ["sentences"]
            for sentence in self._bucket_sentences()
            for size in sizes
        ]
        workers = workers or min(os.cpu_count() or 1, WARM_UP_WORKERS)
        with ThreadPoolExecutor(workers, thread_name_prefix="warm-up") as pool:
            list(pool.map(lambda call: self.run(call[0], {"sentences": call[1]}), calls))
        return len(calls)

    def _bucket_sentences(self, bucket=16):
        """One sentence per source-length bucket, shortest first."""
        source_lengths = getattr(self.module, "source_lengths", None)
        limit = getattr(self.module, "max_source_length", None)
        if source_lengths is None or limit is None:
            return [b"a"]
        limit = int(limit.numpy())
        candidates = [" ".join(["a"] * words) for words in range(1, 2 * limit + 2)]
        lengths = source_lengths(tf.constant(candidates)).numpy()
        chosen = {}
        for sentence, length in zip(candidates, lengths):
            chosen.setdefault(-(-min(int(length), limit) // bucket), sentence.encode())
        return [chosen[key] for key in sorted(chosen)]

    # -- metadata ------------------------------------------------------------------------------------

    def metadata(self, model_name, version):
        """TF Serving's GetModelMetadataResponse as JSON: the SignatureDefs from saved_model.pb."""
        from google.protobuf import json_format
        from tensorflow_serving.apis import get_model_metadata_pb2

        signature_map = get_model_metadata_pb2.SignatureDefMap()
        for name, definition in self.signature_defs().items():
            if name != "__saved_model_init_op":
                signature_map.signature_def[name].CopyFrom(definition)
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        response.model_spec.name = model_name
        response.model_spec.version.value = version
        response.metadata["signature_def"].Pack(signature_map)
        return json_format.MessageToDict(response, preserving_proto_field_name=True)

    def signature_defs(self):
        """The SignatureDefs of saved_model.pb, by name."""
        from tensorflow.core.protobuf import saved_model_pb2

        saved_model = saved_model_pb2.SavedModel()
        saved_model.ParseFromString((self.path / "saved_model.pb").read_bytes())
        return saved_model.meta_graphs[0].signature_def


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
