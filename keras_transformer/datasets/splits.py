"""The splits a run trains on: a corpus's (or the user's files'), with a dev set held out of `train`."""

from keras_transformer.datasets import corpora, readers


def load_splits(preset, data_dir, corpus_files=None):
    """The preset's corpus splits, or those of the user's `corpus_files` (see `corpora.load_file_splits`).

    `preset.dev_examples` training pairs are held out as a `"dev"` split (see
    `hold_out_dev`); then the training split is cut to `preset.max_examples`.
    """
    data = preset.data
    if corpus_files is not None:
        splits = corpora.load_file_splits(corpus_files)
    else:
        splits = corpora.load_split_pairs(data.corpus, data_dir)
    if data.dev_examples:
        splits.update(hold_out_dev(splits["train"], data.dev_examples))
    if data.max_examples:
        splits["train"] = splits["train"][: data.max_examples]
    return splits


def hold_out_dev(pairs, size):
    """Splits training `pairs` into `{"train": ..., "dev": ...}` with about `size` pairs in `"dev"`.

    The dev pairs are a seeded, order-independent sample of the training data
    (`readers.seeded_split` with the corpora's split seed), so a dev set has the
    training data's sentence lengths, which a corpus's own validation split may
    not. A run with `dev_examples` never trains on them, and
    `benchmarks/multi30k.py` chooses the length penalty on them.

    Example:

    >>> splits = hold_out_dev([(f"s{i}", f"t{i}") for i in range(100)], 10)
    >>> len(splits["dev"]), len(splits["train"])
    (10, 90)
    """
    if not 0 < size < len(pairs):
        raise ValueError(
            f"`dev_examples` must be between 1 and {len(pairs) - 1}, fewer than the {len(pairs)} training pairs. "
            f"Received: dev_examples={size}"
        )
    return readers.seeded_split(pairs, {"dev": size / len(pairs)}, seed=corpora.SPLIT_SEED)
