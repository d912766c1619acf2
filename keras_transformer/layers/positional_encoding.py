"""The sinusoidal positional encoding of "Attention Is All You Need"."""

import keras
import numpy as np
from keras import ops

from keras_transformer.kinds import check_positive_int
from keras_transformer.layers.shapes import check_sequence

LAYOUTS = ("interleaved", "concatenated", "fairseq")


def positional_encoding(length, depth, base=10000.0, layout="interleaved"):
    """The paper's sine/cosine table, interleaved (the paper's) or as two halves.

    With frequency `w_i = 1 / base^(2i/depth)`, `layout="interleaved"` gives
    `PE[pos, 2i] = sin(pos · w_i)` and `PE[pos, 2i+1] = cos(pos · w_i)`;
    `layout="concatenated"` the same columns reordered, all sines then all
    cosines: `PE[pos, i] = sin(pos · w_i)`, `PE[pos, depth/2 + i] = cos(pos · w_i)`
    (Marian's and OPUS-MT's table, for an even `depth`). `layout="fairseq"`
    is fairseq's (M2M100's and NLLB's): the two halves with `w_i =
    1 / base^(i / (depth/2 - 1))`, a zero column last for an odd `depth`.

    Args:
        length: number of positions.
        depth: size of each position's vector (`d_model`).
        base: the wavelength base, 10000 in the paper.
        layout: `"interleaved"` or `"concatenated"`.

    Returns:
        A float32 NumPy array of shape `(length, depth)`.

    Example:

    >>> table = positional_encoding(50, 128)
    >>> table.shape
    (50, 128)
    >>> table[0, :4].tolist()
    [0.0, 1.0, 0.0, 1.0]
    >>> positional_encoding(2, 4, layout="concatenated")[0].tolist()
    [0.0, 0.0, 1.0, 1.0]
    >>> [round(x, 4) for x in positional_encoding(2, 4, layout="fairseq")[1].tolist()]
    [0.8415, 0.0001, 0.5403, 1.0]
    """
    length = check_positive_int("length", length)
    depth = check_positive_int("depth", depth)
    if layout not in LAYOUTS:
        raise ValueError(f"`layout` must be one of {LAYOUTS}. Received: layout={layout!r}")
    positions = np.arange(length, dtype=np.float64)[:, None]
    if layout == "fairseq":
        half = depth // 2
        frequencies = np.exp(np.arange(half, dtype=np.float64) * -(np.log(base) / max(half - 1, 1)))
        angles = positions * frequencies[None, :]
        table = np.concatenate([np.sin(angles), np.cos(angles), np.zeros((length, depth % 2))], axis=1)
        return table.astype("float32")
    pair_index = np.arange(depth, dtype=np.float64)[None, :] // 2
    angles = positions / np.power(base, 2.0 * pair_index / depth)
    table = np.where(np.arange(depth) % 2 == 0, np.sin(angles), np.cos(angles))
    if layout == "concatenated":
        table = np.concatenate([table[:, 0::2], table[:, 1::2]], axis=1)
    return table.astype("float32")


def position_rows(table, inputs, start_index=0):
    """The rows of a `(positions, d_model)` position `table` that `inputs` `(batch, length, ...)` sit at.

    `start_index` is the first position: a Python int (a slice), a scalar
    tensor, or a `(batch,)` tensor that gives each row its own first
    position, `(batch, length, d_model)` rows then. Positions before 0 (the
    padding in front of a left-padded row, which no real token attends) read
    row 0.

    Example:

    >>> table = keras.ops.reshape(keras.ops.arange(8.0), (4, 2))
    >>> rows = position_rows(table, keras.ops.zeros((2, 1, 2)), keras.ops.convert_to_tensor([0, 3]))
    >>> keras.ops.convert_to_numpy(rows)[:, 0].tolist()
    [[0.0, 1.0], [6.0, 7.0]]
    """
    length = inputs.shape[1]
    if isinstance(start_index, int) and isinstance(length, int):
        return table[None, start_index : start_index + length]
    # A gather, not a slice: it also works where the length is a symbolic
    # dimension (JAX's shape polymorphism in functional builds).
    positions = ops.arange(ops.shape(inputs)[1])
    if len(getattr(start_index, "shape", ())) == 1:
        positions = ops.maximum(positions[None] + ops.cast(start_index, positions.dtype)[:, None], 0)
        return ops.take(table, positions, axis=0)  # (batch, length, d_model)
    return ops.take(table, positions + start_index, axis=0)[None]


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionalEncoding(keras.layers.Layer):
    """Adds the fixed sinusoidal position signal to a sequence of vectors.

    The table is not trained and not saved: it is rebuilt from `position` and
    `d_model`. Keras masks pass through unchanged.

    Args:
        position: the longest sequence the layer accepts.
        d_model: the size of each vector.
        layout: the table's columns, `"interleaved"` (the paper's),
            `"concatenated"` (all sines, then all cosines) or `"fairseq"`;
            see `positional_encoding`.
        offset: the row of the first position (fairseq's models number
            positions from their padding id + 1).
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: float tensor of shape `(batch, length, d_model)`.
        start_index: position of the first element (a Python int or a scalar
            tensor); used by cached decoding, which feeds one step at a time.
        real: optional boolean `(batch, length)`, `True` at real tokens. With
            `layout="fairseq"`, positions then count the real tokens only and
            padding gets a zero vector, as fairseq's `make_positions` does.
            A `(batch,)` tensor gives each row its own (a left-padded prompt's
            rows, `keras_transformer.decoding.prompts`).

    Example:

    >>> layer = PositionalEncoding(50, 128)
    >>> tuple(layer.pos_encoding.shape)
    (1, 50, 128)
    >>> tuple(layer(keras.ops.zeros((2, 10, 128))).shape)
    (2, 10, 128)

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 3.5.
    """

    def __init__(self, position, d_model, layout="interleaved", offset=0, **kwargs):
        position = check_positive_int("position", position)
        d_model = check_positive_int("d_model", d_model)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"`offset` must be an int >= 0. Received: offset={offset!r}")
        super().__init__(**kwargs)
        self.position = position
        self.d_model = d_model
        self.layout = layout
        self.offset = offset
        self.pos_encoding = positional_encoding(self.position + offset, self.d_model, layout=layout)[None, offset:]
        self.supports_masking = True

    def call(self, inputs, start_index=0, real=None):
        check_sequence(inputs, "inputs", self.d_model)
        length = inputs.shape[1]
        if isinstance(start_index, int) and isinstance(length, int):
            if start_index + length > self.position:
                raise ValueError(
                    f"The sequence is longer than `position`={self.position} this "
                    f"layer was built for. Received: length={length} with "
                    f"start_index={start_index}"
                )
        table = ops.convert_to_tensor(self.pos_encoding, dtype=inputs.dtype)
        if real is not None and self.layout == "fairseq":
            return inputs + _counted_positions(table, real, start_index)
        return inputs + position_rows(table[0], inputs, start_index)

    def compute_output_shape(self, input_shape, *args, **kwargs):
        check_sequence(input_shape, "inputs", self.d_model)  # what a symbolic call runs instead of `call`
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"position": self.position, "d_model": self.d_model, "layout": self.layout})
        if self.offset:
            config["offset"] = self.offset
        return config


def _counted_positions(table, real, start_index):
    """Rows of `table` `(1, position, depth)` numbered by counting `real` tokens from `start_index`; 0 at padding."""
    real = ops.cast(real, "int32")
    if len(getattr(start_index, "shape", ())) == 1:  # each row its own first position
        start_index = ops.cast(start_index, "int32")[:, None]
    positions = ops.cumsum(real, axis=1) - 1 + start_index  # (batch, length)
    rows = ops.take(table[0], ops.clip(positions, 0, ops.shape(table)[1] - 1), axis=0)
    return rows * ops.cast(real, table.dtype)[..., None]
