"""Figures: every plot is a real, non-blank PNG, through the functions and the `plot` command."""

import json

import keras
import numpy as np
import pytest
from matplotlib.figure import Figure

from keras_transformer import build_transformer, plotting, runs
from keras_transformer.commands.cli import main
from keras_transformer.files import atomic
from keras_transformer.plotting import attention_maps

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TINY_MODEL = dict(num_layers=2, d_model=16, num_heads=2, d_ff=32, dropout=0.0, max_length=16)


def assert_png(path, min_width=200, min_height=150):
    """A PNG file of a reasonable size whose pixels are not all the same."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width >= min_width and height >= min_height, (width, height)
    import matplotlib.image

    pixels = matplotlib.image.imread(path)[..., :3]
    assert pixels.std() > 0.05, f"{path} looks blank (pixel std {pixels.std():.4f})"
    # Not a one-colour picture with a frame: many distinct colours.
    assert len(np.unique(pixels.reshape(-1, 3).round(2), axis=0)) > 20


@pytest.fixture(scope="module")
def history_csv(tmp_path_factory):
    """A `history.csv` written by `keras.callbacks.CSVLogger` during a real (tiny) fit."""
    path = tmp_path_factory.mktemp("history") / "history.csv"
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    x = np.random.default_rng(0).normal(size=(32, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    model.fit(
        x, y, validation_split=0.25, epochs=3, batch_size=8, verbose=0, callbacks=[keras.callbacks.CSVLogger(str(path))]
    )
    return path


@pytest.fixture(scope="module")
def run_directory(tmp_path_factory):
    """A training run directory (the `runs` layout) holding an untrained tiny model."""
    from keras_transformer.tokenizers import SubwordTokenizer

    path = tmp_path_factory.mktemp("run")
    lines = [
        "a man is riding a bike",
        "two dogs play in the park",
        "a woman reads a book",
        "the children are running",
        "a dog is riding in a car",
    ] * 20
    tokenizer = SubwordTokenizer.train(lines, vocab_size=60, byte_fallback=False)
    tokenizer.save(str(path / runs.SOURCE_TOKENIZER))
    tokenizer.save(str(path / runs.TARGET_TOKENIZER))
    model_kwargs = dict(source_vocab_size=tokenizer.vocab_size, target_vocab_size=tokenizer.vocab_size, **TINY_MODEL)
    keras.utils.set_random_seed(0)
    build_transformer(**model_kwargs).save(path / runs.MODEL)
    atomic.write_json(path / runs.CONFIG, {"model": model_kwargs})
    return path


def test_positional_encoding(tmp_path):
    figure = plotting.plot_positional_encoding(50, 128, output=tmp_path / "pe.png")
    assert isinstance(figure, Figure)
    ax = figure.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("Depth", "Position")
    assert ax.collections[0].get_cmap().name == "RdBu"
    assert ax.collections[0].get_array().shape == (50, 128)
    assert_png(tmp_path / "pe.png")


def test_schedule(tmp_path):
    figure = plotting.plot_schedule(128, warmup_steps=400, steps=2000, output=tmp_path / "lr.png")
    x, y = figure.axes[0].lines[0].get_data()
    assert len(x) == 2000 and int(x[np.argmax(y)]) == 400  # the peak is at the end of warm-up
    np.testing.assert_allclose(y.max(), 128**-0.5 * 400**-0.5, rtol=1e-5)
    assert_png(tmp_path / "lr.png")


def test_masks(tmp_path):
    figure = plotting.plot_masks([[5, 7, 9, 0, 0], [3, 4, 0, 0, 0]], output=tmp_path / "masks.png")
    padding, causal, combined = (ax.images[0].get_array() for ax in figure.axes[:3])
    np.testing.assert_array_equal(padding, [[1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])
    np.testing.assert_array_equal(causal, np.tril(np.ones((5, 5))))  # True = may attend
    np.testing.assert_array_equal(combined[4], [1, 1, 1, 0, 0])
    assert_png(tmp_path / "masks.png")
    plotting.plot_mask(np.tril(np.ones((4, 4), bool)), "causal", output=tmp_path / "one.png")
    assert_png(tmp_path / "one.png", min_width=100, min_height=100)


def test_attention_weights_and_heads(tmp_path):
    keras.utils.set_random_seed(1)
    model = build_transformer(50, 50, **TINY_MODEL)
    source = np.array([[5, 6, 7, 8, 0, 0], [9, 10, 0, 0, 0, 0]], "int32")
    target = np.array([[2, 11, 12, 0], [2, 13, 0, 0]], "int32")
    weights = attention_maps.attention_weights(model, source, target)
    assert [w.shape for w in weights["encoder"]] == [(2, 2, 6, 6)] * 2
    assert [w.shape for w in weights["decoder_self"]] == [(2, 2, 4, 4)] * 2
    assert [w.shape for w in weights["decoder_cross"]] == [(2, 2, 4, 6)] * 2
    cross = weights["decoder_cross"][-1]
    np.testing.assert_allclose(cross[0].sum(-1), 1.0, atol=1e-5)
    assert np.all(cross[0, :, :, 4:] == 0) and np.all(cross[1, :, :, 2:] == 0)  # padded source keys
    self_attention = weights["decoder_self"][0][0]
    assert np.all(np.triu(self_attention, k=1) == 0)  # no look-ahead

    figure = plotting.plot_attention_heads(
        cross[0],
        ["ein", "Mann", "</s>", "<pad>"],
        ["a", "man", "rides", "</s>"],
        title="cross",
        output=tmp_path / "heads.png",
    )
    assert len([ax for ax in figure.axes if ax.images]) == 2  # one panel per head
    assert figure.axes[0].images[0].get_array().shape == (4, 4)  # cut to the tokens given
    assert [t.get_text() for t in figure.axes[0].get_xticklabels()] == ["a", "man", "rides", "</s>"]
    assert_png(tmp_path / "heads.png")


def test_attention_heads_rejects_bad_input():
    with pytest.raises(ValueError, match="heads, q_len, k_len"):
        plotting.plot_attention_heads(np.zeros((1, 2, 3, 4)), ["a"], ["b"])
    with pytest.raises(ValueError, match="More tokens"):
        plotting.plot_attention_heads(np.zeros((2, 2, 2)), ["a", "b", "c"])
    with pytest.raises(ValueError, match="png"):
        plotting.save_figure(plotting.new_figure(), "figure.jpg")


def test_history(tmp_path, history_csv):
    figure = plotting.plot_history(history_csv, output=tmp_path / "curves.png")
    titles = [ax.get_title() for ax in figure.axes]
    assert titles == ["loss", "accuracy"]
    assert [line.get_label() for line in figure.axes[0].lines] == ["train", "validation"]
    assert len(figure.axes[0].lines[0].get_xdata()) == 3
    assert_png(tmp_path / "curves.png")
    # A keras History-like dict works too, with the package's metric names.
    figure = plotting.plot_history(
        {
            "loss": [3, 2],
            "masked_accuracy": [0.1, 0.3],
            "val_loss": [3.1, 2.5],
            "val_masked_accuracy": [0.1, 0.2],
            "learning_rate": [1e-3, 1e-3],
        }
    )
    assert [ax.get_title() for ax in figure.axes] == ["loss", "masked accuracy"]


def test_cli_figures(tmp_path, history_csv):
    assert (
        main(["plot", "positional-encoding", "--length", "20", "--depth", "64", "--output", str(tmp_path / "pe.png")])
        == 0
    )
    assert_png(tmp_path / "pe.png")
    assert (
        main(
            [
                "plot",
                "schedule",
                "--d-model",
                "256",
                "--warmup-steps",
                "100",
                "--steps",
                "500",
                "--output",
                str(tmp_path / "lr.png"),
            ]
        )
        == 0
    )
    assert_png(tmp_path / "lr.png")
    assert main(["plot", "history", "--csv", str(history_csv), "--output", str(tmp_path / "h.png")]) == 0
    assert_png(tmp_path / "h.png")


def test_cli_attention(tmp_path, run_directory):
    output = tmp_path / "cross.png"  # the model's own greedy output as the target
    assert (
        main(
            [
                "plot",
                "attention",
                "--model",
                str(run_directory),
                "--sentence",
                "a man is riding a bike",
                "--max-length",
                "4",
                "--columns",
                "1",
                "--output",
                str(output),
            ]
        )
        == 0
    )
    assert_png(output)
    for attention, layer in (("encoder", "-1"), ("decoder-self", "0")):
        output = tmp_path / f"{attention}.png"
        assert (
            main(
                [
                    "plot",
                    "attention",
                    "--model",
                    str(run_directory),
                    "--sentence",
                    "a dog",
                    "--target",
                    "two dogs play",
                    "--attention",
                    attention,
                    "--layer",
                    layer,
                    "--output",
                    str(output),
                ]
            )
            == 0
        )
        assert_png(output)
    assert (
        main(
            [
                "plot",
                "attention",
                "--model",
                str(run_directory),
                "--sentence",
                "a dog",
                "--target",
                "a",
                "--layer",
                "5",
                "--output",
                str(tmp_path / "bad.png"),
            ]
        )
        == 2
    )


def test_cli_errors(tmp_path, capsys):
    assert main(["plot", "history", "--csv", str(tmp_path / "missing.csv"), "--output", str(tmp_path / "h.png")]) == 2
    assert "No history file" in capsys.readouterr().err
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text(json.dumps({}))
    assert (
        main(
            [
                "plot",
                "attention",
                "--model",
                str(tmp_path / "run"),
                "--sentence",
                "x",
                "--output",
                str(tmp_path / "a.png"),
            ]
        )
        == 2
    )
    assert "not a training run" in capsys.readouterr().err
    assert not (tmp_path / "h.png").exists() and not (tmp_path / "a.png").exists()


def test_sentence_attention(run_directory):
    from keras_transformer.commands.plot import load_run

    model, source_tokenizer, target_tokenizer = load_run(run_directory)
    result = attention_maps.sentence_attention(
        model, source_tokenizer, "a man is riding", target_tokenizer, target="two dogs play"
    )
    assert result["input_tokens"][0] == "<s>" and result["output_tokens"][-1] == "</s>"
    assert result["input_tokens"][1:] == result["output_tokens"][:-1]  # teacher forcing: shifted by one
    cross = result["weights"]["decoder_cross"][-1]
    assert cross.shape == (1, 2, len(result["output_tokens"]), len(result["source_tokens"]))
    greedy = attention_maps.sentence_attention(model, source_tokenizer, "a dog", max_length=5)
    assert 1 <= len(greedy["output_tokens"]) <= 5
    assert greedy["weights"]["decoder_self"][0].shape[-1] == len(greedy["input_tokens"])
    with pytest.raises(ValueError, match="no tokens"):
        attention_maps.sentence_attention(model, source_tokenizer, "   ")
