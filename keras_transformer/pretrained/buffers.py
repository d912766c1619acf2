"""The buffers a checkpoint stores that carry a meaning, checked against it before they are trusted.

transformers' `save_pretrained` wrote, in some years, tensors that are no
weight of their own: a second copy of a tied embedding (`lm_head.weight`,
`model.decoder.embed_tokens.weight`) and a position table that the model
computes (Marian's sinusoidal `embed_positions.weight`). An import reads
the weight once and computes the table, so each stored copy must equal its
original, and each stored table the table computed: otherwise the model
imported would not be the one uploaded. A tensor that disagrees is a
`ValueError` naming the file and the tensor. Both are compared a block of
rows at a time, so a large embedding is never held twice.

Example:

>>> check_copies(checkpoint, {"lm_head.weight": "model.shared.weight"})  # doctest: +SKIP
>>> check_tables(checkpoint, {"model.encoder.embed_positions.weight": marian_table})  # doctest: +SKIP
"""

import numpy as np

BLOCK_BYTES = 16 * 2**20  # the float32 bytes of each tensor's block compared at a time
# How far a stored table may be from the one computed in float64: its dtype's rounding, and float32's sin and cos
# of positions in the thousands.
TABLE_TOLERANCE = {"F16": 4e-3, "BF16": 3e-2}
DEFAULT_TABLE_TOLERANCE = 1e-3


def check_copies(checkpoint, copies):
    """Each present `copy` of `copies` (`{copy: original}`, a family's names) equals its present original, exactly."""
    tensors = checkpoint.tensors()
    for copy, original in copies.items():
        if copy == original or copy not in tensors or original not in tensors:
            continue
        where = checkpoint.stored_path(copy)
        if tuple(tensors[copy].shape) != tuple(tensors[original].shape):
            raise ValueError(
                f"{where}: tensor `{tensors.stored_name(copy)}` has shape {tuple(tensors[copy].shape)}, but it is "
                f"a tied copy of `{tensors.stored_name(original)}`, of shape {tuple(tensors[original].shape)}"
            )
        pairs = zip(checkpoint.row_blocks(copy, BLOCK_BYTES), checkpoint.row_blocks(original, BLOCK_BYTES))
        for (start, rows), (_, expected) in pairs:
            if not np.array_equal(rows, expected):
                row = start + int(np.argwhere(rows != expected)[0][0]) if rows.ndim else 0
                raise ValueError(
                    f"{where}: tensor `{tensors.stored_name(copy)}` differs from "
                    f"`{tensors.stored_name(original)}` (row {row}), but transformers ties it to it: one of the two "
                    "is not the model's"
                )


def check_tables(checkpoint, tables):
    """Each present tensor of `tables` (`{name: table(rows)}`, `rows` its stored rows) equals the table computed."""
    tensors = checkpoint.tensors()
    for name, table in tables.items():
        if name not in tensors:
            continue
        info = tensors[name]
        expected = np.asarray(table(info.shape[0]), np.float32)
        where, stored = checkpoint.stored_path(name), tensors.stored_name(name)
        if tuple(info.shape) != expected.shape:
            raise ValueError(
                f"{where}: tensor `{stored}` has shape {tuple(info.shape)}, not the {expected.shape} table"
            )
        tolerance = TABLE_TOLERANCE.get(info.dtype, DEFAULT_TABLE_TOLERANCE)
        for start, rows in checkpoint.row_blocks(name, BLOCK_BYTES):
            error = np.abs(rows - expected[start : start + len(rows)])
            if error.size and error.max() > tolerance:
                row = start + int(np.unravel_index(error.argmax(), error.shape)[0])
                raise ValueError(
                    f"{where}: tensor `{stored}` is not the position table the model computes (row {row} differs by "
                    f"{error.max():.3g}); keras-transformer computes the table, so it refuses one that differs"
                )
