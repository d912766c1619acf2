"""`Translator`: a LiteRT export run in the LiteRT interpreter, the search on the host in NumPy.

It answers what `keras_transformer.export.load`'s translators answer
where it makes sense (`translator(strings)`, `greedy`, `nbest`, `score`,
`source_lengths`, the `*_with_status` methods, `beam_size`,
`max_source_length`), with NumPy arrays that also have `.numpy()` (as the
SavedModel's tensors), so code written for `export.load` runs unchanged.
They take `target_prefix=`, and a multilingual export's (M2M100, NLLB-200)
`source_lang=` and `target_lang=` (`Translator`). `sample` is not offered.

It needs `ai-edge-litert` (`pip install 'keras-transformer[litert]'`), and
registers tensorflow-text's LiteRT kernels (`tensorflow_text`'s
`tflite_registrar`) where the `.tflite` tokenizes. Load only exports you
trust: the files are checked against `MANIFEST.sha256` first.

Example:

>>> translator = Translator("saved_models/chatbot-ko-litert")
>>> translator(["오늘 너무 힘들었어"])  # beam search, the export's beam size and alpha
>>> translator.greedy_with_status(["오늘 너무 힘들었어"])["finished"]
"""

import pathlib
import threading

import numpy as np

from keras_transformer.decoding import rules
from keras_transformer.files.folders import is_litert_export
from keras_transformer.litert import fast_text
from keras_transformer.litert import search as host_search
from keras_transformer.litert import text as host_text
from keras_transformer.litert.info import INFO_FILE, check_model, read_info
from keras_transformer.translators import TranslatorInterface, decoding_defaults
from keras_transformer.translators.controls import Languages, pieces_of, special_tokens

_ASCII_SPACE = " \t\n\r\x0b\x0c"


class Array(np.ndarray):
    """A NumPy array with `.numpy()`, as a TensorFlow tensor has: code written for the SavedModel runs on it."""

    def numpy(self):
        return np.asarray(self)


def _array(values, dtype=None):
    return np.asarray(values, dtype=dtype).view(Array)


class Translator(TranslatorInterface):
    """A LiteRT export (`keras_transformer.litert.export_run`) as a translator (the litert engine).

    The translating methods take `target_prefix=` (the first words of the
    output, forced as the XLA decoder forces them), and a multilingual
    export's (M2M100, NLLB-200) `source_lang=` and `target_lang=`: the
    source gets its language token, and the target language's token is
    the first forced token of the output, scored 0, as transformers'
    forced BOS is (`litert.search`).

    Args:
        path: the export folder.
        beam_size: beams of `__call__` and `nbest` (default: the export's; 1 = greedy).
        alpha: the length penalty's exponent (default: the export's).
        source_lang, target_lang: a multilingual export's default languages
            (default: those its `litert.json` records).
        num_threads: the LiteRT interpreter's CPU threads (default: its own).

    Example:

    >>> translator = Translator("saved_models/en-de-litert", beam_size=4)
    >>> translator.nbest(["A dog runs."])["scores"].shape
    (1, 4)
    >>> nllb = Translator("saved_models/nllb-litert", source_lang="eng_Latn")  # doctest: +SKIP
    >>> nllb(["A dog runs."], target_lang="deu_Latn", target_prefix="Ein")  # doctest: +SKIP
    """

    def __init__(self, path, *, beam_size=None, alpha=None, source_lang=None, target_lang=None, num_threads=None):
        from keras_transformer.files import manifest

        path = pathlib.Path(path)
        if not is_litert_export(path):
            raise ValueError(f"{path} is not a LiteRT export (no {INFO_FILE} of format 'litert')")
        manifest.verify_manifest(path)
        info = read_info(path)
        self.info, self.path = info, path
        beams, self._alpha = decoding_defaults(info["decoding"], beam_size, alpha)
        self.beam_size = _array(beams, np.int32)
        self.max_source_length = _array(info["max_source_length"], np.int32)
        self._source_text = host_text.load_text(path / info["tokenizer"]["source"])
        self._target_text = host_text.load_text(path / info["tokenizer"]["target"])
        self._languages = _languages(info, self._target_text, path).with_defaults(source_lang, target_lang)
        self._language_ids = (info["languages"] or {}).get("codes", {})
        self._source_extra = int(info["add_source_end"]) + int(bool(self._language_ids))
        text_ops = bool({"tokenize", "detokenize"} & set(info["signatures"]))
        self._interpreter = _interpreter(path / info["model_file"], text_ops, num_threads)
        check_model(info, self._interpreter, path)
        self._runners = {name: self._interpreter.get_signature_runner(name) for name in info["signatures"]}
        self._banned = np.array(self._never_generated(), np.int64)
        self._lock = threading.Lock()  # one interpreter: one call at a time
        ids = (info["start_id"], info["end_id"], info["target_pad_id"], self._target_text.unk_id)
        self._special_tokens = special_tokens(  # what no prefix may hold (`controls.prefix_error`)
            self._target_text.special_tokens,
            pieces_of(self._target_text.pieces_by_id(), [*ids, *self._language_ids.values()]),
        )

    @property
    def languages(self):
        """The export's language codes and this translator's default source and target (`controls.Languages`)."""
        return self._languages

    @property
    def special_tokens(self):
        """The texts of the target vocabulary's special tokens, which no `target_prefix` may hold."""
        return self._special_tokens

    # -- the engine's hooks (`TranslatorInterface`), given checked inputs -------------

    supports_sampling = False  # `serve` leaves its `sample` signature out

    def sample_with_status(self, sentences, temperature, top_k, top_p, seed, **controls):
        """Not offered by LiteRT exports: a `ValueError`."""
        raise ValueError("A LiteRT export does not sample: use the run directory or its SavedModel export")

    def _decode(self, search, sentences, controls, *sampling):
        if search == "best":
            return {name: _array(value[:, 0]) for name, value in self._nbest(sentences, controls).items()}
        source, done = self._sources(_texts(sentences), controls.source_lang)
        prefix = self._prefix(controls, len(source))
        with self._lock:
            outputs, log_probs, finished = host_search.greedy(
                self._session(source, 1, controls.banned),
                done,
                self.info["max_length"],
                *self._ids(),
                self._force_end(),
                prefix,
            )
        lengths = np.array([len(output) for output in outputs], np.float32)
        scores = rules.normalise(log_probs, lengths, self._alpha, self.info["decoding"].normalization)
        return {
            "translations": _array(self.detokenize(outputs), object),
            "scores": _array(np.where(done, 0.0, scores), np.float32),
            "finished": _array(finished, bool),
        }

    def _nbest(self, sentences, controls):
        beams = int(self.beam_size)
        if beams == 1:
            return {name: _array(value[:, None]) for name, value in self._decode("greedy", sentences, controls).items()}
        texts = _texts(sentences)
        source, done = self._sources(texts, controls.source_lang)
        decoding = self.info["decoding"]
        with self._lock:
            ids, scores, finished = host_search.beam(
                self._session(source, beams, controls.banned),
                done,
                beams,
                self.info["max_length"],
                *self._ids(),
                self._alpha,
                decoding.normalization,
                self._force_end(),
                decoding.stopping,
                decoding.cut_off,
                self._prefix(controls, len(texts)),
            )
        rows = [self._cut(row) for row in ids.reshape(-1, ids.shape[-1])]
        strings = np.array(self.detokenize(rows), object).reshape(len(texts), beams)
        return {"translations": _array(strings), "scores": _array(scores), "finished": _array(finished)}

    def _score(self, sources, targets, controls):
        sources, targets = _texts(sources), _texts(targets)
        end, length = self.info["end_id"], self.info["max_length"]
        rows = [row + [end] for row in self._target_text.tokenize(_as_read(targets, self._target_text))]
        rows = rules.forced_rows(rows, self._target_language(controls))  # as the model was trained
        rows = [row[:length] for row in rows]
        source, _ = self._sources(sources, controls.source_lang)
        totals = np.zeros(len(rows), np.float32)
        width = max((len(row) for row in rows), default=0)
        with self._lock:
            session = self._session(source, 1) if rows else None
            previous = np.full(len(rows), self.info["start_id"], np.int32)
            for index in range(width):
                log_probs = session.step(previous, index)
                current = np.array([row[index] if index < len(row) else end for row in rows], np.int32)
                real = np.array([index < len(row) for row in rows])
                totals += np.where(real, log_probs[np.arange(len(rows)), current], 0.0).astype(np.float32)
                previous = current
        return {"log_probs": _array(totals), "target_lengths": _array([len(r) for r in rows], np.int32)}

    def _source_lengths(self, sentences):
        rows = self.tokenize(_as_read(_texts(sentences), self._source_text))
        return _array([len(row) + self._source_extra for row in rows], np.int32)

    # -- tokenizers -------------------------------------------------------------

    def tokenize(self, texts):
        """Source ids of `texts` (a list of str), one list per text: the `.tflite`'s, else SentencePiece's.

        Where the model has byte-fallback pieces, which the fast tokenizer
        lacks, a text it gives `<unk>` for is tokenized by SentencePiece.
        """
        texts = list(texts)
        text = self._source_text
        if not self.info["tokenizer"]["in_model"] or not texts:
            return text.tokenize(texts)
        with self._lock:
            out = self._runners["tokenize"](strings=np.array([t.encode("utf-8") for t in texts], object))
        ids, splits = out["ids"].tolist(), out["row_splits"].tolist()
        rows = [ids[start:stop] for start, stop in zip(splits, splits[1:])]
        # The converter drops byte-fallback pieces: where the fast tokenizer saw an unknown character, SentencePiece.
        redo = [i for i, row in enumerate(rows) if text.byte_ids and text.unk_id in row]
        for i, row in zip(redo, text.tokenize([texts[i] for i in redo])):
            rows[i] = row
        return rows

    def detokenize(self, rows):
        """UTF-8 bytes of each row of target ids (special ids dropped): the `.tflite`'s, else SentencePiece's.

        The `.tflite` detokenizes one row per call (`keras_transformer.litert.graph`
        says why); the rows where the fast detokenizer may differ (a
        byte-fallback id, a leading `▁` piece: `fast_text.detokenized_on_host`)
        are detokenized by SentencePiece.
        """
        rows = [[int(i) for i in row] for row in rows]
        text = self._target_text
        if "detokenize" not in self._runners:
            return text.detokenize(rows)
        out = []
        with self._lock:
            for row in rows:
                if fast_text.detokenized_on_host(text, row):
                    out.extend(text.detokenize([row]))
                else:
                    out.append(self._runners["detokenize"](ids=np.array(row, np.int32))["strings"][0])
        return out

    # -- parts ------------------------------------------------------------------

    def _ids(self):
        return self.info["start_id"], self.info["end_id"]

    def _never_generated(self):
        """The export's banned ids, and what `rules.never_generated` bans for its ids and settings."""
        info = self.info
        ids = (info["start_id"], info["end_id"], info["target_pad_id"], info["banned_ids"])
        return sorted({*info["banned_ids"], *rules.never_generated(*ids, info["decoding"].softmax_over)})

    def _force_end(self):
        return self.info["decoding"].force_end

    def _cut(self, ids):
        """The generated ids up to and including the first END."""
        ids = [int(i) for i in ids]
        end = self.info["end_id"]
        return ids[: ids.index(end) + 1] if end in ids else ids

    def _sources(self, texts, source_lang=None):
        """`(source_ids (batch, width) int32, done (batch,))`: truncated, END added, padded; empty rows done.

        With `add_source_end` an empty sentence is END alone, and decodes (as
        the run's `Translator` and transformers do); without, it is done. A
        multilingual export's sources carry the token of their `source_lang`
        (`(batch,)` codes; None: the default), first or last as its
        tokenizer puts it.
        """
        info = self.info
        limit = info["max_source_length"] - self._source_extra
        end = [info["end_id"]] * int(info["add_source_end"])
        rows = [row[:limit] + end for row in self.tokenize(_as_read(texts, self._source_text))]
        if self._language_ids:
            codes = source_lang if source_lang is not None else [self._languages.source_lang] * len(rows)
            last = info["languages"]["source_position"] == "last"
            tokens = self._language_tokens(codes)
            rows = [row + [token] if last else [token] + row for token, row in zip(tokens, rows)]
        done = np.array([not row for row in rows], bool)
        width = max([len(row) for row in rows] + [1])
        source = np.full((len(rows), width), info["pad_id"], np.int32)
        for i, row in enumerate(rows):
            source[i, : len(row)] = row
        return source, done

    def _prefix(self, controls, rows):
        """The forced beginning of each output, int `(rows, width)` (-1 where free), or None: language, then prefix.

        The prefix's text is stripped and tokenized by the target tokenizer,
        and cut to the export's `max_length`, as the XLA decoder does.
        """
        pieces = [[] for _ in range(rows)]
        if controls.target_prefix is not None:
            pieces = self._target_text.tokenize([_strip(text) for text in _texts(controls.target_prefix)])
        forced = [row[: self.info["max_length"]] for row in rules.forced_rows(pieces, self._target_language(controls))]
        width = max((len(row) for row in forced), default=0)
        if not width:
            return None
        prefix = np.full((rows, width), -1, np.int64)
        for i, row in enumerate(forced):
            prefix[i, : len(row)] = row
        return prefix

    def _target_language(self, controls):
        """The target language's token of each output that begins with one (`Languages.forced_first`); else None."""
        return self._language_tokens(controls.target_lang) if self._languages.forced_first else None

    def _language_tokens(self, codes):
        """The token ids of language `codes` (a `(batch,)` string tensor or a list of str, checked by `resolve`)."""
        codes = _texts(codes) if hasattr(codes, "numpy") else codes
        return [int(self._language_ids[code]) for code in codes]

    def _session(self, source, beams, banned=()):
        """The decoder's session for `source`; `banned` words (`translators.banned_words`) join the banned ids."""
        banned = np.union1d(self._banned, np.array(self.banned_ids_of(banned), np.int64)).astype(np.int64)
        return _Session(self._runners, source, beams, self.info, banned)

    def _banning_vocabulary(self):
        """What banned words are read against (`TranslatorInterface.banned_ids_of`): the export's target text."""
        text, info = self._target_text, self.info
        unbanned = (info["start_id"], info["end_id"], info["target_pad_id"], text.unk_id)
        return text.tokenize, text.pieces_by_id(), unbanned


class _Session:
    """The encoder run once, then decoder steps over the self-attention cache (`search`'s session)."""

    def __init__(self, runners, source, beams, info, banned):
        self._step = runners["decode_step"]
        cross = runners["encode"](source_ids=source)["cross_cache"] if len(source) else None
        self._source = np.repeat(source, beams, axis=0)
        self._cross = np.repeat(cross, beams, axis=0) if cross is not None else None
        shape = (len(self._source), 2 * info["layers"], info["heads"], info["max_length"], info["key_dim"])
        self._cache = np.zeros(shape, np.float32)
        self._banned = banned

    def step(self, tokens, index):
        out = self._step(
            tokens=np.asarray(tokens, np.int32),
            index=np.array(index, np.int32),
            source_ids=self._source,
            cross_cache=self._cross,
            self_cache=self._cache,
        )
        self._cache = out["self_cache"]
        log_probs = np.array(out["log_probs"], np.float32)
        log_probs[:, self._banned] = -np.inf  # LiteRT stores -inf constants as the lowest float
        return log_probs

    def reorder(self, rows):
        self._cache = self._cache[rows]


def _interpreter(model_path, text_ops, num_threads):
    try:
        from ai_edge_litert.interpreter import InterpreterWithCustomOps
    except ModuleNotFoundError:
        raise ValueError(
            "Running a LiteRT export needs the ai-edge-litert package: pip install 'keras-transformer[litert]'"
        ) from None
    registerers = []
    if text_ops:
        from tensorflow_text.core.pybinds import tflite_registrar

        registerers = list(tflite_registrar.SELECT_TFTEXT_OPS)
    try:
        interpreter = InterpreterWithCustomOps(
            model_path=str(model_path), custom_op_registerers=registerers, num_threads=num_threads
        )
        interpreter.get_signature_list()
    except (RuntimeError, ValueError) as error:  # LiteRT's own words for a file it cannot read
        message = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        raise ValueError(f"{model_path} is not a LiteRT model this export can run: {message}") from None
    return interpreter


def _texts(sentences):
    """Checked sentences (a 1-D string tensor) as a list of str."""
    return [s.decode("utf-8") for s in sentences.numpy().tolist()]


def _strip(text):
    return text.strip(_ASCII_SPACE)


def _as_read(texts, text):
    """`texts` as the host tokenizer `text` takes them: stripped, or as they are where it `keeps_spaces`.

    Either way a blank text is "" (no ids), as the XLA decoder reads it.
    """
    if text.keeps_spaces:
        return ["" if not _strip(t) else t for t in texts]
    return [_strip(t) for t in texts]


def _languages(info, text, path):
    """The `Languages` of `litert.json`'s `languages`, which must be the target tokenizer `text`'s own."""
    recorded = info["languages"]
    if (recorded or {}).get("codes", {}) != (getattr(text, "languages", None) or {}):
        raise ValueError(
            f"{path / INFO_FILE}: `languages` are not those of the tokenizer in {path / info['tokenizer']['target']}"
        )
    if recorded is None:
        return Languages()
    codes = tuple(sorted(recorded["codes"], key=recorded["codes"].get))
    return Languages(codes, recorded["source_lang"], recorded["target_lang"])
