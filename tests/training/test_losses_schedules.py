"""The masked, label-smoothed loss, the masked accuracy and the warmup schedule."""

import keras
import numpy as np
import pytest

import keras_transformer as kt

RNG = np.random.default_rng(0)
LOGITS = RNG.normal(size=(2, 4, 7)).astype("float32")
LABELS = np.array([[3, 1, 0, 0], [6, 2, 5, 0]], "int32")


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_loss_equals_keras_smoothed_crossentropy_over_real_tokens(smoothing):
    ours = float(kt.MaskedSparseCategoricalCrossentropy(label_smoothing=smoothing)(LABELS, LOGITS))
    reference = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=smoothing, reduction=None)(
        keras.ops.one_hot(LABELS, 7), LOGITS
    )
    real = LABELS != 0
    expected = float(np.asarray(reference)[real].mean())
    assert ours == pytest.approx(expected, rel=1e-5)


def test_padding_never_counts_in_loss_or_accuracy():
    loss = kt.MaskedSparseCategoricalCrossentropy()
    changed = LOGITS.copy()
    changed[LABELS == 0] = 100.0 * RNG.normal(size=changed[LABELS == 0].shape)
    assert float(loss(LABELS, changed)) == pytest.approx(float(loss(LABELS, LOGITS)), rel=1e-6)

    accuracy = kt.MaskedAccuracy()
    predictions = keras.ops.one_hot(np.array([[3, 4, 1, 1], [6, 2, 1, 2]]), 7)
    accuracy.update_state(LABELS, predictions)
    assert float(accuracy.result()) == pytest.approx(3 / 5)  # 3, 6, 2 right; 1, 5 wrong


def test_accuracy_agrees_with_argmax_and_counts_a_tie_for_the_top_as_right():
    accuracy = kt.MaskedAccuracy()
    accuracy.update_state(LABELS, LOGITS)
    real = LABELS != 0
    expected = (np.argmax(LOGITS, axis=-1) == LABELS)[real].mean()
    assert float(accuracy.result()) == pytest.approx(expected)

    tied = kt.MaskedAccuracy()
    tied.update_state(np.array([[2, 1]]), np.array([[[5.0, 0.0, 5.0], [5.0, 0.0, 5.0]]]))
    assert float(tied.result()) == 0.5  # label 2 ties for the top; label 1 does not


def test_all_padding_gives_zero_loss_not_nan():
    assert float(kt.MaskedSparseCategoricalCrossentropy()(np.zeros((2, 3), "int32"), LOGITS[:, :3])) == 0.0


def test_bad_label_smoothing():
    with pytest.raises(ValueError, match="label_smoothing=1.5"):
        kt.MaskedSparseCategoricalCrossentropy(label_smoothing=1.5)


def test_warmup_schedule_follows_the_paper():
    schedule = kt.WarmupSchedule(d_model=512, warmup_steps=4000)
    for step in [1, 100, 4000, 10000, 100000]:
        expected = 512**-0.5 * min(step**-0.5, step * 4000**-1.5)
        assert float(schedule(step - 1)) == pytest.approx(expected, rel=1e-5)
    rates = [float(schedule(s)) for s in range(0, 8000, 500)]
    assert int(np.argmax(rates)) in (7, 8)  # the peak is at the end of warm-up


def test_warmup_schedule_serializes_inside_the_optimizer():
    optimizer = keras.optimizers.Adam(kt.WarmupSchedule(128, warmup_steps=50, scale=2.0))
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    schedule = keras.saving.deserialize_keras_object(restored.get_config()["learning_rate"])
    assert isinstance(schedule, kt.WarmupSchedule)
    assert float(schedule(10)) == pytest.approx(float(kt.WarmupSchedule(128, 50, 2.0)(10)))


def test_loss_and_metric_configs_round_trip():
    loss = kt.MaskedSparseCategoricalCrossentropy(label_smoothing=0.2, pad_id=1)
    clone = kt.MaskedSparseCategoricalCrossentropy.from_config(loss.get_config())
    assert (clone.label_smoothing, clone.pad_id) == (0.2, 1)
    metric = kt.MaskedAccuracy.from_config(kt.MaskedAccuracy(pad_id=1).get_config())
    assert metric.pad_id == 1


def test_cooldown_decays_the_rate_linearly_to_zero():
    plain = kt.WarmupSchedule(d_model=64, warmup_steps=10)
    cooled = kt.WarmupSchedule(d_model=64, warmup_steps=10, cooldown=(100, 200))
    factors = [float(cooled(step - 1)) / float(plain(step - 1)) for step in [50, 100, 150, 190, 200, 300]]
    assert factors == pytest.approx([1.0, 1.0, 0.5, 0.1, 0.0, 0.0], abs=1e-5)
    assert cooled.cooldown == (100, 200) and plain.cooldown is None
    plain.set_cooldown(10, 20)
    assert float(plain(19)) == 0.0
    with pytest.raises(ValueError, match="start=20, end=20"):
        plain.set_cooldown(20, 20)


def test_cooldown_serializes_inside_the_optimizer():
    optimizer = keras.optimizers.Adam(kt.WarmupSchedule(128, warmup_steps=50, cooldown=(60, 90)))
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    schedule = keras.saving.deserialize_keras_object(restored.get_config()["learning_rate"])
    assert schedule.cooldown == (60, 90)


def test_a_run_that_only_time_ends_shows_no_epoch_count(capsys):
    """`train --minutes 30` printed "Epoch 1/10000": `fit` is given epochs it never reaches."""
    from keras_transformer.training.callbacks import TimedEpochProgress

    class StopAfterTwo(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            self.model.stop_training = epoch == 1

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x = np.zeros((4, 2), np.float32)
    model.fit(x, x[:, :1], epochs=10_000, verbose=2, callbacks=[StopAfterTwo(), TimedEpochProgress(30)])
    out = capsys.readouterr().out
    assert "Epoch 1 (training stops after 30 minutes)" in out and "Epoch 2 (" in out
    assert "/10000" not in out and "Epoch 3" not in out
