"""`MarianTokenizer`: an OPUS-MT model's tokenizer, SentencePiece pieces mapped to ids by `vocab.json`.

A Marian (OPUS-MT) checkpoint has its own ids: SentencePiece cuts the text
into pieces, and `vocab.json` gives each piece its id (`</s>` 0, `<unk>` 1,
`<pad>` the last), whatever SentencePiece's own ids are. A piece missing from
`vocab.json` is `<unk>`. A text that starts with a target-language token
(`>>fra<<`, multilingual models) keeps it as one piece, in front. This is
what transformers' `MarianTokenizer` does, here in tensorflow-text ops so that
an exported SavedModel tokenizes with no Python.
"""

import json
import pathlib

import tensorflow as tf

from keras_transformer.files import atomic
from keras_transformer.tokenizers.pieces import (
    BYTES_PER_PIECE,
    CONFIG_FILENAME,
    MAX_VOCAB_FILE_BYTES,
    MAX_VOCAB_SIZE,
    PieceTokenizer,
    read_sentencepiece,
    read_vocab,
)

SPECIAL_PIECES = ("</s>", "<unk>", "<pad>")
# A target-language token at the start of a text: `>>` up to the first `<<` (transformers' rule).
LANGUAGE_CODE = r"(?s)^(>>.*?<<)"


class MarianTokenizer(PieceTokenizer):
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

    Example:

    >>> tokenizer = MarianTokenizer.from_files("opus-mt-en-de/source.spm", "opus-mt-en-de/vocab.json")  # doctest: +SKIP
    >>> tokenizer.tokenize(tf.constant(["A dog runs."]))  # doctest: +SKIP
    """

    FORMAT = "marian"  # what `save` writes as `tokenizer.json`'s `format`: its kind (`tokenizers.kinds`)

    def __init__(
        self,
        model_proto,
        vocab,
        name=None,
        file_names=("sentencepiece.spm", "vocab.json"),
        vocab_bytes=None,
        start_id=None,
    ):
        missing = [piece for piece in SPECIAL_PIECES if piece not in vocab]
        if missing:
            raise ValueError(f"`vocab` must hold the pieces {SPECIAL_PIECES}. Missing: {missing}")
        super().__init__(model_proto, vocab, hidden=SPECIAL_PIECES, name=name)
        self.file_names = tuple(file_names)  # (SentencePiece model, vocabulary), as `save` names them
        self._vocab_bytes = vocab_bytes  # the vocabulary file as it was read, which `save` writes back
        self.end_id, self.pad_id = self._vocab["</s>"], self._vocab["<pad>"]
        self.start_id = self.pad_id if start_id is None else int(start_id)  # OPUS-MT's start from their padding id
        self._trace()

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
        vocab, vocab_bytes = read_vocab(vocab_file, max_bytes, max_vocab_size or MAX_VOCAB_SIZE)
        model_proto = read_sentencepiece(spm_file)
        names = (spm_file.name, vocab_file.name)
        try:
            return cls(model_proto, vocab, name=name, file_names=names, vocab_bytes=vocab_bytes, start_id=start_id)
        except ValueError as error:
            raise ValueError(f"{vocab_file}: {error}") from None

    @tf.function(autograph=False)
    def tokenize(self, strings):
        """Strings `(batch,)` -> int32 `RaggedTensor` `(batch, None)` of Marian ids, without `</s>`."""
        strings = tf.convert_to_tensor(strings, tf.string)
        has_code = tf.strings.regex_full_match(strings, LANGUAGE_CODE + ".*")
        code = tf.strings.regex_replace(strings, LANGUAGE_CODE + ".*$", r"\1")
        rest = tf.where(has_code, tf.strings.regex_replace(strings, LANGUAGE_CODE, ""), strings)
        pieces = self._pieces.tokenize(rest)
        codes = tf.RaggedTensor.from_row_lengths(tf.boolean_mask(code, has_code), tf.cast(has_code, tf.int64))
        return self._ids.lookup(tf.concat([codes, pieces], axis=1))

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
            "format": self.FORMAT,
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
        self.write_config(directory / CONFIG_FILENAME, config)

    @classmethod
    def load(cls, directory, name=None):
        """The tokenizer `save` wrote in `directory`."""
        directory = pathlib.Path(directory)
        config = json.loads((directory / CONFIG_FILENAME).read_text(encoding="utf-8"))
        return cls.from_files(
            directory / config["spm_file"], directory / config["vocab_file"], name=name, start_id=config.get("start_id")
        )
