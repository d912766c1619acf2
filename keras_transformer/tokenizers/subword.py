"""`SubwordTokenizer`: this package's SentencePiece tokenizer, trained in seconds, run by tensorflow-text.

`SubwordTokenizer` is a `tf.Module`, so it can live inside a SavedModel: a
`Translator` module holds one as an attribute and calls `tokenize` and
`detokenize` inside its own `tf.function`. The SentencePiece model proto is
saved inside the SavedModel as an asset-like resource; the loading process
must `import tensorflow_text` first so that its ops are registered.

Reserved ids, the same in every tokenizer of this package:

| id | piece     | meaning                                  |
|----|-----------|------------------------------------------|
| 0  | `<pad>`   | padding (the models and losses ignore 0) |
| 1  | `<unk>`   | unknown (rare with `byte_fallback=True`) |
| 2  | `<s>`     | START, the decoder's first input         |
| 3  | `</s>`    | END, the decoder's last label            |
"""

import io
import json
import os
import pathlib
import tempfile

import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text
from sentencepiece import sentencepiece_model_pb2

from keras_transformer.config import END_ID, PAD_ID, START_ID, UNK_ID
from keras_transformer.files import atomic, text_files
from keras_transformer.tokenizers.pieces import resource_name

NUM_RESERVED_IDS = 4  # PAD_ID, UNK_ID, START_ID, END_ID (keras_transformer.config)

# SentencePiece's trainer skips lines longer than its `max_sentence_length` (4192 bytes by default, kept here)
# and lines holding its unknown-character mark; with none left it fails with "[!sentences_.empty()]".
MAX_SENTENCE_BYTES = 4192
_SKIPPED_MARK = "\u2585"

MODEL_FILENAME = "tokenizer.model"
CONFIG_FILENAME = "tokenizer.json"
_MODEL_TYPES = ("unigram", "bpe")
# Tab, line breaks and the Unicode space separators (category Zs): mapped to " " by `normalization="whitespace"`.
_SPACE_CODEPOINTS = (0x09, 0x0A, 0x0D, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000)


def _iter_texts(texts_or_files):
    """Yields non-empty lines: `str` items are text, `os.PathLike` items (or one path) are UTF-8 files.

    A NUL byte (in a file, most often UTF-16 read as UTF-8) is a `ValueError`
    naming the file and line, or the item.
    """
    if isinstance(texts_or_files, (str, os.PathLike)):
        texts_or_files = [pathlib.Path(texts_or_files)]
    for index, item in enumerate(texts_or_files):
        if isinstance(item, os.PathLike):
            try:
                text = pathlib.Path(item).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise ValueError(f"`texts_or_files` names a file that is not readable UTF-8 text: {item}: {e}") from e
            lines = text_files.check_no_nul(text, item).splitlines()
            yield from (line for line in lines if line.strip())
        elif isinstance(item, str):
            text_files.check_no_nul(item, f"`texts_or_files[{index}]`")
            if item.strip():
                yield item
        else:
            raise ValueError(
                "`texts_or_files` must hold strings (text) or `pathlib.Path`s (files). "
                f"Received an item of type {type(item).__name__}: {item!r}"
            )


def _check_trainable(texts):
    """A `ValueError` unless SentencePiece's trainer keeps at least one of `texts` (see `MAX_SENTENCE_BYTES`)."""
    sizes = [len(text.encode("utf-8")) for text in texts]
    if any(size <= MAX_SENTENCE_BYTES and _SKIPPED_MARK not in text for size, text in zip(sizes, texts)):
        return
    marked = sum(_SKIPPED_MARK in text for text in texts)
    raise ValueError(
        f"`texts_or_files` holds no line that SentencePiece trains on: of its {len(texts)} lines, "
        f"{sum(size > MAX_SENTENCE_BYTES for size in sizes)} are longer than {MAX_SENTENCE_BYTES} bytes "
        f"(the longest: {max(sizes)}) and {marked} hold U+2585, its unknown-character mark; SentencePiece skips both. "
        "Give one sentence a line."
    )


def _without_rule_file(model_proto):
    """`model_proto` without the path of the temporary rule file it was trained with.

    SentencePiece records that path, which only the training read, so every
    training gave other bytes; without it, one corpus and seed give one model.
    """
    model = sentencepiece_model_pb2.ModelProto.FromString(model_proto)
    model.normalizer_spec.ClearField("normalization_rule_tsv")
    return model.SerializeToString()


class SubwordTokenizer(tf.Module):
    """A SentencePiece subword tokenizer as a `tf.Module` (tensorflow-text ops).

    `tokenize` maps a batch of strings to a `tf.RaggedTensor` of int32 ids
    (no START/END added: the data pipeline adds them); `detokenize` maps ids,
    ragged or dense and padded with 0, back to strings and ignores the
    reserved ids 0-3 (pad, unk, START, END). By default text is not
    Unicode-normalized: tabs and Unicode spaces become spaces, runs of spaces
    collapse, the ends are stripped, and nothing else changes, so a round
    trip returns the input up to whitespace; and with
    `byte_fallback=True` (the default) characters unseen in training become
    UTF-8 byte pieces instead of `<unk>`, so any text round-trips.

    Seed first, then tokenize: `keras.utils.set_random_seed` (and
    `tf.random.set_seed`) resets TensorFlow's eager context, which drops the
    SentencePiece resource of every tokenizer made before it (tensorflow/text
    #570); such a tokenizer then fails with `NotFoundError: ... does not
    exist`. Make or load tokenizers after seeding.

    Args:
        model_proto: bytes, a serialized SentencePiece `ModelProto` whose
            pad/unk/bos/eos ids are 0/1/2/3.
        name: name of the module.

    Call arguments (of `tokenize`):
        strings: string tensor of shape `(batch,)`.

    Example:

    >>> tokenizer = SubwordTokenizer.train(
    ...     ["a small corpus", "of two lines"] * 50, vocab_size=40, byte_fallback=False)
    >>> ids = tokenizer.tokenize(tf.constant(["a small corpus"]))
    >>> tokenizer.detokenize(ids).numpy()
    array([b'a small corpus'], dtype=object)
    >>> tokenizer.save("/tmp/tok")
    >>> tokenizer = SubwordTokenizer.load("/tmp/tok")
    """

    FORMAT = "sentencepiece"  # what `save` writes as `tokenizer.json`'s `format`: its kind (`tokenizers.kinds`)
    pad_id = PAD_ID
    unk_id = UNK_ID
    start_id = START_ID
    end_id = END_ID

    def __init__(self, model_proto, name=None):
        super().__init__(name=name)
        model_proto = bytes(model_proto)
        processor = spm.SentencePieceProcessor(model_proto=model_proto)
        reserved = (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id())
        if reserved != (PAD_ID, UNK_ID, START_ID, END_ID):
            raise ValueError(
                f"`model_proto` must reserve pad/unk/bos/eos = 0/1/2/3. Received pad/unk/bos/eos = {reserved}"
            )
        self._model_proto = model_proto
        self.vocab_size = processor.vocab_size()
        # The reserved pieces (`<pad>`, `<unk>`, `<s>`, `</s>`): no text, so no prefix may hold them (`translators`).
        self.special_tokens = tuple(processor.id_to_piece(i) for i in range(NUM_RESERVED_IDS))
        self._tokenizer = tf_text.SentencepieceTokenizer(
            model=model_proto, out_type=tf.int32, name=resource_name(model_proto)
        )
        self._vocab_size = tf.Variable(self.vocab_size, trainable=False, dtype=tf.int32, name="vocab_size")
        # Trace the signatures a SavedModel should keep, so a reloaded module can call them.
        self.tokenize.get_concrete_function(tf.TensorSpec([None], tf.string))
        self.detokenize.get_concrete_function(tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1))
        self.detokenize.get_concrete_function(tf.TensorSpec([None, None], tf.int32))

    @tf.function(autograph=False)
    def tokenize(self, strings):
        """Strings `(batch,)` -> int32 `RaggedTensor` `(batch, None)`, without START/END."""
        return self._tokenizer.tokenize(strings)

    @tf.function(autograph=False)
    def detokenize(self, ids):
        """Ids `(batch, length)`, ragged or dense, -> strings `(batch,)`; ids 0-3 are dropped."""
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(ids))
        ids = tf.cast(ids, tf.int32)
        ids = tf.ragged.boolean_mask(ids, ids >= NUM_RESERVED_IDS)
        return self._tokenizer.detokenize(ids)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)], autograph=False)
    def id_to_piece(self, ids):
        """Int32 ids -> their subword pieces as strings (for inspection)."""
        return self._tokenizer.id_to_string(ids)

    @tf.function(input_signature=[], autograph=False)
    def get_vocab_size(self):
        """The vocabulary size as a scalar int32 tensor (also `self.vocab_size`, an int)."""
        return self._vocab_size.read_value()

    def sampler(self, alpha=0.3, nbest_size=-1):
        """A tokenizer that samples a segmentation on every call (subword regularization).

        Training on sampled segmentations of the same text (Kudo, 2018) makes
        a model see each word split several ways, a regularizer that helps
        most on small corpora. Use it for training batches only: evaluation
        and decoding take the most likely segmentation (`tokenize`).
        The draws cannot be seeded: SentencePiece samples from absl's
        generator, which absl salts anew in every process, so not even
        `sentencepiece.set_random_generator_seed` repeats a draw in another
        process (sentencepiece 0.2.3), and two runs of one seed train on
        other draws.

        Args:
            alpha: float in (0, 1], the sharpness of the sampling: segmentations
                are drawn with probability proportional to `P(x) ** alpha`, so
                1.0 follows the unigram model and smaller values split more
                (docs/multi30k.md measures how much longer the sequences get).
            nbest_size: -1 samples from all segmentations; `n > 1` from the
                `n` best.

        Returns:
            An object with the `tokenize` of this tokenizer (same ids, same
            vocabulary) and `samples_segmentation = True`, which tells
            `make_batches` to tokenize again every epoch.

        Example:

        >>> tokenizer = SubwordTokenizer.train(
        ...     ["a small corpus", "of two lines"] * 50, vocab_size=40, byte_fallback=False)
        >>> ids = tokenizer.sampler(alpha=0.3).tokenize(tf.constant(["a small corpus"]))
        >>> tokenizer.detokenize(ids).numpy()  # whichever split was drawn
        array([b'a small corpus'], dtype=object)
        """
        return SegmentationSampler(self._model_proto, alpha=alpha, nbest_size=nbest_size)

    @property
    def model_proto(self):
        """The serialized SentencePiece model (bytes)."""
        return self._model_proto

    @classmethod
    def train(
        cls,
        texts_or_files,
        vocab_size,
        *,
        model_type="unigram",
        character_coverage=0.9995,
        byte_fallback=True,
        normalization="whitespace",
        max_sentences=2_000_000,
        hard_vocab_limit=False,
        seed=0,
        num_threads=None,
        name=None,
    ):
        """Trains a SentencePiece model on strings or UTF-8 files (one sentence a line).

        Args:
            texts_or_files: an iterable of sentences (`str`) and/or text files
                (`pathlib.Path`, one sentence a line), or one file path. Pass
                source and target text together for a shared vocabulary.
            vocab_size: int, the number of ids including the 4 reserved ones
                (and the 256 byte pieces when `byte_fallback`).
            model_type: `"unigram"` (default) or `"bpe"`.
            character_coverage: fraction of characters the vocabulary covers;
                0.9995 suits Korean and other large alphabets; 1.0 for small ones.
            byte_fallback: bool, encode uncovered characters as UTF-8 bytes.
            normalization: `"whitespace"` (default: tabs and Unicode spaces
                such as U+00A0 become spaces; runs of spaces collapse; nothing
                else changes) or a SentencePiece rule name: `"identity"`,
                `"nmt_nfkc"`, `"nfkc"`, ... NFKC is not the default because it
                rewrites Korean chat text (the compatibility jamo of "ㅠㅠ" and
                "ㅋㅋ" become conjoining jamo, "ᅲᅲ") and Spanish ordinals ("1º" -> "1o").
            max_sentences: int, at most this many sentences are sampled.
            hard_vocab_limit: bool; False (default) makes `vocab_size` an upper
                bound that a corpus too small for it may not reach (read the
                result's `vocab_size`), True makes that an error.
            seed: int, the seed of that sampling (SentencePiece is otherwise
                deterministic for a given input and thread count).
            num_threads: int, trainer threads; default `os.cpu_count()`.
            name: name of the module.

        Returns:
            A `SubwordTokenizer`.

        Example:

        >>> files = [pathlib.Path("multi30k_task1/train.en"), pathlib.Path("multi30k_task1/train.de")]
        >>> tok = SubwordTokenizer.train(files, vocab_size=8000)
        """
        if not isinstance(vocab_size, int) or vocab_size <= NUM_RESERVED_IDS:
            raise ValueError(
                f"`vocab_size` must be an int larger than {NUM_RESERVED_IDS}. Received: vocab_size={vocab_size!r}"
            )
        if model_type not in _MODEL_TYPES:
            raise ValueError(f"`model_type` must be one of {_MODEL_TYPES}. Received: model_type={model_type!r}")
        if not 0.0 < character_coverage <= 1.0:
            raise ValueError(
                f"`character_coverage` must be in (0, 1]. Received: character_coverage={character_coverage!r}"
            )
        texts = list(_iter_texts(texts_or_files))
        if not texts:
            raise ValueError("`texts_or_files` holds no non-empty line of text. Received nothing to train on.")
        _check_trainable(texts)
        writer = io.BytesIO()
        spm.set_random_generator_seed(seed)
        with tempfile.TemporaryDirectory() as tmp:
            if normalization == "whitespace":
                rules = pathlib.Path(tmp) / "whitespace.tsv"
                rules.write_text("".join(f"{c:X}\t20\n" for c in _SPACE_CODEPOINTS), encoding="ascii")
                rule_args = {"normalization_rule_tsv": str(rules)}
            else:
                rule_args = {"normalization_rule_name": normalization}
            cls._run_trainer(
                texts,
                writer,
                normalization,
                rule_args,
                vocab_size=vocab_size,
                model_type=model_type,
                character_coverage=character_coverage,
                byte_fallback=byte_fallback,
                input_sentence_size=max_sentences,
                hard_vocab_limit=hard_vocab_limit,
                num_threads=num_threads or os.cpu_count() or 1,
            )
        return cls(_without_rule_file(writer.getvalue()), name=name)

    @staticmethod
    def _run_trainer(texts, writer, normalization, rule_args, **options):
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(texts),
                model_writer=writer,
                shuffle_input_sentence=True,
                pad_id=PAD_ID,
                unk_id=UNK_ID,
                bos_id=START_ID,
                eos_id=END_ID,
                minloglevel=2,
                **rule_args,
                **options,
            )
        except RuntimeError as e:
            settings = ", ".join(f"{k}={options[k]}" for k in ("vocab_size", "character_coverage", "byte_fallback"))
            settings += f", normalization={normalization!r}"
            detail = str(e)
            if "sentences_.empty()" in detail:  # every line skipped, or emptied by the normalization
                detail = f"no line is left to train on after SentencePiece's normalization ({detail.strip()})"
            raise ValueError(f"SentencePiece could not train with {settings} on {len(texts)} lines: {detail}") from e

    def save(self, directory):
        """Writes `tokenizer.model` (the proto) and `tokenizer.json` to `directory`, atomically."""
        directory = pathlib.Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        config = {
            "format": self.FORMAT,
            "model_file": MODEL_FILENAME,
            "vocab_size": self.vocab_size,
            "pad_id": PAD_ID,
            "unk_id": UNK_ID,
            "start_id": START_ID,
            "end_id": END_ID,
        }
        atomic.write_bytes(directory / MODEL_FILENAME, self._model_proto)
        atomic.write_bytes(directory / CONFIG_FILENAME, (json.dumps(config, indent=2) + "\n").encode("utf-8"))

    @classmethod
    def load(cls, directory, name=None):
        """Loads a tokenizer written by `save` from `directory`."""
        directory = pathlib.Path(directory)
        config_path = directory / CONFIG_FILENAME
        if not config_path.is_file():
            raise ValueError(f"`directory` must hold {CONFIG_FILENAME}. Received: directory={str(directory)!r}")
        config = json.loads(config_path.read_text(encoding="utf-8"))
        if config.get("format") != cls.FORMAT:
            raise ValueError(
                f"{config_path} must have format {cls.FORMAT!r}. Received: format={config.get('format')!r}"
            )
        tokenizer = cls((directory / config["model_file"]).read_bytes(), name=name)
        if tokenizer.vocab_size != config["vocab_size"]:
            raise ValueError(
                f"{config_path} says vocab_size={config['vocab_size']} but the model has {tokenizer.vocab_size}."
            )
        return tokenizer


class SegmentationSampler:
    """`tokenize` with a sampled segmentation; made by `SubwordTokenizer.sampler`."""

    samples_segmentation = True
    pad_id, unk_id, start_id, end_id = PAD_ID, UNK_ID, START_ID, END_ID

    def __init__(self, model_proto, alpha=0.3, nbest_size=-1):
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 < alpha <= 1.0:
            raise ValueError(f"`alpha` must be a number in (0, 1]. Received: alpha={alpha!r}")
        if isinstance(nbest_size, bool) or not isinstance(nbest_size, int) or nbest_size in (0, 1) or nbest_size < -1:
            raise ValueError(f"`nbest_size` must be -1 (all) or an int above 1. Received: nbest_size={nbest_size!r}")
        self.alpha, self.nbest_size = float(alpha), nbest_size
        self._tokenizer = tf_text.SentencepieceTokenizer(
            model=model_proto, out_type=tf.int32, nbest_size=nbest_size, alpha=self.alpha
        )

    def tokenize(self, strings):
        """Strings `(batch,)` -> int32 `RaggedTensor` `(batch, None)`: one sampled segmentation each."""
        return self._tokenizer.tokenize(strings)
