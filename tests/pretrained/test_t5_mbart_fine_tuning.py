"""`train --init-from` an imported MADLAD-400, flan-T5 or mBART-50 run: a lower loss, the tokenizer kept, an export.

MADLAD is fine-tuned into one target language (its `<2xx>` token starts
every source, `--target-lang` alone), mBART-50 on one pair (`--source-lang
--target-lang`, framed as M2M100's), flan-T5 on plain pairs. Each takes two
minutes or more on 2 cores, so all run with the long checks (`-m slow`);
M2M100's fine-tuning (test_multilingual_fine_tuning.py) runs in every run.
"""

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
from keras_transformer.pretrained import export_checkpoint, import_pretrained
from keras_transformer.training import data

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "t5_mbart"
CHATBOT = pathlib.Path(__file__).resolve().parents[2] / "keras_transformer" / "data" / "korean_chatbot"
LANGUAGES = {"madlad": ["--target-lang", "ko"], "mbart50": ["--source-lang", "ko_KR", "--target-lang", "ko_KR"]}


def chatbot_pairs(count, skip=3000):
    with open(CHATBOT / "ChatbotData.csv", encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))[skip : skip + count]
    return [(row["Q"].strip(), row["A"].strip()) for row in rows]


def mean_loss(run, pairs, languages):
    """The model's mean token loss on `pairs` (no label smoothing), framed as training frames them."""
    model = keras.saving.load_model(run / runs.MODEL, compile=False)
    tokenizers = runs.load_tokenizers(run)
    sources, targets = zip(*pairs)
    dataset = tf.data.Dataset.from_tensor_slices({"source": list(sources), "target": list(targets)})
    frame = data.language_frame(tokenizers, languages)
    batches = make_eval_batches(
        dataset, *tokenizers, add_source_end=True, bucket_boundaries=(16, 32, 64), max_length=64, frame=frame
    )
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.0, pad_id=model.config.target_pad)
    total = count = 0.0
    for inputs, labels in batches:
        real = float(np.sum(labels.numpy() != model.config.target_pad))
        total += float(loss(labels, model(inputs, training=False))) * real
        count += real
    return total / count


@pytest.fixture(
    scope="module",
    params=[pytest.param(kind, marks=pytest.mark.slow) for kind in ("madlad", "mbart50", "flan_t5")],
)
def tuned(request, tmp_path_factory):
    """`(kind, imported run, fine-tuned run, pairs)`: a fixture imported, then `train --init-from` 1 epoch."""
    kind, folder = request.param, tmp_path_factory.mktemp(request.param)
    import_pretrained(FIXTURES / kind, folder / "imported")
    pairs = chatbot_pairs(200)
    tsv = folder / "pairs.tsv"
    tsv.write_text("".join(f"{source}\t{target}\n" for source, target in pairs), encoding="utf-8")
    argv = ["train", "--init-from", str(folder / "imported"), "--train-tsv", str(tsv), "--epochs", "1"]
    assert cli.main([*argv, *LANGUAGES.get(kind, []), "--output", str(folder / "tuned")]) == 0
    return kind, folder / "imported", folder / "tuned", pairs


def test_fine_tuning_lowers_the_loss_and_keeps_the_tokenizer(tuned):
    kind, imported, tuned, pairs = tuned
    for side in (runs.SOURCE_TOKENIZER, runs.TARGET_TOKENIZER):
        before = {path.name: path.read_bytes() for path in (imported / side).rglob("*") if path.is_file()}
        assert {path.name: path.read_bytes() for path in (tuned / side).rglob("*") if path.is_file()} == before
    config = runs.RunConfig.read(tuned)
    assert config.model == runs.RunConfig.read(imported).model
    languages = config.languages
    assert languages == {"madlad": {"source_lang": None, "target_lang": "ko"}}.get(
        kind, {"source_lang": "ko_KR", "target_lang": "ko_KR"} if kind == "mbart50" else None
    )
    assert mean_loss(tuned, pairs[:64], languages) < mean_loss(imported, pairs[:64], languages) - 0.01


def test_the_tuned_run_exports_with_the_checkpoints_other_files(tuned, tmp_path):
    kind, _, tuned, _ = tuned
    export_checkpoint(tuned, tmp_path / "hf")
    for path in (FIXTURES / kind).iterdir():
        if path.name in ("config.json", "tokenizer.json", "spiece.model", "sentencepiece.bpe.model"):
            assert (tmp_path / "hf" / path.name).read_bytes() == path.read_bytes(), path.name
    assert (tmp_path / "hf" / "model.safetensors").read_bytes() != (FIXTURES / kind / "model.safetensors").read_bytes()
