"""A run's tokenizers in plain Python SentencePiece: the LiteRT export's tokenizer outside the model.

A LiteRT export copies the run's `tokenizers/` folders. Where the `.tflite`
cannot tokenize exactly as the run does (see `docs/litert.md`), the host
tokenizes with these, which give the run's own ids and strings with the
`sentencepiece` library alone (its C++ library on a device):

- `SentencePieceText`: this package's `SubwordTokenizer` (ids are
  SentencePiece's; `detokenize` drops the reserved ids 0-3);
- `MarianText`: an imported OPUS-MT `MarianTokenizer` (pieces mapped to ids
  by `vocab.json`, a leading `>>lang<<` code kept whole; `detokenize` drops
  `</s>`, `<unk>` and `<pad>`, turns byte pieces into their bytes and `▁`
  into spaces, and strips the ends);
- `FairseqText`: an imported M2M100 or NLLB-200 run's `FairseqTokenizer`,
  with its language tokens. It runs that tokenizer itself (its
  tensorflow-text ops, on the host): its ids are a vocabulary's, not
  SentencePiece's, and NLLB's SentencePiece model is rebuilt from its
  `tokenizer.json` (`keras_transformer.tokenizers.fairseq`), so a second
  implementation could only drift from it.

`load_text(folder)` reads any of them from a tokenizer folder of a run.

Example:

>>> text = load_text("saved_models/en-de-litert/tokenizers/source")
>>> ids = text.tokenize(["A dog runs."])  # [[...]], lists of ints
>>> text.detokenize(ids)  # [b'A dog runs.']
"""

import json
import pathlib
import re

CONFIG_FILENAME = "tokenizer.json"  # as keras_transformer.tokenizers writes it
NUM_RESERVED_IDS = 4  # this package's pad, unk, START, END
_LANGUAGE_CODE = re.compile(r"(?s)^(>>.*?<<)")  # transformers' rule, as MarianTokenizer's
_MARIAN_SPECIALS = ("</s>", "<unk>", "<pad>")
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_ASCII_SPACE = b" \t\n\r\x0b\x0c"


def load_text(folder):
    """The host tokenizer of the run's tokenizer `folder` (`SentencePieceText`, `MarianText` or `FairseqText`)."""
    folder = pathlib.Path(folder)
    try:
        config = json.loads((folder / CONFIG_FILENAME).read_text(encoding="utf-8"))
        if config.get("format") == "marian":
            vocab = json.loads((folder / config["vocab_file"]).read_text(encoding="utf-8"))
            return MarianText((folder / config["spm_file"]).read_bytes(), vocab)
        if config.get("format") == "fairseq":
            return FairseqText(folder)
        return SentencePieceText((folder / config["model_file"]).read_bytes())
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{folder} is not a tokenizer folder of this package: {error}") from None


class SentencePieceText:
    """This package's `SubwordTokenizer`, in Python SentencePiece.

    Args:
        model_proto: the SentencePiece model (`tokenizer.model`'s bytes).
    """

    keeps_spaces = False  # the translator strips texts first (SentencePiece would anyway)

    def __init__(self, model_proto):
        import sentencepiece as spm

        self.model_proto = bytes(model_proto)
        self._processor = spm.SentencePieceProcessor(model_proto=self.model_proto)
        self.vocab_size = self._processor.vocab_size()
        self.unk_id = self._processor.unk_id()
        self.special_tokens = tuple(self._processor.id_to_piece(i) for i in range(NUM_RESERVED_IDS))
        self.byte_ids = frozenset(i for i in range(self.vocab_size) if self._processor.is_byte(i))
        self.blank_ids = frozenset(i for i in range(self.vocab_size) if self._processor.id_to_piece(i) == "\u2581")

    def pieces(self):
        """The pieces that text is made of (not the control, unknown or byte pieces), in id order."""
        processor = self._processor
        return [
            processor.id_to_piece(i)
            for i in range(self.vocab_size)
            if not (processor.is_control(i) or processor.is_unknown(i) or processor.is_byte(i))
        ]

    def pieces_by_id(self):
        """Every piece by id (a list of str): what banned words are read against."""
        return [self._processor.id_to_piece(i) for i in range(self.vocab_size)]

    def tokenize(self, texts):
        """Lists of ids, one per text (no START or END)."""
        return [list(ids) for ids in self._processor.encode(list(texts))] if texts else []

    def detokenize(self, rows):
        """UTF-8 bytes, one per row of ids; the reserved ids 0-3 are dropped.

        Byte pieces that do not form UTF-8 become U+FFFD (SentencePiece's
        Python decoder gives text), where tensorflow-text keeps the raw bytes.
        """
        rows = [[int(i) for i in row if i >= NUM_RESERVED_IDS] for row in rows]
        return [self._processor.decode(row).encode("utf-8") for row in rows]


class MarianText:
    """An imported OPUS-MT run's `MarianTokenizer`, in Python SentencePiece.

    Args:
        model_proto: the SentencePiece model (`source.spm` or `target.spm`).
        vocab: `{piece: id}`, the checkpoint's `vocab.json`.
    """

    keeps_spaces = False  # the translator strips texts first

    def __init__(self, model_proto, vocab):
        import sentencepiece as spm

        self.model_proto = bytes(model_proto)
        self._processor = spm.SentencePieceProcessor(model_proto=self.model_proto)
        self._vocab = dict(vocab)
        missing = [piece for piece in _MARIAN_SPECIALS if piece not in self._vocab]
        if missing:
            raise ValueError(f"`vocab` must hold the pieces {_MARIAN_SPECIALS}. Missing: {missing}")
        self.vocab_size = max(self._vocab.values()) + 1
        self.unk_id = self._vocab["<unk>"]
        self.special_tokens = _MARIAN_SPECIALS
        # Text never gives a special token: a piece spelling one reads as <unk>, as `PieceTokenizer` reads it.
        self._text_ids = {piece: index for piece, index in self._vocab.items() if piece not in _MARIAN_SPECIALS}
        self.byte_ids = frozenset()
        self.blank_ids = frozenset()
        self._surfaces = [b""] * self.vocab_size
        for piece, index in self._vocab.items():
            if piece not in _MARIAN_SPECIALS:
                byte = _BYTE_PIECE.fullmatch(piece)
                self._surfaces[index] = bytes([int(byte.group(1), 16)]) if byte else piece.encode("utf-8")

    def pieces_by_id(self):
        """Every piece by id (None where the vocabulary has none)."""
        pieces = [None] * self.vocab_size
        for piece, index in self._vocab.items():
            pieces[index] = piece
        return pieces

    def tokenize(self, texts):
        """Lists of Marian ids, one per text, without `</s>`."""
        rows = []
        for text in texts:
            code = _LANGUAGE_CODE.match(text)
            rest = text[code.end() :] if code else text
            pieces = ([code.group(1)] if code else []) + self._processor.encode(rest, out_type=str)
            rows.append([self._text_ids.get(piece, self.unk_id) for piece in pieces])
        return rows

    def detokenize(self, rows):
        """UTF-8 bytes, one per row of ids; `</s>`, `<unk>` and `<pad>` are dropped."""
        out = []
        for row in rows:
            joined = b"".join(self._surfaces[i] for i in row if 0 <= i < self.vocab_size)
            out.append(joined.replace("\u2581".encode("utf-8"), b" ").strip(_ASCII_SPACE))
        return out


class FairseqText:
    """An imported M2M100 or NLLB-200 run's `FairseqTokenizer` on the host, with its languages.

    Unlike the others, it reads a text as it comes: NLLB's tokenizer keeps
    a trailing space as a piece, as transformers' does (`keeps_spaces`;
    the translator strips nothing but blank texts).

    Args:
        folder: the tokenizer folder (`tokenizer.json` of format
            `"fairseq"`, the checkpoint's files in `files/`).

    Attributes:
        languages: `{code: id}` of the language tokens.
        source_lang, target_lang: the tokenizer's default languages, or None.
        source_position: `"first"` (`[src_lang] X </s>`) or `"last"` (`X </s> [src_lang]`).
    """

    keeps_spaces = True

    def __init__(self, folder):
        from keras_transformer.tokenizers.fairseq import FairseqTokenizer

        self._tokenizer = tokenizer = FairseqTokenizer.load(folder)
        self.vocab_size, self.unk_id = tokenizer.vocab_size, tokenizer.unk_id
        self.special_tokens = tokenizer.special_tokens
        self.byte_ids = self.blank_ids = frozenset()
        self.languages = dict(tokenizer.languages)
        self.source_lang, self.target_lang = tokenizer.source_lang, tokenizer.target_lang
        self.source_position = tokenizer.source_position

    def pieces_by_id(self):
        """Every piece by id (a list of str)."""
        import tensorflow as tf

        pieces = self._tokenizer.id_to_piece(tf.range(self.vocab_size)).numpy().tolist()
        return [piece.decode("utf-8") for piece in pieces]

    def tokenize(self, texts):
        """Lists of ids, one per text (no language token, no `</s>`)."""
        import tensorflow as tf

        texts = list(texts)
        return self._tokenizer.tokenize(tf.constant(texts, tf.string, shape=[len(texts)])).to_list() if texts else []

    def detokenize(self, rows):
        """UTF-8 bytes, one per row of ids; the special ids (and NLLB's language tokens) are dropped."""
        import tensorflow as tf

        rows = [[int(i) for i in row] for row in rows]
        if not rows:
            return []
        ids = tf.RaggedTensor.from_row_lengths(tf.constant(sum(rows, []), tf.int32), [len(row) for row in rows])
        return self._tokenizer.detokenize(ids).numpy().tolist()
