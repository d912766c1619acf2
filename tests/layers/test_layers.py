"""Every public layer passes the standard checks (see layer_checks.py)."""

import numpy as np
import pytest

import keras_transformer as kt

from layer_checks import run_layer_checks

RNG = np.random.default_rng(0)
HIDDEN = RNG.normal(size=(3, 6, 16)).astype("float32")
MEMORY = RNG.normal(size=(3, 5, 16)).astype("float32")
IDS = np.array([[5, 9, 2, 0, 0, 0], [3, 1, 4, 1, 5, 0], [7, 0, 0, 0, 0, 0]], dtype="int32")

CASES = {
    "positional_encoding": (kt.PositionalEncoding, dict(position=10, d_model=16), [HIDDEN]),
    "embedding": (kt.TokenAndPositionEmbedding, dict(vocab_size=12, d_model=16, max_length=8, dropout=0.1), [IDS]),
    "attention": (kt.MultiHeadAttention, dict(d_model=16, num_heads=4, dropout=0.1), [HIDDEN, MEMORY]),
    "feed_forward": (kt.PositionwiseFeedForward, dict(d_model=16, d_ff=32, dropout=0.1), [HIDDEN]),
    "encoder_layer": (kt.EncoderLayer, dict(d_model=16, num_heads=4, d_ff=32, norm_first=True), [HIDDEN]),
    "decoder_layer": (kt.DecoderLayer, dict(d_model=16, num_heads=2, d_ff=32), [HIDDEN, MEMORY]),
    "encoder": (kt.Encoder, dict(num_layers=2, vocab_size=12, max_length=8, d_model=16, num_heads=4, d_ff=32), [IDS]),
    "decoder": (
        kt.Decoder,
        dict(num_layers=1, vocab_size=12, max_length=8, d_model=16, num_heads=4, d_ff=32, norm_first=True),
        [IDS, MEMORY],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_standard_layer_checks(case, tmp_path):
    layer_class, init_kwargs, inputs = CASES[case]
    run_layer_checks(layer_class, init_kwargs, inputs, tmp_path)
