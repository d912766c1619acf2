"""The graph side of a `Translator`: sentences to ids, the compiled searches, ids to strings; its SavedModel.

`TranslatorGraph` is the part of `translator.Translator` that runs
in TensorFlow: tokenization (tensorflow-text ops), the decode (one XLA
program per (batch bucket, source bucket) shape, or, with `compact=True`,
segments that drop the finished sentences between them) and
detokenization, as the `tf.function`s its SavedModel holds. A SavedModel
written by `Translator.save` needs no project code, only `import
tensorflow_text` before loading (it registers the SentencePiece ops)::

    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

    translator = tf.saved_model.load("saved_models/multi30k-en-de-export")
    translator(tf.constant(["A man is riding a bike."]))  # beam search
    translator.greedy(tf.constant(["A dog runs."]))
    translator.sample(tf.constant(["Hi"]), 0.8, 0, 0.9, -1)  # temperature, top_k, top_p, seed
    translator.call_with_status(tf.constant(["A dog runs."]))  # {"translations", "scores", "finished"}
    translator.nbest(tf.constant(["A dog runs."]))  # every beam, best first, with scores
    translator.score(tf.constant(["A dog runs."]), tf.constant(["Ein Hund läuft."]))  # log-probabilities

It also has named signatures (`SIGNATURES`), which TF Serving, `saved_model_cli`
and other tools that read SignatureDefs call: `serving_default` (beam
search), `greedy` and `sample` (`sentences` -> `translations`, `scores`,
`finished`), `nbest` (the same, `(batch, beam)`) and `score` (`sources`,
`targets` -> `log_probs`, `target_lengths`)::

    signatures = tf.saved_model.load("saved_models/multi30k-en-de-export").signatures
    signatures["serving_default"](sentences=tf.constant(["A dog runs."]))["translations"]

Empty or whitespace-only inputs translate to an empty string; sources longer
than `max_source_length` tokens are truncated (`source_lengths` tells which),
so one long sentence never fails a batch. A translation that reaches the
maximum output length before END is cut off: the `*_with_status` functions
return `finished=False` for it.

Callers of `tf.saved_model.load` itself get no check in Python (the
`Translator`'s methods and `load`'s `LoadedTranslator` check their inputs
first): they must pass a 1-D `tf.string` tensor (and `sample` scalars of
float32, int32, float32 and int64). The SavedModel's `sample` checks its
numbers itself: a NaN, infinite or negative `temperature`, a negative
`top_k` or a `top_p` outside (0, 1] is an `InvalidArgumentError` that names
it (they are not clamped).
"""

import functools

import keras
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops for loading)

from keras_transformer.decoding import rules
from keras_transformer.files import atomic, destinations, manifest
from keras_transformer.translators.controls import Controls
from keras_transformer.translators.token_ids import pad_to_buckets

_STRINGS = tf.TensorSpec([None], tf.string)
_SAMPLE_SPECS = [
    _STRINGS,
    tf.TensorSpec([], tf.float32),
    tf.TensorSpec([], tf.int32),
    tf.TensorSpec([], tf.float32),
    tf.TensorSpec([], tf.int64),
]
# The controls (`translators.controls`): source language, target language, target prefix, one each per sentence,
# and the ids that the call's banned words ban (`translators.banned_words`), for the whole call.
_CONTROL_SPECS = [_STRINGS, _STRINGS, _STRINGS, tf.TensorSpec([None], tf.int32)]
# The SavedModel's functions, by name, and the `Translator` tf.functions they are. The
# Python methods of those names check their inputs first, then call these.
_EXPORTED = {
    "__call__": "_tf_call",
    "greedy": "_tf_greedy",
    "sample": "_tf_sample",
    "source_lengths": "_tf_source_lengths",
    "call_with_status": "_tf_call_with_status",
    "greedy_with_status": "_tf_greedy_with_status",
    "sample_with_status": "_tf_sample_with_status",
    "nbest": "_tf_nbest",
    "score": "_tf_score",
    "call_with_controls": "_tf_call_with_controls",
    "greedy_with_controls": "_tf_greedy_with_controls",
    "sample_with_controls": "_tf_sample_with_controls",
    "nbest_with_controls": "_tf_nbest_with_controls",
    "score_with_controls": "_tf_score_with_controls",
}
# The SavedModel's signatures (what TF Serving and `saved_model_cli` call), by name.
SIGNATURES = {
    "serving_default": "_tf_call_with_status",
    "greedy": "_tf_greedy_with_status",
    "sample": "_tf_sample_with_status",
    "nbest": "_tf_nbest",
    "score": "_tf_score",
    "with_controls": "_tf_call_with_controls",
    "greedy_with_controls": "_tf_greedy_with_controls",
}


class TranslatorGraph(tf.Module):
    """The graph side of a `Translator` (see the module docstring); `Translator` builds what it reads.

    Reads `_inputs` (a `model_inputs.ModelInputs`: the rows the model
    reads), `_searches` (a `compiled_searches.CompiledSearches`),
    `target_tokenizer`, `target_pieces` and `default_languages` (the
    variables the SavedModel keeps) and `_compact`.

    `search_inputs`, `ban_mask` and `detokenize` are the steps of every
    decode here, public for what decodes a translator's sentences in other
    ways (its streams, `stream_decoder`; in-flight rows, `inflight`).
    """

    def search_inputs(self, sentences, controls):
        """`(source ids (batch', width), forced beginnings (batch', max_length))` of `sentences` `(batch,)`.

        `controls` are a `controls.Controls` as a graph reads them
        (`Controls.filled`: each `(batch,)` of str, "" for the default);
        `batch'` is the batch bucketed (`token_ids.pad_to_buckets`), its
        extra rows padding and free. A forced beginning is -1 where the
        output is free.
        """
        source_ids = self._inputs.source_ids(sentences, controls)
        return source_ids, self._inputs.prefix(controls, tf.shape(source_ids)[0])

    def ban_mask(self, banned_ids):
        """Bool `(vocab_size,)`, True at `banned_ids`: a search's `ban_mask` (`rules.ids_mask`)."""
        return rules.ids_mask(self.target_pieces.shape[0], banned_ids, keras.ops)

    def detokenize(self, ids):
        """Strings of ids `(batch, length)`, or `(batch, beams, length)` -> `(batch, beams)`."""
        if ids.shape.rank == 2:
            return self.target_tokenizer.detokenize(ids)
        shape = tf.shape(ids)
        strings = self.target_tokenizer.detokenize(tf.reshape(ids, [-1, shape[2]]))
        return tf.reshape(strings, shape[:2])

    def save(self, path, overwrite=True):
        """Writes this module as a SavedModel at `path`, atomically, with a manifest of sha256 sums.

        The SavedModel has the signatures of `SIGNATURES`. `path` may be new,
        an empty folder, or (when `overwrite` is true) an earlier export of
        this package; anything else is refused before any work with
        `destinations.UnsafeDestinationError`. The new export is written
        beside `path` and swapped in only when complete: a failed or
        interrupted save leaves a previous export intact. A compacting
        `Translator` (`compact=True`) is refused with a `ValueError`: exports
        decode each batch as one XLA program.
        """
        if self._compact:
            raise ValueError("A Translator built with `compact=True` does not save: build one with compact=False")
        check_export_destination(path, overwrite)
        # The functions, not their concrete functions: traced once, inside the save.
        signatures = {name: getattr(self, private) for name, private in SIGNATURES.items()}
        # No gradients: the export only translates, and tracing them took a fifth of the save.
        options = tf.saved_model.SaveOptions(experimental_custom_gradients=False)

        def write(tmp):
            tf.saved_model.save(self, tmp, signatures=signatures, options=options)
            manifest.write_manifest(tmp)

        atomic.replace_dir(write, path, destinations.remove_previous)
        return str(path)

    def _trackable_children(self, *args, **kwargs):
        """The SavedModel holds the `_tf_*` functions under their public names (`_EXPORTED`)."""
        children = super()._trackable_children(*args, **kwargs)
        for public, private in _EXPORTED.items():
            if private in children:
                children[public] = children.pop(private)
        return children

    # The SavedModel's functions. The input signatures check nothing in
    # Python's time: the methods of `TranslatorInterface` do, before calling these.
    # No autograph: their control flow is explicit (`tf.cond`, the searches' loops).

    @tf.function(input_signature=[_STRINGS], autograph=False)
    def _tf_call(self, sentences):
        return self._tf_call_with_status(sentences)["translations"]

    @tf.function(input_signature=[_STRINGS], autograph=False)
    def _tf_greedy(self, sentences):
        return self._tf_greedy_with_status(sentences)["translations"]

    @tf.function(input_signature=_SAMPLE_SPECS, autograph=False)
    def _tf_sample(self, sentences, temperature, top_k, top_p, seed):
        return self._tf_sample_with_status(sentences, temperature, top_k, top_p, seed)["translations"]

    @tf.function(input_signature=[_STRINGS], autograph=False)
    def _tf_source_lengths(self, sentences):
        return self._inputs.source_lengths(sentences)

    @tf.function(input_signature=[_STRINGS], autograph=False)
    def _tf_call_with_status(self, sentences):
        return self._tf_call_with_controls(sentences, *self._defaults(sentences))

    @tf.function(input_signature=[_STRINGS], autograph=False)
    def _tf_greedy_with_status(self, sentences):
        return self._tf_greedy_with_controls(sentences, *self._defaults(sentences))

    @tf.function(input_signature=_SAMPLE_SPECS, autograph=False)
    def _tf_sample_with_status(self, sentences, temperature, top_k, top_p, seed):
        return self._tf_sample_with_controls(sentences, *self._defaults(sentences), temperature, top_k, top_p, seed)

    @tf.function(input_signature=[_STRINGS], autograph=False)
    def _tf_nbest(self, sentences):
        return self._tf_nbest_with_controls(sentences, *self._defaults(sentences))

    @tf.function(input_signature=[_STRINGS, _STRINGS], autograph=False)
    def _tf_score(self, sources, targets):
        return self._tf_score_with_controls(sources, targets, *self._defaults(sources)[:2])

    # The same with the controls (`translators.controls`): a "" entry is the translator's default. Their
    # arguments are the SavedModel's input names (the exported format's edge): each makes one `Controls`.

    @tf.function(input_signature=[_STRINGS, *_CONTROL_SPECS], autograph=False)
    def _tf_call_with_controls(self, sentences, source_lang, target_lang, target_prefix, banned_ids):
        controls = Controls(source_lang, target_lang, target_prefix)
        return self._run(sentences, self._searches.best, controls, banned_ids)

    @tf.function(input_signature=[_STRINGS, *_CONTROL_SPECS], autograph=False)
    def _tf_greedy_with_controls(self, sentences, source_lang, target_lang, target_prefix, banned_ids):
        controls = Controls(source_lang, target_lang, target_prefix)
        return self._run(sentences, self._searches.greedy, controls, banned_ids)

    @tf.function(input_signature=[_STRINGS, *_CONTROL_SPECS, *_SAMPLE_SPECS[1:]], autograph=False)
    def _tf_sample_with_controls(
        self, sentences, source_lang, target_lang, target_prefix, banned_ids, temperature, top_k, top_p, seed
    ):
        controls = Controls(source_lang, target_lang, target_prefix)
        return self._run_sample(sentences, controls, banned_ids, temperature, top_k, top_p, seed)

    @tf.function(input_signature=[_STRINGS, *_CONTROL_SPECS], autograph=False)
    def _tf_nbest_with_controls(self, sentences, source_lang, target_lang, target_prefix, banned_ids):
        controls = Controls(source_lang, target_lang, target_prefix)
        return self._run(sentences, self._searches.nbest, controls, banned_ids, beams=self._searches.beam_size)

    @tf.function(input_signature=[_STRINGS, _STRINGS, _STRINGS, _STRINGS], autograph=False)
    def _tf_score_with_controls(self, sources, targets, source_lang, target_lang):
        batch = tf.shape(sources)[0]
        check = tf.debugging.assert_equal(
            batch, tf.shape(targets)[0], message="`sources` and `targets` must hold as many sentences"
        )

        controls = Controls(source_lang, target_lang)

        def run():
            ids = self._inputs.target_ids(targets, controls)
            target = pad_to_buckets(ids, self._inputs.decode_length, self._inputs.target_pad)
            source_ids = self._inputs.source_ids(sources, controls)
            log_probs = self._searches.score(source_ids, target)[:batch]
            return {"log_probs": log_probs, "target_lengths": tf.cast(ids.row_lengths(), tf.int32)}

        with tf.control_dependencies([check]):
            empty = {"log_probs": tf.zeros([0]), "target_lengths": tf.zeros([0], tf.int32)}
            return tf.cond(batch > 0, run, lambda: empty)

    def _defaults(self, sentences):
        """The controls of a plain call: the default languages, no prefix, nothing banned."""
        fill = functools.partial(tf.fill, tf.shape(sentences)[:1])
        return fill(self.default_languages[0]), fill(self.default_languages[1]), fill(""), tf.zeros([0], tf.int32)

    def _run_sample(self, sentences, controls, banned_ids, temperature, top_k, top_p, seed):
        with tf.control_dependencies(_sampling_asserts(temperature, top_k, top_p)):
            seed = tf.cond(seed < 0, lambda: tf.random.uniform([], 0, 2**62, tf.int64), lambda: seed)

        def decode(source_ids, prefix, ban_mask):
            shape = tf.stack([tf.shape(source_ids)[0], self._inputs.decode_length])
            noise = tf.random.stateless_uniform(shape, tf.stack([seed, 0]))
            return self._searches.sample(source_ids, noise, temperature, top_k, top_p, prefix, ban_mask)

        return self._run(sentences, decode, controls, banned_ids)

    def _run(self, sentences, decode, controls, banned_ids, beams=None):
        """`{"translations", "scores", "finished"}` of `sentences` by `decode(source_ids, prefix, ban_mask)`.

        `decode` returns a `SearchResult`. `controls` are a `Controls` of
        `(batch,)` tensors ("" the default: `Controls.filled`); the banned
        ids `(n,)` reach the search as its `ban_mask` (`rules.ids_mask`).
        Each output is `(batch,)`, or `(batch, beams)` when `beams` is given.
        """
        batch = tf.shape(sentences)[0]
        shape = [0] if beams is None else [0, beams]

        def run():
            source_ids, prefix = self.search_inputs(sentences, controls)
            ids, scores, finished = decode(source_ids, prefix, self.ban_mask(banned_ids))
            return _status(self.detokenize(ids[:batch]), scores[:batch], finished[:batch])

        def empty():
            return _status(tf.zeros(shape, tf.string), tf.zeros(shape), tf.zeros(shape, tf.bool))

        return tf.cond(batch > 0, run, empty)


def check_export_destination(path, overwrite):
    """Refuses `path` unless it is new, empty, or (with `overwrite`) an export of this package."""
    if destinations.check_destination(path, destinations.EXPORT) == "ours" and not overwrite:
        raise destinations.DestinationInUseError(path, "an export", ["overwrite"])


def _status(translations, scores, finished):
    return {"translations": translations, "scores": scores, "finished": finished}


def _sampling_asserts(temperature, top_k, top_p):
    """Graph-side checks of `sample`'s numbers (for SavedModel callers that skip the Python ones)."""

    def check(condition, message, value):
        return tf.debugging.Assert(condition, [message, value])

    return [
        check(
            tf.math.is_finite(temperature) & (temperature >= 0),
            "`temperature` must be a finite number >= 0 (0 = greedy). Received: temperature=",
            temperature,
        ),
        check(top_k >= 0, "`top_k` must be an int >= 0 (0 = off). Received: top_k=", top_k),
        check((top_p > 0) & (top_p <= 1), "`top_p` must be in (0, 1] (1 = off). Received: top_p=", top_p),
    ]
