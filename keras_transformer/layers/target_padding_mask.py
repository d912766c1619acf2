"""`TargetPaddingMask`: the decoder's padding mask where the start token is the padding id."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class TargetPaddingMask(keras.layers.Layer):
    """`True` at the real tokens of decoder inputs, the start token included even where it is the padding id.

    Marian (OPUS-MT) models start decoding from their padding id and attend
    it like any token; their padding needs no mask of its own in the decoder,
    where it only ever follows the real tokens that the causal mask already
    keeps from seeing it. This layer gives `build_transformer`'s functional
    graph that mask: `(ids != pad_id) | (ids == start_id)`, boolean,
    `True` = may attend. For this package's own vocabularies (start 2, pad 0)
    it is the plain padding mask.

    Args:
        pad_id: the padding id.
        start_id: the decoder's start id.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        token_ids: integer decoder inputs `(batch, length)`.

    Example:

    >>> layer = TargetPaddingMask(pad_id=9, start_id=9)
    >>> keras.ops.convert_to_numpy(layer(keras.ops.convert_to_tensor([[9, 4, 0, 9]]))).tolist()
    [[True, True, True, True]]
    """

    def __init__(self, pad_id, start_id, **kwargs):
        super().__init__(**kwargs)
        self.pad_id, self.start_id = pad_id, start_id

    def call(self, token_ids):
        return target_padding_mask(token_ids, self.pad_id, self.start_id)

    def compute_output_shape(self, input_shape):
        return input_shape

    def compute_output_spec(self, token_ids):
        return keras.KerasTensor(token_ids.shape, dtype="bool")

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id, "start_id": self.start_id}


def target_padding_mask(token_ids, pad_id, start_id):
    """`(token_ids != pad_id) | (token_ids == start_id)`: see `TargetPaddingMask`."""
    token_ids = ops.convert_to_tensor(token_ids)
    return ops.logical_or(ops.not_equal(token_ids, pad_id), ops.equal(token_ids, start_id))
