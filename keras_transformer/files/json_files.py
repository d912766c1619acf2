"""Reading a JSON file that may be hostile: bounded in size, an object, every error naming the file.

A checkpoint's `config.json`, a LiteRT export's `litert.json`: files that
come from elsewhere, read before anything is built from them.

Example:

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "config.json"
>>> _ = path.write_text("[" * 100_000 + "]" * 100_000)
>>> read_json_object(path)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: .../config.json is not JSON that can be read: nested too deeply
"""

import json
import pathlib

MAX_JSON_BYTES = 4 * 2**20  # a config of a few kB, far under this


def read_json_object(path, max_bytes=MAX_JSON_BYTES):
    """The JSON object in file `path`; a `ValueError` naming it for a file too large, not JSON, or not an object."""
    data = read_json(path, max_bytes)
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a JSON object. Received: {type(data).__name__}")
    return data


def read_json(path, max_bytes=MAX_JSON_BYTES):
    """The JSON value in file `path` (any kind); a `ValueError` naming it for a file too large or not JSON."""
    path = pathlib.Path(path)
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"{path} is {size:,} bytes, more than the {max_bytes:,} such a file can need")
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except RecursionError:
        raise ValueError(f"{path} is not JSON that can be read: nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not JSON: {str(error).strip()[:200]}") from None
    return data
