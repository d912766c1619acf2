"""The one rule for a sentence given to translate: UTF-8 text without NUL bytes; a blank one translates to "".

Every way in reads it: the Python translators (`translators.inputs`), the REST
server (`serving.signatures`), the commands' arguments, files and stdin
(`commands`, `files.text_files`). A sentence that breaks it is refused, never
translated into garbage: bytes that are not strict UTF-8 (no stray
continuation bytes, overlong forms, encoded surrogates or code points past
U+10FFFF), a str with a lone surrogate, or a NUL byte (the tokenizer would
turn it into an unknown token). An empty or blank sentence is not an error:
it translates to "".

Example:

>>> sentence_error("café") is None
True
>>> sentence_error(b"caf\\xe9 au lait")
'is not valid UTF-8 text (invalid continuation byte at byte 3)'
>>> check_sentence("a\\0b", "argument 2")
Traceback (most recent call last):
...
ValueError: argument 2 contains a NUL byte, which the model cannot read; remove it
"""

NUL = "contains a NUL byte, which the model cannot read; remove it"


def utf8_error(text):
    """Why `text` (a str or bytes) is not valid UTF-8 text, in a few words; None when it is.

    Example:

    >>> utf8_error("\\ud800")
    'a lone surrogate at character 0'
    """
    if isinstance(text, str):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            return f"a lone surrogate at character {error.start}"
        return None
    try:
        bytes(text).decode("utf-8")
    except UnicodeDecodeError as error:
        return f"{error.reason} at byte {error.start}"
    return None


def sentence_error(text):
    """What is wrong with sentence `text` (str or bytes), as the end of a sentence naming it; None if nothing."""
    reason = utf8_error(text)
    if reason is not None:
        return f"is not valid UTF-8 text ({reason})"
    if ("\0" if isinstance(text, str) else b"\0") in text:
        return NUL
    return None


def check_sentence(text, where):
    """`text` as it is, or a `ValueError` "`where` <what is wrong>"; `where` names the sentence (a line, ...)."""
    reason = sentence_error(text)
    if reason is not None:
        raise ValueError(f"{where} {reason}")
    return text


def is_blank(text):
    """Whether `text` holds nothing to translate (empty, or ASCII whitespace only): it translates to ""."""
    return not (text.strip(" \t\n\r\x0b\x0c") if isinstance(text, str) else bytes(text).strip())
