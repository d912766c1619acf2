"""Tiny trained runs that many test modules share, built once for both of the README's pytest processes.

- `trained_export()`: the `tiny` preset trained 1 epoch by `training.train`,
  and its SavedModel export.
- `tiny_run_dir()`: a run directory made by hand from a model that overfits
  20 short Multi30k pairs, so that it translates them (needs the corpus).

`run_cache` keeps both in the temporary folder and builds them again when the
package or this file changes.
"""

import functools
import pathlib

import keras
import pytest
import tensorflow as tf

from keras_transformer import MaskedSparseCategoricalCrossentropy, build_transformer, runs
from keras_transformer.files import atomic

import run_cache

DATA = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k_task1"
MAX_LENGTH = 32


@functools.cache
def trained_export():
    """`(run directory, SavedModel directory)` of the tiny preset trained 1 epoch on 300 pairs.

    Built once for both of the README's pytest processes (about 1-2 minutes on
    2 busy cores; `run_cache` keeps it in the temporary folder and builds it
    again when the package or this file changes): `training.train` then
    `Translator.save`. Shared with `test_faults.py`, whose tests copy it before
    breaking it.
    """
    folder, export = run_cache.cached("trained-export", _build_trained_export, [__file__])
    return folder / "run", folder / export


def _build_trained_export(root):
    from keras_transformer.export import load
    from keras_transformer.training import train

    run = root / "run"
    summary = train("tiny", output=run, epochs=1, max_examples=300, verbose=0)
    assert summary["completed_epochs"] == 1 and runs.is_run_dir(run)
    export = pathlib.Path(load(run).save(root / "export"))
    assert runs.is_saved_model(export)
    return export.name


@functools.cache
def tiny_run_dir():
    """A run directory as `keras-transformer train` writes it: 1 layer, d_model 32, vocab 400.

    SentencePiece is trained on 600 Multi30k lines; the model overfits the 20
    shortest pairs (~15 s on one core), so it translates those and ends with
    END. Built once for both of the README's pytest processes (`run_cache`:
    kept in the temporary folder, built again when the package, this file or
    the corpus changes) and shared by the inference tests; returns `(path, pairs)`.
    """
    if not DATA.is_dir():
        pytest.skip(f"Multi30k is not at {DATA}")
    folder, pairs = run_cache.cached("tiny-run", _build_tiny_run, [__file__, DATA / "train.en", DATA / "train.de"])
    return folder / "run", tuple(tuple(pair) for pair in pairs)


def _build_tiny_run(root):
    from keras_transformer.tokenizers import SubwordTokenizer

    # Seed before any tokenizer exists: tf.random.set_seed drops the SentencePiece
    # resources of tokenizers created earlier (tensorflow/text#570).
    keras.utils.set_random_seed(0)
    english = (DATA / "train.en").read_text(encoding="utf-8").splitlines()[:300]
    german = (DATA / "train.de").read_text(encoding="utf-8").splitlines()[:300]
    tokenizer = SubwordTokenizer.train(english + german, vocab_size=400, num_threads=1)
    pairs = sorted(zip(english, german), key=lambda pair: len(pair[0]) + len(pair[1]))[:20]
    source = tokenizer.tokenize(tf.constant([s for s, _ in pairs])).to_tensor(0)
    target = tokenizer.tokenize(tf.constant([t for _, t in pairs]))
    start, end = tf.fill([20, 1], 2), tf.fill([20, 1], 3)
    decoder_inputs, labels = tf.concat([start, target], 1).to_tensor(0), tf.concat([target, end], 1).to_tensor(0)

    model_config = dict(
        source_vocab_size=400,
        target_vocab_size=400,
        num_layers=1,
        d_model=32,
        num_heads=4,
        d_ff=64,
        dropout=0.0,
        max_length=MAX_LENGTH,
        share_embeddings=True,
    )
    model = build_transformer(**model_config)
    model.compile(keras.optimizers.Adam(1e-2), MaskedSparseCategoricalCrossentropy())
    model.fit({"encoder_inputs": source, "decoder_inputs": decoder_inputs}, labels, batch_size=20, epochs=80, verbose=0)

    path = root / "run"
    path.mkdir()
    model.save(path / runs.MODEL)
    tokenizer.save(path / runs.SOURCE_TOKENIZER)
    tokenizer.save(path / runs.TARGET_TOKENIZER)
    atomic.write_json(
        path / runs.CONFIG,
        {
            "model": model_config,
            "decoding": {"beam_size": 4, "length_penalty": 0.6, "max_length": MAX_LENGTH},
            "finished": True,
        },
    )
    return pairs
