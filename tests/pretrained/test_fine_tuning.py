"""`train --init-from` an imported OPUS-MT run: its own tokenizers, unchanged, and a lower loss on the pairs."""

import csv
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import runs
from keras_transformer.commands import cli
from keras_transformer.datasets import make_eval_batches
from keras_transformer.losses import MaskedSparseCategoricalCrossentropy
from keras_transformer.pretrained import import_pretrained

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "marian"
CHATBOT = pathlib.Path(__file__).resolve().parents[2] / "keras_transformer" / "data" / "korean_chatbot"


def chatbot_pairs(count, skip=3000):
    with open(CHATBOT / "ChatbotData.csv", encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))[skip : skip + count]
    return [(row["Q"].strip(), row["A"].strip()) for row in rows]


def mean_loss(run, pairs):
    """The model's mean token loss on `pairs` (no label smoothing), framed as training frames them."""
    model = keras.saving.load_model(run / runs.MODEL, compile=False)
    tokenizers = runs.load_tokenizers(run)
    sources, targets = zip(*pairs)
    data = tf.data.Dataset.from_tensor_slices({"source": list(sources), "target": list(targets)})
    longest = min(model.config.max_length, 128)  # the pairs are short; OPUS-MT's 512 positions are not a batch's
    batches = make_eval_batches(
        data, *tokenizers, add_source_end=True, bucket_boundaries=(16, 32, 64, longest), max_length=longest
    )
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.0, pad_id=model.config.target_pad)
    total = count = 0.0
    for inputs, labels in batches:
        real = float(np.sum(labels.numpy() != model.config.target_pad))
        total += float(loss(labels, model(inputs, training=False))) * real
        count += real
    return total / count


# Each trains for a minute on 2 cores: the shared vocabulary runs with the long checks (`-m slow`).
@pytest.mark.parametrize("kind", [pytest.param("shared", marks=pytest.mark.slow), "separate"])
def test_one_epoch_on_200_pairs_lowers_their_loss_and_keeps_the_tokenizers(tmp_path, capsys, kind):
    imported = tmp_path / "imported"
    import_pretrained(FIXTURES / kind, imported)
    pairs = chatbot_pairs(200)
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("".join(f"{source}\t{target}\n" for source, target in pairs), encoding="utf-8")
    tuned = tmp_path / "tuned"

    status = cli.main(
        ["train", "--init-from", str(imported), "--train-tsv", str(tsv), "--epochs", "1"]
        + [
            "--output",
            str(tuned),
        ]
    )
    assert status == 0, capsys.readouterr().err[-2000:]

    for side in (runs.SOURCE_TOKENIZER, runs.TARGET_TOKENIZER):
        before = {path.name: path.read_bytes() for path in (imported / side).iterdir()}
        assert {path.name: path.read_bytes() for path in (tuned / side).iterdir()} == before
    config = runs.RunConfig.read(tuned)
    assert config.model == runs.RunConfig.read(imported).model
    assert config.add_source_end and config.pretrained["source"] == str(FIXTURES / kind)
    assert mean_loss(tuned, pairs) < mean_loss(imported, pairs) - 0.01
