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

import codecs
import pathlib
import stat

from keras_transformer.input_rules import check_sentence

UTF16_HINT = "is it UTF-16? save it as UTF-8"


def decode_utf8(data, name):
    """`data` (bytes) as text, without a leading BOM; a bad byte is a `ValueError` naming `name` and its line.

    A file that starts with a UTF-16 byte-order mark, or also holds NUL
    bytes (UTF-16 without the mark), is said to look like UTF-16.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            hint = f" It starts with a UTF-16 byte-order mark: {UTF16_HINT}."
        else:
            hint = f" It also holds NUL bytes: {UTF16_HINT}." if b"\0" in data else ""
        raise ValueError(
            f"{name}, line {line}: not valid UTF-8 ({error.reason}, byte {data[error.start : error.start + 1]!r} "
            f"at offset {error.start}).{hint} Convert the file to UTF-8, e.g. with `iconv -t UTF-8`."
        ) from None
    return text.removeprefix("\ufeff")


def read_text(path):
    """The text of the UTF-8 file at `path` (see `decode_utf8`): a regular file, or a pipe or terminal read to its end.

    A named pipe, `/dev/stdin` and a process substitution (`<(cmd)`, a
    `/dev/fd/N`) are read as they come, and the reading stops at the first
    bytes that cannot be text (a NUL byte, invalid UTF-8), which the caller
    then names: `/dev/zero` is refused at once, not read forever.
    """
    path = pathlib.Path(path)
    try:
        mode = path.stat().st_mode
        if stat.S_ISREG(mode):
            data = path.read_bytes()
        elif stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
            data = _read_stream(path)
        else:
            what = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
            raise ValueError(f"{path} is {what}: pass a text file, a pipe or /dev/stdin")
    except FileNotFoundError:
        raise ValueError(f"`path` must be an existing file. Received: path={str(path)!r}") from None
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error.strerror}") from None
    return decode_utf8(data, path)


def _read_stream(path, chunk_size=1 << 16):
    """The bytes of the pipe or device at `path`, to its end or to the first chunk that cannot be UTF-8 text."""
    chunks, decoder = [], codecs.getincrementaldecoder("utf-8")()
    with open(path, "rb") as stream:
        while chunk := stream.read(chunk_size):
            chunks.append(chunk)
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError:
                break
            if b"\0" in chunk:
                break
    return b"".join(chunks)


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
    """`lines` as they are, or a `ValueError` naming `name` and the first line that breaks the input rule.

    Each line is a sentence to translate (`keras_transformer.input_rules`).

    Example:

    >>> reject_nul(["fine", "a\\0b"], "input.txt")
    Traceback (most recent call last):
    ...
    ValueError: input.txt, line 2: contains a NUL byte, which the model cannot read; remove it
    """
    for number, line in enumerate(lines, 1):
        check_sentence(line, f"{name}, line {number}:")
    return lines


def check_no_nul(text, name):
    """`text` as it is, or a `ValueError` naming `name` and the line of its first NUL byte.

    Text never holds NUL bytes; a file that does is most often UTF-16 (ASCII
    saved as UTF-16 without a byte-order mark decodes as UTF-8 with a NUL
    every other byte), which would train a vocabulary of garbage.

    Example:

    >>> check_no_nul("one\\ntwo\\n", "train.en")
    'one\\ntwo\\n'
    >>> check_no_nul("one\\ntwo\\nt\\0h\\0r\\0e\\0e\\0", "train.en")
    Traceback (most recent call last):
    ...
    ValueError: train.en, line 3: contains a NUL byte (is it UTF-16? save it as UTF-8)
    """
    index = text.find("\0")
    if index >= 0:
        line = text.count("\n", 0, index) + 1
        raise ValueError(f"{name}, line {line}: contains a NUL byte ({UTF16_HINT})")
    return text
