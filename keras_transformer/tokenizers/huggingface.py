"""`HuggingFaceTokenizer`: an imported GPT-2's or BERT's tokenizer, read and run by the `tokenizers` library.

GPT-2 cuts text with a byte-level BPE (`vocab.json` and `merges.txt`), BERT
with WordPiece (`vocab.txt`, lower-cased and accents stripped as its
`tokenizer_config.json` says). Both are read with Hugging Face's
`tokenizers` (the `pretrained` extra), the library transformers' own fast
tokenizers run, from the checkpoint's `tokenizer.json` where it has one
(transformers 5 writes only that) or else from those vocabulary files: so
the ids are transformers'. A run keeps the tokenizer as `hf_tokenizer.json`
beside this package's `tokenizer.json`, which names the format and the
special ids.

The checkpoint's own tokenizer files (`files`: `vocab.txt`, `tokenizer.json`,
...) are kept as they were read, in `files/` beside them, so that
an export back to a Hugging Face checkpoint writes them byte for byte.

The tokenizer runs in Python, not in a TensorFlow graph: a SavedModel
export of an imported GPT-2 or BERT does not hold it (a BERT export holds
tensorflow-text's WordPiece instead, `serving.encoder_graph`).

Example:

>>> tokenizer = HuggingFaceTokenizer.load("saved_models/gpt2-run/source_tokenizer")  # doctest: +SKIP
>>> tokenizer.detokenize(tokenizer.tokenize(["Hello world"]))  # doctest: +SKIP
"""

import json
import pathlib

import tensorflow as tf

from keras_transformer.files import atomic
from keras_transformer.files.json_files import read_json_object

CONFIG_FILENAME = "tokenizer.json"  # this package's, as for its other tokenizers
TOKENIZER_FILENAME = "hf_tokenizer.json"
KEPT_FOLDER = "files"  # the checkpoint's tokenizer files, as they were read (as a FairseqTokenizer keeps them)
BYTES_PER_ENTRY = 512  # a vocabulary entry and its merge in tokenizer.json: a few dozen bytes, escaped
MODELS = ("BPE", "WordPiece")


def _tokenizers():
    try:
        import tokenizers
    except ImportError:
        raise ValueError(
            "Reading a GPT-2 or BERT tokenizer needs the `tokenizers` package: "
            "pip install 'keras-transformer[pretrained]'"
        ) from None
    return tokenizers


class HuggingFaceTokenizer:
    """Strings to ids and back with a `tokenizers.Tokenizer`, behind this package's tokenizer methods.

    `tokenize` adds what the checkpoint's post-processor adds (BERT:
    `[CLS]` ... `[SEP]`; GPT-2: nothing), as transformers' tokenizer does
    by default; `detokenize` skips the special tokens, as `decode(...,
    skip_special_tokens=True)` does.

    Args:
        tokenizer_json: the tokenizer as `tokenizers` serializes it (a str).
        pad_id, start_id, end_id: the model's special ids.
        mask_id: the `[MASK]` id of a masked-LM tokenizer, or None.
        cleanup: decoded text has the spaces before punctuation removed, as
            transformers' `clean_up_tokenization_spaces` does.

    Attributes:
        files: `{name: bytes}` of the checkpoint's tokenizer files as they
            were read (`vocab.txt`, `tokenizer.json`, ...; empty for a run
            imported before they were kept), which `save` keeps.
    """

    FORMAT = "huggingface"  # what `save` writes as `tokenizer.json`'s `format`: its kind (`tokenizers.kinds`)

    def __init__(self, tokenizer_json, pad_id, start_id, end_id, mask_id=None, cleanup=False):
        self._json = tokenizer_json
        self._tokenizer = _tokenizers().Tokenizer.from_str(tokenizer_json)
        self.vocab_size = self._tokenizer.get_vocab_size(with_added_tokens=True)
        self.pad_id, self.start_id, self.end_id, self.mask_id = pad_id, start_id, end_id, mask_id
        self.cleanup = cleanup
        self.files = {}
        added = self._tokenizer.get_added_tokens_decoder().values()
        self.special_tokens = tuple(sorted(token.content for token in added if token.special))

    @property
    def tokenizer_json(self):
        """The tokenizer as `tokenizers` serializes it (a str): its normalizer, pre-tokenizer, model, ..."""
        return self._json

    @property
    def vocab(self):
        """`{token: id}`."""
        return self._tokenizer.get_vocab(with_added_tokens=True)

    @classmethod
    def from_tokenizer_file(cls, path, vocab_size, **ids):
        """The tokenizer in a checkpoint's `tokenizer.json` (untrusted: its size, model and ids are checked)."""
        path = pathlib.Path(path)
        data = read_json_object(path, 2**16 + vocab_size * BYTES_PER_ENTRY)
        model = data.get("model")
        kind = model.get("type") if isinstance(model, dict) else None
        if kind not in MODELS:
            raise ValueError(f"{path}: a tokenizer model of type {kind!r}; keras-transformer reads {MODELS}")
        return cls._checked(path, json.dumps(data), vocab_size, ids)

    @classmethod
    def from_bpe_files(cls, vocab_path, merges_path, vocab_size, add_prefix_space=False, add_bos_token=False, **ids):
        """GPT-2's byte-level BPE from `vocab.json` and `merges.txt`, as transformers' `GPT2Tokenizer` builds it.

        With `add_bos_token`, every text starts with the start id (`ids["start_id"]`).
        """
        tokenizers = _tokenizers()
        vocab = read_json_object(vocab_path, 2**16 + vocab_size * BYTES_PER_ENTRY)
        if not all(isinstance(token, str) and type(index) is int for token, index in vocab.items()):
            raise ValueError(f"{vocab_path} must map tokens to integer ids")
        merges = _text(merges_path, 2**16 + vocab_size * BYTES_PER_ENTRY).splitlines()
        pairs = [tuple(line.split(" ")) for line in merges if line and not line.startswith("#version")]
        if any(len(pair) != 2 for pair in pairs):
            raise ValueError(f"{merges_path}: every line must be two tokens separated by a space")
        tokenizer = tokenizers.Tokenizer(
            tokenizers.models.BPE(vocab, pairs, continuing_subword_prefix="", fuse_unk=False)
        )
        tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
        tokenizer.decoder = tokenizers.decoders.ByteLevel()
        special = [token for token, index in vocab.items() if index in ids.values() and token.startswith("<|")]
        tokenizer.add_special_tokens(special)
        start = next((token for token, index in vocab.items() if index == ids.get("start_id")), None)
        if add_bos_token and start is not None:
            tokenizer.post_processor = tokenizers.processors.TemplateProcessing(
                single=f"{start} $A", special_tokens=[(start, vocab[start])]
            )
        return cls._checked(vocab_path, tokenizer.to_str(), vocab_size, ids)

    @classmethod
    def from_wordpiece_file(
        cls, vocab_path, vocab_size, lowercase=True, strip_accents=None, chinese_chars=True, special_tokens=None, **ids
    ):
        """BERT's WordPiece from `vocab.txt`, as transformers' `BertTokenizer` builds it.

        `special_tokens` names them (`{"cls_token": "[CLS]", ...}`; BERT's by default).
        """
        names = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]"}
        names = {**names, "mask_token": "[MASK]", **(special_tokens or {})}
        tokenizers = _tokenizers()
        lines = _text(vocab_path, 2**16 + vocab_size * BYTES_PER_ENTRY).split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        vocab = {}
        for index, token in enumerate(lines):
            vocab.setdefault(token.rstrip("\r"), index)
        tokenizer = tokenizers.Tokenizer(tokenizers.models.WordPiece(vocab, unk_token=names["unk_token"]))
        tokenizer.normalizer = tokenizers.normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=chinese_chars, strip_accents=strip_accents, lowercase=lowercase
        )
        tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
        tokenizer.decoder = tokenizers.decoders.WordPiece(prefix="##")
        tokenizer.add_special_tokens([token for token in names.values() if token in vocab])
        first, separator = names["cls_token"], names["sep_token"]
        if first in vocab and separator in vocab:
            tokenizer.post_processor = tokenizers.processors.BertProcessing(
                (separator, vocab[separator]), (first, vocab[first])
            )
        return cls._checked(vocab_path, tokenizer.to_str(), vocab_size, ids)

    @classmethod
    def _checked(cls, path, tokenizer_json, vocab_size, ids):
        try:
            tokenizer = cls(tokenizer_json, **ids)
        except Exception as error:  # noqa: BLE001  (the tokenizers library's errors: all mean "not a tokenizer")
            raise ValueError(f"{path}: not a tokenizer that can be read: {str(error).splitlines()[0][:200]}") from None
        found = sorted(set(tokenizer.vocab.values()))
        if found != list(range(vocab_size)):
            raise ValueError(
                f"{path} does not give the model's {vocab_size} embedding rows one token each: its "
                f"{len(found)} ids run from {found[0] if found else None} to {found[-1] if found else None}"
            )
        return tokenizer

    def encode(self, texts, max_length=None, segments=False):
        """Each text's ids, a list of lists (the special tokens the post-processor adds included).

        A text may be a pair `(first, second)`, framed as the checkpoint
        frames pairs (BERT: `[CLS] first [SEP] second [SEP]`). With
        `max_length`, each is cut to that many ids as transformers'
        `truncation=True` cuts it (the special tokens kept; a pair's longer
        side first). With `segments`, `(ids, segment ids)`: 0 for a text
        and a pair's first side, 1 for its second (BERT's token types).
        """
        inputs = [tuple(map(str, text)) if isinstance(text, (tuple, list)) else str(text) for text in texts]
        if max_length is not None:
            self._tokenizer.enable_truncation(max_length)
        try:
            encodings = self._tokenizer.encode_batch(inputs)
        finally:
            self._tokenizer.no_truncation()
        ids = [encoding.ids for encoding in encodings]
        return (ids, [encoding.type_ids for encoding in encodings]) if segments else ids

    def decode(self, rows, skip_special_tokens=True):
        """Each row of ids as text, special tokens skipped unless `skip_special_tokens=False`."""
        texts = self._tokenizer.decode_batch([[int(i) for i in row] for row in rows], skip_special_tokens)
        return [_clean_up(text) for text in texts] if self.cleanup else texts

    def token(self, index):
        """The token of id `index` as the vocabulary spells it (`"##ing"`, `"[MASK]"`)."""
        return self._tokenizer.id_to_token(int(index))

    def tokenize(self, strings):
        """Strings `(batch,)` -> int32 `RaggedTensor` `(batch, None)`."""
        texts = [s.decode("utf-8") if isinstance(s, bytes) else s for s in _as_list(strings)]
        return tf.ragged.constant(self.encode(texts), dtype=tf.int32, ragged_rank=1)

    def detokenize(self, ids):
        """Ids `(batch, length)`, ragged or dense (padding and special ids dropped) -> strings `(batch,)`."""
        rows = ids.to_list() if isinstance(ids, tf.RaggedTensor) else _as_list(ids)
        rows = [[i for i in row if 0 <= i < self.vocab_size] for row in rows]
        return tf.constant(self.decode(rows), dtype=tf.string)

    def id_to_piece(self, ids):
        """The tokens of int `ids` (a flat list or 1-D tensor)."""
        return tf.constant([self._tokenizer.id_to_token(int(i)) or "" for i in _as_list(ids)])

    def save(self, directory):
        """Writes `hf_tokenizer.json`, this package's `tokenizer.json` (format and ids) and `files` to `directory`."""
        directory = pathlib.Path(directory)
        for name, data in self.files.items():
            atomic.write_bytes(directory / KEPT_FOLDER / _kept_name(name), data)
        config = {
            "format": self.FORMAT,
            "tokenizer_file": TOKENIZER_FILENAME,
            "vocab_size": self.vocab_size,
            "pad_id": self.pad_id,
            "start_id": self.start_id,
            "end_id": self.end_id,
            "mask_id": self.mask_id,
            "cleanup": self.cleanup,
            "checkpoint_files": sorted(self.files),
        }
        atomic.write_bytes(directory / TOKENIZER_FILENAME, self._json.encode("utf-8"))
        atomic.write_bytes(directory / CONFIG_FILENAME, (json.dumps(config, indent=2) + "\n").encode("utf-8"))

    @classmethod
    def load(cls, directory, name=None):
        """The tokenizer `save` wrote in `directory`."""
        directory = pathlib.Path(directory)
        config = read_json_object(directory / CONFIG_FILENAME)
        ids = {key: config.get(key) for key in ("pad_id", "start_id", "end_id", "mask_id")}
        tokenizer = cls.from_tokenizer_file(directory / TOKENIZER_FILENAME, config["vocab_size"], **ids)
        tokenizer.cleanup = config.get("cleanup") is True
        kept = config.get("checkpoint_files") or []
        tokenizer.files = {name: (directory / KEPT_FOLDER / _kept_name(name)).read_bytes() for name in kept}
        return tokenizer


def _kept_name(name):
    """`name` if it is a plain file name (no folder, not hidden): the only names kept files have."""
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"{name!r} is not a tokenizer file's name")
    return name


def _clean_up(text):
    """transformers' `clean_up_tokenization`: no space before punctuation and English contractions."""
    for spaced, joined in _CLEAN_UP:
        text = text.replace(spaced, joined)
    return text


_CLEAN_UP = (
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
)


def _text(path, max_bytes):
    path = pathlib.Path(path)
    if path.stat().st_size > max_bytes:
        raise ValueError(f"{path} is {path.stat().st_size:,} bytes, more than the {max_bytes:,} its model can need")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text") from None


def _as_list(values):
    if isinstance(values, (tf.Tensor, tf.RaggedTensor)) or hasattr(values, "numpy"):
        values = values.numpy()
    return values.tolist() if hasattr(values, "tolist") else list(values)
