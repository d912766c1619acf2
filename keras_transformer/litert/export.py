"""A training run as a LiteRT (TFLite) model for on-device translation: `export_run`.

The export is a folder:

- `model.tflite`: the signatures `encode` and `decode_step` (the cached
  decoder step over a fixed-size self-attention cache and the precomputed
  cross-attention keys and values, `keras_transformer.litert.graph`), and
  `tokenize` and `detokenize` (tensorflow-text's `FastSentencepieceTokenizer`)
  each where it is exact (`keras_transformer.litert.fast_text`); LiteRT
  builtins and tensorflow-text ops only, checked on the written flatbuffer
  (`keras_transformer.litert.ops`);
- `litert.json`: what the host loop needs (special ids, lengths, the beam
  defaults, the tokenizer's mode and why, a multilingual run's languages:
  their codes and token ids, the default source and target, where a
  source's language token goes), and what it was made from;
- `tokenizers/`: the run's tokenizer folders, for the tokenizer outside the
  model (`keras_transformer.litert.text`);
- `MANIFEST.sha256`.

The search runs on the host (the litert engine, `keras_transformer.engines.litert`).

Example:

>>> export_run("saved_models/chatbot-ko", "saved_models/chatbot-ko-litert", quantization="int8")
{'created_by': 'keras-transformer', 'format': 'litert', ...}
"""

import json
import pathlib
import shutil
import tempfile
import warnings

from keras_transformer import runs
from keras_transformer.config import DecodingConfig
from keras_transformer.decoding import rules
from keras_transformer.errors import ArgumentError, KerasTransformerWarning, first_line, literal
from keras_transformer.files import atomic, destinations, manifest
from keras_transformer.litert import fast_text
from keras_transformer.litert import text as host_text
from keras_transformer.models.loading import load_model

FORMAT = "litert"
MODEL_FILE = "model.tflite"
INFO_FILE = destinations.LITERT_PROVENANCE
QUANTIZATIONS = ("int8",)
_TEXT_SIGNATURES = ("tokenize", "detokenize")
MAX_CACHE_LENGTH = 512  # positions of the self-attention cache, copied in and out at every step


class TokenizerOutsideWarning(KerasTransformerWarning):
    """The `.tflite` cannot tokenize exactly as the run does: the export's tokenizer runs outside the model."""


def export_run(
    run,
    output,
    *,
    quantization=None,
    overwrite=False,
    beam_size=None,
    alpha=None,
    max_length=None,
    source_lang=None,
    target_lang=None,
):
    """Writes the training run `run` as a LiteRT export folder at `output`, atomically.

    Every check runs before the model loads: `run` must be a run directory of
    one model, and `output` new, an empty folder, or a LiteRT export of this
    package (replaced only when `overwrite` is true) that neither holds nor
    lies inside `run`.

    Args:
        run: a training run directory (of this package, or imported).
        output: the folder to write.
        quantization: None (float32 weights) or `"int8"` (dynamic-range
            quantization of the weights).
        overwrite: replace an earlier LiteRT export of this package.
        beam_size, alpha: the beam defaults recorded for the host (default:
            the run's, else 4 and 0.6).
        max_length: tokens generated at most, the self-attention cache's
            length (default: the run's, else the model's; at most
            `MAX_CACHE_LENGTH`).
        source_lang, target_lang: a multilingual run's default languages
            recorded for the host (codes of its tokenizer; default its
            tokenizer's), which each call may override.

    Returns:
        The `litert.json` written, as a dict.

    Raises:
        ValueError: naming the argument, the op that is not a LiteRT
            builtin, or the limit a length exceeds.

    Example:

    >>> info = export_run("saved_models/tiny", "/tmp/tiny-litert")
    >>> info["tokenizer"]["in_model"]
    True
    """
    run = runs.single_model_run(run, "a LiteRT export holds one model; export one member instead")
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ValueError(f"`quantization` must be None or 'int8'. Received: quantization={quantization!r}")
    destinations.check_separate(run, output, what="the export")
    if destinations.check_destination(output, destinations.LITERT) == "ours" and not overwrite:
        raise destinations.DestinationInUseError(output, "a LiteRT export", ["overwrite"])
    runs.warn_if_unfinished(run)
    config = runs.RunConfig.read(run)
    _check_layers(run, config.model)
    decoding = config.decoding or DecodingConfig()
    tokenizer_dirs = _tokenizer_dirs(run)
    languages = _languages(run, tokenizer_dirs, source_lang, target_lang)
    model = load_model(run / runs.MODEL)
    cache_length = _cache_length(run, model, max_length if max_length is not None else decoding.max_new_tokens)
    protos, reasons = zip(
        fast_text.in_model_tokenizer(tokenizer_dirs[0]), fast_text.in_model_detokenizer(tokenizer_dirs[1])
    )
    if any(reasons):
        warnings.warn(TokenizerOutsideWarning(_outside(run, *reasons)), stacklevel=2)
    info = _info(run, model, config, decoding, cache_length, quantization, beam_size, alpha, reasons)
    info["languages"] = languages
    data = convert(model, cache_length, info, *protos, quantization=quantization)

    def write(tmp):
        tmp = pathlib.Path(tmp)
        (tmp / MODEL_FILE).write_bytes(data)
        for side, folder in zip(("source", "target"), tokenizer_dirs):
            shutil.copytree(folder, tmp / "tokenizers" / side)
        (tmp / INFO_FILE).write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        manifest.write_manifest(tmp)

    atomic.replace_dir(write, output, destinations.remove_previous)
    return info


def _outside(run, reason, target_reason):
    """The one line that says what runs outside the model, and why."""
    names = [name for name, why in (("tokenize", reason), ("detokenize", target_reason)) if why]
    why = "; ".join(dict.fromkeys(why for why in (reason, target_reason) if why))
    return (
        f"{run}: {why}; the export runs {' and '.join(names)} outside the model with SentencePiece (its "
        f"tokenizers/ folder, docs/litert.md), and its .tflite has no {' or '.join(names)} signature"
    )


def convert(model, cache_length, info, source_proto=None, target_proto=None, quantization=None):
    """The `.tflite` flatbuffer (bytes) of `model`'s `StepModule`, its ops checked (`ops.check_operators`)."""
    import tensorflow as tf

    from keras_transformer.litert.graph import StepModule
    from keras_transformer.litert.ops import check_operators

    softmax_over = info["decoding"]["softmax_over"]
    module = StepModule(model, cache_length, info["banned_ids"], softmax_over, source_proto, target_proto)
    signatures = module.signatures()
    with tempfile.TemporaryDirectory() as tmp:
        options = tf.saved_model.SaveOptions(experimental_custom_gradients=False)
        tf.saved_model.save(module, tmp, signatures=signatures, options=options)
        converter = tf.lite.TFLiteConverter.from_saved_model(tmp, signature_keys=list(signatures))
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        converter.allow_custom_ops = True  # tensorflow-text's ops; check_operators refuses any other
        if quantization == "int8":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]  # no dataset: dynamic-range int8 weights
            # GATHER takes one scale a tensor and FULLY_CONNECTED one a row: a tied table used by both
            # would be stored twice. One scale a tensor everywhere keeps one int8 copy.
            converter._experimental_disable_per_channel = int8_scales(model) == "per-tensor"
        try:
            data = converter.convert()
        except Exception as error:  # noqa: BLE001  (the converter's errors are many and long)
            raise ValueError(f"the LiteRT converter failed: {first_line(error)}") from None
    check_operators(data)
    return data


def int8_scales(model):
    """`"per-tensor"` where the output projection is the embedding table (one int8 copy), else `"per-channel"`."""
    return "per-tensor" if model.config.tie_output_embedding else "per-channel"


def _info(run, model, config, decoding, cache_length, quantization, beam_size, alpha, reasons):
    model_config = model.config
    start_id, target_pad = model_config.start_id, model_config.target_pad
    banned = rules.never_generated(
        start_id, model_config.end_id, target_pad, decoding.banned_ids, decoding.softmax_over
    )
    layer = model.decoder_layers[0]
    return {
        "created_by": destinations.CREATOR,
        "format": FORMAT,
        "run": str(run),
        "model_file": MODEL_FILE,
        "quantization": quantization or "float32",
        "int8_scales": int8_scales(model) if quantization == "int8" else None,
        "signatures": ["encode", "decode_step"] + [n for n, why in zip(_TEXT_SIGNATURES, reasons) if why is None],
        "max_length": cache_length,
        "max_source_length": int(model.max_length),
        "layers": len(model.decoder_layers),
        "heads": int(layer.num_heads),
        "key_dim": int(layer.d_model // layer.num_heads),
        "target_vocab_size": int(model.target_vocab_size),
        "pad_id": model_config.pad_id,
        "target_pad_id": target_pad,
        "start_id": start_id,
        "end_id": model_config.end_id,
        "banned_ids": list(banned),
        "add_source_end": bool(config.add_source_end),
        "decoding": {
            "beam_size": _positive(beam_size, "beam_size") or decoding.beam_size,
            "alpha": decoding.alpha if alpha is None else float(alpha),
            "normalization": decoding.normalization,
            "stopping": decoding.stopping,
            "cut_off": decoding.cut_off,
            "force_end": bool(decoding.force_end),
            "softmax_over": decoding.softmax_over,
        },
        "tokenizer": {
            "in_model": reasons[0] is None,
            "reason": reasons[0],
            "detokenize_in_model": reasons[1] is None,
            "detokenize_reason": reasons[1],
            "source": "tokenizers/source",
            "target": "tokenizers/target",
        },
    }


def _languages(run, tokenizer_dirs, source_lang, target_lang):
    """`litert.json`'s `languages`: a multilingual run's codes and their ids, defaults and source position.

    None for a run of one language pair; a language given for one is a
    `ValueError`, and so is a code the run lacks (naming close ones).
    """
    from keras_transformer.translators.controls import Languages

    source, target = (host_text.load_text(folder) for folder in tokenizer_dirs)
    codes = getattr(target, "languages", None) or {}
    if not codes:
        for name, value in (("source_lang", source_lang), ("target_lang", target_lang)):
            if value is not None:
                raise ValueError(
                    f"`{name}` applies to multilingual models; {literal(run)} translates one language pair. "
                    f"Received: {name}={value!r}"
                )
        return None
    ordered = tuple(sorted(codes, key=codes.get))
    languages = Languages(ordered, source.source_lang, target.target_lang).with_defaults(source_lang, target_lang)
    return {
        "codes": {code: codes[code] for code in ordered},
        "source_lang": languages.source_lang,
        "target_lang": languages.target_lang,
        "source_position": source.source_position,
    }


def _check_layers(run, model_config):
    """A one-line `ValueError` for a model whose embeddings the step graph does not compute (T5's, mBART's)."""
    if model_config is None:
        return
    if model_config.position_layout == "relative" or model_config.embedding_norm or model_config.position_offset:
        family = "a T5-family" if model_config.position_layout == "relative" else "an mBART"
        raise ValueError(
            f"{run} is {family} model, which a LiteRT export does not hold: its step graph computes the paper's "
            "embeddings, without T5's relative position bias or mBART's per-side positions and embedding norms. "
            "Export a SavedModel or --format ctranslate2 instead"
        )


def _positive(value, name):
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}")
    return value


def _cache_length(run, model, max_length):
    """The decode length (the self-attention cache's), checked against the model and `MAX_CACHE_LENGTH`."""
    length = int(model.max_length) if max_length is None else max_length
    if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= model.max_length:
        raise ArgumentError(
            f"{{max_length={max_length!r}}} must be an int from 1 to the model's max_length {model.max_length}"
        )
    if length > MAX_CACHE_LENGTH:
        raise ArgumentError(
            f"{literal(run)}: max_length {length} is more than the LiteRT decoder's fixed self-attention cache "
            f"holds ({MAX_CACHE_LENGTH} positions): pass {{max_length={MAX_CACHE_LENGTH}}} or less"
        )
    return length


def _tokenizer_dirs(run):
    source = run / runs.SOURCE_TOKENIZER
    target = run / runs.TARGET_TOKENIZER
    return source, (target if target.is_dir() else source)
