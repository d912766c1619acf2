"""`litert.json`: what a LiteRT export's host loop reads, checked field by field and against its `.tflite`.

A LiteRT folder may come from elsewhere. Its `litert.json` decides how much
memory the host loop asks for (the beam, the cache's length, layers, heads),
which ids it starts from and stops at, which files it opens, and which
token a language code forces (`languages`), so each field is checked
before anything is allocated, as a run's `config.json` is (`read_info`);
then the numbers are held against the model itself: the signatures it
lists must be in the `.tflite`, and the decoder step's cache and output
shapes must be the ones the file gives (`check_model`); the translator
holds the languages against its tokenizer's. A `ValueError` names the file
and the field.

Example:

>>> info = read_info("saved_models/chatbot-ko-litert")  # doctest: +SKIP
>>> info["decoding"].beam_size  # doctest: +SKIP
4
"""

import pathlib
import re

from keras_transformer.config import DecodingConfig
from keras_transformer.files.folders import LITERT_INFO
from keras_transformer.files.json_files import read_json_object
from keras_transformer.kinds import MAX_LENGTH, check_bool, check_choice, check_ids, check_int_in_range

INFO_FILE = LITERT_INFO
SIGNATURES = ("encode", "decode_step", "tokenize", "detokenize")
QUANTIZATIONS = ("float32", "int8")
INT8_SCALES = (None, "per-tensor", "per-channel")
MAX_VOCAB_SIZE = 2**24
MAX_LAYERS = 1024
_FILE_NAME = re.compile(r"[\w.-]+")
MAX_LANGUAGES = 4096
_LANGUAGE_FIELDS = ("codes", "source_lang", "target_lang", "source_position")
_LANGUAGE_CODE = re.compile(r"[A-Za-z0-9_-]{1,32}")


def read_info(folder):
    """The checked `litert.json` of the export `folder`, its `decoding` as a `DecodingConfig`."""
    path = pathlib.Path(folder) / INFO_FILE
    info = read_json_object(path)
    try:
        return _checked(info)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None


def _checked(info):
    if info.get("format") != "litert":
        raise ValueError(f"`format` must be 'litert'. Received: format={info.get('format')!r}"[:300])
    info = dict(info)
    if not isinstance(info.get("model_file"), str) or not _FILE_NAME.fullmatch(info["model_file"]):
        raise ValueError(f"`model_file` must be a file name in the export. Received: {info.get('model_file')!r}"[:300])
    check_choice("quantization", _get(info, "quantization"), QUANTIZATIONS)
    if info.get("int8_scales") not in INT8_SCALES:
        raise ValueError(f"`int8_scales` must be one of {INT8_SCALES}. Received: {info.get('int8_scales')!r}"[:300])
    signatures = _get(info, "signatures")
    if not isinstance(signatures, list) or not {"encode", "decode_step"} <= set(signatures) <= set(SIGNATURES):
        raise ValueError(
            f"`signatures` must list encode, decode_step and any of tokenize, detokenize. Received: {signatures!r}"[
                :300
            ]
        )
    for name, high in (("max_length", MAX_LENGTH), ("max_source_length", MAX_LENGTH), ("layers", MAX_LAYERS)):
        check_int_in_range(name, _get(info, name), 1, high)
    check_int_in_range("target_vocab_size", _get(info, "target_vocab_size"), 1, MAX_VOCAB_SIZE)
    check_int_in_range("heads", _get(info, "heads"), 1, 2**12)
    check_int_in_range("key_dim", _get(info, "key_dim"), 1, 2**16)
    vocab = info["target_vocab_size"]
    check_int_in_range("pad_id", _get(info, "pad_id"), 0, MAX_VOCAB_SIZE - 1)
    for name in ("target_pad_id", "start_id", "end_id"):
        check_int_in_range(name, _get(info, name), 0, vocab - 1)
    check_ids("banned_ids", _get(info, "banned_ids"), vocab)
    check_bool("add_source_end", _get(info, "add_source_end"))
    info["decoding"] = DecodingConfig.from_dict(_get(info, "decoding"), "`decoding`").check(
        vocab_size=vocab, model_max_length=info["max_length"], where="`decoding`"
    )
    info["tokenizer"] = _tokenizer(_get(info, "tokenizer"))
    info["languages"] = _languages(info.get("languages"), vocab)
    return info


def _languages(languages, vocab):
    """A multilingual export's `languages` (codes -> token ids, defaults, source position), checked; None: none."""
    if languages is None:  # one language pair (and exports of earlier versions)
        return None
    if not isinstance(languages, dict) or set(languages) != set(_LANGUAGE_FIELDS):
        raise ValueError(f"`languages` must be null or an object of {', '.join(_LANGUAGE_FIELDS)}")
    codes = languages["codes"]
    if not isinstance(codes, dict) or not 1 <= len(codes) <= MAX_LANGUAGES:
        raise ValueError(f"`languages.codes` must map 1 to {MAX_LANGUAGES} language codes to their token ids")
    for code, index in codes.items():
        if not _LANGUAGE_CODE.fullmatch(code):
            raise ValueError(f"`languages.codes` holds {code!r}, which is not a language code"[:300])
        check_int_in_range(f"languages.codes[{code!r}]", index, 0, vocab - 1)
    if len(set(codes.values())) != len(codes):
        raise ValueError("`languages.codes` must give each language a token of its own")
    for name in ("source_lang", "target_lang"):
        default = languages[name]
        if default is not None and (not isinstance(default, str) or default not in codes):
            raise ValueError(
                f"`languages.{name}` must be null or one of `languages.codes`. Received: {default!r}"[:300]
            )
    check_choice("languages.source_position", languages["source_position"], ("first", "last"))
    return languages


def _tokenizer(tokenizer):
    if not isinstance(tokenizer, dict):
        raise ValueError(f"`tokenizer` must be a JSON object. Received: {tokenizer!r}"[:300])
    for name in ("in_model", "detokenize_in_model"):
        check_bool(f"tokenizer.{name}", tokenizer.get(name, False))
    for side in ("source", "target"):
        folder = tokenizer.get(side)
        parts = pathlib.PurePosixPath(folder).parts if isinstance(folder, str) else ()
        if not parts or folder.startswith("/") or any(part in ("..", ".") for part in parts):
            raise ValueError(f"`tokenizer.{side}` must be a folder inside the export. Received: {folder!r}"[:300])
    return tokenizer


def _get(info, name):
    if name not in info:
        raise ValueError(f"it has no `{name}`, which a LiteRT export's litert.json holds")
    return info[name]


def check_model(info, interpreter, folder):
    """`ValueError` naming the file where `litert.json`'s signatures or sizes are not the `.tflite`'s own."""
    folder = pathlib.Path(folder)
    model = folder / info["model_file"]
    present = set(interpreter.get_signature_list())
    missing = [name for name in info["signatures"] if name not in present]
    if missing:
        raise ValueError(f"{model} has no signature {missing[0]!r}, which {folder / INFO_FILE} lists")
    step = interpreter.get_signature_runner("decode_step")
    cache = _shape(step.get_input_details(), "self_cache")
    expected = [2 * info["layers"], info["heads"], info["max_length"], info["key_dim"]]
    if cache is None or list(cache[1:]) != expected:
        raise ValueError(
            f"{folder / INFO_FILE}: `layers`, `heads`, `max_length` and `key_dim` give a decoder cache of "
            f"{expected}, but {model} takes {None if cache is None else list(cache[1:])}"
        )
    log_probs = _shape(step.get_output_details(), "log_probs")
    if log_probs is None or log_probs[-1] != info["target_vocab_size"]:
        raise ValueError(
            f"{folder / INFO_FILE}: `target_vocab_size` is {info['target_vocab_size']}, but {model} gives "
            f"{None if log_probs is None else log_probs[-1]} log-probabilities"
        )


def _shape(details, name):
    detail = details.get(name)
    return None if detail is None else [int(size) for size in detail.get("shape_signature", detail["shape"])]
