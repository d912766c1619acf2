"""CTranslate2 as a decoding engine: a run directory translated by CTranslate2, with the run's own tokenizers.

`CTranslate2Translator(path)` (what `keras_transformer.open_translator(path,
"ctranslate2")` gives) decodes the run's conversion, kept in a cache folder
and converted again when the run changes (`cache`), and answers
every method of `translators.TranslatorInterface`, decoded by
`ctranslate2.Translator`. Greedy search gives the XLA decoder's strings
(the same pieces in, the decode of the module docstring of
`keras_transformer.ctranslate2.conversion`, the same tokenizer out), with
target prefixes and, for an imported M2M100 or NLLB run, the languages:
transformers' greedy strings, and its beam strings but where its
stopping rule differs (`CTranslate2Translator` says how often).

Example:

>>> translator = CTranslate2Translator("saved_models/multi30k-en-de", beam_size=1)
>>> translator.greedy(["A dog runs."]).numpy()
array([b'Ein Hund rennt.'], dtype=object)
>>> translator.score(["A dog runs."], ["Ein Hund rennt."])["log_probs"]
"""

import functools

import tensorflow as tf

from keras_transformer import runs
from keras_transformer.config import END_ID, PAD_ID, START_ID, DecodingConfig
from keras_transformer.decoding import rules
from keras_transformer.engines.ctranslate2.cache import cached_model, check_run, recorded, require_ctranslate2
from keras_transformer.tokenizers import kinds
from keras_transformer.translators import TranslatorInterface, decoding_defaults
from keras_transformer.translators.controls import Controls, languages_of, pieces_of, special_tokens
from keras_transformer.translators.precision import check_precision
from keras_transformer.translators.streaming import Piece, WordCutter, word_starts
from keras_transformer.translators.token_ids import tokenize_words, tokenized

COMPUTE_TYPES = {"float32": "float32", "bfloat16": "bfloat16", "int8": "int8_float32"}  # CTranslate2's names
TYPICAL_LENGTH = 20  # output tokens at which the beam's length penalty ranks as GNMT's (module docstring of writer)
# CTranslate2's beam stops once `beam_size * patience` hypotheses ended. transformers' `early_stopping=False`
# (`stopping="cannot_improve"`) searches on while a live beam may still win: 4 comes closest, and higher
# patience gives the same strings, slower (the class docstring has the figures).
CANNOT_IMPROVE_PATIENCE = 4
# `translate_options` that CTranslate2's `generate_tokens` takes too (it has no beam, scores or END in its output).
GENERATE_OPTIONS = ("min_decoding_length", "max_input_length", "max_decoding_length", "suppress_sequences")


class CTranslate2Translator(TranslatorInterface):
    """A run directory's translator decoded by CTranslate2: the methods of `export.load`'s translators.

    `__call__`, `greedy`, `nbest` and the `*_with_status` methods translate
    with `ctranslate2.Translator.translate_batch`, `score` scores with its
    `score_batch`, `sample` samples with its `sampling_*` options (seeded with
    `ctranslate2.set_random_seed`: not the XLA decoder's draws). Inputs are
    checked as `export.load`'s translators check them; the results are
    TensorFlow tensors, as theirs.

    The translating methods take `target_prefix=` (the first words of the
    output: their pieces go to `translate_batch`'s `target_prefix`, which
    forces them and scores them 0, as the XLA decoder does), and an imported
    M2M100 or NLLB run's `source_lang=` and `target_lang=`: each source is
    framed `[src_lang] pieces </s>` (or as its tokenizer says), and the
    target language's token begins the `target_prefix`, the forced first
    token of transformers' `generate` (`forced_bos_token_id`); `score`
    takes the languages, a target being `[tgt_lang] pieces </s>`.

    Greedy search gives the XLA decoder's translations, with scores
    normalised the same way (`log p / ((5 + length) / 6) ** alpha`, or
    `length ** alpha` for a run that says `normalization="length"`; the
    length counts a forced beginning and END). Beam search ranks by
    CTranslate2's `length ** length_penalty`, with `length_penalty = alpha
    * n / (5 + n)` at n = `TYPICAL_LENGTH` for GNMT's penalty: the same
    order for outputs of about that length, not always the same beams; the
    scores it returns are normalised as ours. For imported runs
    (`normalization="length"`) the penalty is transformers' own, but the
    stopping rule is CTranslate2's: a source is done once `beam_size *
    patience` hypotheses ended. That is transformers' `early_stopping=True`
    (`stopping="beams_ended"`, patience 1: M2M100's fixture gives its
    beam-4 strings 40 of 40, and 480 of 480 for 120 more sentences, two
    targets, 24 and 48 tokens at most). For `early_stopping=False` (`"cannot_improve"`, NLLB's),
    where transformers searches on while a live beam may still win,
    patience `CANNOT_IMPROVE_PATIENCE` (4) comes closest: NLLB's fixture
    gives transformers' strings 40 of 40 and 474 of 480 on those
    sentences (patience 1: 28 of 40 and 402 of 480; 8 or 1000 give what 4
    gives), the few others being hypotheses that end after transformers
    stopped and score higher. Two more details of CTranslate2's beam: it
    sorts the beams cut off at the limit among the ended ones by score
    (transformers' `cut_off="by_score"`, where this package's own runs put
    them after), and right after a forced beginning it keeps END out of all
    but the best beam.

    `score` takes its log-probabilities over the whole vocabulary, where
    the XLA decoder's leave out PAD and START for this package's runs:
    never higher, lower by what the model gives those two (0.1-0.5% of a
    sum for the tests' tiny run); for imported runs both take the whole
    vocabulary, as transformers does. Two edge cases differ from the XLA
    decoder: an empty source translates to "" and scores 0 (CTranslate2
    does not read it; a multilingual source is never empty: it has its
    language token), and a target of `max_length` tokens or more is scored
    on its first `max_length - 1` tokens and END (the decoder's positions
    end there), where the XLA decoder scores its first `max_length` tokens.

    Args:
        path: a run directory (one model; an imported OPUS-MT, M2M100 or
            NLLB run too).
        beam_size, alpha, max_length: as `export.load`'s (defaults: the
            run's `decoding` settings, else beam 4 and alpha 0.6).
        source_lang, target_lang: a multilingual run's default languages
            (codes of its tokenizer, checked before any conversion; default
            its tokenizer's), which each call may override.
        cache_dir: where conversions are kept (default `cache_root()`).
        inter_threads: batches CTranslate2 decodes side by side (give as
            many as the threads that call this translator).
        intra_threads: threads per batch (0: CTranslate2's default).
        precision: what CTranslate2 loads the weights in: `"float32"`
            (None), `"int8"` or `"bfloat16"`, as decided by
            `keras_transformer.opener.precision_for` (what `open_translator`
            gives here: low precision where this CPU has the units,
            CTranslate2 the kernels (`precision_facts`) and the model is
            wide enough for int8 to be faster, else float32 with a one-line
            warning). The cached conversion stays float32: CTranslate2
            quantizes it as it loads.

    Example:

    >>> translator = CTranslate2Translator("saved_models/multi30k-en-de", beam_size=1, intra_threads=2)
    >>> translator.greedy_with_status(["A dog runs."])["finished"].numpy()
    array([ True])
    >>> nllb = CTranslate2Translator("saved_models/nllb", source_lang="eng_Latn")  # doctest: +SKIP
    >>> nllb(["A dog runs."], target_lang="deu_Latn", target_prefix="Ein")  # doctest: +SKIP
    """

    def __init__(
        self,
        path,
        *,
        beam_size=None,
        alpha=None,
        max_length=None,
        source_lang=None,
        target_lang=None,
        cache_dir=None,
        inter_threads=1,
        intra_threads=0,
        precision=None,
    ):
        from keras_transformer import decoding

        ctranslate2 = require_ctranslate2()
        path = check_run(path)
        config = runs.RunConfig.read(path)
        self.source_tokenizer, self.target_tokenizer = runs.load_tokenizers(path)
        self._languages = languages_of(self.source_tokenizer, self.target_tokenizer).with_defaults(
            source_lang, target_lang
        )  # checked before the conversion: a wrong code costs nothing
        self.model_path = cached_model(path, cache_dir)
        defaults = config.decoding or DecodingConfig()
        model_max = int(recorded(self.model_path)["max_length"])
        beam_size, alpha = decoding_defaults(config.decoding, beam_size, alpha)
        beam_size, self.alpha = decoding.check_beam_size(beam_size), float(alpha)
        limit = max_length or defaults.max_new_tokens or model_max
        self._decode_length = min(int(limit), model_max)
        self._normalization, self._stopping = defaults.normalization, defaults.stopping
        self._source_pieces, self._target_pieces = _vocabularies(path, config)
        self._target_ids = {piece: i for i, piece in enumerate(self._target_pieces)}
        self._end = self._target_pieces[int(getattr(self.target_tokenizer, "end_id", END_ID))]
        self._source_end = self._source_pieces[int(getattr(self.source_tokenizer, "end_id", END_ID))]
        special = config.model.special_ids() if config.model else {}
        ids = [
            special.get(name, default)
            for name, default in (("start_id", START_ID), ("end_id", END_ID), ("pad_id", PAD_ID))
        ]
        banned = rules.never_generated(*ids, defaults.banned_ids, defaults.softmax_over)
        self._suppress = [[self._target_pieces[i]] for i in banned]
        unk = getattr(self.target_tokenizer, "unk_id", ids[1])
        self._unbanned = (*ids, unk)  # what banned words never ban (`translators.banned_words`)
        languages = getattr(self.target_tokenizer, "languages", None) or {}
        self.special_tokens = special_tokens(  # what no prefix may hold (`controls.prefix_error`)
            getattr(self.target_tokenizer, "special_tokens", ()),
            pieces_of(self._target_pieces, [*self._unbanned, *languages.values()]),
        )
        self._add_source_end = bool(config.add_source_end)
        self._multilingual = bool(self._languages.codes)
        self._target_in_source = self._languages.target_in_source  # MADLAD: `<2xx> pieces </s>`, no forced language
        self._source_extra = int(self._add_source_end) + int(self._multilingual)
        self._source_limit = model_max - self._source_extra
        self.beam_size = tf.constant(beam_size)
        self.max_source_length = tf.constant(model_max)
        self.precision = check_precision(precision)  # decided by the opener (`opener.precision_for`)
        self.translator = ctranslate2.Translator(
            str(self.model_path),
            device="cpu",
            compute_type=COMPUTE_TYPES[self.precision],
            inter_threads=inter_threads,
            intra_threads=intra_threads,
        )
        self._ctranslate2 = ctranslate2

    @property
    def languages(self):
        """The model's language codes and this translator's default source and target (`controls.Languages`)."""
        return self._languages

    # -- the engine's hooks (`TranslatorInterface`), given checked inputs ---------------------------

    def _decode(self, search, sentences, controls, *sampling):
        if search == "best":
            return _first(self._nbest(sentences, controls, hypotheses=1))
        if search == "sample":
            temperature, top_k, top_p, seed = (t.numpy().item() for t in sampling)
            if temperature != 0:
                if seed >= 0:
                    self._ctranslate2.set_random_seed(seed)
                options = dict(sampling_temperature=temperature, sampling_topk=top_k, sampling_topp=top_p)
                return _first(self._translate(sentences, controls, beam_size=1, num_hypotheses=1, **options))
        return _first(self._translate(sentences, controls, beam_size=1, num_hypotheses=1))

    def _nbest(self, sentences, controls, hypotheses=None):
        beam_size = int(self.beam_size.numpy())
        return self._translate(sentences, controls, beam_size=beam_size, num_hypotheses=hypotheses or beam_size)

    def _stream(self, search, sentences, controls, *sampling, cancel=None):
        """Greedy search and sampling token by token, with CTranslate2's `generate_tokens`; beam search once.

        Its options are `translate_batch`'s (`translate_options`), so the
        pieces joined are `greedy`'s (or `sample`'s, for the same seed) strings.
        """
        options = {}
        if search == "sample":
            temperature, top_k, top_p, seed = (t.numpy().item() for t in sampling)
            if temperature != 0:
                if seed >= 0:
                    self._ctranslate2.set_random_seed(seed)
                options = dict(sampling_temperature=temperature, sampling_topk=top_k, sampling_topp=top_p)
        elif search == "best" and int(self.beam_size.numpy()) > 1:
            return super()._stream(search, sentences, controls)
        return self._generated(sentences, controls, options, cancel)

    def _generated(self, sentences, controls, sampling, cancel):
        source = self.source_pieces(sentences, controls)[0]
        if not source:  # as `_hypotheses`: an empty sentence translates to ""
            yield Piece("", (), "end")
            return
        prefix = (self.target_prefix(controls, 1) or [None])[0]
        options = {
            name: value
            for name, value in self.translate_options(1, 1, controls.banned).items()
            if name in GENERATE_OPTIONS
        }
        sampling = {"sampling_topk": 1, **sampling}  # greedy: the one likeliest token
        steps = self.translator.generate_tokens(source, prefix, **options, **sampling, end_token=self._end)
        cutter = WordCutter(self._text, word_starts(self._target_pieces))
        finished = False
        for step in steps:
            if cancel is not None and cancel.is_set():
                steps.close()  # CTranslate2 stops decoding
                yield cutter.finish(cutter.text, "cancelled")
                return
            if step.token == self._end:
                finished = True
                break
            piece = cutter.add(self._target_ids[step.token])
            if piece is not None:
                yield piece
        yield cutter.finish(self._text(cutter.ids), "end" if finished else "length")

    def _text(self, ids):
        ragged = tf.RaggedTensor.from_row_lengths(tf.constant(ids, tf.int32), [len(ids)])
        return self.target_tokenizer.detokenize(ragged).numpy()[0].decode("utf-8", errors="replace")

    def _source_lengths(self, sentences):
        ids = tokenized(self.source_tokenizer, sentences)
        return tf.cast(ids.row_lengths(), tf.int32) + self._source_extra

    def _score(self, sources, targets, controls):
        limit = self._decode_length
        pieces = [[self._target_pieces[i] for i in row] for row in tokenized(self.target_tokenizer, targets).to_list()]
        pieces = rules.forced_rows(pieces, self._target_language(controls))  # as the model learnt
        # CTranslate2 appends END: a longer target is scored on `limit - 1` tokens and END (class docstring).
        pieces = [row[: limit - 1] for row in pieces]
        source = self.source_pieces(sources, controls)  # truncated as XLA's
        results = self.translator.score_batch(source, pieces, max_input_length=0)
        lengths = [len(row) + 1 for row in pieces]
        log_probs = [sum(result.log_probs[:n]) for result, n in zip(results, lengths)]
        return {"log_probs": tf.constant(log_probs, tf.float32), "target_lengths": tf.constant(lengths, tf.int32)}

    # -- decoding ------------------------------------------------------------------------------------

    def _banning_vocabulary(self):
        """What banned words are read against (`TranslatorInterface.banned_ids_of`): the target vocabulary's."""
        return functools.partial(tokenize_words, self.target_tokenizer), self._target_pieces, self._unbanned

    def translate_options(self, beam_size, num_hypotheses=1, banned=(), **options):
        """The keyword arguments this engine gives CTranslate2's `translate_batch` (`options` added).

        `banned` words (`translators.banned_words`) join the ids never
        generated in `suppress_sequences`, each as a sequence of one token.
        """
        if beam_size > 1 and self._normalization == "gnmt":
            options["length_penalty"] = self.alpha * TYPICAL_LENGTH / (5 + TYPICAL_LENGTH)
        elif beam_size > 1:
            options["length_penalty"] = self.alpha
        else:
            options["length_penalty"] = 0.0  # greedy: CTranslate2's score is the plain sum of log-probabilities
        if beam_size > 1 and self._stopping == "cannot_improve":
            options["patience"] = CANNOT_IMPROVE_PATIENCE
        return dict(
            beam_size=beam_size,
            num_hypotheses=num_hypotheses,
            min_decoding_length=0,
            max_input_length=0,  # truncated by `source_pieces`, as the XLA decoder truncates
            max_decoding_length=self._decode_length,
            suppress_sequences=self._suppress + [[self._target_pieces[i]] for i in self.banned_ids_of(banned)],
            return_end_token=True,
            return_scores=True,
            **options,
        )

    def source_pieces(self, sentences, controls=None):
        """Pieces of each sentence as the model reads them, truncated as the XLA decoder truncates.

        A multilingual model's source is framed here, `[src_lang] pieces
        </s>` (or `pieces </s> [src_lang]`, as its tokenizer says), each
        sentence in the `source_lang` of its `controls` (a
        `controls.Controls`: `(batch,)` codes; None: the defaults), MADLAD's
        `[<2tgt>] pieces </s>` in its `target_lang`; CTranslate2 appends END
        to the others' itself.
        """
        controls = Controls() if controls is None else controls
        rows = tokenized(self.source_tokenizer, sentences).to_list()
        rows = [[self._source_pieces[i] for i in row[: self._source_limit]] for row in rows]
        if not self._multilingual:
            return rows
        end = [self._source_end] if self._add_source_end else []
        if self._target_in_source:
            target = controls.target_lang
            target = tf.fill([len(rows)], self._languages.target_lang or "") if target is None else target
            return [[code] + row + end for code, row in zip(self._language_pieces(target), rows)]
        source = controls.source_lang
        source = tf.fill([len(rows)], self._languages.source_lang or "") if source is None else source
        last = getattr(self.source_tokenizer, "source_position", "first") == "last"
        languages = self._language_pieces(source)
        return [row + end + [code] if last else [code] + row + end for code, row in zip(languages, rows)]

    def target_prefix(self, controls, count):
        """CTranslate2's `target_prefix` for `count` sentences: the target language's token, then the prefix's pieces.

        None where the call has neither (no forced beginning); a prefix is
        cut to the output's maximum length.
        """
        language = self._target_language(controls)
        if language is None and controls.target_prefix is None:
            return None
        pieces = [[] for _ in range(count)]
        if controls.target_prefix is not None:
            ids = self.target_tokenizer.tokenize(tf.strings.strip(controls.target_prefix)).to_list()
            pieces = [[self._target_pieces[i] for i in row] for row in ids]
        return [row[: self._decode_length] for row in rules.forced_rows(pieces, language)]

    def _target_language(self, controls):
        """The target language's piece of each output that begins with one (`Languages.forced_first`); else None."""
        return self._language_pieces(controls.target_lang) if self._languages.forced_first else None

    def _language_pieces(self, codes):
        """The language tokens' pieces of `codes` (`(batch,)` `tf.string`, checked by `resolve`)."""
        languages = self.target_tokenizer.languages
        return [self._target_pieces[languages[code.decode("utf-8")]] for code in codes.numpy().tolist()]

    def _translate(self, sentences, controls, beam_size, num_hypotheses, **options):
        """`{"translations", "scores", "finished"}` `(batch, num_hypotheses)` from `translate_batch`."""
        batch = self.source_pieces(sentences, controls)
        options = self.translate_options(beam_size, num_hypotheses, controls.banned, **options)
        prefix = self.target_prefix(controls, len(batch))
        results = self.translator.translate_batch(batch, target_prefix=prefix, **options) if batch else []
        rows = [self._hypotheses(source, result, num_hypotheses, options) for source, result in zip(batch, results)]
        shape = [len(batch), num_hypotheses]
        ids, scores, finished = zip(*sum(rows, [])) if batch else ((), (), ())
        flat = [i for row in ids for i in row]  # tf.ragged.constant is slow: half of the engine's overhead
        ids = tf.RaggedTensor.from_row_lengths(tf.constant(flat, tf.int32), [len(row) for row in ids])
        return {
            "translations": tf.reshape(self.target_tokenizer.detokenize(ids), shape),
            "scores": tf.reshape(tf.constant(scores, tf.float32), shape),
            "finished": tf.reshape(tf.constant(finished, tf.bool), shape),
        }

    def _hypotheses(self, source, result, count, options):
        """`[(ids, normalised score, finished)]` of one source's `count` hypotheses."""
        if not source:  # the XLA decoder translates an empty sentence to "" (CTranslate2 too, unread)
            return [([], 0.0, True)] * count
        rows = []
        for tokens, score in zip(result.hypotheses, result.scores):
            finished = bool(tokens) and tokens[-1] == self._end
            ids = [self._target_ids[t] for t in (tokens[:-1] if finished else tokens)]
            length = len(tokens)  # END included, as the XLA decoder counts (a forced beginning too)
            raw = score * length ** options["length_penalty"] if length else 0.0
            rows.append((ids, raw / self._penalty(length), finished))
        return rows

    def _penalty(self, length):
        return float(rules.length_penalty(float(length), self.alpha, self._normalization))


def _vocabularies(path, config):
    """`(source pieces, target pieces)` by id, as the conversion (`ctranslate2.conversion.convert_run`) names them.

    Each tokenizer's kind says what they are (`tokenizers.kinds`): one
    tokenizer for both sides (M2M100, NLLB, mBART-50, T5) is completed up
    to the model's rows.
    """
    vocab_size = config.model.target_vocab_size if config.model else None
    source, target, _ = kinds.ctranslate2_vocabularies(
        path / runs.SOURCE_TOKENIZER, path / runs.TARGET_TOKENIZER, vocab_size
    )
    return source, target


def precision_facts(path):
    """What the precision of run `path` decoded by CTranslate2 depends on (`translators.precision`'s arguments).

    `{"supported": the precisions CTranslate2 has kernels for on this CPU,
    "width": the model's d_model}`: `opener.precision_for` decides with them.
    """
    ctranslate2 = require_ctranslate2()
    kernels = ctranslate2.get_supported_compute_types("cpu")
    config = runs.RunConfig.read(check_run(path))
    return {
        "supported": [name for name, compute_type in COMPUTE_TYPES.items() if compute_type in kernels],
        "width": config.model.d_model if config.model else None,
    }


def _first(result):
    """The first hypothesis of each sentence: `(batch, hypotheses)` -> `(batch,)`."""
    return {name: value[:, 0] for name, value in result.items()}
