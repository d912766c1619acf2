"""A trained table of position embeddings (GPT-2's `wpe`, BERT's `position_embeddings`)."""

import keras
from keras import ops

from keras_transformer.kinds import check_positive_int
from keras_transformer.layers.positional_encoding import position_rows
from keras_transformer.layers.shapes import check_sequence


@keras.saving.register_keras_serializable(package="keras_transformer")
class LearnedPositionEmbedding(keras.layers.Layer):
    """Adds a trained vector per position to a sequence of vectors: `inputs + P[start : start + length]`.

    What GPT and BERT use where the paper has its fixed sinusoids
    (`PositionalEncoding`, whose call it shares: `TokenAndPositionEmbedding`
    takes one or the other by its `position_layout`). Keras masks pass
    through unchanged.

    Args:
        position: the longest sequence the layer accepts (the table's rows).
        d_model: the size of each vector.
        initializer: the table's initializer (GPT-2 and BERT: a normal
            of standard deviation 0.02).
        offset: rows before position 0's: the table has `position + offset`
            rows, position `p` reads row `p + offset` (mBART's 2, which
            fairseq kept for its padding).
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: float tensor `(batch, length, d_model)`.
        start_index: the position of the first element: a Python int, a
            scalar tensor, or a `(batch,)` tensor, one per row (see
            `positional_encoding.position_rows`).
        real: accepted for `PositionalEncoding`'s signature and not read:
            GPT-2 and BERT number every position, padding included.

    Example:

    >>> layer = LearnedPositionEmbedding(16, 8)
    >>> tuple(layer(keras.ops.zeros((2, 5, 8)), start_index=3).shape)
    (2, 5, 8)
    >>> tuple(layer.embeddings.shape)
    (16, 8)
    """

    def __init__(self, position, d_model, initializer=None, offset=0, **kwargs):
        position = check_positive_int("position", position)
        d_model = check_positive_int("d_model", d_model)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"`offset` must be a non-negative int. Received: offset={offset!r}")
        super().__init__(**kwargs)
        self.position = position
        self.d_model = d_model
        self.offset = offset
        self.initializer = keras.initializers.get(initializer or keras.initializers.RandomNormal(stddev=0.02))
        self.supports_masking = True

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            shape=(self.position + self.offset, self.d_model), initializer=self.initializer, name="embeddings"
        )
        self.built = True

    def call(self, inputs, start_index=0, real=None):
        check_sequence(inputs, "inputs", self.d_model)
        length = inputs.shape[1]
        if isinstance(start_index, int) and isinstance(length, int) and start_index + length > self.position:
            raise ValueError(
                f"The sequence is longer than `position`={self.position} this layer was built for. "
                f"Received: length={length} with start_index={start_index}"
            )
        table = ops.cast(self.embeddings, inputs.dtype)
        return inputs + position_rows(table[self.offset :] if self.offset else table, inputs, start_index)

    def compute_output_shape(self, input_shape):
        check_sequence(input_shape, "inputs", self.d_model)
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "position": self.position,
                "d_model": self.d_model,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        if self.offset:  # written where not the default, so that earlier files' configs read alike
            config["offset"] = self.offset
        return config
