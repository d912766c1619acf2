"""The learning-rate schedule of "Attention Is All You Need", with an optional linear cooldown."""

import keras
from keras import ops

_NEVER = float(2**31)  # a step no run reaches: no cooldown


@keras.saving.register_keras_serializable(package="keras_transformer")
class WarmupSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """`lrate = scale · d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)`.

    The rate grows linearly for `warmup_steps` steps, then decays with the
    inverse square root of the step (paper section 5.3). `step` counts from 1:
    the optimizer's first update (its `iterations == 0`) uses step 1.

    With `cooldown=(start, end)` the rate is further multiplied by a factor
    that falls linearly from 1 at step `start` to 0 at step `end` (and stays
    0 after). A run whose length is a time budget rather than a number of
    steps sets it while training, with `set_cooldown` (see
    `keras_transformer.training.callbacks.CooldownToEnd`): annealing to zero at the end
    of a short budget gives a better final model than stopping on the
    inverse-square-root tail.

    Args:
        d_model: model width.
        warmup_steps: length of the linear warm-up (4000 in the paper).
        scale: a constant factor on the whole curve (1.0 in the paper).
        cooldown: None, or the `(start, end)` optimizer steps of the linear
            decay to zero.

    Example:

    >>> schedule = WarmupSchedule(d_model=512, warmup_steps=4000)
    >>> optimizer = keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    >>> round(float(schedule(3999)), 6)  # the peak, at step 4000
    0.000699
    >>> cooled = WarmupSchedule(d_model=512, warmup_steps=4000, cooldown=(10000, 20000))
    >>> round(float(cooled(14999)) / float(schedule(14999)), 3)  # halfway through the cooldown
    0.5

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 5.3.
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0, cooldown=None):
        if d_model <= 0 or warmup_steps <= 0:
            raise ValueError(
                "`d_model` and `warmup_steps` must be positive. "
                f"Received: d_model={d_model}, warmup_steps={warmup_steps}"
            )
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale
        # Variables, so that a compiled train step sees a cooldown set later.
        self._cooldown_start = keras.Variable(_NEVER, dtype="float32", trainable=False, name="cooldown_start")
        self._cooldown_end = keras.Variable(_NEVER + 1, dtype="float32", trainable=False, name="cooldown_end")
        if cooldown is not None:
            self.set_cooldown(*cooldown)

    @property
    def cooldown(self):
        """The `(start, end)` steps of the cooldown, or None."""
        start, end = float(self._cooldown_start.numpy()), float(self._cooldown_end.numpy())
        return None if start >= _NEVER else (int(start), int(end))

    def set_cooldown(self, start, end):
        """Decays the rate linearly to zero from optimizer step `start` to step `end`.

        A train step compiled by TensorFlow sees the change (the cooldown lives
        in variables); one traced by JAX holds the old values as constants
        until it is traced again: `model.make_train_function(force=True)`.
        """
        if not 0 <= start < end:
            raise ValueError(f"The cooldown needs 0 <= start < end. Received: start={start}, end={end}")
        self._cooldown_start.assign(float(start))
        self._cooldown_end.assign(float(end))

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        rate = ops.minimum(ops.rsqrt(step), step * self.warmup_steps**-1.5)
        start, end = self._cooldown_start, self._cooldown_end
        factor = ops.clip((end - step) / (end - start), 0.0, 1.0)
        return self.scale * self.d_model**-0.5 * rate * factor

    def get_config(self):
        return {
            "d_model": self.d_model,
            "warmup_steps": self.warmup_steps,
            "scale": self.scale,
            "cooldown": self.cooldown,
        }
