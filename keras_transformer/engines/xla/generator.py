"""`Generator`: a decoder-only model (GPT) and its tokenizer, continuing text prompts.

What a `Translator` is to an encoder-decoder, a `Generator` is to a
language model, with the same methods (`translators.TranslatorInterface`:
`__call__`, `greedy`, `sample`, the `*_with_status` forms, `nbest`,
`score`, `source_lengths`), its "translations" the continuations and its
"sentences" the prompts; `generate_with_status` takes every setting at once.
Each prompt is tokenized (an empty one is the model's start id alone, as
GPT-2 starts a text from `<|endoftext|>`), the batch is padded to a width
of a multiple of 8 (each width compiles once), and the search continues
every prompt (`keras_transformer.decoding.prompts`) with the run's
generation settings: an imported GPT-2 decodes as transformers' `generate`
does. The outputs are the continuations alone, their special tokens
dropped, a newline inside one written as a space.

`keras_transformer.export.load(RUN)` and `keras-transformer generate` open
a decoder-only run as a `Generator`. `stream(prompt)` gives the
continuation in words as they are decoded (`generator_stream`): greedy
search and sampling step by step, their pieces joined equal to
`generate_with_status([prompt], ...)`'s text; beam search gives its text
once, at the end.

Example:

>>> generator = open_generator("saved_models/gpt2-tiny")  # doctest: +SKIP
>>> generator.generate_with_status(["오늘 너무"], max_length=8)  # doctest: +SKIP
>>> for words in generator.stream("오늘 너무", max_length=8):  # doctest: +SKIP
...     print(words, end="", flush=True)
"""

import numpy as np
import tensorflow as tf

from keras_transformer import decoding, runs
from keras_transformer.config import DecodingConfig
from keras_transformer.input_rules import check_sentence
from keras_transformer.kinds import check_int_in_range
from keras_transformer.translators.interface import TranslatorInterface
from keras_transformer.translators.streaming import Piece

WIDTH_STEP = 8  # prompts are padded to a multiple of it: one compiled program per width
ARCHITECTURE_WORDS = {"encoder_decoder": "an encoder-decoder (translation)", "encoder_only": "an encoder-only (BERT)"}
DEFAULT_MAX_LENGTH = 20  # tokens generated at most where neither the caller nor the run says


class Generator(TranslatorInterface):
    """Continues prompts with a decoder-only `model` and its `tokenizer` (see the module).

    Args:
        model: a `DecoderOnlyModel`.
        tokenizer: its tokenizer (`tokenize`, `detokenize`).
        decoding: the run's `DecodingConfig` (the search's rules and defaults).
        beam_size, alpha, max_length: defaults instead of the run's.
        **options: `add_start` (begin every prompt with the start id, as
            this package's own language models were trained: False),
            `batch_size` (prompts per compiled call, 16) and
            `jit_compile` (compile the searches with XLA, True).
    """

    def __init__(self, model, tokenizer, decoding=None, beam_size=None, alpha=None, max_length=None, **options):
        self.model, self.tokenizer = model, tokenizer
        self.decoding = decoding or DecodingConfig(beam_size=1)
        self.beams = beam_size or self.decoding.beam_size  # the default search's beams (1: greedy)
        self.alpha = self.decoding.alpha if alpha is None else alpha
        self.max_length = max_length or self.decoding.max_new_tokens or DEFAULT_MAX_LENGTH
        self.add_start = options.get("add_start", False)
        self.batch_size = options.get("batch_size", 16)
        self.jit_compile = options.get("jit_compile", True)
        self._compiled = {}
        self._streams = None  # what `stream` steps through (`generator_stream`), built on the first stream

    @property
    def beam_size(self):
        """The default search's beams, a tensor as a translator's (`beams` is the int)."""
        return tf.constant(self.beams, tf.int32)

    @property
    def max_source_length(self):
        """The longest prompt, in tokens, that leaves room for `max_length` generated ones (a tensor, as a
        translator's)."""
        return tf.constant(self.model.max_length - self.max_length + 1, tf.int32)

    def generate_with_status(
        self, prompts, beam_size=None, temperature=None, top_k=0, top_p=1.0, seed=None, max_length=None
    ):
        """`(continuations, finished)`: each prompt's best continuation (a list of str), and whether it ended.

        `beam_size` (1 = greedy) or `temperature` (sampling, with `top_k`,
        `top_p`, `seed`) choose the search; `max_length` counts the tokens
        generated (END included; default the run's, cut to what the
        longest prompt leaves of the model's positions). A prompt that
        cannot fit the model's positions with them is a `ValueError` naming it.
        """
        settings = dict(beam_size=beam_size, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
        result = self._search(prompts, settings, max_length)
        return self._texts([ids[0] for ids, _, _ in result]), [bool(finished[0]) for _, _, finished in result]

    def max_length_for(self, prompts, max_length=None):
        """The tokens `generate_with_status(prompts, max_length=max_length)` generates at most, each prompt checked.

        `max_length` None: the run's, cut to what the longest prompt leaves
        of the model's positions. A prompt that cannot fit the positions
        with them is a `ValueError` naming it.
        """
        token_ids = self._token_ids(prompts)
        if max_length is None:  # the default: as many as the longest prompt leaves room for
            longest = max(map(len, token_ids), default=1)
            self._check_room(token_ids)
            return max(1, min(self.max_length, self.model.max_length - longest + 1))
        self._check_room(token_ids, check_int_in_range("max_length", max_length, 1, self.model.max_length))
        return max_length

    def stream_pieces(
        self,
        sentence,
        search="best",
        *,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        seed=-1,
        max_length=None,
        cancel=None,
        **controls,
    ):
        """`stream` as `streaming.Piece`s (see `TranslatorInterface.stream_pieces`), with `max_length`.

        `max_length` counts the tokens generated, as `generate_with_status`'s
        (`stream(prompt, max_length=...)` takes it too). The prompt is
        checked here, before the first piece: one too long for the model's
        positions with them is a `ValueError` naming it.
        """
        numbers = dict(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
        sentences, numbers = self._stream_inputs(sentence, search, **numbers)
        controls = self._controls(sentences, **controls)  # a translator's: refused (`_check_no_prefix`)
        return self._stream(search, sentences, controls, *numbers, cancel=cancel, max_length=max_length)

    # -- the translator's hooks ------------------------------------------------------------------

    def _decode(self, search, sentences, controls, *sampling_numbers):
        _check_no_prefix(controls)
        result = self._search(_texts_of(sentences), _settings(search, sampling_numbers), None)
        return _status([ids[0] for ids, _, _ in result], result, self, column=0)

    def _stream(self, search, sentences, controls, *sampling_numbers, cancel=None, max_length=None):
        """The `Piece`s of the one prompt of `sentences`, word by word (`generator_stream`); beam search's once."""
        _check_no_prefix(controls)
        prompts, settings = _texts_of(sentences), _settings(search, sampling_numbers)
        max_length = self.max_length_for(prompts, max_length)
        search, numbers = self._search_of(settings)
        if isinstance(search, decoding.BeamSearch):
            return self._whole(prompts, settings, max_length)
        if self._streams is None:
            from keras_transformer.engines.xla.generator_stream import GeneratorStreams

            self._streams = GeneratorStreams(self)
        noise = self._noise(settings, 1, max_length) if numbers else None
        return self._streams.pieces(self._token_ids(prompts)[0], max_length, search, noise, numbers, cancel)

    def _whole(self, prompts, settings, max_length):
        """The one `Piece` of a search that gives its text at the end (beam search's best can change until then)."""
        ids, _, finished = self._search(prompts, settings, max_length)[0]
        end = self.model.config.end_id
        kept = [int(i) for i in ids[0]]
        kept = kept[: kept.index(end)] if end in kept else kept
        yield Piece(self._texts([ids[0]])[0], tuple(kept), "end" if finished[0] else "length")

    def _nbest(self, sentences, controls):
        _check_no_prefix(controls)
        result = self._search(_texts_of(sentences), dict(beam_size=self.beams), None)
        beams = len(result[0][0]) if result else self.beams
        return _status([ids for ids, _, _ in result], result, self, column=slice(None), beams=beams)

    def _score(self, sources, targets, controls):
        """The log-probability of each target continuing its prompt, END included, and its token count."""
        del controls  # a language model has no languages (`resolve` refused any)
        prompts, continuations = _texts_of(sources), _texts_of(targets)
        log_probs, lengths = [], []
        for prompt, target in zip(self._token_ids(prompts), self._token_ids(continuations, start=False)):
            ids = prompt + target + [self.model.config.end_id]
            logits = np.asarray(self.model(np.array([ids[:-1]], np.int32)))[0, len(prompt) - 1 :]
            shifted = logits - logits.max(-1, keepdims=True)
            log_softmax = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
            chosen = log_softmax[np.arange(len(target) + 1), ids[len(prompt) :]]
            log_probs.append(float(chosen.sum()))
            lengths.append(len(target) + 1)
        return {"log_probs": tf.constant(log_probs, tf.float32), "target_lengths": tf.constant(lengths, tf.int32)}

    def _source_lengths(self, sentences):
        return tf.constant([len(row) for row in self._token_ids(_texts_of(sentences))], tf.int32)

    # -- the search ------------------------------------------------------------------------------

    def _search(self, prompts, settings, max_length):
        """`[(ids, scores, finished)]`, one per prompt, of the search `settings` name."""
        max_length = self.max_length_for(prompts, max_length)
        token_ids = self._token_ids(prompts)
        search, numbers = self._search_of(settings)
        rng = np.random.default_rng(settings.get("seed"))
        out = []
        for start in range(0, len(token_ids), self.batch_size):
            batch = token_ids[start : start + self.batch_size]
            ids = self._padded(batch, max_length)
            inputs = (self._noise(settings, len(ids), max_length, rng),) if numbers else ()
            result = self._compiled_search(search, ids.shape[1], max_length)(ids, *inputs, **numbers)
            arrays = [np.asarray(x) for x in (result.ids, result.scores, result.finished)]
            out += list(zip(*arrays))[: len(batch)]
        return out

    def _search_of(self, settings):
        """`(search, numbers)`: the search `settings` name, and a sampling search's settings as scalar tensors.

        Sampling is one `SamplingSearch` whatever its numbers, which it is
        given as tensors: one compiled program serves every temperature.
        """
        options = self.decoding.search_options()
        if settings.get("temperature") is None:
            return decoding.search_for(settings.get("beam_size") or self.beams, self.alpha, **options), {}
        numbers = dict(
            temperature=tf.constant(settings["temperature"], tf.float32),
            top_k=tf.constant(settings.get("top_k", 0), tf.int32),
            top_p=tf.constant(settings.get("top_p", 1.0), tf.float32),
        )
        return decoding.search_for(None, self.alpha, temperature=1.0, **options), numbers

    @staticmethod
    def _noise(settings, rows, max_length, rng=None):
        """Sampling's uniform noise `(rows, max_length)` from `settings`' seed: a prompt's row is its first draws."""
        rng = np.random.default_rng(settings.get("seed")) if rng is None else rng
        return rng.random((rows, max_length), dtype=np.float32)

    def _compiled_search(self, search, width, max_length):
        key = (search, width, max_length)
        if key not in self._compiled:
            self._compiled[key] = decoding.compile_search(self.model, search, max_length, jit_compile=self.jit_compile)
        return self._compiled[key]

    def _token_ids(self, prompts, start=True):
        if isinstance(prompts, str):
            raise ValueError("`prompts` must be a list of strings. Received: one string")
        prompts = [check_sentence(p, f"prompts[{i}]") for i, p in enumerate(prompts)]
        rows = self.tokenizer.tokenize(prompts).to_list() if prompts else []
        if not start:
            return rows
        first = [self.model.config.start_id]
        return [first + row if self.add_start else row or first for row in rows]

    def _check_room(self, rows, max_length=None):
        """A `ValueError` naming the first prompt of `rows` that leaves no room for `max_length` tokens (None: one)."""
        positions = self.model.max_length
        room = positions - (max_length or 1) + 1  # the last token generated is never read back
        for index, row in enumerate(rows):
            if len(row) > room:
                leaves = (
                    f"to generate max_length={max_length} tokens, a prompt may have {room} at most"
                    if max_length
                    else f"a prompt may have {room} tokens at most"
                )
                raise ValueError(
                    f"prompts[{index}] has {len(row):,} tokens, more than the model's {positions} positions "
                    f"leave room for: {leaves}; shorten it"
                )

    def _padded(self, rows, max_length, batch=None):
        """`(batch or batch_size, width)` ids, right-padded: width a multiple of `WIDTH_STEP` where it fits.

        The rows after the prompts repeat the first (they end with it): a
        row of padding would be GPT-2's empty text (`decoding.prompts`).
        """
        longest = max(len(row) for row in rows)
        width = min(-(-longest // WIDTH_STEP) * WIDTH_STEP, self.model.max_length - max_length + 1)
        ids = np.full((batch or self.batch_size, width), self.model.config.target_pad, np.int32)
        for index, row in enumerate(rows):
            ids[index, : len(row)] = row
        ids[len(rows) :] = ids[0]
        return ids

    def _texts(self, rows):
        end = self.model.config.end_id
        rows = [[int(i) for i in row] for row in rows]
        rows = [row[: row.index(end)] if end in row else row for row in rows]
        if not rows:
            return []
        ragged = tf.ragged.constant(rows, dtype=tf.int32, ragged_rank=1)
        texts = [t.decode("utf-8") for t in np.asarray(self.tokenizer.detokenize(ragged)).tolist()]
        return [" ".join(text.splitlines()) if "\n" in text or "\r" in text else text for text in texts]


def _check_no_prefix(controls):
    """A `target_prefix` is a translator's control: a generator's continuation starts where its prompt ends.

    So are `banned` words, which a generator does not take (yet).
    """
    if controls.banned:
        raise ValueError("`banned` words apply to translators (encoder-decoder runs); a generator takes none")
    prefix = controls.target_prefix
    if prefix is not None and any(prefix.numpy().tolist()):
        raise ValueError(
            "`target_prefix` applies to translators; a generator continues its prompt: end the prompt with it"
        )


def _settings(search, sampling_numbers):
    """The settings of `_search` that a translator's `search` names: sampling at temperature 0 is greedy."""
    settings = {"greedy": dict(beam_size=1), "best": {}}.get(search)
    if settings is None:  # sampling: temperature 0 is greedy, seed -1 a random one
        temperature, top_k, top_p, seed = (x.numpy().item() for x in sampling_numbers)
        settings = dict(temperature=temperature, top_k=top_k, top_p=top_p, seed=None if seed < 0 else seed)
        if temperature == 0:
            settings = dict(beam_size=1)
    return settings


def _texts_of(sentences):
    """A checked 1-D string tensor as a list of str."""
    return [s.decode("utf-8") for s in sentences.numpy().tolist()]


def _status(ids, result, generator, column, beams=None):
    """`{"translations", "scores", "finished"}` of the rows `ids` (one per prompt, or each prompt's beams)."""
    if beams is None:
        texts = generator._texts(ids)
    else:
        flat = generator._texts([row for rows in ids for row in rows])
        texts = [flat[i : i + beams] for i in range(0, len(flat), beams)]
    scores = np.array([scores[column] for _, scores, _ in result], np.float32)
    finished = np.array([finished[column] for _, _, finished in result], bool)
    return {
        "translations": tf.constant(texts, tf.string),
        "scores": tf.constant(scores),
        "finished": tf.constant(finished),
    }


def open_generator(path, beam_size=None, alpha=None, max_length=None, jit_compile=True, **unused):
    """The `Generator` of the decoder-only run directory at `path`, with its generation settings unless given."""
    run = runs.open_run(path)
    if run.config.model.architecture != "decoder_only":
        architecture = run.config.model.architecture
        raise ValueError(
            f"{path} holds {ARCHITECTURE_WORDS.get(architecture, architecture)} model: it does not continue "
            "prompts; a generator needs a decoder-only model (GPT)"
        )
    options = dict(beam_size=beam_size, alpha=alpha, max_length=max_length, jit_compile=jit_compile)
    options["add_start"] = run.config.pretrained is None  # trained here: on [START] + text (`training.causal_lm`)
    return Generator(run.model, run.tokenizers.target, run.config.decoding, **options)


def is_generator_run(path):
    """Whether the run directory at `path` holds a decoder-only model (opened as a `Generator`).

    An encoder-only run (BERT) is a `ValueError`: it neither translates nor
    generates (`keras_transformer.export.load` opens it as an `Encoder`).
    """
    architecture = runs.RunConfig.read(path).model.architecture
    if architecture == "encoder_only":
        raise ValueError(
            f"{path} holds an encoder-only model (BERT): it neither translates nor generates; use "
            "`keras-transformer embed`, `classify` or `fill-mask`, or keras_transformer.export.load"
        )
    return architecture == "decoder_only"


def tokenizes_in_python(path):
    """Whether the run directory at `path` is a decoder-only one whose tokenizer runs in Python (an imported GPT-2).

    A SavedModel cannot hold that tokenizer (`generator_export`): `serve`
    serves such a run through its `Generator` instead.
    """
    config = runs.RunConfig.read(path)
    return config.model.architecture == "decoder_only" and config.pretrained is not None
