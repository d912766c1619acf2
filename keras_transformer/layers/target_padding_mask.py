"""`TargetPaddingMask`: the decoder's padding mask where padding is attended like any token."""

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
    it is the plain padding mask. `attend_padding=True` attends every token,
    as transformers' M2M100 and NLLB decoders do: only the rows of padding
    itself, which no loss reads, see the difference.

    Args:
        pad_id: the padding id.
        start_id: the decoder's start id.
        attend_padding: attend padding keys too (an all-`True` mask).
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        token_ids: integer decoder inputs `(batch, length)`.

    Example:

    >>> layer = TargetPaddingMask(pad_id=9, start_id=9)
    >>> keras.ops.convert_to_numpy(layer(keras.ops.convert_to_tensor([[9, 4, 0, 9]]))).tolist()
    [[True, True, True, True]]
    """

    def __init__(self, pad_id, start_id, attend_padding=False, **kwargs):
        super().__init__(**kwargs)
        self.pad_id, self.start_id, self.attend_padding = pad_id, start_id, bool(attend_padding)

    def call(self, token_ids):
        return target_padding_mask(token_ids, self.pad_id, self.start_id, self.attend_padding)

    def compute_output_shape(self, input_shape):
        return input_shape

    def compute_output_spec(self, token_ids):
        return keras.KerasTensor(token_ids.shape, dtype="bool")

    def get_config(self):
        config = {**super().get_config(), "pad_id": self.pad_id, "start_id": self.start_id}
        if self.attend_padding:
            config["attend_padding"] = True
        return config


def target_padding_mask(token_ids, pad_id, start_id, attend_padding=False):
    """`(token_ids != pad_id) | (token_ids == start_id)`, or all `True` to attend padding: see `TargetPaddingMask`."""
    token_ids = ops.convert_to_tensor(token_ids)
    if attend_padding:
        return ops.ones_like(token_ids, dtype="bool")
    return ops.logical_or(ops.not_equal(token_ids, pad_id), ops.equal(token_ids, start_id))
