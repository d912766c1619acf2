"""The SentencePiece unigram models of T5 and mBART-50 checkpoints, read from `spiece.model` or `tokenizer.json`.

transformers 5 runs these tokenizers with Hugging Face's `tokenizers`: a
`tokenizer.json` whose model is a unigram vocabulary (piece and score, the
id its index), added tokens with ids of their own, a precompiled normalizer
and a `Metaspace` pre-tokenizer; older repositories hold the SentencePiece
model itself (`spiece.model`, `sentencepiece.bpe.model`), which
transformers converts into the same. This package cuts text with
tensorflow-text's SentencePiece ops (a SavedModel tokenizes without Python),
so a `tokenizer.json` is turned back into the SentencePiece model it stands
for (`unigram_sentencepiece`), and either is read as `UnigramFiles`: the
model, each piece's id, the unknown id, the special pieces.

Example:

>>> files = read_unigram_files("flan-t5-small")  # doctest: +SKIP
>>> files.vocab["</s>"], files.unk_id  # doctest: +SKIP
(1, 2)
"""

import base64
import pathlib
from typing import NamedTuple

from keras_transformer.files.json_files import read_json_object
from keras_transformer.tokenizers.pieces import BYTES_PER_PIECE, MAX_VOCAB_SIZE, read_sentencepiece


class UnigramFiles(NamedTuple):
    """A unigram tokenizer as a checkpoint's files give it.

    `model_proto`: the serialized SentencePiece model that cuts text into
    pieces; `vocab`: `{piece: id}`, every id (added tokens too); `unk_id`:
    the id of a piece the vocabulary lacks; `special`: the pieces that stand
    for nothing in decoded text (transformers' special tokens); `added`: the
    added tokens that are not special (MADLAD's `<2xx>`); `files`: `{name:
    bytes}` of the files read.
    """

    model_proto: bytes
    vocab: dict
    unk_id: int
    special: tuple
    added: tuple
    files: dict


def unigram_from_tokenizer_json(path, max_vocab_size=None, collapse_spaces=True):
    """The `UnigramFiles` of a `tokenizer.json` whose model is a unigram vocabulary.

    `collapse_spaces`: whether its pre-tokenizer drops runs of spaces and the
    spaces at either end (T5's `WhitespaceSplit`); mBART-50's keeps a
    trailing space as a `▁` piece (its normalizer collapses the runs).
    """
    path = pathlib.Path(path)
    limit = max_vocab_size or MAX_VOCAB_SIZE
    data = read_json_object(path, max_bytes=limit * 2 * BYTES_PER_PIECE + 2**20)
    model = data.get("model")
    pieces = model.get("vocab") if isinstance(model, dict) else None
    if not isinstance(model, dict) or model.get("type") != "Unigram" or not isinstance(pieces, list):
        raise ValueError(f"{path} must hold a Unigram model with a vocabulary, as a T5 or mBART-50 tokenizer does")
    valid = all(
        isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and _is_number(entry[1])
        for entry in pieces
    )
    if not valid or not pieces or len(pieces) > limit:
        raise ValueError(f"{path}: its vocabulary must be [piece, score] pairs, at most {limit} of them")
    vocab = {}
    for index, (piece, _) in enumerate(pieces):
        vocab.setdefault(piece, index)
    added = data.get("added_tokens") or []
    if not isinstance(added, list) or not all(isinstance(token, dict) for token in added):
        raise ValueError(f"{path}: `added_tokens` must be a list of tokens")
    for token in added:
        content, index = token.get("content"), token.get("id")
        if not isinstance(content, str) or isinstance(index, bool) or not isinstance(index, int):
            raise ValueError(f"{path}: an added token must have a `content` string and an integer `id`")
        if not 0 <= index < limit:
            raise ValueError(f"{path}: added token {content!r} has id {index}, outside [0, {limit})")
        vocab[content] = index
    unk_id = model.get("unk_id")
    if isinstance(unk_id, bool) or not isinstance(unk_id, int) or not 0 <= unk_id < len(pieces):
        raise ValueError(f"{path}: the model's `unk_id` must be the index of one of its pieces. Received: {unk_id!r}")
    special = tuple(token["content"] for token in added if token.get("special"))
    plain = tuple(token["content"] for token in added if not token.get("special"))
    proto = unigram_sentencepiece(pieces, unk_id, special, plain, _charsmap(data), collapse_spaces, path)
    return UnigramFiles(proto, vocab, unk_id, special, plain, {"tokenizer.json": path.read_bytes()})


def unigram_sentencepiece(pieces, unk_id, special=(), added=(), charsmap=None, collapse_spaces=True, where=""):
    """The serialized SentencePiece unigram model of `pieces` (`[piece, score]`, in id order).

    The piece `<unk>` (else the one at `unk_id`) is SentencePiece's unknown
    piece, the `special` ones are control pieces (never cut from text), the
    other `added` ones user-defined (always cut whole, as MADLAD's `<2xx>`);
    `charsmap` is the `tokenizer.json`'s precompiled normalizer.
    """
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    kinds = model_pb2.ModelProto.SentencePiece
    unknown = "<unk>" if any(piece == "<unk>" for piece, _ in pieces) else pieces[unk_id][0]
    proto = model_pb2.ModelProto()
    proto.trainer_spec.model_type = model_pb2.TrainerSpec.UNIGRAM
    proto.trainer_spec.byte_fallback = False
    proto.normalizer_spec.name = "nmt_nfkc"
    if charsmap:
        proto.normalizer_spec.precompiled_charsmap = base64.b64decode(charsmap)
    proto.normalizer_spec.add_dummy_prefix = True
    proto.normalizer_spec.remove_extra_whitespaces = collapse_spaces
    proto.normalizer_spec.escape_whitespaces = True
    seen = set()
    for piece, score in pieces:
        if piece in seen:  # SentencePiece refuses a piece twice; the first keeps its id
            continue
        seen.add(piece)
        entry = proto.pieces.add()
        entry.piece, entry.score = piece, float(score)
        if piece == unknown:
            entry.type = kinds.UNKNOWN
        elif piece in special:
            entry.type = kinds.CONTROL
        elif piece in added:
            entry.type = kinds.USER_DEFINED
    serialized = proto.SerializeToString()
    try:
        import sentencepiece

        sentencepiece.SentencePieceProcessor(model_proto=serialized)
    except (RuntimeError, ValueError) as error:
        raise ValueError(
            f"{where}: its unigram vocabulary is not a SentencePiece model's: {str(error)[:200]}"
        ) from None
    return serialized


def sentencepiece_pieces(path):
    """`(serialized model, [(piece, score, type name)])` of a SentencePiece model file (`read_sentencepiece`)."""
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    model_proto = read_sentencepiece(pathlib.Path(path))
    proto = model_pb2.ModelProto()
    proto.ParseFromString(model_proto)
    names = model_pb2.ModelProto.SentencePiece.Type.Name
    return model_proto, [(entry.piece, entry.score, names(entry.type)) for entry in proto.pieces]


def keep_spaces(model_proto):
    """`model_proto` (a serialized SentencePiece model) with its runs of spaces kept: mBART-50's `Metaspace` keeps a
    trailing space as a `▁` piece, where SentencePiece would drop it."""
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    proto = model_pb2.ModelProto()
    proto.ParseFromString(model_proto)
    proto.normalizer_spec.remove_extra_whitespaces = False
    return proto.SerializeToString()


def _charsmap(data):
    normalizer = data.get("normalizer") or {}
    normalizers = normalizer.get("normalizers") or [normalizer]
    return next((n.get("precompiled_charsmap") for n in normalizers if n.get("type") == "Precompiled"), None)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)
