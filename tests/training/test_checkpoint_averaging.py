"""Checkpoint averaging: the last epochs' weights kept on disk, then averaged."""

import keras
import numpy as np
import pytest

from keras_transformer.training.callbacks import EpochSnapshots, average_snapshots, snapshot_paths


def _dense_model():
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])


def _set_all(model, value):
    for variable in model.trainable_weights:
        variable.assign(np.full(variable.shape, value, dtype="float32"))


def test_average_snapshots_is_the_mean_of_the_weight_files(tmp_path):
    model = _dense_model()
    paths = []
    for value in (1.0, 2.0, 6.0):
        _set_all(model, value)
        paths.append(tmp_path / f"w{value}.weights.h5")
        model.save_weights(paths[-1])
    _set_all(model, -100.0)
    average_snapshots(model, paths)
    for variable in model.trainable_weights:
        np.testing.assert_allclose(variable.numpy(), 3.0)
    average_snapshots(model, paths[:2])
    np.testing.assert_allclose(model.trainable_weights[0].numpy(), 1.5)


def test_average_snapshots_needs_a_weights_file():
    with pytest.raises(ValueError, match="at least one weights file"):
        average_snapshots(_dense_model(), [])


def test_epoch_snapshots_keep_only_the_last_epochs(tmp_path):
    model = _dense_model()
    callback = EpochSnapshots(tmp_path / "snapshots", keep=2)
    callback.set_model(model)
    for epoch in range(4):
        _set_all(model, float(epoch))
        callback.on_epoch_end(epoch)
    kept = snapshot_paths(tmp_path / "snapshots")
    assert [path.name for path in kept] == ["epoch-003.weights.h5", "epoch-004.weights.h5"]
    average_snapshots(model, kept)  # epochs 3 and 4 held the values 2 and 3
    np.testing.assert_allclose(model.trainable_weights[0].numpy(), 2.5)
    assert not list((tmp_path / "snapshots").glob(".tmp-*"))


def test_disabled_snapshots_write_nothing(tmp_path):
    callback = EpochSnapshots(tmp_path / "snapshots", keep=2, enabled=False)
    callback.set_model(_dense_model())
    callback.on_epoch_end(0)
    assert not (tmp_path / "snapshots").exists()
