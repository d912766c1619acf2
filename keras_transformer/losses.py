"""The label-smoothed, padding-masked cross-entropy of the Transformer."""

import keras
from keras import ops


def label_logits(logits, labels):
    """The logit of each label: `logits[..., label]`, shape `labels.shape`, without a one-hot tensor."""
    return ops.squeeze(ops.take_along_axis(logits, ops.expand_dims(labels, -1), axis=-1), -1)


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Cross-entropy from logits with label smoothing, averaged over real tokens.

    Labels equal to `pad_id` contribute nothing, to the sum or to the count: the
    loss is the mean over non-padding tokens of the batch. (With
    `reduction=None` the per-token values are zero at padding and scaled by
    `positions / real tokens`, so that their plain mean is that loss.) With smoothing `ε`
    the target distribution is `(1 - ε)` on the label plus `ε / vocab_size`
    everywhere, computed without building a one-hot tensor:
    `loss = logsumexp(z) - (1 - ε) · z_label - ε · mean(z)`.

    Args:
        label_smoothing: `ε`, 0.1 in the paper.
        pad_id: the padding label (0 by convention).
        name: loss name.

    Example:

    >>> loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.0)
    >>> labels = keras.ops.convert_to_tensor([[1, 0]])
    >>> logits = keras.ops.convert_to_tensor([[[0.0, 0.0], [5.0, -5.0]]])
    >>> round(float(loss(labels, logits)), 4)  # only the first token counts: ln 2
    0.6931

    References:
        Szegedy et al., "Rethinking the Inception Architecture", 2016 (label
        smoothing); Vaswani et al., 2017, section 5.4.
    """

    def __init__(self, label_smoothing=0.1, pad_id=0, name="masked_sparse_categorical_crossentropy", **kwargs):
        super().__init__(name=name, **kwargs)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"`label_smoothing` must be in [0, 1). Received: label_smoothing={label_smoothing}")
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id

    def call(self, y_true, y_pred):
        labels = ops.cast(y_true, "int32")
        logits = ops.cast(y_pred, "float32")
        log_normalizer = ops.logsumexp(logits, axis=-1)  # (batch, length)
        label_logit = label_logits(logits, labels)
        token_loss = log_normalizer - (1.0 - self.label_smoothing) * label_logit
        if self.label_smoothing:
            token_loss -= self.label_smoothing * ops.mean(logits, axis=-1)
        real = ops.cast(ops.not_equal(labels, self.pad_id), "float32")
        # Per-token losses, zero at padding and scaled so that Keras's
        # "sum_over_batch_size" mean over all positions is the mean over real
        # tokens (and Keras still divides by the replicas under tf.distribute).
        positions = ops.cast(ops.size(real), "float32")
        return token_loss * real * (positions / ops.maximum(ops.sum(real), 1.0))

    def get_config(self):
        config = super().get_config()
        config.update({"label_smoothing": self.label_smoothing, "pad_id": self.pad_id})
        return config
