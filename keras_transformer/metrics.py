"""Token accuracy that ignores padding."""

import keras
from keras import ops

from keras_transformer.losses import label_logits


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedAccuracy(keras.metrics.Metric):
    """Share of non-padding tokens whose label has the largest logit.

    A token whose label ties for the largest logit counts as right (an
    arg-max would pick the first of the tied classes); with real-valued
    logits ties are rare, and the test needs only a max-reduce, which the
    loss's logsumexp already computes, where an arg-max over a large
    vocabulary costs a pass of its own.

    Args:
        pad_id: the padding label (0 by convention); such tokens never count.
        name: metric name.

    Example:

    >>> metric = MaskedAccuracy()
    >>> labels = keras.ops.convert_to_tensor([[2, 1, 0]])
    >>> logits = keras.ops.one_hot(keras.ops.convert_to_tensor([[2, 0, 1]]), 3)
    >>> metric.update_state(labels, logits)
    >>> float(metric.result())  # 1 right of 2 real tokens
    0.5
    """

    def __init__(self, pad_id=0, name="masked_accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = pad_id
        self.correct = self.add_variable((), initializer="zeros", name="correct")
        self.count = self.add_variable((), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels = ops.cast(y_true, "int32")
        # Not an arg-max: XLA:CPU runs its reduce over (value, index) pairs on one thread.
        label_logit = label_logits(y_pred, labels)
        real = ops.cast(ops.not_equal(labels, self.pad_id), "float32")
        if sample_weight is not None:
            real = real * ops.cast(sample_weight, "float32")
        hits = ops.cast(label_logit >= ops.max(y_pred, axis=-1), "float32") * real
        self.correct.assign_add(ops.sum(hits))
        self.count.assign_add(ops.sum(real))

    def result(self):
        return self.correct / ops.maximum(self.count, 1.0)

    def reset_state(self):
        self.correct.assign(0.0)
        self.count.assign(0.0)

    def get_config(self):
        config = super().get_config()
        config.update({"pad_id": self.pad_id})
        return config
