"""Running a model for its attention weights: every layer's maps, or one sentence's.

`attention_weights(model, source_ids, target_ids)` runs a `build_transformer`
model through `TransformerModel.encode` and `decode` with
`return_attention_scores=True` and returns every layer's maps as NumPy
arrays; `sentence_attention` tokenizes and translates one sentence first and
adds its tokens. `plotting.plot_attention_heads` draws the result.

Example:

>>> from keras_transformer import attention_maps, plotting
>>> result = attention_maps.sentence_attention(model, tokenizer, "A man is riding a bike.")
>>> fig = plotting.plot_attention_heads(result["weights"]["decoder_cross"][-1][0],
...                                     result["output_tokens"], result["source_tokens"])
"""

import numpy as np
from keras import ops

from keras_transformer.models import as_transformer

__all__ = ["attention_weights", "sentence_attention"]


def attention_weights(model, source_ids, target_ids, training=False):
    """Every attention map of a `build_transformer` model on a batch of ids.

    Args:
        model: a model from `build_transformer` (or loaded from `model.keras`).
        source_ids: int ids `(batch, source_len)`, 0 = padding.
        target_ids: decoder inputs `(batch, target_len)`: START first, 0 = padding.
        training: passed to every layer (dropout).

    Returns:
        A dict of lists of NumPy arrays, one per layer:
        `"encoder"`: `(batch, heads, source_len, source_len)`,
        `"decoder_self"`: `(batch, heads, target_len, target_len)`,
        `"decoder_cross"`: `(batch, heads, target_len, source_len)`.

    Raises:
        ValueError: for a model that `build_transformer` did not build, or
            ids that are not `(batch, length)`.

    Example:

    >>> weights = attention_weights(model, [[5, 6, 7, 0]], [[2, 11, 12]])
    >>> weights["decoder_cross"][-1].shape  # (batch, heads, target_len, source_len)
    (1, 4, 3, 4)
    """
    model = as_transformer(model)
    source_ids = ops.cast(ops.convert_to_tensor(source_ids), "int32")
    target_ids = ops.cast(ops.convert_to_tensor(target_ids), "int32")
    if len(source_ids.shape) != 2 or len(target_ids.shape) != 2:
        raise ValueError(
            "`source_ids` and `target_ids` must be (batch, length). Received: "
            f"{tuple(source_ids.shape)} and {tuple(target_ids.shape)}"
        )
    memory, encoder_scores = model.encode(source_ids, training, return_attention_scores=True)
    _, self_scores, cross_scores = model.decode(
        target_ids, memory, model.source_padding_mask(source_ids), training, return_attention_scores=True
    )
    return {
        "encoder": [_to_numpy(scores) for scores in encoder_scores],
        "decoder_self": [_to_numpy(scores) for scores in self_scores],
        "decoder_cross": [_to_numpy(scores) for scores in cross_scores],
    }


def sentence_attention(
    model, source_tokenizer, sentence, target_tokenizer=None, target=None, max_length=None, add_source_end=False
):
    """Attention maps of one sentence, with its tokens, ready for `plot_attention_heads`.

    Tokenizes `sentence`, lets the model translate it greedily (or, with
    `target`, uses that target under teacher forcing) and runs
    `attention_weights` on the pair.

    Args:
        model: a model from `build_transformer`.
        source_tokenizer: a `SubwordTokenizer` (anything with `tokenize` and `id_to_piece`).
        sentence: the source sentence (a Python string).
        target_tokenizer: the target side's tokenizer; defaults to `source_tokenizer`.
        target: an optional target sentence to attend with instead of the model's output.
        max_length: tokens to generate at most (greedy decoding).
        add_source_end: append END to the source, as the training data did.

    Returns:
        A dict: `source_tokens` (keys of the cross-attention), `input_tokens`
        (the decoder inputs, START first), `output_tokens` (what each decoder
        step predicts, END last), `source_ids`, `target_ids` (1-D int arrays)
        and `weights` (`attention_weights`' dict, batch of one).

    Example:

    >>> result = sentence_attention(model, tokenizer, "A man is riding a bike.")
    >>> plot_attention_heads(result["weights"]["decoder_cross"][-1][0],
    ...                      result["output_tokens"], result["source_tokens"])
    """
    import tensorflow as tf

    config = as_transformer(model).config  # the model's own ids (an import's differ from this package's)
    target_tokenizer = source_tokenizer if target_tokenizer is None else target_tokenizer
    source = source_tokenizer.tokenize(tf.constant([sentence]))[0].numpy().astype("int32")
    if add_source_end:
        source = np.append(source, getattr(source_tokenizer, "end_id", config.end_id)).astype("int32")
    if source.size == 0:
        raise ValueError(f"`sentence` has no tokens. Received: sentence={sentence!r}")
    if target is not None:
        output = target_tokenizer.tokenize(tf.constant([target]))[0].numpy().astype("int32")
        output = np.append(output, config.end_id)
    else:
        from keras_transformer.decoding import decode, resolve_max_length, search_for

        max_length = resolve_max_length(model, max_length)
        greedy = search_for(1, **config.special_ids())
        output = _to_numpy(decode(model, source[None], greedy, max_length=max_length).best().ids)[0]
        ends = np.flatnonzero(output == config.end_id)
        output = output[: ends[0] + 1] if ends.size else output[output != config.target_pad]
    decoder_inputs = np.concatenate([[config.start_id], output[:-1]]).astype("int32")
    return {
        "source_tokens": _pieces(source_tokenizer, source),
        "input_tokens": _pieces(target_tokenizer, decoder_inputs),
        "output_tokens": _pieces(target_tokenizer, output),
        "source_ids": source,
        "target_ids": decoder_inputs,
        "weights": attention_weights(model, source[None], decoder_inputs[None]),
    }


def _pieces(tokenizer, ids):
    import tensorflow as tf

    names = _to_numpy(tokenizer.id_to_piece(tf.constant(ids, tf.int32)))
    return [name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name) for name in names]


def _to_numpy(x):
    return np.asarray(ops.convert_to_numpy(x))
