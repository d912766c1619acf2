"""Adam with its step size computed once per training step, not once per weight."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class Adam(keras.optimizers.Adam):
    """`keras.optimizers.Adam`, the same updates bit for bit, in a smaller training step.

    Keras's Adam computes the step size, `lr · sqrt(1 - β₂ᵗ) / (1 - β₁ᵗ)`,
    anew for every weight: for a Transformer, whose step updates a hundred
    weights or more, that is thousands of operations in the training step,
    which TensorFlow traces and XLA compiles before the first update (and
    again for every new input shape). This Adam computes it once per step
    and weight dtype, so the step traces and compiles faster (measured by
    `benchmarks/adam_step.py`, docs/performance.md); the weights it trains
    are the same, bit for bit. With `amsgrad=True` it is Keras's Adam unchanged.

    Example (the paper's settings):

    >>> from keras_transformer.schedules import WarmupSchedule
    >>> optimizer = Adam(WarmupSchedule(512, 4000), beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    >>> weight = keras.Variable([0.0, 0.0])
    >>> optimizer.apply([keras.ops.convert_to_tensor([0.5, -0.5])], [weight])
    >>> [f"{w:.3e}" for w in keras.ops.convert_to_numpy(weight)]  # the first step moves each by the rate
    ['-1.747e-07', '1.747e-07']
    """

    def apply(self, grads, trainable_variables=None):
        self._step_sizes = {}  # per dtype, for this step's updates
        try:
            return super().apply(grads, trainable_variables)
        finally:
            self._step_sizes = None

    def update_step(self, gradient, variable, learning_rate):
        if self.amsgrad:
            return super().update_step(gradient, variable, learning_rate)
        step_size = self._step_size(learning_rate, keras.backend.standardize_dtype(variable.dtype))
        gradient = ops.cast(gradient, variable.dtype)
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
        self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2))
        self.assign_sub(variable, ops.divide(ops.multiply(m, step_size), ops.add(ops.sqrt(v), self.epsilon)))

    def _step_size(self, learning_rate, dtype):
        """`lr · sqrt(1 - β₂ᵗ) / (1 - β₁ᵗ)` in `dtype`, as Keras's Adam computes it, once per step."""
        sizes = getattr(self, "_step_sizes", None)
        if sizes is None:  # `update_step` called outside `apply`
            sizes = {}
        if dtype not in sizes:
            step = ops.cast(self.iterations + 1, dtype)
            beta_1_power = ops.power(ops.cast(self.beta_1, dtype), step)
            beta_2_power = ops.power(ops.cast(self.beta_2, dtype), step)
            sizes[dtype] = ops.cast(learning_rate, dtype) * ops.sqrt(1 - beta_2_power) / (1 - beta_1_power)
        return sizes[dtype]
