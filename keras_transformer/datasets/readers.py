"""Plain-Python readers for parallel text, with errors that name the file and line.

Every reader returns a list of `(source, target)` string pairs, strips each
sentence, and raises a `ValueError` naming the file and the 1-based line
number for text that is not UTF-8, for a NUL byte (a UTF-16 file, most
often), for empty sentences and for files that do not line up.
`seeded_split` makes a deterministic train/validation/test split for
corpora that have none.

Example:

>>> pairs = read_aligned("multi30k_task1/train.en", "multi30k_task1/train.de")
>>> pairs[0]
('Two young, White males are outside near many bushes.', 'Zwei junge weiße Männer ...')
"""

import csv
import hashlib
import io

from keras_transformer.files import text_files


def _check_sentence(sentence, path, line, what="line"):
    sentence = sentence.strip()
    if not sentence:
        raise ValueError(f"{path}, line {line}: empty {what}. Every example needs a non-empty source and target.")
    return sentence


def read_text(path):
    """The text of the UTF-8 file at `path`; one with a NUL byte (UTF-16?) is a `ValueError` naming the line."""
    return text_files.check_no_nul(text_files.read_text(path), path)


def read_lines(path):
    """Returns the stripped lines of a UTF-8 file; an empty line, or a NUL byte, is a `ValueError`."""
    lines = text_files.split_lines(read_text(path))
    return [_check_sentence(line, path, i) for i, line in enumerate(lines, 1)]


def read_texts(path):
    """The texts of a UTF-8 file, one a line, stripped; blank lines are skipped (paragraph breaks).

    A language model's corpus (`train --train-text`): each text becomes the
    pair `(text, "")`, as a pair becomes a causal LM's text (`training.causal_lm`).
    """
    lines = text_files.split_lines(read_text(path))
    return [line.strip() for line in lines if line.strip()]


def read_aligned(source_path, target_path):
    """Reads two line-aligned files (line i of one translates line i of the other)."""
    sources, targets = read_lines(source_path), read_lines(target_path)
    if len(sources) != len(targets):
        shorter, longer = sorted([(len(sources), source_path), (len(targets), target_path)], key=lambda x: x[0])
        raise ValueError(
            f"Misaligned files: {source_path} has {len(sources)} lines but {target_path} has "
            f"{len(targets)}; {longer[1]}, line {shorter[0] + 1} has no counterpart in {shorter[1]}."
        )
    return list(zip(sources, targets))


def _column_index(column, header, path):
    if isinstance(column, int):
        return column
    if header is None or column not in header:
        raise ValueError(f"{path}: no column named {column!r}. Received header: {header}")
    return header.index(column)


def read_delimited(path, source_column=0, target_column=1, *, delimiter="\t", header=False, columns=None):
    """Reads two columns of a TSV (plain split, quotes kept) or CSV (quoted fields) file.

    Args:
        path: the file.
        source_column, target_column: column index, or name when `header`.
        delimiter: `"\\t"` (split on tabs, no quoting) or another character
            (read with the `csv` module, which understands quoted fields).
        header: bool, whether the first row names the columns.
        columns: optional int, the exact number of columns every row must have.

    Returns:
        A list of `(source, target)` pairs.
    """
    return [
        (row[0], row[1])
        for row in read_rows(path, [source_column, target_column], delimiter=delimiter, header=header, columns=columns)
    ]


def read_rows(path, selected, *, delimiter="\t", header=False, columns=None):
    """Reads the `selected` columns (indices or names) of each row, stripped and checked."""
    return [values for _, values in iter_rows(path, selected, delimiter=delimiter, header=header, columns=columns)]


def iter_rows(path, selected, *, delimiter="\t", header=False, columns=None):
    """Yields `(line_number, values)` for each row; see `read_rows`."""
    text = read_text(path)
    if delimiter == "\t":
        rows = ((i, line.split("\t")) for i, line in enumerate(text_files.split_lines(text), 1))
    else:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
        rows = ((reader.line_num, row) for row in reader)
    names = None
    if header:
        _, names = next(rows, (1, None))
        if names is None:
            raise ValueError(f"{path}: the file is empty; expected a header row.")
        names = [name.strip() for name in names]
    indices = [_column_index(column, names, path) for column in selected]
    width = columns if columns is not None else max(indices) + 1
    for line, row in rows:
        if not "".join(row).strip():
            raise ValueError(f"{path}, line {line}: empty line. Every example needs a non-empty source and target.")
        if (columns is not None and len(row) != columns) or len(row) < width:
            raise ValueError(
                f"{path}, line {line}: expected {width} {delimiter!r}-separated columns, found {len(row)}: {row!r}"
            )
        yield line, tuple(_check_sentence(row[i], path, line, f"column {c!r}") for i, c in zip(indices, selected))


def seeded_split(pairs, fractions, seed=0):
    """Splits pairs deterministically; pairs sharing a source stay in one split.

    Groups of pairs with the same source sentence are ordered by an MD5 hash
    of `(seed, source)`, which depends on neither the Python version nor the
    order of the file; the first groups fill the named splits up to
    `round(fraction * len(pairs))` pairs each, and the rest is `"train"`.
    Within a split the pairs keep the file's order.

    Args:
        pairs: a list of `(source, target, ...)` tuples.
        fractions: dict, split name -> fraction, e.g. `{"validation": 0.05}`.
        seed: int.

    Returns:
        A dict, split name -> list of pairs, with a `"train"` entry.

    Example:

    >>> splits = seeded_split(pairs, {"validation": 0.05, "test": 0.05}, seed=0)
    """
    if sum(fractions.values()) >= 1.0 or any(f < 0 for f in fractions.values()) or "train" in fractions:
        raise ValueError(
            "`fractions` must map non-train split names to non-negative fractions summing to less than 1. "
            f"Received: fractions={fractions}"
        )
    groups = {}
    for index, pair in enumerate(pairs):
        groups.setdefault(pair[0], []).append(index)
    order = sorted(groups, key=lambda s: hashlib.md5(f"{seed}\0{s}".encode()).digest())
    assignment, position = {}, 0
    for name, fraction in fractions.items():
        wanted, taken = round(fraction * len(pairs)), 0
        while taken < wanted and position < len(order):
            members = groups[order[position]]
            assignment.update((i, name) for i in members)
            taken += len(members)
            position += 1
    splits = {"train": [], **{name: [] for name in fractions}}
    for index, pair in enumerate(pairs):
        splits[assignment.get(index, "train")].append(pair)
    return splits
