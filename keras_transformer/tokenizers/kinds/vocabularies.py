"""A tokenizer's CTranslate2 vocabulary: one piece per id, named as CTranslate2 names them.

CTranslate2 maps pieces to ids by position in its vocabulary files, so a
converted model needs a piece for every row of its embedding, each piece
once. A kind module gives its `Vocabulary` (`ctranslate2_vocabulary`);
`with_placeholders` completes a checkpoint's vocabulary up to the model's
rows.

Example:

>>> with_placeholders({"<s>": 0, "</s>": 2}, 4)
['<s>', '<unused1>', '</s>', '<unused3>']
"""

from typing import NamedTuple

from keras_transformer.tokenizers.pieces import pieces_by_id


class Vocabulary(NamedTuple):
    """A tokenizer's pieces for CTranslate2.

    Attributes:
        pieces: one piece per id, in id order.
        source_language: where a source's language token goes, `"first"`
            or `"last"`; None for a tokenizer without languages.
        both_sides: whether this one tokenizer is the source's and the
            target's (a checkpoint of one vocabulary, with its languages).
    """

    pieces: list
    source_language: str = None
    both_sides: bool = False


def with_placeholders(vocab, vocab_size=None):
    """The pieces of `vocab` (`{piece: id}`) by id, an id no piece has (up to `vocab_size`) named `<unusedN>`.

    A checkpoint's embedding may have more rows than its tokenizer has ids;
    CTranslate2 names every row, and the model never generates these.
    """
    pieces = pieces_by_id(vocab)
    pieces += [None] * max(0, (vocab_size or 0) - len(pieces))
    taken = set(pieces)
    return [piece if piece is not None else _placeholder(index, taken) for index, piece in enumerate(pieces)]


def one_for_both_sides(tokenizer, vocab_size=None):
    """The `Vocabulary` of a tokenizer that is both sides' (M2M100, NLLB, mBART-50, T5, MADLAD).

    Its language tokens (`__de__`, `deu_Latn`, `<2de>`) are pieces like the
    others; a source's language token goes where the tokenizer says
    (`source_position`, else first), and nowhere for a tokenizer of one
    language pair.
    """
    position = getattr(tokenizer, "source_position", "first") if tokenizer.languages else None
    return Vocabulary(with_placeholders(tokenizer.vocab, vocab_size), position, both_sides=True)


def _placeholder(index, taken):
    piece = f"<unused{index}>"
    while piece in taken:
        piece = f"<{piece}>"
    taken.add(piece)
    return piece
