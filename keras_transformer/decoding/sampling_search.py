"""Sampling with temperature, top-k and top-p: a token search whose next token is a draw.

Randomness is one uniform number per source and step, drawn up front
(`noise`, `(batch, max_length)`, values in [0, 1)) unless given; the token is
found by inverting the filtered distribution's CDF at it, so the loop itself
is stateless and XLA-friendly, and the same noise gives the same tokens.

Example (the noise picks from the step's distribution over tokens 4, 5 and 6):

>>> def step_fn(tokens, index, state):
...     probs = keras.ops.convert_to_tensor([0.0, 0.0, 0.0, 0.05, 0.5, 0.3, 0.15])
...     return keras.ops.tile(keras.ops.log(probs + 1e-9)[None], (keras.ops.shape(tokens)[0], 1)), state
>>> noise = keras.ops.convert_to_tensor([[0.1], [0.7], [0.99]])
>>> result = SamplingSearch(top_p=0.9).run(step_fn, (), 3, 1, noise)
>>> keras.ops.convert_to_numpy(result.ids[:, 0, 0]).tolist()
[4, 5, 6]

References:
    Holtzman et al., "The Curious Case of Neural Text Degeneration", 2019 (top-p).
"""

import dataclasses

import keras
from keras import ops

from keras_transformer.decoding.greedy_search import TokenSearch, first_max_index
from keras_transformer.decoding.search import NEG_INF


@dataclasses.dataclass(frozen=True)
class SamplingSearch(TokenSearch):
    """Sampling: each token drawn from the step's distribution after `filter_logits`.

    Its input (`run(..., noise)`) is the noise `(batch, max_length)`; without
    it, the noise is drawn from `seed`. The scores are the model's
    log-probabilities of the drawn tokens (before temperature and filters),
    over the length penalty.

    Args:
        temperature: divides the logits; 0 is greedy.
        top_k: keep the k most likely tokens (0 = all).
        top_p: keep the smallest set of tokens with this probability (1 = all).
        seed: an int or a `keras.random.SeedGenerator` for the noise.
        alpha, start_id, end_id, pad_id, normalization, banned_ids,
            force_end, softmax_over: `Search`'s (keyword only).

    The numbers may be Python numbers or scalar tensors (then one compiled
    program serves every value: the `Translator`'s `sample`).
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: object = None

    def initial_rows(self, batch_size, max_length, finished=None, noise=None, prefix=None):
        """`(ids, log_probs, finished, noise)`; the noise drawn from `seed` when None."""
        noise = sampling_noise(batch_size, max_length, self.seed, noise)
        return super().initial_rows(batch_size, max_length, finished, noise, prefix=prefix)

    def choose(self, logits, index, noise):
        """Inverts the filtered CDF at the source's noise for step `index`; the first maximum at temperature 0."""
        temperature = ops.cast(self.temperature, "float32")
        greedy = first_max_index(logits)
        filtered = filter_logits(logits, ops.maximum(temperature, 1e-6), self.top_k, self.top_p)
        cdf = ops.cumsum(ops.softmax(filtered, axis=-1), axis=-1)
        u = ops.take(ops.cast(noise, "float32"), index, axis=1)[:, None] * cdf[:, -1:]
        sampled = ops.sum(ops.cast(cdf <= u, "int32"), axis=-1)
        sampled = ops.minimum(sampled, ops.shape(logits)[-1] - 1)
        return ops.where(temperature > 0, sampled, greedy)


def sampling_noise(batch_size, max_length, seed=None, noise=None):
    """`noise` as float32, or uniform noise `(batch_size, max_length)` drawn from `seed`."""
    if noise is None:
        noise = keras.random.uniform((batch_size, max_length), seed=seed)
    return ops.cast(noise, "float32")


def filter_logits(logits, temperature=1.0, top_k=0, top_p=1.0):
    """Temperature, then top-k and top-p (nucleus) filtering of `(batch, vocab)` logits.

    Filtered-out tokens get `-inf`. `top_k=0` and `top_p=1.0` switch the
    filters off; all three may be Python numbers or scalar tensors. The most
    likely token is always kept. `temperature` must be > 0 here (see
    `SamplingSearch` for 0 = greedy).

    >>> logits = keras.ops.log(keras.ops.convert_to_tensor([[0.5, 0.3, 0.15, 0.05]]))
    >>> keras.ops.convert_to_numpy(keras.ops.isfinite(filter_logits(logits, top_p=0.7))).tolist()
    [[True, True, False, False]]
    """
    logits = ops.cast(logits, "float32") / ops.cast(temperature, "float32")
    static_off = isinstance(top_k, int) and top_k == 0 and isinstance(top_p, (int, float)) and top_p >= 1.0
    if static_off:
        return logits
    vocab = ops.shape(logits)[-1]
    ordered = ops.flip(ops.sort(logits, axis=-1), axis=-1)  # descending
    k = ops.cast(top_k, "int32")
    k = ops.where(k > 0, ops.minimum(k, vocab), vocab)
    probs = ops.softmax(ordered, axis=-1)
    before = ops.cumsum(probs, axis=-1) - probs  # probability mass above each token
    nucleus = ops.sum(ops.cast(before < ops.cast(top_p, "float32"), "int32"), axis=-1)
    keep = ops.maximum(ops.minimum(nucleus, k), 1)  # (batch,)
    threshold = ops.take_along_axis(ordered, (keep - 1)[:, None], axis=-1)
    return ops.where(logits >= threshold, logits, NEG_INF)
