"""Corpora (plain readers, verified downloads, tensorflow-datasets builders) and tf.data pipelines.

Example:

>>> from keras_transformer import datasets
>>> train = datasets.load_corpus("multi30k-en-de", split="train")  # downloaded once, then cached
>>> batches = datasets.make_batches(train, tokenizer, token_budget=4096, training=True)

The tensorflow-datasets builders (`Multi30k`, `KoreanChatbot`, `TatoebaSpaEng`,
`ParallelText`, `ParallelTextConfig`) live in `keras_transformer.datasets.parallel_text`
and are imported on first use; a run's splits (`load_splits`, with a dev set
held out of the training data: `hold_out_dev`) come from `datasets.splits`.
"""

from keras_transformer.datasets.corpora import (
    CORPORA,
    get_corpus,
    load_corpus,
    load_file_splits,
    load_pairs,
    load_split_pairs,
)
from keras_transformer.datasets.pipeline import Frame, bucket_shapes, make_batches, make_eval_batches, tokenize_pairs
from keras_transformer.datasets.readers import read_aligned, read_delimited, read_lines, seeded_split
from keras_transformer.datasets.splits import hold_out_dev, load_splits

__all__ = [
    "CORPORA",
    "Frame",
    "get_corpus",
    "load_corpus",
    "load_file_splits",
    "load_pairs",
    "load_split_pairs",
    "bucket_shapes",
    "make_batches",
    "make_eval_batches",
    "tokenize_pairs",
    "read_aligned",
    "read_delimited",
    "read_lines",
    "seeded_split",
    "hold_out_dev",
    "load_splits",
]
_BUILDERS = ("Multi30k", "KoreanChatbot", "TatoebaSpaEng", "ParallelText", "ParallelTextConfig")


def __getattr__(name):
    if name in _BUILDERS:
        from keras_transformer.datasets import parallel_text

        return getattr(parallel_text, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
