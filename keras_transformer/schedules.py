"""The learning-rate schedule of "Attention Is All You Need"."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class WarmupSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """`lrate = scale · d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)`.

    The rate grows linearly for `warmup_steps` steps, then decays with the
    inverse square root of the step (paper section 5.3). `step` counts from 1:
    the optimizer's first update (its `iterations == 0`) uses step 1.

    Args:
        d_model: model width.
        warmup_steps: length of the linear warm-up (4000 in the paper).
        scale: a constant factor on the whole curve (1.0 in the paper).

    Example:

    >>> schedule = WarmupSchedule(d_model=512, warmup_steps=4000)
    >>> optimizer = keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    >>> round(float(schedule(3999)), 6)  # the peak, at step 4000
    0.000699

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 5.3.
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0):
        if d_model <= 0 or warmup_steps <= 0:
            raise ValueError(
                "`d_model` and `warmup_steps` must be positive. "
                f"Received: d_model={d_model}, warmup_steps={warmup_steps}"
            )
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        rate = ops.minimum(ops.rsqrt(step), step * self.warmup_steps**-1.5)
        return self.scale * self.d_model**-0.5 * rate

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}
