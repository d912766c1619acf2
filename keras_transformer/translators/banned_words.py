"""Banned words: the ids of a word's pieces, which no search may produce (`banned=` on every translator).

A banned word is a whitespace-separated word of the target language. Its
ids are those of the pieces the target tokenizer cuts it into at the start
of a word (`▁Hund`, or `▁Kat` and `ze`), and of its first piece without
the word-boundary marker `▁` where the vocabulary has that piece (`Hund`,
`Kat`: the word inside or after another), so that the word cannot be
produced in either place. The ids themselves are banned, as CTranslate2's
`suppress_sequences` of one token and transformers' `bad_words_ids` of one
token ban them: a piece of a banned word is banned inside other words too
(banning "Katze" also bans the `ze` of "Matratze"). The special ids (END,
START, PAD, `<unk>`) and a piece that is the marker alone are never banned
this way; a word left with no id to ban is a one-line `ValueError`.

Example:

>>> pieces = ["<pad>", "<unk>", "<s>", "</s>", "▁Hund", "Hund", "▁Kat", "ze", "▁", "x"]
>>> tokenize = {"Hund": [4], "Katze": [6, 7], "x": [8, 9]}.__getitem__
>>> banned_ids(("Hund", "Katze"), lambda words: [tokenize(w) for w in words], pieces, specials=(0, 1, 2, 3))
(4, 5, 6, 7)
>>> banned_ids(("x",), lambda words: [tokenize(w) for w in words], pieces, specials=(0, 1, 2, 3))
(9,)
"""

MARKER = "\u2581"  # SentencePiece's word boundary


def check_words(banned):
    """`banned` (None, or a list of str) as a tuple of words (each entry split at whitespace); one-line errors."""
    if banned is None:
        return ()
    if isinstance(banned, str) or not isinstance(banned, (list, tuple)):
        raise ValueError(f"`banned` must be a list of words (str). Received: banned={banned!r}")
    words = []
    for i, entry in enumerate(banned):
        if not isinstance(entry, str) or not entry.strip() or "\x00" in entry:
            raise ValueError(f"`banned[{i}]` must be a word: a non-blank str without NUL. Received: {entry!r}")
        words += entry.split()
    return tuple(dict.fromkeys(words))


def banned_ids(words, tokenize, pieces, specials=()):
    """The sorted ids that ban `words` (see the module docstring).

    Args:
        words: checked words (`check_words`).
        tokenize: `tokenize(list of str) -> list of id lists`, the target
            tokenizer's pieces of each word (no START or END).
        pieces: the target vocabulary's pieces by id (None for an id
            without one).
        specials: ids never banned here (END, START, PAD, `<unk>`).
    """
    if not words:
        return ()
    index = {piece: i for i, piece in enumerate(pieces) if piece}
    specials = {int(i) for i in specials}
    found = set()
    for word, ids in zip(words, tokenize(list(words))):
        ids = [int(i) for i in ids if int(i) not in specials]
        kept = {i for i in ids if 0 <= i < len(pieces) and pieces[i] != MARKER}
        first = pieces[ids[0]] if ids and 0 <= ids[0] < len(pieces) and pieces[ids[0]] else ""
        bare = index.get(first[len(MARKER) :]) if first.startswith(MARKER) else None
        kept |= {bare} - {None} - specials
        if not kept:
            raise ValueError(f"`banned` word {word!r} has no piece this model could produce: nothing to ban")
        found |= kept
    return tuple(sorted(found))
