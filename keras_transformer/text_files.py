"""UTF-8 text files read line by line, with errors that name the file and the line.

Example:

>>> decode_utf8(b"\\xef\\xbb\\xbfone\\r\\ntwo\\n", "notes.txt")  # a leading BOM is dropped
'one\\r\\ntwo\\n'
>>> split_lines("one\\r\\ntwo\\n")
['one', 'two']
>>> decode_utf8(b"fine\\nM\\xe4dchen\\n", "latin1.de")
Traceback (most recent call last):
...
ValueError: latin1.de, line 2: not valid UTF-8 (invalid continuation byte, byte b'\\xe4' at offset 6).
Convert the file to UTF-8, e.g. with `iconv -t UTF-8`.
"""

import pathlib


def decode_utf8(data, name):
    """`data` (bytes) as text, without a leading BOM; a bad byte is a `ValueError` naming `name` and its line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(
            f"{name}, line {line}: not valid UTF-8 ({error.reason}, byte {data[error.start : error.start + 1]!r} "
            f"at offset {error.start}). Convert the file to UTF-8, e.g. with `iconv -t UTF-8`."
        ) from None
    return text.removeprefix("\ufeff")


def read_text(path):
    """The text of the UTF-8 file at `path` (see `decode_utf8`)."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise ValueError(f"`path` must be an existing file. Received: path={str(path)!r}")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error.strerror}") from None
    return decode_utf8(data, path)


def split_lines(text):
    """The lines of `text` without their `\\n` or `\\r\\n`; a final newline does not start an empty line."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def read_lines(path):
    """The lines of the UTF-8 file at `path`, newlines stripped; empty lines are kept."""
    return split_lines(read_text(path))


def reject_nul(lines, name):
    """`lines` as they are, or a `ValueError` naming `name` and the first line with a NUL byte.

    Example:

    >>> reject_nul(["fine", "a\\0b"], "input.txt")
    Traceback (most recent call last):
    ...
    ValueError: input.txt, line 2: contains a NUL byte, which the model cannot translate; remove it
    """
    for number, line in enumerate(lines, 1):
        if "\0" in line:
            raise ValueError(f"{name}, line {number}: contains a NUL byte, which the model cannot translate; remove it")
    return lines
