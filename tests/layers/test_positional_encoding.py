"""The sinusoidal table: shape, known values, and the length check."""

import math

import numpy as np
import pytest

import keras_transformer as kt


def test_seed_tutorial_shape():
    assert kt.PositionalEncoding(50, 128).pos_encoding.shape == (1, 50, 128)


def test_known_values_are_interleaved_sin_cos():
    table = kt.positional_encoding(50, 128)
    np.testing.assert_allclose(table[0, :6], [0, 1, 0, 1, 0, 1], atol=1e-7)
    np.testing.assert_allclose(table[1, :2], [math.sin(1), math.cos(1)], rtol=1e-6)
    angle = 7 / 10000 ** (2 * 3 / 128)  # position 7, pair i = 3 -> columns 6 and 7
    np.testing.assert_allclose(table[7, 6:8], [math.sin(angle), math.cos(angle)], rtol=1e-5)
    angle = 49 / 10000 ** (126 / 128)
    np.testing.assert_allclose(table[49, 126:128], [math.sin(angle), math.cos(angle)], rtol=1e-5)


def test_adds_the_table_and_honours_start_index():
    layer = kt.PositionalEncoding(10, 4)
    zeros = np.zeros((1, 3, 4), "float32")
    np.testing.assert_allclose(np.asarray(layer(zeros)), layer.pos_encoding[:, :3])
    np.testing.assert_allclose(np.asarray(layer(zeros, start_index=5)), layer.pos_encoding[:, 5:8])


def test_longer_than_position_is_a_value_error():
    with pytest.raises(ValueError, match=r"position`=10.*length=11"):
        kt.PositionalEncoding(10, 4)(np.zeros((1, 11, 4), "float32"))
