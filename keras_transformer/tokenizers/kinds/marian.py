"""The kind `"marian"`: an imported OPUS-MT model's `MarianTokenizer`, pieces mapped to ids by `vocab.json`.

Its LiteRT form is `MarianText`, on the host only (tensorflow-text's fast
tokenizer gives SentencePiece's ids, not the vocabulary's); its CTranslate2
vocabulary is `vocab.json`'s pieces by id, `</s>` 0, `<unk>` 1, `<pad>` the
last, the decoder's start.
"""

import json
import re

from keras_transformer.tokenizers.kinds.vocabularies import Vocabulary
from keras_transformer.tokenizers.marian import LANGUAGE_CODE, SPECIAL_PIECES, MarianTokenizer
from keras_transformer.tokenizers.pieces import pieces_by_id

FORMAT = MarianTokenizer.FORMAT
load = MarianTokenizer.load
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_ASCII_SPACE = b" \t\n\r\x0b\x0c"


def host_text(directory, config):
    """`MarianText` of the SentencePiece model and vocabulary that `config` names."""
    vocab = json.loads((directory / config["vocab_file"]).read_text(encoding="utf-8"))
    return MarianText((directory / config["spm_file"]).read_bytes(), vocab)


def ctranslate2_vocabulary(directory, config, vocab_size=None):
    """The pieces of the vocabulary file by id; an id without a piece is a `ValueError` naming the file."""
    path = directory / config["vocab_file"]
    pieces = pieces_by_id(json.loads(path.read_text(encoding="utf-8")))
    if None in pieces:
        raise ValueError(f"{path} leaves ids without a piece")
    return Vocabulary(pieces)


class MarianText:
    """An imported OPUS-MT run's `MarianTokenizer` in plain Python SentencePiece: the LiteRT host's tokenizer.

    `tokenize` keeps a leading `>>lang<<` code whole; `detokenize` drops
    `</s>`, `<unk>` and `<pad>`, turns byte pieces into their bytes and `▁`
    into spaces, and strips the ends.

    Args:
        model_proto: the SentencePiece model (`source.spm` or `target.spm`).
        vocab: `{piece: id}`, the checkpoint's `vocab.json`.
    """

    keeps_spaces = False  # the translator strips texts first
    not_in_model = (
        "is an imported Marian one (SentencePiece pieces mapped to ids by vocab.json, >>lang<< codes kept whole), "
        "which FastSentencepieceTokenizer cannot reproduce"
    )

    def __init__(self, model_proto, vocab):
        import sentencepiece as spm

        self.model_proto = bytes(model_proto)
        self._processor = spm.SentencePieceProcessor(model_proto=self.model_proto)
        self._vocab = dict(vocab)
        missing = [piece for piece in SPECIAL_PIECES if piece not in self._vocab]
        if missing:
            raise ValueError(f"`vocab` must hold the pieces {SPECIAL_PIECES}. Missing: {missing}")
        self.vocab_size = max(self._vocab.values()) + 1
        self.unk_id = self._vocab["<unk>"]
        self.special_tokens = SPECIAL_PIECES
        # Text never gives a special token: a piece spelling one reads as <unk>, as `PieceTokenizer` reads it.
        self._text_ids = {piece: index for piece, index in self._vocab.items() if piece not in SPECIAL_PIECES}
        self._language_code = re.compile(LANGUAGE_CODE)
        self.byte_ids = frozenset()
        self.blank_ids = frozenset()
        self._surfaces = [b""] * self.vocab_size
        for piece, index in self._vocab.items():
            if piece not in SPECIAL_PIECES:
                byte = _BYTE_PIECE.fullmatch(piece)
                self._surfaces[index] = bytes([int(byte.group(1), 16)]) if byte else piece.encode("utf-8")

    def pieces_by_id(self):
        """Every piece by id (None where the vocabulary has none)."""
        return pieces_by_id(self._vocab)

    def tokenize(self, texts):
        """Lists of Marian ids, one per text, without `</s>`."""
        rows = []
        for text in texts:
            code = self._language_code.match(text)
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
