"""An imported GPT-2 fine-tuned as a causal language model, and `model.fit` on the imported model itself.

`train --init-from GPT2_RUN --train-text FILE` continues the tiny fixture's
training (tests/data/gpt2: a `GPT2LMHeadModel` trained on the bundled
chatbot corpus) on other texts of that corpus: its held-out perplexity must
fall, its tokenizer files stay byte for byte the checkpoint's, and its
export is the checkpoint with the fine-tuned weights, bit for bit.
"""

import csv
import json
import math
import pathlib
import random

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file

from keras_transformer import runs
from keras_transformer.commands import cli
from keras_transformer.pretrained import export_checkpoint, import_pretrained
from keras_transformer.training import causal_lm, train

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "gpt2"
CHATBOT = ROOT / "keras_transformer" / "data" / "korean_chatbot" / "ChatbotData.csv"


def chatbot_texts(count, skip=0):
    """`count` texts `question answer` of the bundled corpus, in a seeded order (the fixture saw 256 others)."""
    with open(CHATBOT, encoding="utf-8", newline="") as handle:
        rows = [f"{row['Q'].strip()} {row['A'].strip()}" for row in csv.DictReader(handle)]
    random.Random(3).shuffle(rows)
    return rows[skip : skip + count]


def write_texts(path, texts):
    path.write_text("".join(text + "\n" for text in texts), encoding="utf-8")
    return path


def files_under(folder):
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def weights(run):
    return [keras.ops.convert_to_numpy(w) for w in keras.saving.load_model(run / runs.MODEL, compile=False).weights]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpt2") / "run"
    import_pretrained(FIXTURE, path)
    return path


@pytest.fixture(scope="module")
def tuned(imported, tmp_path_factory):
    """`(run, summary)`: the import fine-tuned for one epoch on 600 texts (100 more held out), a short warmup."""
    work = tmp_path_factory.mktemp("tuned")
    files = {
        "train": {"text": write_texts(work / "train.txt", chatbot_texts(600))},
        "validation": {"text": write_texts(work / "valid.txt", chatbot_texts(100, skip=600))},
    }
    summary = train(init_from=imported, output=work / "run", corpus_files=files, epochs=1, verbose=0, warmup_steps=10)
    return work / "run", summary


def test_fine_tuning_lowers_the_held_out_perplexity(tuned):
    run, summary = tuned
    perplexity = summary["perplexity"]
    assert perplexity["after"] < perplexity["before"], perplexity
    assert perplexity["held_out_tokens"] > 1000
    assert runs.RunConfig.read(run).perplexity == perplexity
    # The validation loss is the mean negative log-likelihood of the same tokens (no label smoothing, no padding).
    assert math.isclose(math.exp(summary["best_val_loss"]), perplexity["after"], rel_tol=1e-3)


def test_the_run_keeps_the_checkpoints_tokenizer_and_generation_settings(imported, tuned):
    run, _ = tuned
    assert files_under(run / "tokenizers") == files_under(imported / "tokenizers")
    for name in ("vocab.json", "merges.txt", "tokenizer.json"):
        assert (run / "tokenizers" / "source" / "files" / name).read_bytes() == (FIXTURE / name).read_bytes()
    config, source = runs.RunConfig.read(run), runs.RunConfig.read(imported)
    assert config.decoding == source.decoding and config.model == source.model
    assert config.pretrained["model_type"] == "gpt2" and config.preset.training.label_smoothing == 0.0


def test_the_fine_tuned_export_is_the_checkpoint_with_its_new_weights(tuned, tmp_path):
    run, _ = tuned
    export_checkpoint(run, tmp_path / "hf")
    for name in ("config.json", "generation_config.json", "tokenizer_config.json", "tokenizer.json", "merges.txt"):
        assert (tmp_path / "hf" / name).read_bytes() == (FIXTURE / name).read_bytes(), name
    tensors = load_file(str(tmp_path / "hf" / "model.safetensors"))
    source = load_file(str(FIXTURE / "model.safetensors"))
    assert sorted(tensors) == sorted(source)
    assert not np.array_equal(tensors["transformer.wte.weight"], source["transformer.wte.weight"])  # trained
    import_pretrained(tmp_path / "hf", tmp_path / "again")
    for ours, back in zip(weights(run), weights(tmp_path / "again"), strict=True):
        np.testing.assert_array_equal(ours, back)
    assert "fine-tuned on `train.txt`" in (tmp_path / "hf" / "README.md").read_text(encoding="utf-8")


def test_model_fit_trains_the_imported_keras_model_itself(imported):
    model = keras.saving.load_model(imported / runs.MODEL)  # a `DecoderOnlyModel`, as keras-hub's GPT2CausalLM
    tokenizer = runs.open_run(imported, models=False).tokenizers.target
    batches = causal_lm.packed_batches(chatbot_texts(120), tokenizer, model.config, length=32, rows=8, seed=0)
    model.compile(keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(batches, epochs=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]


def test_bad_input_is_one_line_and_writes_nothing(imported, tmp_path, capsys):
    blank = write_texts(tmp_path / "blank.txt", ["", "   "])
    texts = write_texts(tmp_path / "texts.txt", chatbot_texts(300))
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("a\tb\n", encoding="utf-8")
    cases = [
        (["--init-from", str(imported), "--train-text", str(blank)], "blank.txt holds no text"),
        (["--preset", "tiny", "--train-text", str(texts)], "trains a language model"),
        (["--init-from", str(imported), "--train-text", str(texts), "--train-tsv", str(pairs)], "--train-text"),
    ]
    for index, (argv, message) in enumerate(cases):
        output = tmp_path / f"out{index}"
        code = cli.main(["train", *argv, "--epochs", "1", "--output", str(output)])
        err = capsys.readouterr().err
        assert code == 2 and message in err and err.count("\n") == 1, err
        assert not output.exists()


def test_a_text_of_unknown_characters_is_refused_before_anything_is_written(tmp_path, capsys):
    from keras_transformer.presets import get_preset

    own = _own_language_model(tmp_path / "own", get_preset("gpt-ko"))
    chinese = "我爱你好谢再见中文字没有学过的"
    unknown = write_texts(tmp_path / "unknown.txt", [f"{chinese[i % 15]}{chinese[i // 15]} 中文" for i in range(200)])
    output = tmp_path / "out"
    code = cli.main(["train", "--init-from", str(own), "--train-text", str(unknown), "--output", str(output)])
    err = capsys.readouterr().err
    assert code == 2 and "unknown.txt: its text is unknown to" in err and err.count("\n") == 1, err
    assert not output.exists()


def _own_language_model(path, preset):
    """A run of this package's decoder-only preset, untrained, with a SentencePiece tokenizer of Korean texts.

    Its tokenizer has no byte pieces (as runs trained before `byte_fallback`): a character it has not seen is
    its unknown piece. (GPT-2's byte-level BPE, and this package's tokenizers since, know every character.)
    """
    from keras_transformer import __version__
    from keras_transformer.files import destinations
    from keras_transformer.models import build_decoder_only
    from keras_transformer.tokenizers import SubwordTokenizer

    keras.utils.set_random_seed(0)  # before any tokenizer exists (tensorflow/text#570)
    texts = chatbot_texts(400)  # without byte pieces: a character it has not seen is `<unk>`
    settings = dict(vocab_size=1000, num_threads=1, character_coverage=0.98, byte_fallback=False)
    tokenizer = SubwordTokenizer.train(texts, **settings)
    preset = preset.replace(num_layers=1, d_model=16, num_heads=2, d_ff=32, vocab_size=tokenizer.vocab_size)
    config = preset.model.with_vocabulary(tokenizer.vocab_size, tokenizer.vocab_size)
    run_config = runs.RunConfig(
        created_by=destinations.CREATOR,
        version=__version__,
        preset=preset,
        model=config,
        decoding=preset.decoding,
        finished=True,
        completed_epochs=1,
    )
    path.mkdir(parents=True)
    runs.write_run(path, build_decoder_only(config=config), run_config, runs.Tokenizers(tokenizer, tokenizer))
    return path


@pytest.mark.slow
def test_the_command_line_recipe_lowers_the_perplexity_on_the_chatbot_corpus(imported, tmp_path, capsys):
    """The import's own preset: 5e-5 after 100 warmup steps, annealed over the last third; 4,000 texts."""
    texts = write_texts(tmp_path / "chats.txt", chatbot_texts(4000))
    argv = ["train", "--init-from", str(imported), "--train-text", str(texts), "--output", str(tmp_path / "run")]
    assert cli.main([*argv, "--epochs", "1"]) == 0
    out = capsys.readouterr().out  # Keras's epoch lines, then the summary
    perplexity = json.loads(out[out.index("{\n") :])["perplexity"]
    assert perplexity["after"] < perplexity["before"], perplexity


class _Interrupt(Exception):
    pass


@pytest.mark.slow
def test_mixed_precision_and_an_interrupted_run_resumed(imported, tmp_path, monkeypatch):
    """mixed_float16; the run stopped after its first epoch (backed up), then resumed: the start kept."""
    from keras_transformer.training import callbacks

    files = {"train": {"text": write_texts(tmp_path / "train.txt", chatbot_texts(600))}}
    options = dict(init_from=imported, output=tmp_path / "run", corpus_files=files, verbose=0, warmup_steps=10)
    made = callbacks.run_callbacks

    def stopping_after_the_first_epoch(run, schedule, budget):
        chosen, limit = made(run, schedule, budget)
        stop = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: (_ for _ in ()).throw(_Interrupt()))
        return chosen + [stop], limit

    monkeypatch.setattr(callbacks, "run_callbacks", stopping_after_the_first_epoch)
    with pytest.raises(_Interrupt):
        train(epochs=2, mixed_precision="mixed_float16", **options)
    monkeypatch.setattr(callbacks, "run_callbacks", made)
    started = runs.RunConfig.read(tmp_path / "run")
    assert not started.finished and started.completed_epochs == 1 and started.mixed_precision == "mixed_float16"
    summary = train(epochs=2, mixed_precision="mixed_float16", resume=True, **options)
    assert summary["completed_epochs"] == 2
    assert summary["perplexity"]["before"] == started.perplexity["before"]  # measured once, at the start
    assert summary["perplexity"]["after"] < summary["perplexity"]["before"]
