"""`WordPieceGraph`: an imported BERT's WordPiece tokenizer as TensorFlow ops, so that a SavedModel holds it.

An imported BERT tokenizes with Hugging Face's `tokenizers` in Python
(`HuggingFaceTokenizer`); a SavedModel needs the same ids from TensorFlow
ops. `graph_form(tokenizer)` rebuilds its pipeline from what `tokenizers`
serializes (`tokenizer.json`), step by step as `tokenizers` runs it:

1. the special tokens (`[MASK]`, `[CLS]`, ...) are cut out of the raw text
   first, each one id (`tf_text.regex_split`);
2. `BertNormalizer`: control characters removed and whitespace made a
   space (`clean_text`), CJK ideographs spaced (`handle_chinese_chars`),
   accents stripped (NFD, then the nonspacing marks removed), lower-cased
   (`tf.strings.lower`, code point by code point, as Rust's `to_lowercase`);
3. `BertPreTokenizer`: words split at whitespace and at each punctuation
   character;
4. WordPiece (`tf_text.WordpieceTokenizer`): a word of more than
   `max_input_chars_per_word` characters (not bytes) is `[UNK]`, as is a
   word that no pieces of the vocabulary spell.

tensorflow-text's own `BertTokenizer` and `FastBertTokenizer` do not give
these ids: their lower-casing applies NFKC and case folding (`ㅠ` becomes
`ᅲ`, `…` three dots, `ß` `ss`), which changed 88 of the 23,646 texts of the
chatbot corpus. The tables of `tokenizers` are of an older Unicode than
TensorFlow's (RE2, ICU): a character added since Unicode 9 (a rare script's
marks, a few letters) may be normalized differently. A tokenizer of another
normalizer, pre-tokenizer, template or model (or added tokens that are not
special) has no graph form: `graph_form` says so in one line.

`decode` is the way back, as `tokenizers`' WordPiece decoder and
transformers' `clean_up_tokenization_spaces` write text.

Example:

>>> graph = graph_form(runs.load_tokenizers("saved_models/bert-base-uncased").source)  # doctest: +SKIP
>>> graph.encode(tf.constant(["Hello, [MASK]!"]))[0].to_list()  # doctest: +SKIP
[[101, 7592, 1010, 103, 999, 102]]
"""

import json
import string

import tensorflow as tf

# `tokenizers`' CJK ideographs (BertNormalizer's `handle_chinese_chars`), as RE2 ranges.
CJK = (
    r"\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}\x{2B740}-\x{2B81F}"
    r"\x{2B920}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}"
)
CONTROL = r"[\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F\p{Cf}\p{Co}\x{FFFD}]"  # removed (`\t\n\r` become spaces)
WHITESPACE = r"[\t\n\x0B\x0C\r \x{85}\p{Zs}\x{2028}\x{2029}]"  # Rust's `char::is_whitespace`
PUNCTUATION = r"[!-/:-@\[-`{-~\p{P}]"  # ASCII punctuation, and Unicode's
# transformers' `clean_up_tokenization_spaces`, after the decoder's own cleanup.
CLEAN_UP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"))
CLEAN_UP += ((" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))
DECODER_CLEAN_UP = CLEAN_UP[:7] + ((" do not", " don't"),) + CLEAN_UP[7:]
BERT_TEMPLATE = {
    "single": [("[CLS]", 0), ("A", 0), ("[SEP]", 0)],
    "pair": [("[CLS]", 0), ("A", 0), ("[SEP]", 0), ("B", 1), ("[SEP]", 1)],
}


def graph_form(tokenizer):
    """The `WordPieceGraph` of a `HuggingFaceTokenizer`; a one-line `ValueError` saying why where it has none."""
    json_text = getattr(tokenizer, "tokenizer_json", None)
    if json_text is None:
        raise ValueError(f"a {type(tokenizer).__name__} is not a BERT's WordPiece tokenizer")
    settings = read_settings(json.loads(json_text))
    return WordPieceGraph(settings, cleanup=bool(getattr(tokenizer, "cleanup", False)))


def read_settings(data):
    """What `WordPieceGraph` needs of a serialized `tokenizers.Tokenizer` (a dict); a `ValueError` if it differs."""
    model = data.get("model") or {}
    if model.get("type") != "WordPiece":
        raise ValueError(f"a {model.get('type')} tokenizer model: only BERT's WordPiece runs in TensorFlow here")
    normalizer = data.get("normalizer") or {"type": "BertNormalizer", "clean_text": False, "lowercase": False}
    normalizer = {"handle_chinese_chars": False, "strip_accents": None, **normalizer}
    if normalizer.get("type") != "BertNormalizer":
        raise ValueError(f"its normalizer is a {normalizer.get('type')}, not BERT's: it has no TensorFlow form here")
    pre_tokenizer = (data.get("pre_tokenizer") or {}).get("type")
    if pre_tokenizer != "BertPreTokenizer":
        raise ValueError(f"its pre-tokenizer is a {pre_tokenizer}, not BERT's: it has no TensorFlow form here")
    vocab = model.get("vocab") or {}
    tokens = [None] * len(vocab)
    for token, index in vocab.items():
        tokens[index] = token
    specials = {}
    for added in data.get("added_tokens") or []:
        plain = not (added.get("normalized") or added.get("single_word") or added.get("lstrip") or added.get("rstrip"))
        if not (added.get("special") and plain and tokens[added["id"]] == added["content"]):
            raise ValueError(f"its added token {added.get('content')!r} is not one of BERT's special tokens")
        specials[added["content"]] = added["id"]
    decoder = data.get("decoder") or {}
    lowercase = bool(normalizer.get("lowercase"))
    strip = normalizer.get("strip_accents")
    return {
        "tokens": tokens,
        "unknown": model["unk_token"],
        "prefix": model.get("continuing_subword_prefix", "##"),
        "max_chars": model.get("max_input_chars_per_word", 100),
        "clean_text": bool(normalizer.get("clean_text")),
        "chinese_chars": bool(normalizer.get("handle_chinese_chars")),
        "strip_accents": lowercase if strip is None else bool(strip),
        "lowercase": lowercase,
        "specials": specials,
        "frame": _frame(data.get("post_processor") or {}, specials),
        "decoder_cleanup": decoder.get("type") == "WordPiece" and bool(decoder.get("cleanup", True)),
    }


def _frame(post_processor, specials):
    """`(start id, end id)` of a post-processor that frames texts as BERT does: `[CLS] A [SEP] (B [SEP])`."""
    kind = post_processor.get("type")
    if kind == "BertProcessing":
        return post_processor["cls"][1], post_processor["sep"][1]
    if kind != "TemplateProcessing":
        raise ValueError(f"its post-processor is a {kind}, not BERT's: it has no TensorFlow form here")
    read = {side: [_template_piece(piece) for piece in post_processor.get(side) or []] for side in ("single", "pair")}
    start, end = (read["single"] + [(None, None)] * 3)[0][0], (read["single"] + [(None, None)] * 3)[2][0]
    expected = {
        "single": [(start, 0), ("$A", 0), (end, 0)],
        "pair": [(start, 0), ("$A", 0), (end, 0), ("$B", 1), (end, 1)],
    }
    if read != expected or start not in specials or end not in specials:
        raise ValueError(f"its template frames texts as {read['pair']}, not as BERT does: it has no TensorFlow form")
    return specials[start], specials[end]


def _template_piece(piece):
    """`(token or "$A"/"$B", type id)` of one piece of a `TemplateProcessing` template."""
    ((role, item),) = piece.items()
    name = item["id"] if role == "SpecialToken" else f"${item['id']}"
    return name, item["type_id"]


class WordPieceGraph(tf.Module):
    """A BERT's WordPiece tokenizer as TensorFlow ops (see the module): `pieces`, `encode`, `decode`, `tokens`.

    Args:
        settings: `read_settings` of the tokenizer's serialized form.
        cleanup: transformers' `clean_up_tokenization_spaces`, applied by `decode`.
    """

    def __init__(self, settings, cleanup=False, name="wordpiece"):
        import tensorflow_text as tf_text

        super().__init__(name=name)
        self.settings = settings
        self.cleanup = cleanup
        tokens = settings["tokens"]
        self.vocab = _table({token: index for index, token in enumerate(tokens) if token is not None})
        self.token_strings = tf.constant(["" if token is None else token for token in tokens])
        specials = settings["specials"]
        self.specials = _table(specials)
        self.special_ids = tf.constant(sorted(specials.values()), tf.int64)
        self._special_pattern = "|".join(_escaped(token) for token in sorted(specials, key=len, reverse=True))
        self.start_id, self.end_id = settings["frame"]
        self._wordpiece = tf_text.WordpieceTokenizer(
            self.vocab,
            suffix_indicator=settings["prefix"],
            max_bytes_per_word=4 * settings["max_chars"],  # the characters are counted below, as `tokenizers` does
            token_out_type=tf.int64,
            unknown_token=settings["unknown"],
        )

    @property
    def vocab_size(self):
        return len(self.settings["tokens"])

    def normalize(self, texts):
        """`texts` as `BertNormalizer` leaves them (strings of any shape)."""
        import tensorflow_text as tf_text

        settings = self.settings
        if settings["clean_text"]:
            texts = tf.strings.regex_replace(texts, CONTROL, "")
            texts = tf.strings.regex_replace(texts, WHITESPACE, " ")
        if settings["chinese_chars"]:
            texts = tf.strings.regex_replace(texts, f"([{CJK}])", r" \1 ")
        if settings["strip_accents"]:
            texts = tf.strings.regex_replace(tf_text.normalize_utf8(texts, "NFD"), r"\p{Mn}", "")
        if settings["lowercase"]:
            texts = tf.strings.lower(texts, encoding="utf-8")
        return texts

    def pieces(self, texts):
        """Each text's ids `(batch, None)` int64, without the `[CLS]`/`[SEP]` frame (see the module)."""
        import tensorflow_text as tf_text

        segments = tf_text.regex_split(texts, self._special_pattern, self._special_pattern)  # (batch, segments)
        flat = segments.flat_values
        special = self.specials.lookup(flat) >= 0
        normalized = self.normalize(tf.where(special, "x", flat))  # a special token's segment: one word, set below
        words = tf_text.regex_split(normalized, f"{WHITESPACE}+|{PUNCTUATION}", PUNCTUATION)  # (segments, words)
        segment_of_word = words.value_rowids()
        word = words.flat_values
        special_word = tf.gather(special, segment_of_word)
        word = tf.where(special_word, tf.gather(flat, segment_of_word), word)
        too_long = tf.strings.length(word, unit="UTF8_CHAR") > self.settings["max_chars"]
        word = tf.where(tf.logical_and(too_long, tf.logical_not(special_word)), self.settings["unknown"], word)
        ids = self._wordpiece.tokenize(word)  # (words, pieces)
        ids = tf.RaggedTensor.from_row_splits(ids, words.row_splits)  # (segments, words, pieces)
        ids = tf.RaggedTensor.from_row_splits(ids, segments.row_splits)  # (batch, segments, words, pieces)
        return ids.merge_dims(1, 3)

    def encode(self, texts, pairs=None, max_pieces=None):
        """`(ids, segment ids)`, both `(batch, None)` int64: `[CLS] text [SEP]`, or `[CLS] text [SEP] pair [SEP]`.

        `pairs` holds each text's second segment ("" for none); `max_pieces`
        cuts a text (not a pair) to that many pieces before the frame, as
        transformers' `truncation=True` does.
        """
        first = self.pieces(texts)
        if max_pieces is not None:
            first = first[:, :max_pieces]
        rows = first.nrows()
        start = tf.fill([rows, 1], tf.constant(self.start_id, tf.int64))
        end = tf.fill([rows, 1], tf.constant(self.end_id, tf.int64))
        ids = tf.concat([start, first, end], axis=1)
        segments = tf.zeros_like(ids)
        if pairs is not None:
            second = self.pieces(pairs)
            has_pair = tf.strings.length(pairs) > 0  # an empty second text is none, as transformers reads it
            second = tf.concat([second, end], axis=1)
            keep = second.with_flat_values(tf.repeat(has_pair, second.row_lengths()))
            second = tf.ragged.boolean_mask(second, keep)  # no second text: no [SEP] either
            ids = tf.concat([ids, second], axis=1)
            segments = tf.concat([segments, tf.ones_like(second)], axis=1)
        return ids, segments

    def tokens(self, ids):
        """The vocabulary's token of each id (any shape)."""
        return tf.gather(self.token_strings, ids)

    def decode(self, ids, skip_special_tokens=True):
        """Each row of `ids` (ragged `(batch, None)`) as text: the WordPiece decoder's, cleaned up as the tokenizer's.

        `skip_special_tokens` may be a bool tensor `(batch,)`: each row's own.
        """
        ids = tf.cast(ids, tf.int64)
        special = tf.reduce_any(tf.equal(ids.flat_values[:, None], self.special_ids), axis=1)
        skip = tf.broadcast_to(tf.convert_to_tensor(skip_special_tokens), [ids.nrows()])
        dropped = tf.logical_and(special, tf.repeat(skip, ids.row_lengths()))
        kept = tf.ragged.boolean_mask(ids, ids.with_flat_values(tf.logical_not(dropped)))
        text = tf.strings.reduce_join(self.tokens(kept), axis=1, separator=" ")
        text = tf.strings.regex_replace(text, _escaped(" " + self.settings["prefix"]), "")
        replacements = (DECODER_CLEAN_UP if self.settings["decoder_cleanup"] else ()) + (
            CLEAN_UP if self.cleanup else ()
        )
        for spaced, joined in replacements:
            text = tf.strings.regex_replace(text, _escaped(spaced), joined.replace("\\", "\\\\"))
        return text


def _table(mapping):
    """A `StaticHashTable` of `{string: id}` (int64), -1 for any other string."""
    keys, values = tf.constant(list(mapping), tf.string), tf.constant(list(mapping.values()), tf.int64)
    return tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(keys, values), -1)


def _escaped(text):
    """`text` as an RE2 pattern that matches it literally (its ASCII punctuation escaped)."""
    return "".join("\\" + char if char in string.punctuation else char for char in text)
