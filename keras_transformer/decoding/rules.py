"""The decoding rules every engine follows, written once: the length penalty, the ids never generated, the forced END,
the forced beginning of an output, the stopping rule.

The XLA searches (`Search`, `BeamSearch`), the LiteRT export's host search
(`keras_transformer.litert.search`) and the CTranslate2 engine's option
mapping (`keras_transformer.engines.ctranslate2.translator`) all read these
functions, so a rule changed here changes every engine. The array functions
take `xp`, the array library they compute with: `keras.ops` inside the
compiled searches, NumPy (the default) on the host; each is written with
what both have.

Example:

>>> float(length_penalty(5.0, alpha=1.0))  # GNMT's ((5 + 5) / 6) ** 1
1.6666666666666667
>>> float(length_penalty(5.0, alpha=1.0, normalization="length"))  # transformers': 5 ** 1
5.0
>>> never_generated(start_id=2, end_id=3, pad_id=0)  # this package's runs: START and PAD
(0, 2)
>>> never_generated(start_id=58100, end_id=0, pad_id=58100, banned_ids=(58100,), softmax_over="vocabulary")
(58100,)
>>> forced_rows([[7, 8], []], language=[4, 5])  # NLLB: the target language's token, then the prefix's pieces
[[4, 7, 8], [5]]
"""

import functools

import numpy as np

from keras_transformer.config import (  # noqa: F401  (the choices)
    CUT_OFF_RULES,
    NORMALIZATIONS,
    SOFTMAX_OVER,
    STOPPING_RULES,
)

NEG_INF = float("-inf")


def length_penalty(length, alpha, normalization="gnmt", xp=np):
    """What a hypothesis's log-probability is divided by: `length` counts its tokens, END included (a float).

    `"gnmt"`: `((5 + length) / 6) ** alpha` (Wu et al., 2016; this
    package's runs). `"length"`: `length ** alpha`, at least 1 (transformers'
    `length_penalty`; imported checkpoints).
    """
    if normalization == "length":
        return xp.power(xp.maximum(length, 1.0), alpha)
    return xp.power((5.0 + length) / 6.0, alpha)


def normalise(log_probs, length, alpha, normalization="gnmt", xp=np):
    """A hypothesis's score: `log_probs / length_penalty(length, ...)`, what beam search ranks by."""
    return log_probs / length_penalty(length, alpha, normalization, xp)


def never_generated(start_id, end_id, pad_id, banned_ids=(), softmax_over="allowed"):
    """The ids no search ever produces, sorted: the `banned_ids`, START, and PAD where the softmax is taken
    over the tokens that may be generated (`softmax_over="allowed"`, this package's runs); never END.

    With `softmax_over="vocabulary"` (transformers' order, imported
    checkpoints) PAD is banned only where the checkpoint's `bad_words_ids`
    say so, as `generate` does.
    """
    ids = {*banned_ids, start_id} | ({pad_id} if softmax_over == "allowed" else set())
    return tuple(sorted(int(i) for i in ids - {end_id}))


def banned_mask(vocab_size, ids, xp=np):
    """Boolean `(vocab_size,)`: True at each of `ids` (all False for none)."""
    vocab = xp.arange(vocab_size)
    return functools.reduce(xp.logical_or, [xp.equal(vocab, i) for i in ids], xp.equal(vocab, -1))


def ids_mask(vocab_size, ids, xp=np):
    """Boolean `(vocab_size,)`: True at each id of the 1-D array `ids` (a call's banned words; none: all False).

    Unlike `banned_mask`, `ids` may be a tensor of any length, known only
    when the search runs (a SavedModel's input).
    """
    return xp.any(xp.equal(xp.arange(vocab_size)[:, None], xp.reshape(ids, (1, -1))), axis=1)


def ban(scores, mask, xp=np):
    """`scores` `(..., vocab)` with -inf where `mask` `(vocab,)` is True: those ids are never produced."""
    return xp.where(mask, NEG_INF, scores)


def is_forced_step(index, max_length):
    """Whether step `index` is the last of `max_length`, where `force_end` leaves END the only token."""
    return index == max_length - 1


def forced_end_scores(vocab_size, end_id, xp=np):
    """A step's scores when END is forced: 0 (log-probability 1) at END, -inf elsewhere, so it adds nothing."""
    return xp.where(xp.equal(xp.arange(vocab_size), end_id), 0.0, NEG_INF)


def forced_rows(pieces, language=None, concat=None):
    """The rows an output begins with: its target language's token, then `pieces` (a row of them per output).

    `language` holds one token per row where the model begins each output
    with its target language's (M2M100, NLLB, mBART: transformers'
    `forced_bos_token_id`; `controls.Languages.forced_first`), None where it
    forces none (a model of one language pair; MADLAD, whose source holds
    it). `pieces` are a target prefix's (the forced beginning of a search)
    or a whole target's (the row a score reads). Rows are Python lists (the
    CTranslate2 engine's pieces, the LiteRT host's ids) unless `concat` is
    given: the array library's concatenation (`tf.concat`) joining a
    `(batch, 1)` `language` and ragged `pieces` on axis 1 (the XLA graph).
    Every engine builds its forced rows here.
    """
    if language is None:
        return pieces
    if concat is not None:
        return concat([language, pieces], axis=1)
    return [[token, *row] for token, row in zip(language, pieces)]


def forced_token_scores(scores, tokens, xp=np):
    """`scores` `(rows, vocab)` where a row's forced token (`tokens` `(rows,)`, -1 where free) is the only one.

    A forced row scores 0 (log-probability 1) at its token and -inf
    elsewhere, so that a forced beginning adds nothing to the score, as
    transformers' forced BOS; a free row keeps its scores. (NumPy gives
    float64 here: a float32 caller casts back, which changes no value.)
    """
    vocab = xp.arange(xp.shape(scores)[-1])
    only = xp.where(xp.equal(vocab[None], tokens[:, None]), 0.0, NEG_INF)
    return xp.where(xp.greater_equal(tokens, 0)[:, None], only, scores)


def stops(stopping, best_live_log_probs, worst_ended_scores, penalty, xp=np):
    """Boolean per source: whether beam search is done with it after this step.

    `worst_ended_scores` is the score of its `beam_size`-th best ended
    hypothesis (-inf while fewer have ended); `best_live_log_probs` the
    log-probability of its best live beam, whose length gives `penalty`.
    `"beams_ended"`: once `beam_size` hypotheses ended (fairseq's rule,
    transformers' `early_stopping=True`). `"cannot_improve"`: besides, the
    best live beam scored at its current length does not beat the worst of
    them (transformers' `early_stopping=False`).
    """
    full = worst_ended_scores > NEG_INF
    if stopping == "beams_ended":
        return full
    return xp.logical_and(full, best_live_log_probs / penalty <= worst_ended_scores)


def final_pick(cut_off, ended_scores, live_scores, xp=np):
    """Where beam search's final `k` hypotheses come from: indices `(batch, k)` into `[ended, live]`, best first.

    `ended_scores` `(batch, k)` are the ended hypotheses' scores (-inf for
    an empty place), `live_scores` `(batch, k)` the live beams' at the
    length limit (-inf for a source that is done). `"after_ended"`: the live
    beams fill the places no ended hypothesis holds, after them (fairseq's).
    `"by_score"`: they rank among the ended ones by score (transformers',
    where the beams cut off join the ended ones; there, only those among
    the last step's `k` best candidates, here every live beam).
    """
    k = ended_scores.shape[1]
    if cut_off == "by_score":
        both = xp.concatenate([ended_scores, live_scores], axis=1)
        return xp.argsort(-both, axis=1)[:, :k]
    num_finished = xp.sum(xp.where(ended_scores > NEG_INF, 1, 0), axis=1, keepdims=True)
    place = xp.arange(k)[None]
    return xp.where(place < num_finished, place, k + place - num_finished)
