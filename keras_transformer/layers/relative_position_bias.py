"""T5's relative position bias: a learned scalar per head and per bucket of key-query distances."""

import math

import keras
from keras import ops

from keras_transformer.kinds import check_positive_int


def relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """The bucket of each `key position - query position`, as T5 numbers them.

    Half the buckets (of each direction, when `bidirectional`) hold one
    distance each, 0, 1, 2, ...; the other half cover the distances up to
    `max_distance` in logarithmically wider steps, and every distance beyond
    it falls in the last bucket. A causal decoder (`bidirectional=False`)
    sees no key after its query: those distances share bucket 0 with the
    query itself. The logarithm is taken in float32, as transformers and
    Mesh TensorFlow take it, so that a distance on a bucket's edge falls on
    the same side.

    Args:
        relative_position: integer tensor, `key position - query position`.
        bidirectional: keys on both sides (the encoder) or only before (the decoder).
        num_buckets: buckets in all (T5: 32).
        max_distance: the distance from which every key shares one bucket (T5: 128).

    Returns:
        An int32 tensor of `relative_position`'s shape, in `[0, num_buckets)`.

    Example:

    >>> distances = ops.convert_to_tensor([-200, -20, -1, 0, 1, 20, 200])
    >>> ops.convert_to_numpy(relative_position_bucket(distances)).tolist()
    [15, 10, 1, 0, 17, 26, 31]
    >>> ops.convert_to_numpy(relative_position_bucket(distances, bidirectional=False)).tolist()
    [31, 17, 1, 0, 0, 0, 0]
    """
    relative_position = ops.cast(relative_position, "int32")
    buckets = ops.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets = ops.where(ops.greater(relative_position, 0), num_buckets, 0)
        distance = ops.abs(relative_position)
    else:
        distance = -ops.minimum(relative_position, 0)
    max_exact = num_buckets // 2
    is_small = ops.less(distance, max_exact)
    # In float32, as T5's; the small distances take `max(distance, 1)`, so that no log(0) is taken.
    scaled = ops.log(ops.cast(ops.maximum(distance, 1), "float32") / max_exact)
    scaled = scaled / ops.cast(math.log(max_distance / max_exact), "float32") * (num_buckets - max_exact)
    large = ops.minimum(max_exact + ops.cast(scaled, "int32"), num_buckets - 1)
    return buckets + ops.where(is_small, distance, large)


@keras.saving.register_keras_serializable(package="keras_transformer")
class RelativePositionBias(keras.layers.Layer):
    """The bias T5 adds to every self-attention score of a stack: one learned value per head and distance bucket.

    Computed once per forward pass and handed to each layer of the stack
    (its `attention_bias`): the first layer of T5 holds the table and every
    layer reads it. The encoder's is bidirectional, the decoder's causal
    (`relative_position_bucket`). Called on the stack's inputs `(batch,
    length, ...)`, it gives the bias of `length` queries over as many keys;
    one cached decoding step passes its position (`query_start`) and the
    cache's length (`key_length`).

    Args:
        num_heads: attention heads (one bias per head).
        num_buckets: T5's `relative_attention_num_buckets` (32).
        max_distance: T5's `relative_attention_max_distance` (128).
        bidirectional: the encoder's buckets (both sides) or the decoder's (earlier keys only).
        initializer: the table's initializer.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: a tensor `(batch, length, ...)`: `length` queries.
        query_start: the position of the first query (an int or a scalar tensor).
        key_length: keys, from position 0 (default: as many as the queries).

    Returns:
        `(1, num_heads, length, key_length)`, in the layer's compute dtype.

    Example:

    >>> bias = RelativePositionBias(num_heads=4)
    >>> tuple(bias(keras.ops.zeros((2, 5, 8))).shape)
    (1, 4, 5, 5)
    >>> tuple(bias(keras.ops.zeros((2, 1)), query_start=3, key_length=9).shape)
    (1, 4, 1, 9)

    References:
        Raffel et al., "Exploring the Limits of Transfer Learning with a
        Unified Text-to-Text Transformer", 2020, section 2.1.
    """

    def __init__(
        self, num_heads, num_buckets=32, max_distance=128, bidirectional=True, initializer="random_normal", **kwargs
    ):
        num_heads = check_positive_int("num_heads", num_heads)
        num_buckets = check_positive_int("num_buckets", num_buckets)
        max_distance = check_positive_int("max_distance", max_distance)
        exact = num_buckets // (4 if bidirectional else 2)  # the buckets of one distance each, per direction
        if exact < 1 or max_distance <= exact:
            raise ValueError(
                "`num_buckets` must leave each direction at least one exact bucket, and `max_distance` must lie "
                f"beyond them. Received: num_buckets={num_buckets}, max_distance={max_distance}"
            )
        super().__init__(**kwargs)
        self.num_heads, self.num_buckets, self.max_distance = num_heads, num_buckets, max_distance
        self.bidirectional = bool(bidirectional)
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            shape=(self.num_buckets, self.num_heads), initializer=self.initializer, name="embeddings"
        )
        self.built = True

    def call(self, inputs, query_start=0, key_length=None):
        query_length = inputs.shape[1] if isinstance(inputs.shape[1], int) else ops.shape(inputs)[1]
        key_length = query_length if key_length is None else key_length
        query_positions = ops.arange(query_length, dtype="int32") + ops.cast(query_start, "int32")
        return self.between(query_positions, ops.arange(key_length, dtype="int32"))

    def between(self, query_positions, key_positions):
        """The bias `(1, num_heads, queries, keys)` of queries and keys at the given int positions `(queries,)`,
        `(keys,)`: e.g. a decoding cache that holds several beams' keys per position."""
        relative = ops.cast(key_positions, "int32")[None, :] - ops.cast(query_positions, "int32")[:, None]
        buckets = relative_position_bucket(relative, self.bidirectional, self.num_buckets, self.max_distance)
        values = ops.take(ops.cast(self.embeddings, self.compute_dtype), buckets, axis=0)  # (queries, keys, heads)
        return ops.transpose(values, (2, 0, 1))[None]

    def compute_output_spec(self, inputs, query_start=0, key_length=None):
        queries = inputs.shape[1]
        keys = queries if key_length is None else key_length if isinstance(key_length, int) else None
        return keras.KerasTensor((1, self.num_heads, queries, keys), dtype=self.compute_dtype)

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "num_buckets": self.num_buckets,
            "max_distance": self.max_distance,
            "bidirectional": self.bidirectional,
            "initializer": keras.initializers.serialize(self.initializer),
        }
