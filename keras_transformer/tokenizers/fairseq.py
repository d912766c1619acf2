"""`FairseqTokenizer`: an M2M100, NLLB-200 or mBART-50 checkpoint's tokenizer, with its language tokens.

Both families come from fairseq: SentencePiece pieces whose ids are shifted
past `<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3, and one token per language
after the pieces. What transformers 5 saves differs by family, and this
reads each as it comes:

- M2M100 (`M2M100Tokenizer`): `vocab.json` (piece -> id) beside
  `sentencepiece.bpe.model`; the language tokens `__en__`, `__de__`, ...
  follow the vocabulary in the order of the checkpoint's `language_codes`,
  then its made-up words. They are special (dropped from decoded text) where
  the `tokenizer_config.json` lists them in `additional_special_tokens`, as
  the Hub's M2M100 checkpoints do; transformers 5 saves them in no list,
  and then decodes them as text, and so does this tokenizer, so that
  strings are equal.
- NLLB-200 (`NllbTokenizer`): `tokenizer.json`, its BPE vocabulary and
  merges built from the SentencePiece model, the languages (`eng_Latn`,
  ...) as added special tokens with ids of their own; it keeps a trailing
  space as a `▁` piece and collapses runs of spaces. The SentencePiece
  model is rebuilt from `tokenizer.json` (`nllb_sentencepiece`), so that
  tokenizing runs in tensorflow-text ops, in a SavedModel too.
- mBART-50 (`MBart50Tokenizer`): a SentencePiece unigram model, from
  `tokenizer.json` (transformers 5's) or `sentencepiece.bpe.model` (the
  pieces shifted by fairseq's offset of 1), the 52 languages (`en_XX`,
  `ko_KR`, ...) and `<mask>` after the pieces; spaces as NLLB's.

`tokenize` gives the pieces' ids only: the language token and `</s>` that
frame a source or a target are the caller's (`languages`, `language_id`).

Example:

>>> tokenizer = FairseqTokenizer.load("saved_models/nllb/tokenizers/source")  # doctest: +SKIP
>>> tokenizer.language_id("deu_Latn")  # doctest: +SKIP
256042
"""

import base64
import pathlib

import tensorflow as tf

from keras_transformer.files import atomic
from keras_transformer.files.json_files import read_json_object
from keras_transformer.kinds import close_matches
from keras_transformer.tokenizers.pieces import (
    BYTES_PER_PIECE,
    CONFIG_FILENAME,
    MAX_VOCAB_SIZE,
    PieceTokenizer,
    read_sentencepiece,
    read_vocab,
)

SPECIAL_PIECES = ("<s>", "<pad>", "</s>", "<unk>")
SPECIAL_TOKENS_MAP = "special_tokens_map.json"  # an old upload's list of its special tokens
CHECKPOINT_FILES = "files"  # where a saved tokenizer keeps the checkpoint's own files, byte for byte
FAMILIES = ("m2m100", "nllb", "mbart50")
# mBART-50's language codes, in the order of their ids (transformers' MBart50Tokenizer's).
MBART50_CODES = (
    "ar_AR cs_CZ de_DE en_XX es_XX et_EE fi_FI fr_XX gu_IN hi_IN it_IT ja_XX kk_KZ ko_KR lt_LT lv_LV my_MM ne_NP "
    "nl_XX ro_RO ru_RU si_LK tr_TR vi_VN zh_CN af_ZA az_AZ bn_IN fa_IR he_IL hr_HR id_ID ka_GE km_KH mk_MK ml_IN "
    "mn_MN mr_IN pl_PL ps_AF pt_XX sv_SE sw_KE ta_IN te_IN th_TH tl_XX uk_UA ur_PK xh_ZA gl_ES sl_SI"
).split()
# transformers' M2M100 language codes, by the `language_codes` a tokenizer_config.json names (their order is the ids').
M2M100_CODES = {
    "m2m100": (
        "af am ar ast az ba be bg bn br bs ca ceb cs cy da de el en es et fa ff fi fr fy ga gd gl gu ha he hi hr ht hu "
        "hy id ig ilo is it ja jv ka kk km kn ko lb lg ln lo lt lv mg mk ml mn mr ms my ne nl no ns oc or pa pl ps pt "
        "ro ru sd si sk sl so sq sr ss su sv sw ta th tl tn tr uk ur uz vi wo xh yi yo zh zu"
    ).split(),
    "wmt21": "en ha is ja cs ru zh de".split(),
}


class FairseqTokenizer(PieceTokenizer):
    """Strings to an M2M100 or NLLB checkpoint's ids and back, as a `tf.Module`.

    Args:
        model_proto: bytes, the serialized SentencePiece model.
        vocab: `{piece: id}`, every id of the model (the language tokens too).
        languages: `{code: id}` of the language tokens (`"en"` for M2M100's
            `__en__`, `"eng_Latn"` for NLLB's).
        family: `"m2m100"` or `"nllb"` (how each family's transformers tokenizer treats spaces and languages).
        files: `{name: bytes}`, the checkpoint's tokenizer files as they were
            read, which `save` writes back unchanged.
        source_lang, target_lang: the default languages the checkpoint's
            tokenizer names (`src_lang`, `tgt_lang`), or None.
        source_position: where a source's language token goes: `"first"`
            (`[lang] X </s>`) or `"last"` (`X </s> [lang]`, NLLB's
            `legacy_behaviour`).
        special_languages: the codes whose tokens decoding drops (special
            tokens); None: every language.
        name: name of the module.
    """

    FORMAT = "fairseq"  # what `save` writes as `tokenizer.json`'s `format`: its kind (`tokenizers.kinds`)

    def __init__(
        self,
        model_proto,
        vocab,
        languages,
        family,
        files=None,
        source_lang=None,
        target_lang=None,
        source_position="first",
        special_languages=None,
        name=None,
    ):
        missing = [piece for piece in SPECIAL_PIECES if piece not in vocab]
        if missing:
            raise ValueError(f"`vocab` must hold the pieces {SPECIAL_PIECES}. Missing: {missing}")
        if family not in FAMILIES:
            raise ValueError(f"`family` must be one of {FAMILIES}. Received: family={family!r}")
        special = languages if special_languages is None else [c for c in languages if c in special_languages]
        tokens = [self._token(code, family) for code in special]
        hidden = (*SPECIAL_PIECES, *tokens) if family == "m2m100" else (*SPECIAL_PIECES, *tokens, "<mask>")
        strip = "both" if family == "m2m100" else "first_space"  # SentencePiece's decoding, or the Metaspace's
        language_tokens = [self._token(code, family) for code in languages]
        super().__init__(model_proto, vocab, hidden=hidden, strip=strip, special=language_tokens, name=name)
        if source_position not in ("first", "last"):
            raise ValueError(f"`source_position` must be 'first' or 'last'. Received: {source_position!r}")
        self.languages, self.family, self.files = dict(languages), family, dict(files or {})
        self.source_position = source_position
        self.source_lang = source_lang if source_lang in self.languages else None
        self.target_lang = target_lang if target_lang in self.languages else None
        self.start_id = self.end_id = self._vocab["</s>"]  # fairseq decodes from </s>
        self.pad_id = self._vocab["<pad>"]
        codes, ids = zip(*self.languages.items()) if self.languages else ((), ())
        self._language_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(codes, tf.string), tf.constant(ids, tf.int32)), -1
        )
        self._trace()
        self.language_ids.get_concrete_function(tf.TensorSpec([None], tf.string))

    @staticmethod
    def _token(code, family):
        return f"__{code}__" if family == "m2m100" else code

    @tf.function(autograph=False)
    def tokenize(self, strings):
        """Strings `(batch,)` -> int32 `RaggedTensor` `(batch, None)` of the pieces' ids (no language, no `</s>`)."""
        strings = tf.convert_to_tensor(strings, tf.string)
        if self.family != "m2m100":  # transformers' NLLB and mBART-50 normalizers: runs of spaces become one
            strings = tf.strings.regex_replace(strings, " {2,}", " ")
            # Its Metaspace prepends `▁` to a text that does not start with one: a leading space is that `▁`.
            strings = tf.strings.regex_replace(strings, "^ ", "")
        return self.piece_ids(strings)

    @tf.function(autograph=False)
    def language_ids(self, codes):
        """Language codes `(batch,)` -> their token ids, int32; -1 for a code the model lacks (checked before)."""
        return self._language_table.lookup(tf.convert_to_tensor(codes, tf.string))

    def language_id(self, code, what="language"):
        """The id of language `code`; an unknown code is a `ValueError` naming three close ones."""
        if code not in self.languages:
            close = close_matches(code, self.languages)
            hint = f" Close: {', '.join(close)}" if close else f" This model has {len(self.languages)} languages"
            raise ValueError(f"{what} {code!r} is not a language of this model.{hint}")
        return self.languages[code]

    def save(self, directory):
        """Writes the checkpoint's tokenizer files, unchanged, in `files/`, and `tokenizer.json`, what `load` reads."""
        directory = pathlib.Path(directory)
        for file_name, data in self.files.items():
            atomic.write_bytes(directory / CHECKPOINT_FILES / file_name, data)
        config = {
            "format": self.FORMAT,
            "family": self.family,
            "files": sorted(self.files),
            "source_lang": self.source_lang,
            "target_lang": self.target_lang,
            "source_position": self.source_position,
        }
        self.write_config(directory / CONFIG_FILENAME, config)

    @classmethod
    def load(cls, directory, name=None):
        """The tokenizer `save` wrote in `directory`."""
        directory = pathlib.Path(directory)
        config = read_json_object(directory / CONFIG_FILENAME)
        reader = {"m2m100": from_m2m100_files, "nllb": from_nllb_files, "mbart50": from_mbart50_files}[config["family"]]
        defaults = {key: config.get(key) for key in ("source_lang", "target_lang", "source_position")}
        return reader(directory / CHECKPOINT_FILES, name=name, **defaults)


def from_m2m100_files(folder, name=None, max_vocab_size=None, **defaults):
    """The tokenizer of an M2M100 checkpoint's `vocab.json`, `sentencepiece.bpe.model` and `tokenizer_config.json`."""
    folder = pathlib.Path(folder)
    settings = _tokenizer_config(folder)
    codes = M2M100_CODES.get(settings.get("language_codes", "m2m100"))
    if codes is None:
        raise ValueError(
            f"{folder / 'tokenizer_config.json'}: `language_codes` must be one of {sorted(M2M100_CODES)}. "
            f"Received: {settings.get('language_codes')!r}"
        )
    limit = max_vocab_size or MAX_VOCAB_SIZE
    vocab_path, spm_path = folder / "vocab.json", folder / "sentencepiece.bpe.model"
    vocab, vocab_bytes = read_vocab(vocab_path, limit * BYTES_PER_PIECE + 2**16, limit)
    size = len(vocab)
    languages = {code: size + index for index, code in enumerate(codes)}
    vocab.update({f"__{code}__": index for code, index in languages.items()})
    madeup = settings.get("num_madeup_words", 8)
    if isinstance(madeup, bool) or not isinstance(madeup, int) or not 0 <= madeup <= 1024:
        raise ValueError(f"{folder / 'tokenizer_config.json'}: `num_madeup_words` must be an int in [0, 1024]")
    vocab.update({f"madeupword{index:04d}": size + len(codes) + index for index in range(madeup)})
    files = {"vocab.json": vocab_bytes, "sentencepiece.bpe.model": read_sentencepiece(spm_path)}
    files.update({**_optional(folder, "tokenizer_config.json"), **_optional(folder, SPECIAL_TOKENS_MAP)})
    defaults = {**_defaults(settings, "m2m100"), **{k: v for k, v in defaults.items() if v is not None}}
    defaults["special_languages"] = [code for code in codes if f"__{code}__" in _listed_special(settings)]
    return _made(folder, files["sentencepiece.bpe.model"], vocab, languages, "m2m100", files, name, defaults)


def from_nllb_files(folder, name=None, max_vocab_size=None, **defaults):
    """The tokenizer of an NLLB checkpoint's `tokenizer.json` (and `tokenizer_config.json`)."""
    folder = pathlib.Path(folder)
    path = folder / "tokenizer.json"
    limit = max_vocab_size or MAX_VOCAB_SIZE
    data = read_json_object(path, max_bytes=limit * 2 * BYTES_PER_PIECE + 2**20)
    model = data.get("model")
    if not isinstance(model, dict) or model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        raise ValueError(f"{path} must hold a BPE model with a vocabulary, as an NLLB tokenizer does")
    vocab = {piece: index for piece, index in model["vocab"].items()}
    added = data.get("added_tokens") or []
    if not isinstance(added, list) or not all(isinstance(a, dict) for a in added):
        raise ValueError(f"{path}: `added_tokens` must be a list of tokens")
    for token in added:
        vocab[token.get("content")] = token.get("id")
    if not all(isinstance(p, str) and isinstance(i, int) and not isinstance(i, bool) for p, i in vocab.items()):
        raise ValueError(f"{path} must map each piece to an integer id")
    if any(not 0 <= index < limit for index in vocab.values()):
        raise ValueError(f"{path}: its ids must lie in [0, {limit}), the model's embedding rows")
    languages = {
        token["content"]: token["id"]
        for token in added
        if token.get("special") and token["content"] not in (*SPECIAL_PIECES, "<mask>")
    }
    files = {"tokenizer.json": path.read_bytes(), **_optional(folder, "tokenizer_config.json")}
    files.update(_optional(folder, SPECIAL_TOKENS_MAP))
    settings = _tokenizer_config(folder)
    defaults = {**_defaults(settings, "nllb"), **{k: v for k, v in defaults.items() if v is not None}}
    return _made(folder, nllb_sentencepiece(data, path), vocab, languages, "nllb", files, name, defaults)


def from_mbart50_files(folder, name=None, max_vocab_size=None, **defaults):
    """The tokenizer of an mBART-50 checkpoint: its `tokenizer.json`, else `sentencepiece.bpe.model`."""
    from keras_transformer.tokenizers.unigram import keep_spaces, sentencepiece_pieces, unigram_from_tokenizer_json

    folder = pathlib.Path(folder)
    settings = _tokenizer_config(folder)
    if (folder / "tokenizer.json").is_file():
        files = unigram_from_tokenizer_json(folder / "tokenizer.json", max_vocab_size, collapse_spaces=False)
        vocab, model_proto, read = files.vocab, files.model_proto, files.files
        if (folder / "sentencepiece.bpe.model").is_file():  # kept beside it, byte for byte
            read = {**read, "sentencepiece.bpe.model": read_sentencepiece(folder / "sentencepiece.bpe.model")}
    else:
        path = folder / "sentencepiece.bpe.model"
        if not path.is_file():
            raise ValueError(f"{folder} holds neither tokenizer.json nor sentencepiece.bpe.model: mBART-50 holds one")
        spm_proto, pieces = sentencepiece_pieces(path)
        vocab = {piece: index for index, piece in enumerate(SPECIAL_PIECES)}
        for index, (piece, _, _) in enumerate(pieces[3:], start=4):  # fairseq's offset: SentencePiece id + 1
            vocab.setdefault(piece, index)
        size = len(pieces) + 1
        vocab.update({code: size + index for index, code in enumerate(MBART50_CODES)})
        vocab["<mask>"] = size + len(MBART50_CODES)
        model_proto, read = keep_spaces(spm_proto), {"sentencepiece.bpe.model": path.read_bytes()}
    languages = {code: vocab[code] for code in MBART50_CODES if code in vocab}
    files = {**read, **_optional(folder, "tokenizer_config.json")}
    defaults = {**_defaults(settings, "mbart50"), **{k: v for k, v in defaults.items() if v is not None}}
    return _made(folder, model_proto, vocab, languages, "mbart50", files, name, defaults)


def nllb_sentencepiece(data, path="tokenizer.json"):
    """The SentencePiece BPE model that an NLLB `tokenizer.json` (a dict) was converted from, serialized.

    Its pieces are the BPE vocabulary's without fairseq's offset (`<unk>`,
    `<s>`, `</s>` first, as SentencePiece numbers them), scored by rank, so
    that SentencePiece merges in the order of the BPE merges; its normalizer
    is the `tokenizer.json`'s precompiled one, with runs of spaces left to
    the caller (the tokenizer collapses them first, as transformers does).
    """
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    pieces = sorted(data["model"]["vocab"].items(), key=lambda item: item[1])
    normalizers = (data.get("normalizer") or {}).get("normalizers") or [data.get("normalizer") or {}]
    charsmap = next((n.get("precompiled_charsmap") for n in normalizers if n.get("type") == "Precompiled"), None)
    proto = model_pb2.ModelProto()
    proto.trainer_spec.model_type = model_pb2.TrainerSpec.BPE
    proto.trainer_spec.unk_id, proto.trainer_spec.bos_id, proto.trainer_spec.eos_id = 0, 1, 2
    proto.trainer_spec.pad_id = -1
    proto.trainer_spec.byte_fallback = bool(data["model"].get("byte_fallback"))
    proto.normalizer_spec.name = "nmt_nfkc"
    if charsmap:
        proto.normalizer_spec.precompiled_charsmap = base64.b64decode(charsmap)
    proto.normalizer_spec.add_dummy_prefix = True
    proto.normalizer_spec.remove_extra_whitespaces = False
    proto.normalizer_spec.escape_whitespaces = True
    kinds = model_pb2.ModelProto.SentencePiece
    for piece, kind in (("<unk>", kinds.UNKNOWN), ("<s>", kinds.CONTROL), ("</s>", kinds.CONTROL)):
        entry = proto.pieces.add()
        entry.piece, entry.score, entry.type = piece, 0.0, kind
    for rank, (piece, _) in enumerate(p for p in pieces if p[0] not in SPECIAL_PIECES):
        entry = proto.pieces.add()
        entry.piece, entry.score = piece, -float(rank)
        entry.type = kinds.BYTE if piece.startswith("<0x") and piece.endswith(">") else kinds.NORMAL
    try:
        import sentencepiece

        serialized = proto.SerializeToString()
        sentencepiece.SentencePieceProcessor(model_proto=serialized)
    except (RuntimeError, ValueError) as error:
        raise ValueError(f"{path}: its BPE vocabulary is not a SentencePiece model's: {str(error)[:200]}") from None
    return serialized


def _tokenizer_config(folder):
    """tokenizer_config.json's settings, and special_tokens_map.json's where it lists no `added_tokens_decoder`.

    An old upload names its special tokens (M2M100's language tokens among
    the `additional_special_tokens`, which decoding drops) in
    special_tokens_map.json; transformers merges that file over the
    settings, its lists of extra tokens added to the settings' own, unless
    tokenizer_config.json lists its added tokens itself (as transformers 4.34
    and later write it).
    """
    folder = pathlib.Path(folder)
    path, special = folder / "tokenizer_config.json", folder / SPECIAL_TOKENS_MAP
    settings = read_json_object(path) if path.is_file() else {}
    if "added_tokens_decoder" in settings or not special.is_file():
        return settings
    merged = dict(settings)
    for key, value in read_json_object(special).items():
        if key == "extra_special_tokens" and isinstance(value, list) and isinstance(settings.get(key), list):
            value = settings[key] + [token for token in value if token not in settings[key]]
        merged[key] = value
    return merged


def _listed_special(settings):
    """The tokens a `tokenizer_config.json` lists as special beside the usual ones (either key, str or dict)."""
    listed = []
    for key in ("additional_special_tokens", "extra_special_tokens"):
        tokens = settings.get(key)
        if isinstance(tokens, list):
            listed += [t.get("content") if isinstance(t, dict) else t for t in tokens]
    return {token for token in listed if isinstance(token, str)}


def _optional(folder, file_name):
    path = pathlib.Path(folder) / file_name
    return {file_name: path.read_bytes()} if path.is_file() else {}


def _defaults(settings, family):
    """The default source language and its token's place, as transformers' tokenizer takes them from its config.

    `src_lang`, else English (transformers' own default); no default
    target: a translation names it (or the checkpoint's generation
    settings do, with `forced_bos_token_id`).
    """
    position = "last" if settings.get("legacy_behaviour") is True else "first"
    source = settings.get("src_lang")
    source = source if isinstance(source, str) else {"m2m100": "en", "nllb": "eng_Latn", "mbart50": "en_XX"}[family]
    return {"source_lang": source, "source_position": position}


def _made(folder, model_proto, vocab, languages, family, files, name, defaults):
    try:
        return FairseqTokenizer(model_proto, vocab, languages, family, files=files, name=name, **defaults)
    except ValueError as error:
        raise ValueError(f"{folder}: {error}") from None
