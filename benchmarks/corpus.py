"""Where a benchmark finds multi30k task 1, and how it reads a text file: one rule for every script in `benchmarks/`.

`multi30k_folder(data)` is `data` (a folder, or its parent holding
`multi30k_task1`), else `$KERAS_TRANSFORMER_DATA_DIR`'s copy, else the
copy the repository's tests read beside the checkout (when there is one),
else the download that tensorflow-datasets verifies and caches
(`keras_transformer.datasets.corpora.resolve_dir`).

Example:

>>> from corpus import multi30k_folder
>>> (multi30k_folder(None) / "test_2016_flickr.en").is_file()
True
>>> len(read_lines(multi30k_folder(None) / "test_2016_flickr.en", 40))
40
"""

import os
import pathlib

BESIDE_CHECKOUT = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data"


def multi30k_folder(data=None):
    """The multi30k task 1 folder (train, val, test_2016_flickr in en/de/fr), found or downloaded."""
    from keras_transformer.datasets.corpora import DATA_DIR_ENV, resolve_dir

    if data is None and not os.environ.get(DATA_DIR_ENV) and (BESIDE_CHECKOUT / "multi30k_task1").is_dir():
        data = BESIDE_CHECKOUT
    return resolve_dir("multi30k-en-de", data)


def read_lines(path, count=None):
    """The lines of the text file `path` (the first `count` of them, where given), without their line ends."""
    lines = pathlib.Path(path).read_text(encoding="utf-8").splitlines()
    return lines[:count] if count else lines
