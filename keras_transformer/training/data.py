"""A run's data: the sha256 that ties a run to its training pairs, its tokenizer, and its batches.

The splits themselves come from `keras_transformer.datasets.splits`.
"""

import hashlib
import pathlib

from keras_transformer import runs
from keras_transformer.errors import ArgumentError, first_line, literal


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


def run_tokenizers(preset, output, pairs, state, is_chief, shared_from=None):
    """The `runs.Tokenizers` of the run in `output`: the resumed run's, `shared_from`'s (a run directory), or new.

    `state` is what the run does with `output` (`destination.check_output`).
    A new run learns one shared vocabulary from `pairs`; a run that starts
    from another (`shared_from`: fine-tuning, an ensemble's members) takes its
    tokenizers as they are, an imported model's included, so the vocabulary
    cannot drift. The chief saves the tokenizers it did not load from
    `output`: the same files, byte for byte, where they came from a run. Call
    it after seeding: `keras.utils.set_random_seed` drops the tokenizers made
    before it (see `SubwordTokenizer`). A resumed run's tokenizer that does
    not load is an `ArgumentError` naming it.
    """
    output = pathlib.Path(output)
    if state == "resume" and (output / runs.SOURCE_TOKENIZER).is_dir():
        return _resumed_tokenizers(output)
    if shared_from is None:
        tokenizer = train_tokenizer(preset, pairs)
        if is_chief:
            for relative in (runs.SOURCE_TOKENIZER, runs.TARGET_TOKENIZER):
                tokenizer.save(output / relative)
        return runs.Tokenizers(tokenizer, tokenizer)
    tokenizers = runs.load_tokenizers(shared_from)
    if is_chief:
        for relative in (runs.SOURCE_TOKENIZER, runs.TARGET_TOKENIZER):
            _copy_folder(pathlib.Path(shared_from) / relative, output / relative)
    return tokenizers


def _resumed_tokenizers(output):
    try:
        return runs.load_tokenizers(output)
    except Exception as error:  # noqa: BLE001  (SentencePiece, JSON, I/O: all mean "corrupt")
        raise ArgumentError(
            f"{output / runs.SOURCE_TOKENIZER}: cannot resume, the tokenizer does not load: "
            f"{literal(first_line(error))}. Pass {{overwrite=True}} to start again."
        ) from None


def _copy_folder(source, destination):
    """Copies the files of the tokenizer folder `source` (its subfolders' too) into `destination`, atomically each.

    An imported M2M100 or NLLB tokenizer keeps the checkpoint's own files in a subfolder (`files/`).
    """
    from keras_transformer.files import atomic

    destination.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.rglob("*")):
        if path.is_file() and not any(p.is_symlink() for p in (path, *path.relative_to(source).parents)):
            atomic.write_bytes(destination / path.relative_to(source), path.read_bytes())


def language_frame(tokenizers, languages):
    """The `datasets.Frame` of a multilingual model's pairs in `languages` (`{"source_lang", "target_lang"}`).

    As transformers' NLLB and M2M100 tokenizers frame them: the source
    language token first (`[src_lang] X </s>`), or last where the
    tokenizer's `source_position` says so (`X </s> [src_lang]`, NLLB's
    `legacy_behaviour`); the target language token begins the target
    (decoder inputs `</s> [tgt_lang] Y`, labels `[tgt_lang] Y </s>`).
    MADLAD's target language is its source's first token (`<2xx> X </s>`),
    its target plain. None for `languages` None (a model of one language pair).
    """
    from keras_transformer.datasets import Frame

    if not languages:
        return None
    source, target = tokenizers
    target_id = target.language_id(languages["target_lang"], "target_lang")
    if getattr(target, "target_in_source", False):  # MADLAD: `<2xx> X </s>`, the target as it is
        return Frame(source_first=(target_id,))
    source_id = source.language_id(languages["source_lang"], "source_lang")
    if getattr(source, "source_position", "first") == "last":
        return Frame(source_last=(source_id,), target_first=(target_id,))
    return Frame(source_first=(source_id,), target_first=(target_id,))


def make_datasets(preset, splits, tokenizers, seed, distributed=False, add_source_end=False, languages=None):
    """`(train, validation)` batches of `splits` for `preset`: bucketed by length, padded to a token budget.

    `tokenizers` are the run's `runs.Tokenizers`. A pair is kept up to the
    model's `max_length` or the largest bucket, the shorter: an imported
    checkpoint's 512 positions are what it can read, not a batch's length.
    The training batches are shuffled with `seed` and tokenized with subword
    sampling where the preset asks for it (this package's own tokenizers);
    `distributed` shards them by data; `add_source_end` ends each source with
    END (imported models, and runs trained to be exported as Marian's);
    `languages` (`{"source_lang", "target_lang"}`) frames each pair with a
    multilingual model's language tokens (`language_frame`).
    """
    import tensorflow as tf

    from keras_transformer.datasets import make_batches, make_eval_batches

    def strings(pairs):
        sources, targets = zip(*pairs)
        return tf.data.Dataset.from_tensor_slices({"source": list(sources), "target": list(targets)})

    data = preset.data
    buckets = tuple(data.bucket_boundaries)
    batching = dict(
        token_budget=data.token_budget,
        bucket_boundaries=buckets,
        # The model's positions bound a pair, the largest bucket a batch: a checkpoint of 512 positions
        # fine-tunes on its preset's buckets, the pairs longer than the largest left out.
        max_length=min(preset.model.max_length, buckets[-1]),
        add_source_end=add_source_end,
        frame=language_frame(tokenizers, languages),
    )
    source, target = tokenizers
    if data.subword_sampling and tokenizers.shared:
        source = target = source.sampler(data.subword_sampling)
    language_model = preset.model.architecture == "decoder_only"
    if language_model:  # GPT: each pair one text, read by the decoder alone
        from keras_transformer.training.causal_lm import as_texts

        splits = as_texts(splits)
    train = make_batches(strings(splits["train"]), source, target, seed=seed, **batching)
    validation = make_eval_batches(strings(splits["validation"]), *tokenizers, pad_batches=True, **batching)
    if language_model:
        from keras_transformer.training.causal_lm import language_model_batches

        train, validation = language_model_batches(train), language_model_batches(validation)
    if distributed:
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
        train, validation = train.with_options(options), validation.with_options(options)
    return train, validation
