"""The paper's training recipe: Adam with its betas, the warmup schedule, a label-smoothed masked loss."""

NO_PADDING = -1  # a `pad_id` no label has: every label counts


def compile_model(model, preset, jit_compile=True, cooldown=None, pad_id=None):
    """Compiles `model` with the paper's recipe (Adam, `WarmupSchedule`, label smoothing); returns the schedule.

    `cooldown` is a resumed run's `(first step, last step)` of the learning
    rate's cooldown (`CooldownToEnd`). `pad_id` is the labels' padding, which
    the loss and accuracy skip (default the model's; `NO_PADDING`: every
    label counts, as in a language model's packed blocks). A model in
    `mixed_bfloat16` on a CPU with bf16 units takes the hybrid route
    (`precision.compile_arguments`).

    Example:

    >>> schedule = compile_model(build_transformer(config=preset.model_config(8000)), preset)
    """
    from keras_transformer.losses import MaskedSparseCategoricalCrossentropy
    from keras_transformer.metrics import MaskedAccuracy
    from keras_transformer.optimizers import Adam
    from keras_transformer.schedules import WarmupSchedule
    from keras_transformer.training.precision import compile_arguments

    # mixed_bfloat16 on a CPU with bf16 units: the model without XLA, the loss with it (see precision.py).
    pad_id = model.config.target_pad if pad_id is None else pad_id  # 0 here, an imported model's own id
    loss, jit_compile = compile_arguments(
        model,
        MaskedSparseCategoricalCrossentropy(label_smoothing=preset.training.label_smoothing, pad_id=pad_id),
        jit_compile,
    )
    recipe = preset.training
    schedule = WarmupSchedule(
        preset.model.d_model, recipe.warmup_steps, scale=recipe.learning_rate_scale, cooldown=cooldown
    )
    model.compile(
        optimizer=Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9),
        loss=loss,
        metrics=[MaskedAccuracy(pad_id=pad_id, name="accuracy")],
        jit_compile=jit_compile,
    )
    return schedule
