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
from keras_transformer.export import load
from keras_transformer.losses import MaskedSparseCategoricalCrossentropy
from keras_transformer.pretrained import export_checkpoint, import_pretrained

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
@pytest.fixture(scope="module", params=[pytest.param("shared", marks=pytest.mark.slow), "separate"])
def tuned(request, tmp_path_factory):
    """`(kind, imported run, fine-tuned run, pairs)`: a fixture imported, then `train --init-from` 1 epoch."""
    kind, folder = request.param, tmp_path_factory.mktemp(request.param)
    imported = folder / "imported"
    import_pretrained(FIXTURES / kind, imported)
    pairs = chatbot_pairs(200)
    tsv = folder / "pairs.tsv"
    tsv.write_text("".join(f"{source}\t{target}\n" for source, target in pairs), encoding="utf-8")
    tuned = folder / "tuned"
    status = cli.main(
        ["train", "--init-from", str(imported), "--train-tsv", str(tsv), "--epochs", "1"]
        + [
            "--output",
            str(tuned),
        ]
    )
    assert status == 0
    return kind, imported, tuned, pairs


def test_one_epoch_on_200_pairs_lowers_their_loss_and_keeps_the_tokenizers(tuned):
    kind, imported, tuned, pairs = tuned
    for side in (runs.SOURCE_TOKENIZER, runs.TARGET_TOKENIZER):
        before = {path.name: path.read_bytes() for path in (imported / side).iterdir()}
        assert {path.name: path.read_bytes() for path in (tuned / side).iterdir()} == before
    config = runs.RunConfig.read(tuned)
    assert config.model == runs.RunConfig.read(imported).model
    assert config.add_source_end and config.pretrained["source"] == str(FIXTURES / kind)
    assert mean_loss(tuned, pairs) < mean_loss(imported, pairs) - 0.01


@pytest.mark.slow  # a tuned run's export: a minute; writing back: test_transformers_export.py
def test_import_tune_export_import_gives_the_tuned_runs_weights_and_outputs(tuned, tmp_path):
    """The export of the fine-tuned run, imported again: its weights bit for bit, so its outputs; what it kept."""
    kind, _, tuned, pairs = tuned
    export_checkpoint(tuned, tmp_path / "hf")
    import_pretrained(tmp_path / "hf", tmp_path / "again")
    models = [keras.saving.load_model(run / runs.MODEL, compile=False) for run in (tuned, tmp_path / "again")]
    assert models[0].config == models[1].config
    for ours, theirs in zip(models[0].weights, models[1].weights, strict=True):
        assert ours.path == theirs.path and np.array_equal(ours.numpy(), theirs.numpy()), ours.path
    assert runs.RunConfig.read(tmp_path / "again").decoding == runs.RunConfig.read(tuned).decoding
    sentences = [source for source, _ in pairs[:12]] + ["", "오늘 너무 힘들었어"]
    translators = [load(run, beam_size=4, max_length=24) for run in (tuned, tmp_path / "again")]
    beams, greedy = ([getattr(t, name)(sentences) for t in translators] for name in ("nbest", "greedy"))
    assert beams[0]["translations"].numpy().tolist() == beams[1]["translations"].numpy().tolist()
    assert greedy[0].numpy().tolist() == greedy[1].numpy().tolist()
    # Fine-tuning changed the weights, and nothing else: every other file is the source checkpoint's.
    for name in ("config.json", "generation_config.json", "tokenizer_config.json", "source.spm", "vocab.json"):
        assert (tmp_path / "hf" / name).read_bytes() == (FIXTURES / kind / name).read_bytes(), name
    assert (tmp_path / "hf" / "model.safetensors").read_bytes() != (FIXTURES / kind / "model.safetensors").read_bytes()
    card = (tmp_path / "hf" / "README.md").read_text(encoding="utf-8")
    assert "fine-tuned on `pairs.tsv`" in card and "for 1 epoch " in card and "license: apache-2.0" in card
