"""Figures of the model and its training: positional encoding, schedule, masks, attention heads, curves.

`figures` draws each as a Matplotlib figure on an Agg canvas (no pyplot, no
global backend), returned and optionally written as PNG; `attention_maps`
runs a model for the attention weights that `plot_attention_heads` draws.
`keras-transformer plot` is the command line over them.
"""

from keras_transformer.plotting.figures import (
    DEFAULT_DPI,
    new_figure,
    plot_attention_heads,
    plot_history,
    plot_mask,
    plot_masks,
    plot_positional_encoding,
    plot_schedule,
    png_path,
    read_history,
    save_figure,
)

__all__ = [
    "DEFAULT_DPI",
    "new_figure",
    "plot_attention_heads",
    "plot_history",
    "plot_mask",
    "plot_masks",
    "plot_positional_encoding",
    "plot_schedule",
    "png_path",
    "read_history",
    "save_figure",
]
