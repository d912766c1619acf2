"""A translation's text as it is decoded: ids in, pieces of text cut at word boundaries out.

A decoder produces subword ids (SentencePiece pieces: `▁Hund`, `▁lä`,
`uft`, `.`), and the text of a word is not known until its last piece is:
`▁lä` may become "läuft" or "lächelt". `WordCutter` takes the ids one at a
time and gives a `Piece` of text only when a word is complete, that is when
the next id begins a new word (its piece starts with `▁`, or GPT-2's `Ġ`)
or when the output ends: nothing it gives can be changed by a later id. Its
text is the tokenizer's own detokenization of the ids so far, so the pieces
joined are the translation's text, which `finish` is given (the
non-streamed decode's) and completes.

Each `Piece` carries the ids it covers; the last one, from `finish`, its
`finish_reason`: `"end"` (the output ended with END), `"length"` (cut off
at the maximum output length) or `"cancelled"`.

Example (a tokenizer whose pieces are the words' letters, `▁` before each word):

>>> pieces = ["<pad>", "</s>", "▁Ein", "▁Hu", "nd", "."]
>>> detokenize = lambda ids: "".join(pieces[i] for i in ids if i > 1).replace("▁", " ").strip()
>>> cutter = WordCutter(detokenize, word_starts(pieces))
>>> [cutter.add(i) for i in (2, 3, 4, 5)]
[None, Piece(text='Ein', ids=(2,), finish_reason=None), None, None]
>>> cutter.finish("Ein Hund.", "end")
Piece(text=' Hund.', ids=(3, 4, 5), finish_reason='end')
"""

from typing import NamedTuple

import numpy as np

FINISH_REASONS = ("end", "length", "cancelled")
WORD_MARKS = ("\u2581", "\u0120")  # SentencePiece's `▁`, byte-level BPE's `Ġ`: a piece that begins a word


class Piece(NamedTuple):
    """Text decoded, the ids it covers, and on the last piece of an output why it ended (`FINISH_REASONS`)."""

    text: str
    ids: tuple
    finish_reason: str = None


def word_starts(pieces):
    """Boolean `(vocab,)`: True for each piece (a str, by id) that begins a word."""
    return np.array([str(piece).startswith(WORD_MARKS) for piece in pieces], bool)


class WordCutter:
    """Ids, one at a time, to `Piece`s of text cut where a word ends (see the module docstring).

    Args:
        detokenize: `detokenize(ids) -> str`, the text of a list of ids.
        starts_word: boolean `(vocab,)`, `word_starts` of the vocabulary.
    """

    def __init__(self, detokenize, starts_word):
        self.detokenize, self.starts_word = detokenize, starts_word
        self.ids, self.given, self.text = [], 0, ""  # every id so far; how many are given out, as `text`

    def add(self, token_id):
        """The `Piece` that `token_id` completes (the words before it), or None."""
        token_id = int(token_id)
        begins = 0 <= token_id < len(self.starts_word) and self.starts_word[token_id]
        self.ids.append(token_id)
        if not begins or len(self.ids) - 1 == self.given:
            return None
        text = self.detokenize(self.ids[:-1])
        if not text.startswith(self.text) or len(text) == len(self.text):
            return None  # nothing new, or a text a later id may still change: kept for `finish`
        return self._give(text, len(self.ids) - 1)

    def finish(self, text, finish_reason):
        """The last `Piece`: the rest of `text` (the whole output's), every id not given out yet."""
        rest = text[len(self.text) :] if text.startswith(self.text) else text
        piece = Piece(rest, tuple(self.ids[self.given :]), finish_reason)
        self.text, self.given = text, len(self.ids)
        return piece

    def _give(self, text, upto):
        piece = Piece(text[len(self.text) :], tuple(self.ids[self.given : upto]))
        self.text, self.given = text, upto
        return piece


def stepped_pieces(steps, cutter, end_id, final_text, cancel=None):
    """The `Piece`s of a stepped decode of one row: one as each word completes, then the last.

    Args:
        steps: a `decoding.SteppedSearch` run: the ids `(1,)` chosen at each
            step, then its `result` (a `SearchResult`).
        cutter: a `WordCutter` of the decode's target vocabulary.
        end_id: the END id, which ends the output and has no text.
        final_text: `final_text(result) -> str`, the whole output's text,
            which the last piece completes.
        cancel: None, or what has `is_set()`, read before each step: once
            set, the last piece has what is pending and the reason
            `"cancelled"`.

    Example (the module's tokenizer; a decode that chose `▁Ein ▁Hu nd </s>`):

    >>> from types import SimpleNamespace
    >>> class Run(list):  # what `SteppedSearch.run` gives: each step's ids, then `result`
    ...     result = SimpleNamespace(finished=np.array([[True]]))
    >>> pieces = ["<pad>", "</s>", "▁Ein", "▁Hu", "nd", "."]
    >>> detokenize = lambda ids: "".join(pieces[i] for i in ids if i > 1).replace("▁", " ").strip()
    >>> cutter = WordCutter(detokenize, word_starts(pieces))
    >>> [piece.text for piece in stepped_pieces(Run([[2], [3], [4], [1]]), cutter, 1, lambda r: "Ein Hund")]
    ['Ein', ' Hund']
    """
    for chosen in steps:
        if cancel is not None and cancel.is_set():
            yield cutter.finish(cutter.text, "cancelled")
            return
        if int(chosen[0]) == end_id:  # the last step (`finish` gives what is left)
            continue
        piece = cutter.add(chosen[0])
        if piece is not None:
            yield piece
    result = steps.result
    finished = bool(np.asarray(result.finished)[0, 0])
    yield cutter.finish(final_text(result), "end" if finished else "length")
