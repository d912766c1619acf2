"""Whether tensorflow-text's `FastSentencepieceTokenizer` (its LiteRT kernels) (de)tokenizes exactly as a run does.

A LiteRT export puts a `tokenize` or `detokenize` signature in its `.tflite`
only where the fast tokenizer gives the run's own ids and strings, checked
here on probes made of the vocabulary; elsewhere the host (de)tokenizes with
SentencePiece (`keras_transformer.litert.text`). Each check returns
`(model_proto, None)` when exact, else `(None, reason)`.

Two differences the checks let through, because the translator redoes
those rows with SentencePiece, so that no sentence is (de)tokenized
differently:

- byte-fallback pieces (`byte_fallback=True`, this package's default): the
  converter drops them, so the fast tokenizer gives `<unk>` where
  SentencePiece gives a character's bytes (a tokenized row holding `<unk>`
  is redone), and the fast detokenizer gives nothing for them (an output
  holding a byte id is redone);
- an output that starts with the lone `▁` piece: SentencePiece drops the
  leading `▁` of every piece until some text comes out, the fast
  detokenizer only the first piece's (`detokenized_on_host`).

Example:

>>> proto, reason = in_model_tokenizer("saved_models/tiny/tokenizers/source")
>>> reason is None
True
>>> in_model_detokenizer("saved_models/opus-mt-en-de/tokenizers/target")[1]
'its target tokenizer is an imported Marian one (...)'
"""

import random

from keras_transformer.errors import first_line
from keras_transformer.litert import text as host_text

PROBE_SENTENCES = 2000


def in_model_tokenizer(source_dir):
    """`(source_proto, None)` when the `.tflite` can tokenize the source exactly, else `(None, reason)`.

    Probes: every piece alone, and sentences of random pieces. A model
    with byte-fallback pieces passes where nothing needs them (see above).
    """
    text, fast, reason = _fast(source_dir, "source")
    if reason:
        return None, reason
    import tensorflow as tf

    pieces = text.pieces()
    rng = random.Random(0)
    probes = [piece.replace("\u2581", " ").strip() for piece in pieces] + [
        "".join(rng.choice(pieces) for _ in range(rng.randint(2, 12))).replace("\u2581", " ").strip()
        for _ in range(PROBE_SENTENCES)
    ]
    probes = [p for p in probes if p]
    for probe, fast_ids, ids in zip(probes, fast.tokenize(tf.constant(probes)).to_list(), text.tokenize(probes)):
        if fast_ids != ids and not (text.byte_ids and text.unk_id in fast_ids):
            return None, f"its source tokenizer gives {ids[:8]} for {probe!r} where FastSentencepieceTokenizer " + (
                f"gives {fast_ids[:8]}"
            )
    return text.model_proto, None


def in_model_detokenizer(target_dir):
    """`(target_proto, None)` when the `.tflite` can detokenize the target exactly, else `(None, reason)`.

    Probes: every id alone (the reserved ids and byte pieces left out),
    and rows of random ids, each detokenized alone as the signature does.
    """
    text, fast, reason = _fast(target_dir, "target")
    if reason:
        return None, reason
    import tensorflow as tf

    ids = [i for i in range(host_text.NUM_RESERVED_IDS, text.vocab_size) if i not in text.byte_ids]
    rng = random.Random(1)
    rows = [[i] for i in ids] + [
        [rng.choice(ids) for _ in range(rng.randint(2, 12))] for _ in range(PROBE_SENTENCES) if ids
    ]
    rows = [row for row in rows if not detokenized_on_host(text, row)]
    expected = text.detokenize(rows)
    got = fast.detokenize(tf.ragged.constant(rows, dtype=tf.int32, row_splits_dtype=tf.int32)).numpy().tolist()
    for row, fast_string, string in zip(rows, got, expected):
        if fast_string != string:
            return None, f"its target tokenizer gives {string!r} for {row[:8]} where FastSentencepieceTokenizer " + (
                f"gives {fast_string!r}"
            )
    return text.model_proto, None


def detokenized_on_host(text, row):
    """Whether the translator detokenizes `row` (target ids) with SentencePiece: where the fast one may differ.

    Example:

    >>> blank = min(text.blank_ids)  # the id of the lone `▁` piece
    >>> detokenized_on_host(text, [blank, 57]), detokenized_on_host(text, [57, blank])
    (True, False)
    """
    kept = [i for i in row if i >= host_text.NUM_RESERVED_IDS]
    return bool(text.byte_ids.intersection(kept)) or bool(kept and kept[0] in text.blank_ids)


def _fast(folder, side):
    """`(text, FastSentencepieceTokenizer, None)`, or `(text, None, reason)` where it cannot be exact."""
    import tensorflow_text as tf_text
    from sentencepiece import sentencepiece_model_pb2

    text = host_text.load_text(folder)
    if text.not_in_model:  # its kind's reason (`tokenizers.kinds`)
        return text, None, f"its {side} tokenizer {text.not_in_model}"
    model = sentencepiece_model_pb2.ModelProto.FromString(text.model_proto)
    if model.trainer_spec.model_type != sentencepiece_model_pb2.TrainerSpec.UNIGRAM:
        return (
            text,
            None,
            (
                f"its {side} tokenizer is not a unigram model (BPE): "
                "FastSentencepieceTokenizer does not tokenize it as SentencePiece does"
            ),
        )
    try:
        return text, tf_text.FastSentencepieceTokenizer(text.model_proto), None
    except Exception as error:  # noqa: BLE001
        return text, None, f"its {side} tokenizer does not convert to FastSentencepieceTokenizer: {first_line(error)}"
