"""`PieceTokenizer`: SentencePiece pieces mapped to a checkpoint's own ids by a vocabulary, in tensorflow-text ops.

Imported checkpoints (Marian, M2M100, NLLB) have ids of their own:
SentencePiece cuts the text into pieces, and a vocabulary (`vocab.json`, or
a `tokenizer.json`'s) gives each piece its id, whatever SentencePiece's own
ids are. A piece missing from the vocabulary is `<unk>`. The special pieces
(`hidden`) stand for nothing in the text. This base class holds the TF ops
both families share, so that an exported SavedModel tokenizes with no
Python: `MarianTokenizer` (`marian`) and `FairseqTokenizer` (`fairseq`)
add their families' specials and language tokens.

Example:

>>> pieces_by_id({"</s>": 0, "<pad>": 2})
['</s>', None, '<pad>']
"""

import hashlib
import json
import re

import tensorflow as tf
import tensorflow_text as tf_text

CONFIG_FILENAME = "tokenizer.json"
# A vocab.json entry is a piece (at most a few dozen bytes, escaped), its id and punctuation: well under this.
BYTES_PER_PIECE = 256
MAX_VOCAB_FILE_BYTES = 2**28
MAX_VOCAB_SIZE = 2**24  # ids of a vocabulary whose embedding size is not known: far above any real one
MAX_SENTENCEPIECE_BYTES = 2**28


class PieceTokenizer(tf.Module):
    """Strings to a checkpoint's ids and back: SentencePiece pieces looked up in `vocab`.

    `tokenize` gives the pieces' ids (no special token added: the model's
    framing, `</s>` or a language token, is the caller's); `detokenize`
    drops the `hidden` ids, joins the other pieces (byte pieces as their
    bytes), turns `▁` into spaces and strips the ends (`strip="both"`,
    SentencePiece's decoding) or the one space in front (`"first_space"`,
    transformers' Metaspace decoder).

    Args:
        model_proto: bytes, the serialized SentencePiece model.
        vocab: `{piece: id}`: every id the model has (specials and language
            tokens too); the largest id + 1 is `vocab_size`.
        hidden: pieces that stand for nothing in the text (dropped by `detokenize`).
        special: pieces that text never gives, beside `hidden` (language tokens a
            tokenizer decodes as text).
        unk_piece: the piece of an unknown piece's id.
        strip: `"both"` or `"first_space"`, what `detokenize` strips.
        name: name of the module.
    """

    # `detokenize` drops ids of the model's rows beyond `vocab_size` (a checkpoint's padding rows).
    drops_ids_beyond_vocab = True

    def __init__(self, model_proto, vocab, hidden=(), unk_piece="<unk>", strip="both", special=(), name=None):
        super().__init__(name=name)
        if strip not in ("both", "first_space"):
            raise ValueError(f"`strip` must be 'both' or 'first_space'. Received: strip={strip!r}")
        self._strip = strip
        self._model_proto, self._vocab = bytes(model_proto), dict(vocab)
        self.vocab_size = max(self._vocab.values()) + 1
        self.unk_id = self._vocab[unk_piece]
        # The tokens no text stands for (no prefix may hold them, `translators.controls`), and which text never
        # gives: an unknown run SentencePiece returns whole ("</s>", a full-width "＜/s＞" after normalization) is
        # looked up by its text, and reads as <unk> where it spells one of them.
        self.special_tokens = tuple(sorted({*hidden, *special, unk_piece}))
        pieces, ids = zip(*((p, i) for p, i in self._vocab.items() if p not in self.special_tokens or p == unk_piece))
        self._ids = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(pieces), tf.constant(ids, tf.int32)), self.unk_id
        )
        self._pieces = tf_text.SentencepieceTokenizer(
            model=self._model_proto, out_type=tf.string, name=resource_name(self._model_proto)
        )
        by_id = [piece or "" for piece in pieces_by_id(self._vocab)]
        self._pieces_by_id = tf.constant(by_id)
        hidden = set(hidden)
        surfaces = ["" if piece in hidden else _surface(piece) for piece in by_id]
        self._surfaces = tf.constant([text.encode("utf-8") if isinstance(text, str) else text for text in surfaces])

    def _trace(self):
        """Traces `tokenize` and `detokenize` for the inputs a SavedModel gives them (a subclass calls it last)."""
        self.tokenize.get_concrete_function(tf.TensorSpec([None], tf.string))
        self.detokenize.get_concrete_function(tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1))
        self.detokenize.get_concrete_function(tf.TensorSpec([None, None], tf.int32))

    @property
    def vocab(self):
        """`{piece: id}`, a copy of the checkpoint's vocabulary."""
        return dict(self._vocab)

    def piece_ids(self, strings):
        """Ids `RaggedTensor` `(batch, None)` of the SentencePiece pieces of `strings` (a `tf.string` tensor)."""
        return self._ids.lookup(self._pieces.tokenize(strings))

    @tf.function(autograph=False)
    def detokenize(self, ids):
        """Ids `(batch, length)`, ragged or dense, -> strings `(batch,)`; hidden ids are dropped."""
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(ids))
        ids = tf.cast(ids, tf.int32)
        ids = tf.ragged.boolean_mask(ids, tf.logical_and(ids >= 0, ids < self.vocab_size))
        joined = tf.strings.reduce_join(tf.ragged.map_flat_values(tf.gather, self._surfaces, ids), axis=-1)
        text = tf.strings.regex_replace(joined, "\u2581", " ")
        return tf.strings.strip(text) if self._strip == "both" else tf.strings.regex_replace(text, "^ ", "")

    def id_to_piece(self, ids):
        """The pieces of int `ids` (any shape), as the vocabulary names them; "" past it (a model's padding rows)."""
        ids = tf.cast(ids, tf.int32)
        pieces = tf.gather(self._pieces_by_id, tf.clip_by_value(ids, 0, self.vocab_size - 1))
        return tf.where(tf.logical_and(ids >= 0, ids < self.vocab_size), pieces, "")

    @staticmethod
    def write_config(path, config):
        """Writes a tokenizer's `tokenizer.json` (what `load` reads) to `path`, atomically."""
        from keras_transformer.files import atomic

        atomic.write_bytes(path, (json.dumps(config, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))


def read_vocab(path, max_bytes, id_limit):
    """`({piece: id}, the file's bytes)` of a `vocab.json`; a `ValueError` naming a file that is not one.

    Too large for `max_bytes`, not UTF-8 JSON, not an object of pieces and
    ids in `[0, id_limit)`.
    """
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(
            f"{path} is {size:,} bytes: too large to be the vocabulary of this model's embedding "
            f"(at most {max_bytes:,} bytes)"
        )
    data = path.read_bytes()
    try:
        vocab = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ValueError(f"{path} is not JSON that can be read: nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not a JSON vocabulary: {str(error)[:200]}") from None
    valid = isinstance(vocab, dict) and all(
        isinstance(i, int) and not isinstance(i, bool) and 0 <= i < id_limit for i in vocab.values()
    )
    if not valid or not vocab:
        raise ValueError(f"{path} must map each piece to an integer id in [0, {id_limit})")
    return vocab, data


def read_sentencepiece(path):
    """The bytes of a SentencePiece model file; a `ValueError` naming it when SentencePiece cannot load it."""
    import sentencepiece

    size = path.stat().st_size
    if size > MAX_SENTENCEPIECE_BYTES:
        raise ValueError(f"{path} is {size:,} bytes: too large to be a SentencePiece model")
    model_proto = path.read_bytes()
    try:
        sentencepiece.SentencePieceProcessor(model_proto=model_proto)
    except (RuntimeError, ValueError, TypeError) as error:
        raise ValueError(f"{path} is not a SentencePiece model: {str(error).strip()[:200]}") from None
    return model_proto


def pieces_by_id(vocab):
    """The pieces of `vocab` (`{piece: id}`) in id order; None at an id no piece has.

    Example:

    >>> pieces_by_id({"</s>": 0, "<pad>": 2})
    ['</s>', None, '<pad>']
    """
    pieces = [None] * (max(vocab.values()) + 1)
    for piece, index in vocab.items():
        pieces[index] = piece
    return pieces


def resource_name(model_proto):
    """A name for the SentencePiece resource of `model_proto`, the same only for the same model.

    tensorflow-text's SentencePiece resource is kernel-owned and shared by
    name: in a loaded SavedModel, two tokenizers whose resources are named
    alike would both cut text with one of the two models (an import's source
    and target models are two).
    """
    return "sentencepiece_" + hashlib.sha256(model_proto).hexdigest()[:16]


def _surface(piece):
    """What a piece stands for in the text: its bytes for a byte piece (`<0xE3>`), else the piece itself."""
    match = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", piece)
    return bytes([int(match.group(1), 16)]) if match else piece
