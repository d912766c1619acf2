"""`T5Tokenizer`: a T5-family checkpoint's tokenizer (T5, flan-T5, mT5, MADLAD-400), in tensorflow-text ops.

A SentencePiece unigram model whose ids are the checkpoint's own: `<pad>`,
`</s>` and `<unk>` first (T5's 0, 1, 2; MADLAD's `<unk>` 0, `<pad>` 1, `</s>`
2), the pieces, then T5's `<extra_id_N>` sentinels (`<extra_id_0>` the last
id). It is read from `tokenizer.json` where the checkpoint has one (what
transformers 5 reads first and writes), else from `spiece.model` and
`tokenizer_config.json` (`extra_ids`, 100 unless it says otherwise), as
transformers' `T5Tokenizer` converts it, which reads a piece missing from the
vocabulary as id 2 whatever the SentencePiece model says (MADLAD's `</s>`);
so does this tokenizer, so that the ids are transformers'.

MADLAD-400 translates into the language whose `<2xx>` piece starts the
source (`<2de> How are you?`): those pieces are its `languages`, and a
translation's target language becomes that first piece
(`target_in_source`), where M2M100's goes first in the target instead.

Example:

>>> tokenizer = from_t5_files("madlad400-3b-mt")  # doctest: +SKIP
>>> tokenizer.language_id("de")  # doctest: +SKIP
"""

import pathlib
import re

import tensorflow as tf

from keras_transformer.files import atomic
from keras_transformer.files.json_files import read_json_object
from keras_transformer.kinds import close_matches
from keras_transformer.tokenizers.pieces import CONFIG_FILENAME, PieceTokenizer, read_sentencepiece
from keras_transformer.tokenizers.unigram import UnigramFiles, sentencepiece_pieces, unigram_from_tokenizer_json

CHECKPOINT_FILES = "files"  # where a saved tokenizer keeps the checkpoint's own files, byte for byte
T5_UNK_ID = 2  # the unknown id of transformers' T5Tokenizer, whatever the SentencePiece model's
_LANGUAGE = re.compile(r"<2([^<>\s]+)>")  # MADLAD's target-language pieces, `<2de>`


class T5Tokenizer(PieceTokenizer):
    """Strings to a T5-family checkpoint's ids and back, as a `tf.Module`.

    `tokenize` gives the pieces' ids, without the `</s>` that ends a source
    (the translator adds it, and MADLAD's language in front); `detokenize`
    drops the special pieces and turns `▁` into spaces, the first one
    dropped, as transformers' `decode(..., skip_special_tokens=True)` does.

    Args:
        files: the `UnigramFiles` the checkpoint's files give.
        start_id: the id the decoder starts from (T5's padding id 0).
        target_lang: a default target language (a MADLAD code, `"de"`), or None.
        name: name of the module.
    """

    FORMAT = "t5"  # what `save` writes as `tokenizer.json`'s `format`: its kind (`tokenizers.kinds`)
    target_in_source = True  # MADLAD: the target language is the source's first piece

    def __init__(self, files, start_id=None, target_lang=None, name=None):
        missing = [piece for piece in ("<pad>", "</s>") if piece not in files.vocab]
        if missing:
            raise ValueError(f"the vocabulary must hold the pieces <pad> and </s>. Missing: {missing}")
        by_id = {index: piece for piece, index in files.vocab.items()}
        super().__init__(
            files.model_proto, files.vocab, hidden=files.special, unk_piece=by_id[files.unk_id], strip="first_space"
        )
        self.unk_id = files.unk_id
        self.files = dict(files.files)
        self.pad_id, self.end_id = files.vocab["<pad>"], files.vocab["</s>"]
        self.start_id = self.pad_id if start_id is None else int(start_id)
        self.languages = {
            match.group(1): index for piece, index in files.vocab.items() if (match := _LANGUAGE.fullmatch(piece))
        }
        self.source_lang = None
        self.target_lang = target_lang if target_lang in self.languages else None
        codes, ids = zip(*self.languages.items()) if self.languages else (("",), (-1,))  # a table is never empty
        self._language_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(codes, tf.string), tf.constant(ids, tf.int32)), -1
        )
        self._trace()
        self.language_ids.get_concrete_function(tf.TensorSpec([None], tf.string))

    @tf.function(autograph=False)
    def tokenize(self, strings):
        """Strings `(batch,)` -> int32 `RaggedTensor` `(batch, None)` of the pieces' ids (no `</s>`)."""
        return self.piece_ids(tf.convert_to_tensor(strings, tf.string))

    @tf.function(autograph=False)
    def language_ids(self, codes):
        """Language codes `(batch,)` -> the ids of their `<2xx>` pieces, int32; -1 for a code the model lacks."""
        return self._language_table.lookup(tf.convert_to_tensor(codes, tf.string))

    def language_id(self, code, what="language"):
        """The id of language `code`'s `<2xx>` piece; a code the vocabulary lacks is a `ValueError`."""
        if code not in self.languages:
            close = close_matches(code, self.languages)
            hint = f" Close: {', '.join(close)}" if close else f" This model has {len(self.languages)} languages"
            raise ValueError(f"{what} {code!r} is not a language of this model (no <2{code}> piece).{hint}")
        return self.languages[code]

    def save(self, directory):
        """Writes the checkpoint's tokenizer files, unchanged, in `files/`, and `tokenizer.json`, what `load` reads."""
        directory = pathlib.Path(directory)
        for file_name, data in self.files.items():
            atomic.write_bytes(directory / CHECKPOINT_FILES / file_name, data)
        config = {
            "format": self.FORMAT,
            "files": sorted(self.files),
            "start_id": self.start_id,
            "target_lang": self.target_lang,
        }
        self.write_config(directory / CONFIG_FILENAME, config)

    @classmethod
    def load(cls, directory, name=None):
        """The tokenizer `save` wrote in `directory`."""
        directory = pathlib.Path(directory)
        config = read_json_object(directory / CONFIG_FILENAME)
        return from_t5_files(
            directory / CHECKPOINT_FILES,
            start_id=config.get("start_id"),
            target_lang=config.get("target_lang"),
            name=name,
        )


def from_t5_files(folder, max_vocab_size=None, start_id=None, target_lang=None, name=None):
    """The `T5Tokenizer` of a checkpoint folder: `tokenizer.json`, else `spiece.model` (and `tokenizer_config.json`)."""
    folder = pathlib.Path(folder)
    if (folder / "tokenizer.json").is_file():  # what transformers reads first; a `spiece.model` beside it is kept
        files = unigram_from_tokenizer_json(folder / "tokenizer.json", max_vocab_size)
        kept = (
            {"spiece.model": read_sentencepiece(folder / "spiece.model")} if (folder / "spiece.model").is_file() else {}
        )
        files = files._replace(files={**files.files, **kept, **_optional(folder, "tokenizer_config.json")})
    else:
        files = _from_spiece(folder)
    try:
        return T5Tokenizer(files, start_id=start_id, target_lang=target_lang, name=name)
    except ValueError as error:
        raise ValueError(f"{folder}: {error}") from None


def _from_spiece(folder):
    """`UnigramFiles` of `spiece.model`, as transformers' `T5Tokenizer` converts it: the sentinels after the pieces."""
    path = folder / "spiece.model"
    if not path.is_file():
        raise ValueError(f"{folder} holds neither tokenizer.json nor spiece.model: a T5 checkpoint holds one")
    model_proto, pieces = sentencepiece_pieces(path)
    settings = _tokenizer_config(folder)
    extra_ids = settings.get("extra_ids", 100)
    if isinstance(extra_ids, bool) or not isinstance(extra_ids, int) or not 0 <= extra_ids <= 10_000:
        raise ValueError(f"{folder / 'tokenizer_config.json'}: `extra_ids` must be an int in [0, 10000]")
    vocab = {}
    for index, (piece, _, _) in enumerate(pieces):
        vocab.setdefault(piece, index)
    sentinels = [f"<extra_id_{i}>" for i in range(extra_ids)]
    vocab.update({piece: len(pieces) + extra_ids - 1 - i for i, piece in enumerate(sentinels)})
    names = [_token_name(settings.get(key), default) for key, default in _SPECIAL_KEYS]
    special = tuple(piece for piece in names if piece in vocab) + tuple(sentinels)
    added = tuple(piece for piece, _, kind in pieces if kind == "USER_DEFINED")
    if T5_UNK_ID >= len(pieces):
        raise ValueError(f"{path} has {len(pieces)} pieces; a T5 model's unknown id is {T5_UNK_ID}")
    files = {"spiece.model": model_proto, **_optional(folder, "tokenizer_config.json")}
    return UnigramFiles(model_proto, vocab, T5_UNK_ID, special, added, files)


_SPECIAL_KEYS = (("eos_token", "</s>"), ("unk_token", "<unk>"), ("pad_token", "<pad>"))


def _token_name(value, default):
    if isinstance(value, dict):  # an AddedToken as older tokenizer_config.json files write it
        value = value.get("content")
    return value if isinstance(value, str) else default


def _tokenizer_config(folder):
    path = pathlib.Path(folder) / "tokenizer_config.json"
    return read_json_object(path) if path.is_file() else {}


def _optional(folder, file_name):
    path = pathlib.Path(folder) / file_name
    return {file_name: path.read_bytes()} if path.is_file() else {}
