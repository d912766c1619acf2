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

The tokenizer runs in Python, not in a TensorFlow graph: a SavedModel
export of an imported GPT-2 or BERT does not hold it.

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
    """

    def __init__(self, tokenizer_json, pad_id, start_id, end_id, mask_id=None):
        self._json = tokenizer_json
        self._tokenizer = _tokenizers().Tokenizer.from_str(tokenizer_json)
        self.vocab_size = self._tokenizer.get_vocab_size(with_added_tokens=True)
        self.pad_id, self.start_id, self.end_id, self.mask_id = pad_id, start_id, end_id, mask_id
        added = self._tokenizer.get_added_tokens_decoder().values()
        self.special_tokens = tuple(sorted(token.content for token in added if token.special))

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
    def from_wordpiece_file(cls, vocab_path, vocab_size, lowercase=True, strip_accents=None, **ids):
        """BERT's WordPiece from `vocab.txt`, as transformers' `BertTokenizer` builds it."""
        tokenizers = _tokenizers()
        lines = _text(vocab_path, 2**16 + vocab_size * BYTES_PER_ENTRY).split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        vocab = {}
        for index, token in enumerate(lines):
            vocab.setdefault(token.rstrip("\r"), index)
        tokenizer = tokenizers.Tokenizer(tokenizers.models.WordPiece(vocab, unk_token="[UNK]"))
        tokenizer.normalizer = tokenizers.normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=strip_accents, lowercase=lowercase
        )
        tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
        tokenizer.decoder = tokenizers.decoders.WordPiece(prefix="##")
        tokenizer.add_special_tokens([t for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]") if t in vocab])
        cls_id, sep_id = vocab.get("[CLS]"), vocab.get("[SEP]")
        if cls_id is not None and sep_id is not None:
            tokenizer.post_processor = tokenizers.processors.BertProcessing(("[SEP]", sep_id), ("[CLS]", cls_id))
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

    def encode(self, texts):
        """Each text's ids, a list of lists (the special tokens the post-processor adds included)."""
        return [encoding.ids for encoding in self._tokenizer.encode_batch([str(t) for t in texts])]

    def decode(self, rows):
        """Each row of ids as text, special tokens skipped."""
        return self._tokenizer.decode_batch([[int(i) for i in row] for row in rows], skip_special_tokens=True)

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
        """Writes `hf_tokenizer.json` and this package's `tokenizer.json` (format and ids) to `directory`."""
        directory = pathlib.Path(directory)
        config = {
            "format": "huggingface",
            "tokenizer_file": TOKENIZER_FILENAME,
            "vocab_size": self.vocab_size,
            "pad_id": self.pad_id,
            "start_id": self.start_id,
            "end_id": self.end_id,
            "mask_id": self.mask_id,
        }
        atomic.write_bytes(directory / TOKENIZER_FILENAME, self._json.encode("utf-8"))
        atomic.write_bytes(directory / CONFIG_FILENAME, (json.dumps(config, indent=2) + "\n").encode("utf-8"))

    @classmethod
    def load(cls, directory, name=None):
        """The tokenizer `save` wrote in `directory`."""
        directory = pathlib.Path(directory)
        config = read_json_object(directory / CONFIG_FILENAME)
        ids = {key: config.get(key) for key in ("pad_id", "start_id", "end_id", "mask_id")}
        return cls.from_tokenizer_file(directory / TOKENIZER_FILENAME, config["vocab_size"], **ids)


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
