"""A tiny run of this package trained from scratch, with the options a Marian checkpoint can hold.

Its own SentencePiece tokenizer (`SubwordTokenizer`: PAD 0, UNK 1, START 2,
END 3), one vocabulary shared and tied to the output, this package's
interleaved position table, sources that end with END and LayerNorms of
epsilon 1e-5 (Marian's). It overfits 24 short pairs of the bundled Korean
chatbot corpus (about 20 s on one core), so that its outputs end at
different lengths. `test_transformers_export.py` writes it as a Marian
checkpoint and imports that back; `tests/data/marian/check_transformers_export.py`
has transformers load it.
"""

import csv
import pathlib

import keras
import tensorflow as tf

from keras_transformer import MaskedSparseCategoricalCrossentropy, __version__, build_transformer, runs
from keras_transformer.config import DecodingConfig, ModelConfig
from keras_transformer.files import destinations
from keras_transformer.presets import Preset

CHATBOT = pathlib.Path(__file__).resolve().parents[2] / "keras_transformer" / "data" / "korean_chatbot"
MAX_LENGTH = 32
DECODING = DecodingConfig(beam_size=4, alpha=1.0, normalization="length", stopping="cannot_improve")


def chatbot_pairs(count, skip=0):
    with open(CHATBOT / "ChatbotData.csv", encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))[skip : skip + count]
    return [(row["Q"].strip(), row["A"].strip()) for row in rows]


def scratch_run(path, epochs=60, **options):
    """Writes the run at `path`; returns `(path, pairs it was trained on)`. `options` change its `ModelConfig`."""
    from keras_transformer.tokenizers import SubwordTokenizer

    keras.utils.set_random_seed(0)  # before any tokenizer exists (tensorflow/text#570)
    lines = [text for pair in chatbot_pairs(600) for text in pair]
    tokenizer = SubwordTokenizer.train(lines, vocab_size=1000, num_threads=1, character_coverage=0.98)
    pairs = sorted(chatbot_pairs(600), key=lambda pair: len(pair[0]) + len(pair[1]))[:24]
    config = ModelConfig(
        source_vocab_size=tokenizer.vocab_size,
        target_vocab_size=tokenizer.vocab_size,
        num_layers=1,
        d_model=32,
        num_heads=4,
        d_ff=64,
        dropout=0.0,
        max_length=MAX_LENGTH,
        share_embeddings=True,
        tie_output_embedding=True,
        layer_norm_epsilon=1e-5,
    ).replace(**options)
    end = tf.fill([len(pairs), 1], 3)
    source = tf.concat([tokenizer.tokenize(tf.constant([s for s, _ in pairs])), end], 1).to_tensor(0)
    target = tokenizer.tokenize(tf.constant([t for _, t in pairs]))
    decoder_inputs = tf.concat([tf.fill([len(pairs), 1], 2), target], 1).to_tensor(0)
    labels = tf.concat([target, end], 1).to_tensor(0)
    model = build_transformer(config=config)
    model.compile(keras.optimizers.Adam(1e-2), MaskedSparseCategoricalCrossentropy())
    model.fit(
        {"encoder_inputs": source, "decoder_inputs": decoder_inputs}, labels, batch_size=24, epochs=epochs, verbose=0
    )
    run_config = runs.RunConfig(
        created_by=destinations.CREATOR,
        version=__version__,
        preset=Preset("scratch", model=config, decoding=DECODING),
        model=config,
        decoding=DECODING,
        add_source_end=True,
        finished=True,
        completed_epochs=epochs,
    )
    path = pathlib.Path(path)
    path.mkdir(parents=True)
    runs.write_run(path, model, run_config, runs.Tokenizers(tokenizer, tokenizer))
    return path, pairs
