"""A run's data: the sha256 that ties a run to its training pairs, its tokenizer, and its batches.

The splits themselves come from `keras_transformer.datasets.splits`.
"""

import hashlib
import pathlib

from keras_transformer.errors import ArgumentError, first_line, literal
from keras_transformer.training import run_dir


def training_data_sha256(pairs):
    """The sha256 of training `pairs`: a resumed run must see the data it started on.

    Example:

    >>> training_data_sha256([("a", "b")]) == training_data_sha256([("a", "b")]) != training_data_sha256([("a", "c")])
    True
    """
    digest = hashlib.sha256()
    for source, target in pairs:
        digest.update(f"{source}\t{target}\n".encode())
    return digest.hexdigest()


def train_tokenizer(preset, pairs):
    """A shared SentencePiece vocabulary learned from both sides of `pairs` with the preset's settings."""
    from keras_transformer.tokenizers import SubwordTokenizer

    texts = [text for pair in pairs for text in pair]
    return SubwordTokenizer.train(
        texts, preset.data.vocab_size, character_coverage=preset.data.character_coverage, seed=0
    )


def run_tokenizer(preset, output, pairs, state, is_chief, shared_from=None):
    """The tokenizer of the run in `output`: loaded when resuming, else `shared_from`'s (a run directory) or a new one.

    `state` is what the run does with `output` (`destination.check_output`);
    the chief saves a tokenizer it did not load as the run's source and target
    tokenizers. Call it after seeding: `keras.utils.set_random_seed` drops the
    tokenizers made before it (see `SubwordTokenizer`). A resumed run's
    tokenizer that does not load is an `ArgumentError` naming it.
    """
    from keras_transformer.tokenizers import SubwordTokenizer

    path = pathlib.Path(output) / run_dir.SOURCE_TOKENIZER
    if state == "resume" and path.is_dir():
        try:
            return SubwordTokenizer.load(path)
        except Exception as error:  # noqa: BLE001  (SentencePiece, JSON, I/O: all mean "corrupt")
            raise ArgumentError(
                f"{path}: cannot resume, the tokenizer does not load: "
                f"{literal(first_line(error))}. Pass {{overwrite=True}} to start again."
            ) from None
    if shared_from is not None:
        tokenizer = SubwordTokenizer.load(pathlib.Path(shared_from) / run_dir.SOURCE_TOKENIZER)
    else:
        tokenizer = train_tokenizer(preset, pairs)
    if is_chief:
        for relative in (run_dir.SOURCE_TOKENIZER, run_dir.TARGET_TOKENIZER):
            tokenizer.save(pathlib.Path(output) / relative)
    return tokenizer


def make_datasets(preset, splits, tokenizer, seed, distributed=False):
    """`(train, validation)` batches of `splits` for `preset`: bucketed by length, padded to a token budget.

    The training batches are shuffled with `seed` and tokenized with subword
    sampling where the preset asks for it; `distributed` shards them by data.
    """
    import tensorflow as tf

    from keras_transformer.datasets import make_batches, make_eval_batches

    def strings(pairs):
        sources, targets = zip(*pairs)
        return tf.data.Dataset.from_tensor_slices({"source": list(sources), "target": list(targets)})

    data = preset.data
    batching = dict(
        token_budget=data.token_budget,
        bucket_boundaries=tuple(data.bucket_boundaries),
        max_length=preset.model.max_length,
    )
    sampling_tokenizer = tokenizer.sampler(data.subword_sampling) if data.subword_sampling else tokenizer
    train = make_batches(strings(splits["train"]), sampling_tokenizer, seed=seed, **batching)
    validation = make_eval_batches(strings(splits["validation"]), tokenizer, pad_batches=True, **batching)
    if distributed:
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
        train, validation = train.with_options(options), validation.with_options(options)
    return train, validation
