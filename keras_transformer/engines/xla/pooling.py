"""Sentence embeddings from token states: sentence-transformers' pooling modes, in NumPy.

`pool(states, lengths, modes)` turns each text's hidden states (its first
`lengths[i]` rows real, the rest padding) into one vector per mode,
concatenated in the order given, as sentence-transformers' `Pooling` module
computes them for right-padded batches:

- `"mean"`: the mean of the real tokens' states (`[CLS]` and `[SEP]` included);
- `"cls"`: the first token's state;
- `"max"`: the maximum over the real tokens, feature by feature;
- `"mean_sqrt_len_tokens"`: their sum over the square root of their count;
- `"weightedmean"`: their mean weighted 1, 2, ... by position;
- `"lasttoken"`: the last real token's state.

`normalize` then scales each embedding to unit length (its `Normalize`
module: divided by max(norm, 1e-12)).

Example:

>>> states = np.array([[[1.0, 2.0], [3.0, 0.0], [9.0, 9.0]]], np.float32)  # one text, 2 real tokens
>>> pool(states, [2], ["mean", "max"]).tolist()
[[2.0, 1.0, 3.0, 2.0]]
>>> [round(x, 4) for x in pool(states, [2], ["cls"], normalize=True)[0].tolist()]
[0.4472, 0.8944]
"""

import numpy as np

MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")


def pool(states, lengths, modes, normalize=False):
    """`(texts, len(modes) * width)` float32 embeddings of `states` `(texts, length, width)` (see the module)."""
    states = np.asarray(states, np.float32)
    lengths = np.asarray(lengths, np.int64)
    real = (np.arange(states.shape[1])[None, :] < lengths[:, None])[..., None]  # (texts, length, 1)
    count = np.maximum(lengths, 1).astype(np.float32)[:, None]
    vectors = []
    for mode in modes:
        if mode == "cls":
            vectors.append(states[:, 0])
        elif mode == "max":
            vectors.append(np.where(real, states, -np.inf).max(axis=1))
        elif mode in ("mean", "mean_sqrt_len_tokens"):
            total = np.where(real, states, 0.0).sum(axis=1)
            vectors.append(total / (count if mode == "mean" else np.sqrt(count)))
        elif mode == "weightedmean":
            weights = np.where(real, np.arange(1, states.shape[1] + 1, dtype=np.float32)[None, :, None], 0.0)
            vectors.append((states * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9))
        elif mode == "lasttoken":
            vectors.append(states[np.arange(len(states)), np.maximum(lengths - 1, 0)])
        else:
            raise ValueError(f"pooling mode {mode!r} is not one of {MODES}")
    embeddings = np.concatenate(vectors, axis=-1).astype(np.float32)
    if normalize:
        norms = np.linalg.norm(embeddings, axis=-1, keepdims=True)
        embeddings = embeddings / np.maximum(norms, 1e-12)
    return embeddings
