"""`train --init-from` an imported M2M100 or NLLB run on one language pair: transformers' ids, a lower loss.

The pairs are framed with their language tokens exactly as transformers'
tokenizers frame them for fine-tuning (`tokenizer(sources,
text_target=targets)` with `src_lang` and `tgt_lang`, decoder inputs
`shift_tokens_right(labels)`): tests/data/m2m100/make_fixtures.py records
those ids under `training` in each fixture's reference.json, so that this
needs neither torch nor transformers.
"""

import json
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import runs
from keras_transformer.commands import cli
from keras_transformer.datasets import make_eval_batches
from keras_transformer.export import load
from keras_transformer.files import destinations
from keras_transformer.losses import MaskedSparseCategoricalCrossentropy
from keras_transformer.pretrained import import_pretrained
from keras_transformer.training import data

import own_runs

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "m2m100"
MARIAN = pathlib.Path(__file__).resolve().parents[1] / "data" / "marian" / "separate"
PAIR = {"m2m100": ("ko", "en"), "nllb": ("kor_Hang", "eng_Latn")}


@pytest.fixture(scope="module", params=["m2m100", "nllb"])
def imported(request, tmp_path_factory):
    """`(kind, imported run, reference)` of each fixture."""
    run = tmp_path_factory.mktemp(request.param) / "imported"
    import_pretrained(FIXTURES / request.param, run)
    reference = json.loads((FIXTURES / request.param / "reference.json").read_text(encoding="utf-8"))
    return request.param, run, reference


def batch_rows(run, pairs, languages, source_position="first"):
    """`[(encoder ids, decoder ids, labels)]` of the training batches of `pairs`, padding removed, in their order."""
    config = runs.RunConfig.read(run)
    preset = config.preset.replace(token_budget=16, bucket_boundaries=(16,))  # one pair a batch: none dropped
    tokenizers = runs.load_tokenizers(run)
    tokenizers.source.source_position = source_position
    splits = {"train": pairs, "validation": pairs[:1]}
    train, _ = data.make_datasets(preset, splits, tokenizers, seed=0, add_source_end=True, languages=languages)
    pad = config.model.pad_id
    rows = []
    for inputs, labels in train:
        encoder, decoder = (np.asarray(inputs[name])[0] for name in ("encoder_inputs", "decoder_inputs"))
        labels = np.asarray(labels)[0]
        real = labels != pad
        rows.append((encoder[encoder != pad].tolist(), decoder[real].tolist(), labels[real].tolist()))
    return sorted(rows)


def test_training_batches_hold_transformers_ids_for_each_pair_of_languages(imported):
    kind, run, reference = imported
    pairs = [tuple(pair) for pair in reference["training"]["pairs"]]
    framings = reference["training"]["framings"]
    assert len(framings) == (4 if kind == "nllb" else 2)
    for framing in framings:
        languages = {key: framing[key] for key in ("source_lang", "target_lang")}
        legacy = framing["legacy_behaviour"]
        ours = batch_rows(run, pairs, languages, "last" if legacy else "first")
        start, end = 2, 2  # fairseq decodes from </s>
        if legacy:
            # transformers' legacy tokenizer puts the target language last too (`Y </s> [tgt]`), where `generate`
            # forces it first: the sources are its, the targets framed as the model decodes.
            targets = [[labels[-1], *labels[:-2], end] for labels in framing["labels"]]
            assert all(labels[-2:] == [end, target[0]] for labels, target in zip(framing["labels"], targets))
            theirs = [(i, [start, *target[:-1]], target) for i, target in zip(framing["input_ids"], targets)]
        else:
            theirs = list(zip(framing["input_ids"], framing["decoder_input_ids"], framing["labels"]))
            assert all(d == [start] + labels[:-1] for _, d, labels in theirs)  # shift_tokens_right
        assert ours == sorted(map(tuple, theirs)), (kind, languages, legacy)


def fine_tune(imported_run, output, *languages, tsv, epochs=1):
    argv = ["train", "--init-from", str(imported_run), "--train-tsv", str(tsv), "--epochs", str(epochs)]
    flags = [item for flag, code in zip(("--source-lang", "--target-lang"), languages) for item in (flag, code)]
    return cli.main([*argv, *flags, "--output", str(output)])


@pytest.mark.parametrize(
    "languages, named",
    [
        ((), "name the pair it is fine-tuned on with both --source-lang kor_Hang --target-lang fra_Latn"),
        (("kor_Hang",), "Received: --source-lang kor_Hang"),
        (("kor_Hang", "eng_Latm"), "'eng_Latm' is not a language of this model; close: eng_Latn"),
    ],
)
def test_a_multilingual_run_without_its_pair_is_refused_in_one_line(tmp_path, capsys, languages, named):
    imported = tmp_path / "imported"
    import_pretrained(FIXTURES / "nllb", imported)
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("안녕\tHello\n" * 4, encoding="utf-8")
    capsys.readouterr()
    assert fine_tune(imported, tmp_path / "tuned", *languages, tsv=tsv) == 2
    err = capsys.readouterr().err.strip()
    assert named in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "tuned").exists()


def test_languages_for_a_run_of_one_pair_are_refused_in_one_line(tmp_path, capsys):
    imported = tmp_path / "imported"
    import_pretrained(MARIAN, imported)
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("안녕\tHello\n" * 4, encoding="utf-8")
    capsys.readouterr()
    assert fine_tune(imported, tmp_path / "tuned", "ko", "en", tsv=tsv) == 2
    err = capsys.readouterr().err.strip()
    assert "translates one language pair: it takes no source or target language. Received: --source-lang ko" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "tuned").exists()
    argv = ["train", "--preset", "tiny", "--target-lang", "en", "--output", str(tmp_path / "scratch")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "--init-from RUN" in err and len(err.splitlines()) == 1 and not (tmp_path / "scratch").exists(), err


def mean_loss(run, pairs, languages):
    """The model's mean token loss on `pairs` (no label smoothing), framed as training frames them."""
    model = keras.saving.load_model(run / runs.MODEL, compile=False)
    tokenizers = runs.load_tokenizers(run)
    sources, targets = zip(*pairs)
    strings = tf.data.Dataset.from_tensor_slices({"source": list(sources), "target": list(targets)})
    frame = data.language_frame(tokenizers, languages)
    batches = make_eval_batches(
        strings, *tokenizers, add_source_end=True, frame=frame, bucket_boundaries=(16, 32, 64), max_length=64
    )
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.0, pad_id=model.config.target_pad)
    total = count = 0.0
    for inputs, labels in batches:
        real = float(np.sum(labels.numpy() != model.config.target_pad))
        total += float(loss(labels, model(inputs, training=False))) * real
        count += real
    return total / count


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """`(imported NLLB run, the run fine-tuned from it on Korean -> English pairs, the pairs)`."""
    folder = tmp_path_factory.mktemp("nllb-tuned")
    import_pretrained(FIXTURES / "nllb", folder / "imported")
    pairs = own_runs.chatbot_pairs(200, skip=3000)
    tsv = folder / "pairs.tsv"
    tsv.write_text("".join(f"{source}\t{target}\n" for source, target in pairs), encoding="utf-8")
    assert fine_tune(folder / "imported", folder / "tuned", *PAIR["nllb"], tsv=tsv, epochs=2) == 0
    return folder / "imported", folder / "tuned", pairs


def test_fine_tuning_on_a_pair_lowers_its_loss_and_keeps_the_tokenizer(tuned):
    imported, tuned, pairs = tuned
    for side in (runs.SOURCE_TOKENIZER, runs.TARGET_TOKENIZER):
        before = {p.relative_to(imported): p.read_bytes() for p in (imported / side).rglob("*") if p.is_file()}
        assert {p.relative_to(tuned): p.read_bytes() for p in (tuned / side).rglob("*") if p.is_file()} == before
    config = runs.RunConfig.read(tuned)
    languages = dict(zip(("source_lang", "target_lang"), PAIR["nllb"]))
    assert config.languages == languages and config.add_source_end
    before, after = mean_loss(imported, pairs, languages), mean_loss(tuned, pairs, languages)
    assert after < before - 0.01, (before, after)


def test_the_tuned_run_translates_into_its_pair_by_default(tuned):
    imported, tuned, pairs = tuned
    sentences = [source for source, _ in pairs[:8]] + ["", "오늘 너무 힘들었어"]
    translator = load(tuned, beam_size=1, max_length=16)
    assert (translator.languages.source_lang, translator.languages.target_lang) == PAIR["nllb"]
    named = load(tuned, beam_size=1, max_length=16, source_lang="kor_Hang", target_lang="eng_Latn")
    ours = translator.greedy(sentences).numpy().tolist()
    assert ours == named.greedy(sentences).numpy().tolist()
    into_korean = translator.greedy(sentences, target_lang="kor_Hang").numpy().tolist()
    assert ours != into_korean  # the language still chooses the output
    # The import itself has no default target language: the run's config.json gave it.
    assert load(imported, beam_size=1).languages.target_lang is None


def test_the_import_and_the_tuned_run_own_the_tokenizers_checkpoint_files(tuned):
    """Each tokenizer's `files/` (the checkpoint's own) is the run's: a run there is replaced, not refused."""
    imported, tuned, _ = tuned
    for run in (imported, tuned):
        assert destinations.check_destination(run, destinations.RUN) == "ours"
    recorded = runs.RunConfig.read(tuned).files
    assert "tokenizers/source/files/tokenizer.json" in recorded and "tokenizers/target/files/tokenizer.json" in recorded
