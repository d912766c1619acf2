"""`MarianTokenizer`: an OPUS-MT model's tokenizer, SentencePiece pieces mapped to ids by `vocab.json`.

A Marian (OPUS-MT) checkpoint has its own ids: SentencePiece cuts the text
into pieces, and `vocab.json` gives each piece its id (`</s>` 0, `<unk>` 1,
`<pad>` the last), whatever SentencePiece's own ids are. A piece missing from
`vocab.json` is `<unk>`. A text that starts with a target-language token
(`>>fra<<`, multilingual models) keeps it as one piece, in front. This is
what transformers' `MarianTokenizer` does, here in tensorflow-text ops so that
an exported SavedModel tokenizes with no Python.
"""

import hashlib
import json
import pathlib
import re

import tensorflow as tf
import tensorflow_text as tf_text

from keras_transformer.files import atomic

CONFIG_FILENAME = "tokenizer.json"
# A vocab.json entry is a piece (at most a few dozen bytes, escaped), its id and punctuation: well under this.
BYTES_PER_PIECE = 256
MAX_VOCAB_FILE_BYTES = 2**28
MAX_VOCAB_SIZE = 2**24  # ids of a vocabulary whose embedding size is not known: far above any real one
MAX_SENTENCEPIECE_BYTES = 2**28
SPECIAL_PIECES = ("</s>", "<unk>", "<pad>")
# A target-language token at the start of a text: `>>` up to the first `<<` (transformers' rule).
_LANGUAGE_CODE = r"(?s)^(>>.*?<<)"


class MarianTokenizer(tf.Module):
    """Strings to Marian ids and back, as a `tf.Module`.

    `tokenize` gives the pieces' ids, without the `</s>` that Marian appends
    to a source (the `Translator` and the data pipeline append END where a
    run's config says so); `detokenize` drops `</s>`, `<unk>` and `<pad>`,
    joins the other pieces (byte pieces as their bytes), turns `▁` into
    spaces and strips the ends, as transformers'
    `decode(..., skip_special_tokens=True)` does.

    Args:
        model_proto: bytes, the serialized SentencePiece model (`source.spm`
            or `target.spm`).
        vocab: `{piece: id}`, the checkpoint's `vocab.json` (or `target_vocab.json`).
        name: name of the module.
        file_names: `(SentencePiece model, vocabulary)`, the names `save` and `files` give them.
        vocab_bytes: the vocabulary file as it was read, which `save` and `files` write back.
        start_id: the id the decoder starts from (`decoder_start_token_id`); None: the padding id, as
            OPUS-MT's models start.

    Example:

    >>> tokenizer = MarianTokenizer.from_files("opus-mt-en-de/source.spm", "opus-mt-en-de/vocab.json")  # doctest: +SKIP
    >>> tokenizer.tokenize(tf.constant(["A dog runs."]))  # doctest: +SKIP
    """

    def __init__(
        self,
        model_proto,
        vocab,
        name=None,
        file_names=("sentencepiece.spm", "vocab.json"),
        vocab_bytes=None,
        start_id=None,
    ):
        super().__init__(name=name)
        self._model_proto, self._vocab = bytes(model_proto), dict(vocab)
        self.file_names = tuple(file_names)  # (SentencePiece model, vocabulary), as `save` names them
        self._vocab_bytes = vocab_bytes  # the vocabulary file as it was read, which `save` writes back
        missing = [piece for piece in SPECIAL_PIECES if piece not in self._vocab]
        if missing:
            raise ValueError(f"`vocab` must hold the pieces {SPECIAL_PIECES}. Missing: {missing}")
        self.vocab_size = max(self._vocab.values()) + 1
        self.end_id, self.unk_id, self.pad_id = (self._vocab[piece] for piece in SPECIAL_PIECES)
        self.start_id = self.pad_id if start_id is None else int(start_id)  # OPUS-MT's start from their padding id
        pieces, ids = zip(*self._vocab.items())
        self._ids = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(pieces), tf.constant(ids, tf.int32)), self.unk_id
        )
        self._pieces = tf_text.SentencepieceTokenizer(
            model=self._model_proto, out_type=tf.string, name=resource_name(self._model_proto)
        )
        by_id = [piece or "" for piece in pieces_by_id(self._vocab)]
        self._pieces_by_id = tf.constant(by_id)
        surfaces = ["" if piece in SPECIAL_PIECES else _surface(piece) for piece in by_id]
        self._surfaces = tf.constant([text.encode("utf-8") if isinstance(text, str) else text for text in surfaces])
        self.tokenize.get_concrete_function(tf.TensorSpec([None], tf.string))
        self.detokenize.get_concrete_function(tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1))
        self.detokenize.get_concrete_function(tf.TensorSpec([None, None], tf.int32))

    @property
    def vocab(self):
        """`{piece: id}`, a copy of the checkpoint's vocabulary."""
        return dict(self._vocab)

    @classmethod
    def from_files(cls, spm_file, vocab_file, name=None, max_vocab_size=None, start_id=None):
        """The tokenizer of a checkpoint's SentencePiece model and vocabulary files.

        Each file is checked before it is used, and a `ValueError` names the
        one that is not what it should be: a SentencePiece model that does not
        load, a vocabulary that is not a JSON object of pieces and integer
        ids, lacks a special piece, or (with `max_vocab_size`, the embedding's
        rows) is too large to be that model's, before it is parsed.
        """
        spm_file, vocab_file = pathlib.Path(spm_file), pathlib.Path(vocab_file)
        max_bytes = MAX_VOCAB_FILE_BYTES if max_vocab_size is None else max_vocab_size * BYTES_PER_PIECE + 2**16
        vocab, vocab_bytes = _read_vocab(vocab_file, max_bytes, max_vocab_size or MAX_VOCAB_SIZE)
        model_proto = _read_sentencepiece(spm_file)
        names = (spm_file.name, vocab_file.name)
        try:
            return cls(model_proto, vocab, name=name, file_names=names, vocab_bytes=vocab_bytes, start_id=start_id)
        except ValueError as error:
            raise ValueError(f"{vocab_file}: {error}") from None

    @tf.function
    def tokenize(self, strings):
        """Strings `(batch,)` -> int32 `RaggedTensor` `(batch, None)` of Marian ids, without `</s>`."""
        strings = tf.convert_to_tensor(strings, tf.string)
        has_code = tf.strings.regex_full_match(strings, _LANGUAGE_CODE + ".*")
        code = tf.strings.regex_replace(strings, _LANGUAGE_CODE + ".*$", r"\1")
        rest = tf.where(has_code, tf.strings.regex_replace(strings, _LANGUAGE_CODE, ""), strings)
        pieces = self._pieces.tokenize(rest)
        codes = tf.RaggedTensor.from_row_lengths(tf.boolean_mask(code, has_code), tf.cast(has_code, tf.int64))
        return self._ids.lookup(tf.concat([codes, pieces], axis=1))

    @tf.function
    def detokenize(self, ids):
        """Ids `(batch, length)`, ragged or dense, -> strings `(batch,)`; special ids are dropped."""
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(ids))
        ids = tf.cast(ids, tf.int32)
        ids = tf.ragged.boolean_mask(ids, tf.logical_and(ids >= 0, ids < self.vocab_size))
        joined = tf.strings.reduce_join(tf.ragged.map_flat_values(tf.gather, self._surfaces, ids), axis=-1)
        return tf.strings.strip(tf.strings.regex_replace(joined, "\u2581", " "))

    def id_to_piece(self, ids):
        """The pieces of int `ids` (any shape), as `vocab.json` names them."""
        return tf.gather(self._pieces_by_id, tf.cast(ids, tf.int32))

    def files(self):
        """`{name: bytes}` of the SentencePiece model and the vocabulary, under their `file_names`.

        A tokenizer read by `from_files` gives the bytes it read; one made
        from a `vocab` dict gives it as JSON.
        """
        spm_name, vocab_name = self.file_names
        vocab_bytes = self._vocab_bytes
        if vocab_bytes is None:
            vocab_bytes = (json.dumps(self._vocab, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
        return {spm_name: self._model_proto, vocab_name: vocab_bytes}

    def save(self, directory):
        """Writes the SentencePiece model, the vocabulary and `tokenizer.json` to `directory`, atomically.

        The files keep the names (`file_names`) and, for a tokenizer read by
        `from_files`, the bytes they were read from.
        """
        directory = pathlib.Path(directory)
        spm_name, vocab_name = self.file_names
        config = {
            "format": "marian",
            "spm_file": spm_name,
            "vocab_file": vocab_name,
            "vocab_size": self.vocab_size,
            "pad_id": self.pad_id,
            "unk_id": self.unk_id,
            "start_id": self.start_id,
            "end_id": self.end_id,
        }
        atomic.write_bytes(directory / spm_name, self._model_proto)
        if self._vocab_bytes is None:
            atomic.write_json(directory / vocab_name, self._vocab)
        else:
            atomic.write_bytes(directory / vocab_name, self._vocab_bytes)
        atomic.write_bytes(directory / CONFIG_FILENAME, (json.dumps(config, indent=2) + "\n").encode("utf-8"))

    @classmethod
    def load(cls, directory, name=None):
        """The tokenizer `save` wrote in `directory`."""
        directory = pathlib.Path(directory)
        config = json.loads((directory / CONFIG_FILENAME).read_text(encoding="utf-8"))
        return cls.from_files(
            directory / config["spm_file"], directory / config["vocab_file"], name=name, start_id=config.get("start_id")
        )


def _read_vocab(path, max_bytes, id_limit):
    """`({piece: id}, the file's bytes)` of a `vocab.json`; a `ValueError` naming a file that is not one.

    Too large for `max_bytes`, not UTF-8 JSON, not an object of pieces and
    ids in `[0, id_limit)`.
    """
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(
            f"{path} is {size:,} bytes: too large to be the vocabulary of this model's embedding "
            f"(at most {max_bytes:,} bytes)"
        )
    data = path.read_bytes()
    try:
        vocab = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ValueError(f"{path} is not JSON that can be read: nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not a JSON vocabulary: {str(error)[:200]}") from None
    valid = isinstance(vocab, dict) and all(
        isinstance(i, int) and not isinstance(i, bool) and 0 <= i < id_limit for i in vocab.values()
    )
    if not valid or not vocab:
        raise ValueError(f"{path} must map each piece to an integer id in [0, {id_limit})")
    return vocab, data


def _read_sentencepiece(path):
    """The bytes of a SentencePiece model file; a `ValueError` naming it when SentencePiece cannot load it."""
    import sentencepiece

    size = path.stat().st_size
    if size > MAX_SENTENCEPIECE_BYTES:
        raise ValueError(f"{path} is {size:,} bytes: too large to be a SentencePiece model")
    model_proto = path.read_bytes()
    try:
        sentencepiece.SentencePieceProcessor(model_proto=model_proto)
    except (RuntimeError, ValueError, TypeError) as error:
        raise ValueError(f"{path} is not a SentencePiece model: {str(error).strip()[:200]}") from None
    return model_proto


def pieces_by_id(vocab):
    """The pieces of `vocab` (`{piece: id}`) in id order; None at an id no piece has.

    Example:

    >>> pieces_by_id({"</s>": 0, "<pad>": 2})
    ['</s>', None, '<pad>']
    """
    pieces = [None] * (max(vocab.values()) + 1)
    for piece, index in vocab.items():
        pieces[index] = piece
    return pieces


def resource_name(model_proto):
    """A name for the SentencePiece resource of `model_proto`, the same only for the same model.

    tensorflow-text's SentencePiece resource is kernel-owned and shared by
    name: in a loaded SavedModel, two tokenizers whose resources are named
    alike would both cut text with one of the two models (an import's source
    and target models are two).
    """
    return "sentencepiece_" + hashlib.sha256(model_proto).hexdigest()[:16]


def _surface(piece):
    """What a piece stands for in the text: its bytes for a byte piece (`<0xE3>`), else the piece itself."""
    match = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", piece)
    return bytes([int(match.group(1), 16)]) if match else piece
