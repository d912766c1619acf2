"""The precision a translator decodes in: float32, or bf16/int8 weights where the CPU and the engine make them faster.

`decoding_precision(asked, engine)` is what an engine decodes in when a user
asks for `asked` (`"float32"`, `"bfloat16"` or `"int8"`). Low precision is
used only where it was measured faster than float32 (docs/performance.md,
"Low-precision decoding"):

- the CPU must have the units (`cpu_units`: AVX-512 BF16 or AMX for
  bfloat16, VNNI or AMX for int8);
- the ctranslate2 engine runs int8 for models at least `INT8_MIN_WIDTH`
  (512) wide: 2.4× its float32 on an OPUS-MT-base shape (d_model 512), but
  0.2× on a d_model-128 model, on the same AMD EPYC with VNNI;
- the xla engine, SavedModels and LiteRT exports decode in float32:
  TensorFlow's XLA:CPU runs bf16 products at about 0.6× float32's and Keras's
  int8 weights decoded slower than float32, and an export's weights are
  fixed when it is written.

Anything else decodes in float32, with one `KerasTransformerWarning` line
that says why.

Example:

>>> decoding_precision(None, "xla")
'float32'
>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     decoding_precision("int8", "ctranslate2", supported=["int8"], width=512, cpuinfo_path="/nonexistent")
'float32'
>>> print(caught[0].message)
this CPU has no int8 units (amx_int8 or avx512_vnni or avx_vnni): decoding in float32
"""

import warnings

from keras_transformer import cpu_units
from keras_transformer.errors import KerasTransformerWarning

PRECISIONS = ("float32", "bfloat16", "int8")
INT8_MIN_WIDTH = 512  # CTranslate2's int8 against its float32: 2.4x at d_model 512, 0.2x at 128

_NOT_FASTER = {
    "xla": {
        "bfloat16": "TensorFlow's XLA runs bfloat16 products slower than float32 on CPUs",
        "int8": "Keras int8 weights decode slower than float32 under TensorFlow's XLA",
    },
    "savedmodel": "a SavedModel's weights are fixed at export (float32)",
    "litert": "a LiteRT export's precision is chosen at export (export --format litert --quantization int8)",
}


def check_precision(precision):
    """`precision` (None: `"float32"`), or a `ValueError` naming the ones there are."""
    precision = "float32" if precision is None else precision
    if precision not in PRECISIONS:
        raise ValueError(f"`precision` must be one of {PRECISIONS}. Received: precision={precision!r}")
    return precision


def decoding_precision(
    precision, engine, *, saved_model=False, supported=None, width=None, cpuinfo_path="/proc/cpuinfo"
):
    """The precision `engine` decodes in when `precision` is asked for; a one-line warning when it is float32 instead.

    Args:
        precision: None or `"float32"`, `"bfloat16"`, `"int8"`.
        engine: `"xla"`, `"ctranslate2"` or `"litert"` (an `engines.Engine`'s name).
        saved_model: whether the xla engine decodes a SavedModel export.
        supported: the precisions the engine has kernels for on this CPU
            (CTranslate2's), None when the engine never runs low precision.
        width: the model's `d_model` (None: not known).
        cpuinfo_path: where the CPU's flags are read.
    """
    precision = check_precision(precision)
    if precision == "float32":
        return precision
    if not cpu_units.units(precision, cpuinfo_path):
        names = " or ".join(cpu_units.UNITS[precision])
        return _float32(f"this CPU has no {precision} units ({names})")
    reason = _NOT_FASTER.get("savedmodel" if saved_model else engine)
    if isinstance(reason, dict):
        reason = reason[precision]
    if reason is None and precision not in (supported or ()):
        reason = f"the {engine} engine has no {precision} kernels for this CPU"
    if reason is None and precision == "int8" and (width or 0) < INT8_MIN_WIDTH:
        reason = (
            f"CTranslate2's int8 decodes models narrower than d_model {INT8_MIN_WIDTH} slower than float32 "
            f"(this one: {width or 'unknown'})"
        )
    if reason is not None:
        return _float32(reason)
    return precision


def _float32(reason):
    warnings.warn(f"{reason}: decoding in float32", KerasTransformerWarning, stacklevel=3)
    return "float32"
