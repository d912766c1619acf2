"""`train --init-from BERT_RUN --train-tsv text<TAB>label`: an imported BERT fine-tuned as a text classifier.

Fast tests train the tiny fixtures for a few steps on a few hundred lines of
the bundled chatbot corpus (its label column as words): the loss falls, the
head is the checkpoint's or a new one as the labels say, the tokenizer files
are the checkpoint's, and the run classifies, with its held-out accuracy
recorded. A tiny random BERT learns little Korean in a few steps, so whether
fine-tuning beats the majority class is the slow test's, on the whole corpus.
Bad label files are one line, before anything is written.
"""

import csv
import json
import random

import keras
import numpy as np
import pytest
from checkpoint_layouts import LAYOUTS

from keras_transformer import export, runs
from keras_transformer.commands import cli
from keras_transformer.datasets import corpora
from keras_transformer.pretrained import import_pretrained
from keras_transformer.training import train

BERT = LAYOUTS.parent / "bert"  # a BertForMaskedLM of 64 positions
NAMES = {"0": "everyday", "1": "parting", "2": "love"}  # the order of the classifier fixture's id2label


def chatbot_rows(count=None, seed=0, short=False):
    """`(question, label)` of the bundled chatbot corpus, its labels as words, shuffled with `seed`.

    `short`: only questions of at most 16 tokens for both fixtures' tokenizers, so that a fast test's batches
    are of one shape (the first length bucket), which XLA compiles once.
    """
    path = corpora.BUNDLED_DIR / "korean_chatbot" / corpora.CHATBOT_FILE
    with open(path, encoding="utf-8") as handle:
        rows = [(question, NAMES[label.strip()]) for question, _, label in list(csv.reader(handle))[1:]]
    random.Random(seed).shuffle(rows)
    if short:
        rows = rows[: 3 * count]
        lengths = [[len(ids) for ids in tokenizer.encode([text for text, _ in rows])] for tokenizer in _tokenizers()]
        rows = [row for row, *sizes in zip(rows, *lengths) if max(sizes) <= 16]
    return rows[:count]


def _tokenizers():
    from keras_transformer.tokenizers.huggingface import HuggingFaceTokenizer

    ids = dict(pad_id=0, start_id=None, end_id=None)
    classifier = HuggingFaceTokenizer.from_tokenizer_file(LAYOUTS / "bert-classifier" / "tokenizer.json", 999, **ids)
    return classifier, HuggingFaceTokenizer.from_tokenizer_file(BERT / "tokenizer.json", 900, **ids)


def write_tsv(path, rows):
    path.write_text("".join(f"{text}\t{label}\n" for text, label in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    work = tmp_path_factory.mktemp("bert-classifiers")
    import_pretrained(LAYOUTS / "bert-classifier", work / "classifier")
    import_pretrained(BERT, work / "masked-lm")
    rows = chatbot_rows(192, short=True)  # two batches of 64 to train on, one to hold out
    files = {
        "train": write_tsv(work / "train.tsv", rows[:128]),
        "validation": write_tsv(work / "valid.tsv", rows[128:]),
    }
    return work, files


@pytest.fixture(scope="module")
def tuned(imported):
    """The classifier fixture fine-tuned for 3 short epochs, at a rate a random tiny model learns at."""
    work, files = imported
    summary = train(
        init_from=work / "classifier",
        output=work / "tuned",
        corpus_files=files,
        epochs=3,
        warmup_steps=4,
        learning_rate_scale=1e-3 * (32 * 4) ** 0.5,
        verbose=0,
    )
    return work / "tuned", summary


def test_fine_tuning_trains_the_checkpoints_own_head_and_the_loss_falls(imported, tuned):
    run, summary = tuned
    config = runs.RunConfig.read(run)
    assert config.finished and config.model.encoder_head == "classifier" and config.model.num_classes == 3
    assert config.pretrained["labels"] == ["everyday", "parting", "love"]  # the checkpoint's order, kept
    figures = summary["classifier"]
    assert figures == config.classifier and figures["head"] == "checkpoint's" and figures["held_out"] == 64
    assert 0 <= figures["accuracy"] <= 1 and figures["majority_class"] in NAMES.values()
    with open(run / runs.HISTORY, encoding="utf-8") as handle:
        losses = [float(row["loss"]) for row in csv.DictReader(handle)]
    assert len(losses) == 3 and losses[-1] < losses[0]
    assert config.preset.training.warmup_steps == 4 and config.init_from["run"].endswith("classifier")


def test_the_tokenizer_files_are_the_checkpoints_and_the_run_classifies(imported, tuned):
    run, _ = tuned
    work, _ = imported
    for side in ("source", "target"):
        folder = run / "tokenizers" / side
        assert sorted(p.name for p in (folder / "files").iterdir()) == [
            "special_tokens_map.json",
            "tokenizer.json",
            "vocab.txt",
        ]
        for path in (folder / "files").iterdir():
            assert path.read_bytes() == (LAYOUTS / "bert-classifier" / path.name).read_bytes()
    results = export.load(run).classify(["오늘 너무 힘들었어", ("고마워", "정말")])
    assert [sorted(row["label"] for row in result) for result in results] == [sorted(NAMES.values())] * 2


@pytest.mark.slow  # fine-tunes a second head: 20 s
def test_labels_the_checkpoint_lacks_train_a_new_head_in_sorted_order(imported):
    work, _ = imported
    renamed = {"everyday": "calm", "parting": "sad", "love": "happy"}
    rows = [(text, renamed[label]) for text, label in chatbot_rows(192, seed=2, short=True)]
    files = {
        "train": write_tsv(work / "new.tsv", rows[:128]),
        "validation": write_tsv(work / "new-valid.tsv", rows[128:]),
    }
    summary = train(init_from=work / "masked-lm", output=work / "new-head", corpus_files=files, epochs=1, verbose=0)
    config = runs.RunConfig.read(work / "new-head")
    assert config.model.encoder_head == "classifier" and config.model.num_classes == 3
    assert config.pretrained["labels"] == ["calm", "happy", "sad"] and config.pretrained["problem_type"] is None
    assert summary["classifier"]["head"] == "new"
    start = keras.saving.load_model(work / "masked-lm" / runs.MODEL, compile=False)
    assert config.model.replace(encoder_head="masked_lm", num_classes=None) == start.config  # the encoder's shape


@pytest.mark.parametrize(
    "labels, message",
    [
        (lambda label: "joy", "every line has the label 'joy': a classifier tells two labels or more apart"),
        (
            lambda label: "sad" if label == "love" else label,
            "the label 'sad' is not one of the 3 labels of .*classifier's classifier .*: label every line with its "
            "labels to fine-tune its classifier, or with none of them to train a new one",
        ),
    ],
)
def test_bad_label_files_are_one_line_and_nothing_is_written(imported, labels, message, capsys):
    work, _ = imported
    rows = [(text, labels(label)) for text, label in chatbot_rows(200)]
    tsv = write_tsv(work / "bad.tsv", rows)
    output = work / "never"
    status = cli.main(
        ["train", "--init-from", str(work / "classifier"), "--train-tsv", str(tsv), "--output", str(output)]
    )
    error = capsys.readouterr().err.strip()
    assert status == 2 and error.startswith("keras-transformer train: error: ") and "\n" not in error
    assert __import__("re").search(message, error), error
    assert not output.exists()


def test_a_validation_label_no_training_line_has_is_refused(imported):
    work, _ = imported
    rows = chatbot_rows(200)
    files = {
        "train": write_tsv(work / "two.tsv", [(t, "a" if i % 2 else "b") for i, (t, _) in enumerate(rows[:150])]),
        "validation": write_tsv(work / "three.tsv", [(t, "c") for t, _ in rows[150:]]),
    }
    with pytest.raises(ValueError, match=r"three.tsv: the label 'c' is on no line of .*two.tsv"):
        train(init_from=work / "masked-lm", output=work / "never", corpus_files=files, epochs=1)
    assert not (work / "never").exists()


def test_model_fit_works_on_the_imported_keras_model_directly(imported, tmp_path):
    """As keras-hub's `BertTextClassifier.from_preset(...).fit(...)`: the run's model.keras is a Keras model."""
    work, _ = imported
    model = keras.saving.load_model(work / "classifier" / runs.MODEL)
    tokenizer = runs.load_tokenizers(work / "classifier").source
    rows = chatbot_rows(64, seed=1)
    ids = tokenizer.encode([text for text, _ in rows])
    tokens = np.zeros((len(ids), max(map(len, ids))), np.int32)
    for index, row in enumerate(ids):
        tokens[index, : len(row)] = row
    labels = np.array([list(NAMES.values()).index(label) for _, label in rows])
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        jit_compile=False,  # a test's few steps: XLA's compile would take longer than they do
    )
    history = model.fit({"token_ids": tokens, "segment_ids": np.zeros_like(tokens)}, labels, epochs=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    model.save(tmp_path / "tuned.keras")
    again = keras.saving.load_model(tmp_path / "tuned.keras")
    np.testing.assert_allclose(again.predict(tokens, verbose=0), model.predict(tokens, verbose=0), atol=1e-6)


@pytest.mark.slow
def test_fine_tuning_on_the_whole_corpus_beats_the_majority_class(tmp_path):
    """The classifier fixture (random weights, width 32) fine-tuned on the chatbot corpus's questions.

    The held-out lines are 1% of the corpus (118), as `train` holds them
    out. A random tiny model needs a higher rate than a pretrained BERT's
    5e-5: 1e-3 after 100 steps. The majority class (everyday) is 45% of them.
    """
    import_pretrained(LAYOUTS / "bert-classifier", tmp_path / "classifier")
    tsv = write_tsv(tmp_path / "chatbot.tsv", chatbot_rows())
    summary = train(
        init_from=tmp_path / "classifier",
        output=tmp_path / "tuned",
        corpus_files={"train": tsv},
        epochs=6,
        learning_rate_scale=1e-3 * (32 * 100) ** 0.5,
        verbose=0,
    )
    figures = summary["classifier"]
    print(json.dumps(figures))
    assert figures["accuracy"] > figures["majority"] + 0.1, figures
