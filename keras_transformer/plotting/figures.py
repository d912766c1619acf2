"""Matplotlib figures: positional encoding, schedule, masks, attention heads, training curves.

Every `plot_*` function builds a `matplotlib.figure.Figure` on an Agg canvas
(no pyplot, no global backend change, safe in scripts, tests and servers),
returns it, and also writes a PNG when `output` is given. In a notebook run
`%matplotlib inline` once and the returned figure shows as the cell's result.

Example:

>>> from keras_transformer import attention_maps, plotting
>>> fig = plotting.plot_positional_encoding(50, 128, output="positional_encoding.png")
>>> result = attention_maps.sentence_attention(model, tokenizer, "A man is riding a bike.")
>>> fig = plotting.plot_attention_heads(result["weights"]["decoder_cross"][-1][0],
...                                     result["output_tokens"], result["source_tokens"])

This module only draws: running a model for its attention maps is
`keras_transformer.plotting.attention_maps`. The `keras-transformer plot` command
draws the same figures.
"""

import csv
import math
import os
import pathlib

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from keras_transformer.files import atomic

DEFAULT_DPI = 100

__all__ = [
    "new_figure",
    "plot_attention_heads",
    "plot_history",
    "plot_mask",
    "plot_masks",
    "plot_positional_encoding",
    "plot_schedule",
    "read_history",
    "save_figure",
]


def new_figure(figsize=(6.4, 4.8), dpi=DEFAULT_DPI):
    """A `Figure` on its own Agg canvas, independent of `pyplot`'s global state."""
    figure = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def png_path(output):
    """`output` as a `pathlib.Path`, or a `ValueError` if it does not name a `.png` file."""
    output = pathlib.Path(output)
    if output.suffix.lower() != ".png":
        raise ValueError(f"`output` must be a .png file. Received: output={str(output)!r}")
    return output


def save_figure(figure, output, dpi=None):
    """Writes `figure` as a PNG at `output` (parent folders are created); returns the path."""
    output = png_path(output)
    with atomic.atomic_path(output, ".png") as tmp:
        figure.savefig(tmp, dpi=dpi or figure.dpi, format="png")
    return output


def _finish(figure, output, dpi=None):
    if output is not None:
        save_figure(figure, output, dpi)
    return figure


_CJK_FONTS = (
    "Noto Sans CJK KR",
    "Noto Sans KR",
    "NanumGothic",
    "Malgun Gothic",
    "AppleGothic",
    "Noto Sans CJK JP",
    "Noto Sans CJK SC",
    "Arial Unicode MS",
)


def _token_fonts():
    """Font families for token labels: DejaVu Sans, then any installed CJK font as a fallback."""
    from matplotlib import font_manager

    installed = {font.name for font in font_manager.fontManager.ttflist}
    return ["DejaVu Sans"] + [name for name in _CJK_FONTS if name in installed]


def _to_numpy(x):
    if hasattr(x, "numpy"):
        x = x.numpy()
    else:
        try:
            from keras import ops

            x = ops.convert_to_numpy(x)
        except Exception:  # noqa: BLE001  (a list, tuple or NumPy array already)
            pass
    return np.asarray(x)


# -- positional encoding and schedule ----------------------------------------


def plot_positional_encoding(length=50, depth=128, output=None, dpi=None, cmap="RdBu"):
    """Heatmap of the sinusoidal table `positional_encoding(length, depth)`.

    Rows are positions, columns the encoding's dimensions: the left columns
    oscillate fast along the positions, the right ones slowly (the
    wavelengths form a geometric progression from 2π to 10000·2π).

    Args:
        length: number of positions (50 in the TensorFlow tutorial).
        depth: encoding size, `d_model` (128 in the tutorial).
        output: optional PNG path to write.
        dpi: resolution of the PNG (defaults to the figure's).
        cmap: a matplotlib colormap; a diverging one shows the sign.

    Returns:
        The `matplotlib.figure.Figure`.
    """
    from keras_transformer.layers.positional_encoding import positional_encoding

    table = positional_encoding(length, depth)
    figure = new_figure(figsize=(8, 4.2))
    ax = figure.add_subplot()
    image = ax.pcolormesh(table, cmap=cmap, vmin=-1, vmax=1)
    ax.set_xlabel("Depth")
    ax.set_ylabel("Position")
    ax.set_xlim(0, depth)
    ax.set_ylim(length, 0)
    ax.set_title(f"Sinusoidal positional encoding ({length} positions × {depth} dimensions)")
    figure.colorbar(image, ax=ax)
    return _finish(figure, output, dpi)


def plot_schedule(d_model=512, warmup_steps=4000, steps=40000, scale=1.0, output=None, dpi=None, compare_d_models=()):
    """The learning rate of `WarmupSchedule` over `steps` optimizer updates.

    Args:
        d_model, warmup_steps, scale: the schedule's arguments.
        steps: the number of updates on the x axis.
        output: optional PNG path to write.
        dpi: resolution of the PNG.
        compare_d_models: other widths to draw beside `d_model` (same warmup).

    Returns:
        The `matplotlib.figure.Figure`.
    """
    from keras_transformer.schedules import WarmupSchedule

    if steps < 1:
        raise ValueError(f"`steps` must be positive. Received: steps={steps}")
    iterations = np.arange(steps, dtype="float32")
    figure = new_figure(figsize=(6.4, 4))
    ax = figure.add_subplot()
    for width in (d_model, *compare_d_models):
        rates = _to_numpy(WarmupSchedule(width, warmup_steps, scale)(iterations))
        ax.plot(iterations + 1, rates, label=f"d_model={width}")
    ax.axvline(warmup_steps, color="gray", linestyle=":", linewidth=1)
    ax.annotate(
        f"warmup_steps={warmup_steps}",
        (warmup_steps, 0),
        xytext=(4, 4),
        textcoords="offset points",
        color="gray",
        fontsize=8,
    )
    ax.set_xlabel("Train step")
    ax.set_ylabel("Learning rate")
    ax.set_title("d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)")
    ax.legend()
    ax.grid(alpha=0.3)
    return _finish(figure, output, dpi)


# -- masks ---------------------------------------------------------------------


def plot_mask(
    mask,
    title=None,
    x_labels=None,
    y_labels=None,
    ax=None,
    output=None,
    dpi=None,
    xlabel="Key position",
    ylabel="Query position",
):
    """A boolean mask as an image: dark = `True` (may attend), light = `False` (blocked).

    Masks follow the Keras convention: `True` where attention is **allowed**.

    Args:
        mask: a 1-D `(length,)` or 2-D `(rows, columns)` boolean array or tensor.
        title: subplot title.
        x_labels, y_labels: optional tick labels (tokens).
        ax: draw into this `Axes` instead of a new figure.
        output: optional PNG path to write (ignored when `ax` is given).
        dpi: resolution of the PNG.
        xlabel, ylabel: axis titles.

    Returns:
        The `Figure` holding the plot.
    """
    mask = _to_numpy(mask).astype(bool)
    if mask.ndim == 1:
        mask = mask[None]
    if mask.ndim != 2:
        raise ValueError(f"`mask` must be 1-D or 2-D. Received: mask.shape={mask.shape}")
    own = ax is None
    if own:
        figure = new_figure(figsize=(max(2.5, 0.4 * mask.shape[1] + 1.2), max(1.6, 0.4 * mask.shape[0] + 1.2)))
        ax = figure.add_subplot()
    figure = ax.figure
    ax.imshow(mask, cmap="Greys", vmin=-0.25, vmax=1.25, interpolation="nearest")
    rows, columns = mask.shape
    for i in range(rows):
        for j in range(columns):
            ax.text(
                j,
                i,
                "T" if mask[i, j] else "F",
                ha="center",
                va="center",
                fontsize=7,
                color="white" if mask[i, j] else "black",
            )
    ax.set_xticks(
        range(columns), x_labels if x_labels is not None else range(columns), rotation=90 if x_labels is not None else 0
    )
    ax.set_yticks(range(rows), y_labels if y_labels is not None else range(rows))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    return _finish(figure, output if own else None, dpi)


def plot_masks(token_ids, pad_id=0, output=None, dpi=None):
    """The padding, look-ahead and combined decoder self-attention masks of a batch.

    Args:
        token_ids: integer ids `(batch, length)`, `pad_id` = padding.
        pad_id: the padding id.
        output: optional PNG path to write.
        dpi: resolution of the PNG.

    Returns:
        A figure with three panels: `padding_mask(token_ids)` (one row per
        sequence), `causal_mask(length)`, and for the first sequence the AND of
        the two, which is what decoder self-attention uses (`True` = may attend).
    """
    from keras_transformer.layers.masks import causal_mask, padding_mask

    token_ids = _to_numpy(token_ids)
    if token_ids.ndim != 2:
        raise ValueError(f"`token_ids` must be (batch, length). Received: shape={token_ids.shape}")
    padding = _to_numpy(padding_mask(token_ids, pad_id))
    causal = _to_numpy(causal_mask(token_ids.shape[1]))
    combined = causal & padding[0][None, :]
    length = token_ids.shape[1]
    figure = new_figure(figsize=(3 * 0.45 * length + 2.5, 0.45 * length + 1.6))
    axes = figure.subplots(1, 3, width_ratios=[1, 1, 1])
    tokens = [str(t) for t in token_ids[0]]
    plot_mask(padding, "padding_mask(ids)", ax=axes[0], xlabel="Position", ylabel="Sequence")
    plot_mask(causal, f"causal_mask({length})", ax=axes[1])
    plot_mask(
        combined,
        "padding AND causal, sequence 0",
        x_labels=tokens,
        y_labels=tokens,
        ax=axes[2],
        xlabel="Key (token id)",
        ylabel="Query (token id)",
    )
    return _finish(figure, output, dpi)


# -- attention -----------------------------------------------------------------


def plot_attention_heads(
    weights, query_tokens, key_tokens=None, title=None, output=None, dpi=None, columns=4, cmap="viridis"
):
    """One heatmap per attention head, with the tokens on the axes.

    Args:
        weights: attention weights `(heads, q_len, k_len)` (one sequence), e.g.
            `attention_maps.attention_weights(...)["decoder_cross"][-1][0]`. Extra rows or
            columns beyond the tokens given (padding) are cut off.
        query_tokens: the `q_len` query tokens (y axis), e.g. the generated words.
            Hangul and other CJK text needs an installed CJK font (e.g. Noto
            Sans CJK, NanumGothic); it is used as a fallback when present.
        key_tokens: the key tokens (x axis); defaults to `query_tokens`
            (self-attention).
        title: figure title.
        output: optional PNG path to write.
        dpi: resolution of the PNG.
        columns: subplots per row.
        cmap: a matplotlib colormap.

    Returns:
        The `matplotlib.figure.Figure`.
    """
    weights = _to_numpy(weights).astype("float32")
    if weights.ndim == 2:
        weights = weights[None]
    if weights.ndim != 3:
        raise ValueError(
            f"`weights` must be (heads, q_len, k_len) for one sequence. Received: weights.shape={weights.shape}"
        )
    query_tokens = [str(t) for t in query_tokens]
    key_tokens = query_tokens if key_tokens is None else [str(t) for t in key_tokens]
    heads, q_len, k_len = weights.shape
    if len(query_tokens) > q_len or len(key_tokens) > k_len:
        raise ValueError(
            f"More tokens than weights: {len(query_tokens)} query tokens and {len(key_tokens)} key "
            f"tokens for weights of shape {weights.shape}"
        )
    weights = weights[:, : len(query_tokens), : len(key_tokens)]
    columns = max(1, min(columns, heads))
    rows = math.ceil(heads / columns)
    cell = 0.3
    width = max(2.4, cell * len(key_tokens) + 1.0)
    height = max(2.2, cell * len(query_tokens) + 1.0)
    figure = new_figure(figsize=(columns * width, rows * height + (0.4 if title else 0)))
    axes = np.atleast_1d(figure.subplots(rows, columns, squeeze=False)).ravel()
    fontsize = 7 if max(len(query_tokens), len(key_tokens)) > 12 else 9
    fonts = _token_fonts()
    for head, ax in enumerate(axes):
        if head >= heads:
            ax.set_axis_off()
            continue
        ax.imshow(weights[head], cmap=cmap, vmin=0.0, aspect="auto", interpolation="nearest")
        ax.set_xticks(range(len(key_tokens)), key_tokens, rotation=90, fontsize=fontsize, fontfamily=fonts)
        ax.set_yticks(range(len(query_tokens)), query_tokens, fontsize=fontsize, fontfamily=fonts)
        ax.set_title(f"Head {head + 1}", fontsize=10)
    if title:
        figure.suptitle(title)
    return _finish(figure, output, dpi)


# -- training curves -----------------------------------------------------------

_NOT_CURVES = {"epoch", "learning_rate", "lr"}


def read_history(csv_path):
    """Reads a `keras.callbacks.CSVLogger` file into `{column: [float, ...]}`."""
    path = pathlib.Path(csv_path)
    if not path.is_file():
        raise FileNotFoundError(f"No history file at {path}")
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    if not rows:
        raise ValueError(f"{path} has no rows: train for at least one epoch first")
    history = {}
    for column in rows[0]:
        try:
            history[column] = [float(row[column]) if row[column] not in ("", None) else math.nan for row in rows]
        except ValueError:
            continue  # a non-numeric column
    return history


def plot_history(history, output=None, dpi=None, title=None):
    """Training curves: one panel per metric, training and validation together.

    Args:
        history: a `history.csv` path (written by `keras.callbacks.CSVLogger`),
            a `keras.callbacks.History`, or a dict `{name: [value per epoch]}`.
            Each metric `m` is drawn with `val_m` when present (e.g. `loss` and
            `val_loss`, `masked_accuracy` and `val_masked_accuracy`); `epoch`
            and `learning_rate` columns are not drawn.
        output: optional PNG path to write.
        dpi: resolution of the PNG.
        title: figure title.

    Returns:
        The `matplotlib.figure.Figure`.
    """
    if isinstance(history, (str, os.PathLike)):
        history = read_history(history)
    elif hasattr(history, "history") and isinstance(history.history, dict):
        history = history.history
    history = {name: np.asarray(values, dtype="float64") for name, values in history.items()}
    epochs = history.pop("epoch", None)
    metrics = [name for name in history if not name.startswith("val_") and name not in _NOT_CURVES]
    metrics += [name[4:] for name in history if name.startswith("val_") and name[4:] not in history]
    metrics.sort(key=lambda name: (name != "loss", "loss" not in name, name))
    if not metrics:
        raise ValueError(f"No metric columns to plot. Received columns: {sorted(history)}")
    figure = new_figure(figsize=(4.2 * len(metrics), 3.4))
    axes = np.atleast_1d(figure.subplots(1, len(metrics), squeeze=False)).ravel()
    for ax, name in zip(axes, metrics):
        for key, label in ((name, "train"), (f"val_{name}", "validation")):
            if key in history:
                values = history[key]
                x = epochs + 1 if epochs is not None and len(epochs) == len(values) else np.arange(1, len(values) + 1)
                ax.plot(x, values, marker="o" if len(values) <= 30 else None, markersize=3, label=label)
        ax.set_xlabel("Epoch")
        ax.set_ylabel(name)
        ax.set_title(name.replace("_", " "), fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        figure.suptitle(title)
    return _finish(figure, output, dpi)
