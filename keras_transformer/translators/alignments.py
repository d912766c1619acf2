"""Word alignments from cross-attention: for each output word, the source word it attends to most.

`translator.align(sources, outputs)` runs the model teacher-forced on each
pair (the source, then START and the output), takes one decoder layer's
cross-attention weights averaged over its heads (`cross_attention`), and
reads them word by word (`word_alignment`): words are whitespace-separated,
each tokenized on its own (SentencePiece splits at spaces anyway, so these
are the sentence's pieces), and a word's attention is that of its pieces,
summed over a source word's pieces and averaged over an output word's. The
attention that produces a piece is the decoder's at the position before it
(the one whose input is the previous token), as Marian's and fairseq's
guided alignments read it.

The result is Moses-style pairs, `i-j` for source word `i` and output word
`j`, both 0-based, as fast_align and Moses write them: one pair per output
word, in output order (`format_pairs`). An empty output has none; so has an
output whose source has no word (nothing to point at).

Example:

>>> import numpy as np
>>> attention = np.array([[0.1, 0.8, 0.1], [0.7, 0.2, 0.1], [0.2, 0.3, 0.5]])  # (output pieces, source pieces)
>>> word_alignment(attention, source_words=[0, 1, 1], target_words=[0, 0, 1])
[(1, 0), (1, 1)]
>>> format_pairs([(1, 0), (1, 1)])
'1-0 1-1'
"""

import numpy as np
from keras import ops


def check_layer(layer, num_layers):
    """The decoder layer to read, as an index in [0, num_layers): `layer` (negative from the end), or the default.

    The default is the second-to-last layer (the last of a one-layer
    model): the cross-attention of upper-middle layers aligns best (Garg et
    al., 2019, "Jointly Learning to Align and Translate with Transformer
    Models"). Anything else is a one-line `ValueError`.
    """
    if layer is None:
        return max(num_layers - 2, 0)
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not -num_layers <= layer < num_layers:
        raise ValueError(
            f"`layer` must be a decoder layer of this model: an int in [{-num_layers}, {num_layers - 1}]. "
            f"Received: layer={layer!r}"
        )
    return int(layer) % num_layers


def word_pieces(tokenize, text):
    """`(ids, word of each id)` of `text`, its whitespace-separated words tokenized one by one."""
    words = text.split()
    rows = tokenize(words) if words else []
    ids = [int(i) for row in rows for i in row]
    return ids, [w for w, row in enumerate(rows) for _ in row]


def cross_attention(models, source_ids, decoder_inputs, layer):
    """Layer `layer`'s cross-attention `(batch, target_len, source_len)`, the mean over heads (and members).

    `models` are `TransformerModel`s (an ensemble's members, or one);
    `source_ids` and `decoder_inputs` are int `(batch, length)`, padded
    with the model's own padding ids.
    """
    total = 0.0
    for model in models:
        memory = model.encode(source_ids)
        mask = model.source_padding_mask(source_ids)
        _, _, cross = model.decode(decoder_inputs, memory, mask, return_attention_scores=True)
        total = total + ops.convert_to_numpy(ops.mean(ops.cast(cross[layer], "float32"), axis=1))
    return total / len(models)


def word_alignment(attention, source_words, target_words):
    """`[(i, j)]`: for each output word `j`, the source word `i` it attends to most.

    `attention` `(output pieces, source pieces)` is the weight each output
    piece gives each source piece (as produced; columns past the source
    words, END or a language token, are left out); `source_words` and
    `target_words` name the word of each piece. Ties go to the first word.
    """
    n_source, n_target = max(source_words, default=-1) + 1, max(target_words, default=-1) + 1
    if not n_source or not n_target:
        return []
    attention = np.asarray(attention, np.float64)[: len(target_words), : len(source_words)]
    by_source = np.zeros((attention.shape[0], n_source))
    np.add.at(by_source.T, np.asarray(source_words), attention.T)  # summed over each source word's pieces
    by_words = np.zeros((n_target, n_source))
    np.add.at(by_words, np.asarray(target_words), by_source)
    counts = np.bincount(target_words, minlength=n_target)[:, None]
    return [(int(i), j) for j, i in enumerate(np.argmax(by_words / counts, axis=1))]


def format_pairs(pairs):
    """Moses-style `"i-j i-j ..."` of `pairs`."""
    return " ".join(f"{i}-{j}" for i, j in pairs)
