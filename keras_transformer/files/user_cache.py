"""The user's cache folder: what this package keeps between processes (conversions, compiled programs).

`$KERAS_TRANSFORMER_CACHE`, else `$XDG_CACHE_HOME/keras_transformer`, else
`~/.cache/keras_transformer`, as other libraries place theirs. Each user of
it takes a subfolder of its own: `ctranslate2/` (the CTranslate2 engine's
conversions), `xla/` (`keras_transformer.compile_cache`).

Example:

>>> import os
>>> os.environ["KERAS_TRANSFORMER_CACHE"] = "/tmp/kt-cache"
>>> cache_root()
PosixPath('/tmp/kt-cache')
>>> del os.environ["KERAS_TRANSFORMER_CACHE"]
"""

import os
import pathlib

CACHE_ENV = "KERAS_TRANSFORMER_CACHE"


def cache_root():
    """`$KERAS_TRANSFORMER_CACHE`, else `$XDG_CACHE_HOME/keras_transformer`, else `~/.cache/keras_transformer`."""
    if os.environ.get(CACHE_ENV):
        return pathlib.Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "keras_transformer"
