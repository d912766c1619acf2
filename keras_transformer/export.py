"""`Translator`: strings in, strings out, as a `tf.Module` that saves to a SavedModel.

The module holds the source and target tokenizers, the Keras model and the
cached decoder (`keras_transformer.decoding`). Tokenization runs in
TensorFlow (tensorflow-text ops); the decode runs as one XLA program per
(batch bucket, source bucket) shape. A SavedModel written by
`Translator.save` needs no project code, only `import tensorflow_text`
before loading (it registers the SentencePiece ops)::

    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

    translator = tf.saved_model.load("saved_models/multi30k-en-de-export")
    translator(tf.constant(["A man is riding a bike."]))  # beam search
    translator.greedy(tf.constant(["A dog runs."]))
    translator.sample(tf.constant(["Hi"]), 0.8, 0, 0.9, -1)  # temperature, top_k, top_p, seed
    translator.call_with_status(tf.constant(["A dog runs."]))  # {"translations", "finished"}

Empty or whitespace-only inputs translate to an empty string; sources longer
than `max_source_length` tokens are truncated (`source_lengths` tells which),
so one long sentence never fails a batch. A translation that reaches the
maximum output length before END is cut off: the `*_with_status` functions
return `finished=False` for it, and the Python side (`Translator`, `load`)
warns with `keras_transformer.decoding.TruncatedOutputWarning`.

Inputs are checked in Python before any TensorFlow call, by the `Translator`
and by what `load` returns (for a SavedModel, a `LoadedTranslator` around the
loaded module). `sentences` must be a 1-D string tensor or a list of str
without NUL bytes (the tokenizer would turn a NUL into an unknown token, so it
is rejected rather than translated into garbage), and `sample`'s
`temperature`, `top_k`, `top_p` and `seed` must be in range; anything else is
a one-line `ValueError` naming the argument. The check must come first: a
`tf.function` whose input signature rejects a call keeps its lock (a
TensorFlow bug, TF 2.21), so every later call from another thread would hang.
Callers of `tf.saved_model.load` itself get no such check: they must pass a
1-D `tf.string` tensor (and `sample` scalars of float32, int32, float32 and
int64). The SavedModel's `sample` checks its numbers itself: a NaN, infinite
or negative `temperature`, a negative `top_k` or a `top_p` outside (0, 1] is
an `InvalidArgumentError` that names it (they are not clamped).
"""

import math
import pathlib
import warnings

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops for loading)

from keras_transformer import atomic, decoding, destinations, manifest, run_dir
from keras_transformer.errors import ArgumentError, first_line

SOURCE_BUCKET = 16  # sources are padded to a multiple of this (few XLA programs)
_STRINGS = tf.TensorSpec([None], tf.string)
_SAMPLE_SPECS = [
    _STRINGS,
    tf.TensorSpec([], tf.float32),
    tf.TensorSpec([], tf.int32),
    tf.TensorSpec([], tf.float32),
    tf.TensorSpec([], tf.int64),
]
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
}


class _CheckedMethods:
    """The Python side of a translator: inputs checked before TensorFlow, cut-off outputs warned about.

    A subclass gives `_function(name)`: the function of that name in the
    SavedModel interface (`_EXPORTED`), or None where it lacks it.
    """

    def __call__(self, sentences):
        """Beam search (greedy when `beam_size=1`): strings `(batch,)` -> strings."""
        return self._translate("__call__", _sentences(sentences))

    def greedy(self, sentences):
        """Greedy decoding: strings `(batch,)` -> strings."""
        return self._translate("greedy", _sentences(sentences))

    def sample(self, sentences, temperature, top_k, top_p, seed):
        """Sampling: `temperature` (0 = greedy), `top_k` (0 = off), `top_p` (1 = off), `seed` (-1 = random)."""
        return self._translate("sample", _sentences(sentences), *_sampling(temperature, top_k, top_p, seed))

    def source_lengths(self, sentences):
        """Source tokens per sentence before truncation (END included if added)."""
        return self._function("source_lengths")(_sentences(sentences))

    def call_with_status(self, sentences):
        """`__call__` without the warning: `{"translations": strings, "finished": bool (batch,)}`.

        `finished` is False where the translation was cut off at the maximum
        output length before END (None from a SavedModel exported before
        this flag existed).
        """
        return self._with_status("__call__", _sentences(sentences))

    def greedy_with_status(self, sentences):
        """`greedy` without the warning; see `call_with_status`."""
        return self._with_status("greedy", _sentences(sentences))

    def sample_with_status(self, sentences, temperature, top_k, top_p, seed):
        """`sample` without the warning; see `call_with_status`."""
        return self._with_status("sample", _sentences(sentences), *_sampling(temperature, top_k, top_p, seed))

    def _with_status(self, name, *args):
        function = self._function(("call" if name == "__call__" else name) + "_with_status")
        if function is None:  # a SavedModel exported before the flag
            return {"translations": self._function(name)(*args), "finished": None}
        return function(*args)

    def _translate(self, name, *args):
        result = self._with_status(name, *args)
        _warn_cut_off(result["finished"])
        return result["translations"]


class Translator(_CheckedMethods, tf.Module):
    """A Transformer with its tokenizers and decoder: `translator(strings) -> strings`.

    Args:
        model: a model from `build_transformer`, or a list of them: an
            ensemble, which decodes with the mean of their distributions.
        source_tokenizer: a `SubwordTokenizer` (or any `tf.Module` with
            `tokenize(strings) -> RaggedTensor` and `detokenize(ids)`).
        target_tokenizer: the target tokenizer; defaults to `source_tokenizer`.
        beam_size: beams of `__call__` (1 = greedy).
        alpha: GNMT length-penalty exponent of the beam search.
        max_length: tokens generated at most; default the model's `max_length`.
        max_source_length: source tokens kept (longer ones are truncated);
            default the model's `max_length`.
        add_source_end: append END to the source ids (as the training data did).
        jit_compile: compile the decode with XLA.
        name: module name.

    Call arguments:
        sentences: string tensor `(batch,)`, or a list of str. Checked before
            any TensorFlow call: anything else, or a sentence with a NUL
            byte, is a `ValueError` naming it.

    Returns:
        string tensor `(batch,)`, the translations. A translation cut off at
        `max_length` before END raises a `TruncatedOutputWarning`
        (`call_with_status` returns the flags instead).

    Example:

    >>> translator = Translator(model, tokenizer, beam_size=4)
    >>> translator(tf.constant(["Ein Hund läuft."])).numpy()
    array([b'A dog runs.'], dtype=object)
    >>> translator.save("saved_models/demo")
    """

    def __init__(
        self,
        model,
        source_tokenizer,
        target_tokenizer=None,
        *,
        beam_size=4,
        alpha=0.6,
        max_length=None,
        max_source_length=None,
        add_source_end=False,
        jit_compile=True,
        name=None,
    ):
        super().__init__(name=name)
        first = decoding.ensemble_members(model)[0]  # the members share vocabularies and lengths
        model_max = first.encoder_embedding.max_length
        max_source_length = model_max if max_source_length is None else max_source_length
        if not isinstance(max_source_length, int) or not 1 <= max_source_length <= model_max:
            raise ValueError(
                f"`max_source_length` must be an int in [1, {model_max}]. "
                f"Received: max_source_length={max_source_length!r}"
            )
        if not isinstance(beam_size, int) or beam_size < 1:
            raise ValueError(f"`beam_size` must be a positive int. Received: beam_size={beam_size!r}")
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer or source_tokenizer
        _check_vocab("source_tokenizer", self.source_tokenizer, first.source_vocab_size)
        _check_vocab("target_tokenizer", self.target_tokenizer, first.outputs[0].shape[-1])
        self._source_limit = max_source_length - int(add_source_end)
        self._add_source_end = add_source_end
        self._decode_length = decoding.resolve_max_length(model, max_length)
        settings = dict(max_length=self._decode_length)
        self._greedy = decoding.compile_decoder(model, "greedy", jit_compile, return_finished=True, **settings)
        self._beam = (
            self._greedy
            if beam_size == 1
            else decoding.compile_decoder(
                model, "beam", jit_compile, return_finished=True, beam_size=beam_size, alpha=alpha, **settings
            )
        )

        def sample(source_ids, noise, temperature, top_k, top_p):
            return decoding.sample_decode(
                model, source_ids, temperature, top_k, top_p, noise=noise, return_finished=True, **settings
            )

        self._sample = tf.function(sample, jit_compile=jit_compile, reduce_retracing=True)
        # Read back by the commands, also after `tf.saved_model.load`.
        self.beam_size = tf.Variable(beam_size, trainable=False, name="beam_size")
        self.max_source_length = tf.Variable(max_source_length, trainable=False, name="max_source_length")

    def _function(self, name):
        return getattr(self, _EXPORTED[name])

    def _trackable_children(self, *args, **kwargs):
        """The SavedModel holds the `_tf_*` functions under their public names (`_EXPORTED`)."""
        children = super()._trackable_children(*args, **kwargs)
        for public, private in _EXPORTED.items():
            if private in children:
                children[public] = children.pop(private)
        return children

    # The SavedModel's functions. The input signatures check nothing in
    # Python's time: the methods of `_CheckedMethods` do, before calling these.

    @tf.function(input_signature=[_STRINGS])
    def _tf_call(self, sentences):
        return self._run(sentences, self._beam)[0]

    @tf.function(input_signature=[_STRINGS])
    def _tf_greedy(self, sentences):
        return self._run(sentences, self._greedy)[0]

    @tf.function(input_signature=_SAMPLE_SPECS)
    def _tf_sample(self, sentences, temperature, top_k, top_p, seed):
        return self._run_sample(sentences, temperature, top_k, top_p, seed)[0]

    @tf.function(input_signature=[_STRINGS])
    def _tf_source_lengths(self, sentences):
        ids = self.source_tokenizer.tokenize(tf.strings.strip(sentences))
        return tf.cast(ids.row_lengths(), tf.int32) + int(self._add_source_end)

    @tf.function(input_signature=[_STRINGS])
    def _tf_call_with_status(self, sentences):
        return _status(*self._run(sentences, self._beam))

    @tf.function(input_signature=[_STRINGS])
    def _tf_greedy_with_status(self, sentences):
        return _status(*self._run(sentences, self._greedy))

    @tf.function(input_signature=_SAMPLE_SPECS)
    def _tf_sample_with_status(self, sentences, temperature, top_k, top_p, seed):
        return _status(*self._run_sample(sentences, temperature, top_k, top_p, seed))

    def _run_sample(self, sentences, temperature, top_k, top_p, seed):
        with tf.control_dependencies(_sampling_asserts(temperature, top_k, top_p)):
            seed = tf.cond(seed < 0, lambda: tf.random.uniform([], 0, 2**62, tf.int64), lambda: seed)

        def decode(source_ids):
            shape = tf.stack([tf.shape(source_ids)[0], self._decode_length])
            noise = tf.random.stateless_uniform(shape, tf.stack([seed, 0]))
            return self._sample(source_ids, noise, temperature, top_k, top_p)

        return self._run(sentences, decode)

    def _run(self, sentences, decode):
        """`(translations, finished)` of `sentences` with `decode(source_ids) -> (ids, finished)`."""
        batch = tf.shape(sentences)[0]

        def run():
            ids = self.source_tokenizer.tokenize(tf.strings.strip(sentences))
            ids = tf.cast(ids[:, : self._source_limit], tf.int32)
            empty = ids.row_lengths() == 0
            if self._add_source_end:
                ends = tf.RaggedTensor.from_tensor(tf.fill([batch, 1], decoding.END_ID))
                ids = tf.concat([ids, ends], axis=1)
            source = _pad_to_buckets(ids, self.max_source_length)
            source = tf.where(tf.pad(empty, [[0, tf.shape(source)[0] - batch]])[:, None], 0, source)
            output, finished = decode(source)
            return self.target_tokenizer.detokenize(output[:batch]), finished[:batch]

        return tf.cond(batch > 0, run, lambda: (tf.zeros([0], tf.string), tf.zeros([0], tf.bool)))

    def save(self, path, overwrite=True):
        """Writes this module as a SavedModel at `path`, atomically, with a manifest of sha256 sums.

        `path` may be new, an empty folder, or (when `overwrite` is true) an
        earlier export of this package; anything else is refused before any
        work with `destinations.UnsafeDestinationError`. The new export is
        written beside `path` and swapped in only when complete: a failed or
        interrupted save leaves a previous export intact.
        """
        _check_export_destination(path, overwrite)

        def write(tmp):
            tf.saved_model.save(self, tmp)
            manifest.write_manifest(tmp)

        atomic.replace_dir(write, path)
        return str(path)


def export_run(model, output, *, overwrite=False, **options):
    """Exports the training run `model` (a run directory) as a SavedModel at `output`.

    Every check runs before the model loads: `model` must be a run directory,
    and `output` must be new, an empty folder, or an export of this package
    (replaced only when `overwrite` is true) that neither holds nor lies inside
    `model`. `options` go to `load` (`beam_size`, `alpha`, `max_length`,
    `jit_compile`).

    Returns:
        The `Translator` that was saved.

    Example:

    >>> export_run("saved_models/chatbot-ko", "saved_models/chatbot-ko-export", beam_size=4)
    """
    if not run_dir.is_run_dir(model):
        kind = "a SavedModel already" if run_dir.is_saved_model(model) else "not a training run"
        raise ValueError(
            f"{model} is {kind}: `model` must be a run directory (config.json + model.keras + tokenizers/)"
        )
    destinations.check_separate(model, output, what="the export")
    _check_export_destination(output, overwrite)
    translator = load(model, **options)
    translator.save(output, overwrite=overwrite)
    return translator


def _check_export_destination(path, overwrite):
    if destinations.check_destination(path, destinations.EXPORT) == "ours" and not overwrite:
        raise destinations.DestinationInUseError(path, "an export", ["overwrite"])


class LoadedTranslator(_CheckedMethods):
    """A `Translator` SavedModel loaded by `tf.saved_model.load`, which checks its inputs first.

    `load` returns one for a SavedModel. It answers what a `Translator`
    answers (`translator(strings)`, `greedy`, `sample`, `source_lengths`,
    the `*_with_status` methods, `beam_size`, `max_source_length`),
    checking the inputs in Python and warning about cut-off translations,
    then calls the loaded module's function; any other attribute is the
    loaded module's (`module`).

    Args:
        module: what `tf.saved_model.load` returned for a `Translator` export.

    Example:

    >>> translator = LoadedTranslator(tf.saved_model.load("saved_models/demo"))
    >>> translator(["A dog runs."])
    >>> translator(tf.constant([["A dog runs."]]))  # ValueError: `sentences` must be a 1-D ...
    """

    def __init__(self, module):
        self.module = module

    @property
    def beam_size(self):
        return self.module.beam_size

    @property
    def max_source_length(self):
        return self.module.max_source_length

    def __getattr__(self, name):  # only for attributes not found above: the module's
        if name == "module":
            raise AttributeError(name)
        return getattr(self.module, name)

    def _function(self, name):
        return self.module if name == "__call__" else getattr(self.module, name, None)


def _status(translations, finished):
    return {"translations": translations, "finished": finished}


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


def _sentences(sentences):
    """`sentences` as a 1-D `tf.string` tensor, checked in Python before any TensorFlow call.

    Takes a 1-D string tensor, a list (or tuple, or 1-D numpy array) of str or
    bytes. Anything else, or a sentence with a NUL byte, is a one-line
    `ValueError` naming the argument.
    """
    if isinstance(sentences, np.ndarray) and sentences.ndim == 1 and sentences.dtype.kind in "USO":
        sentences = sentences.tolist()
    if isinstance(sentences, (list, tuple)):
        for index, sentence in enumerate(sentences):
            if not isinstance(sentence, (str, bytes)):
                kind = type(sentences).__name__
                _reject_sentences(f"a {kind} holding {_describe(sentence)} at index {index}")
            if isinstance(sentence, str):
                try:
                    sentence.encode("utf-8")
                except UnicodeEncodeError:
                    raise ValueError(
                        f"`sentences[{index}]` is not valid UTF-8 text. Received: sentences[{index}]={_short(sentence)}"
                    ) from None
        _check_no_nul(sentences)
        return tf.constant(list(sentences), tf.string) if sentences else tf.zeros([0], tf.string)
    if (
        not tf.is_tensor(sentences)
        or isinstance(sentences, (tf.RaggedTensor, tf.SparseTensor))
        or sentences.dtype != tf.string
        or sentences.shape.rank != 1
    ):
        _reject_sentences(_describe(sentences))
    if tf.executing_eagerly():
        _check_no_nul(sentences.numpy())
    return sentences


def _reject_sentences(received):
    raise ValueError(f"`sentences` must be a 1-D string tensor or a list of str. Received: {received}")


def _check_no_nul(sentences):
    for index, sentence in enumerate(sentences):
        if ("\0" if isinstance(sentence, str) else b"\0") in sentence:
            raise ValueError(
                f"`sentences[{index}]` contains a NUL byte, which the tokenizer would turn into an "
                f"unknown token; remove it. Received: sentences[{index}]={_short(sentence)}"
            )


def _describe(value):
    """A one-line description of a rejected input: its kind, dtype and shape, or a short repr."""
    if isinstance(value, (tf.RaggedTensor, tf.SparseTensor)):
        return f"a {type(value).__name__} of dtype {value.dtype.name}, shape {value.shape}"
    if tf.is_tensor(value) or isinstance(value, np.ndarray):
        dtype = value.dtype.name if tf.is_tensor(value) else str(value.dtype)
        kind = "tensor" if tf.is_tensor(value) else "numpy array"
        rank = value.shape.rank if tf.is_tensor(value) else value.ndim
        if rank is None:
            return f"a {dtype} {kind} of unknown rank"
        if rank == 0:
            return f"a scalar {dtype} {kind}"
        return f"a {rank}-D {dtype} {kind} of shape {tuple(value.shape)}"
    if isinstance(value, str):
        return f"a str {_short(value)} (wrap a single sentence in a list)"
    return f"{type(value).__name__} {_short(value)}"


def _short(value, limit=60):
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _sampling(temperature, top_k, top_p, seed):
    """`sample`'s numbers as the SavedModel's scalar tensors, checked in Python first."""
    return (
        _number(
            "temperature",
            temperature,
            tf.float32,
            "a finite number >= 0 (0 = greedy)",
            lambda t: math.isfinite(t) and t >= 0,
        ),
        _number("top_k", top_k, tf.int32, "an int >= 0 (0 = off)", lambda k: 0 <= k < 2**31),
        _number("top_p", top_p, tf.float32, "a number in (0, 1] (1 = off)", lambda p: 0 < p <= 1),
        _number("seed", seed, tf.int64, "an int (-1 = random)", lambda s: -(2**63) <= s < 2**63),
    )


def _number(name, value, dtype, expected, valid):
    """`value` (a number, or a scalar tensor or array) as a scalar `dtype` tensor.

    A value of the wrong kind, or one that `valid` refuses, is a `ValueError` naming `name`.
    """
    received = value
    if tf.is_tensor(value) and not tf.executing_eagerly():  # symbolic: its value is checked in the graph
        if value.shape.rank == 0 and (value.dtype.is_integer or (value.dtype.is_floating and dtype.is_floating)):
            return tf.cast(value, dtype)
        value = None
    elif tf.is_tensor(value) or isinstance(value, (np.ndarray, np.generic)):
        value = value.numpy() if tf.is_tensor(value) else value
        value = value.item() if np.ndim(value) == 0 else None
    integer = isinstance(value, int) and not isinstance(value, bool)
    number = integer or (isinstance(value, float) and dtype.is_floating)
    if not number or not valid(value):
        raise ValueError(f"`{name}` must be {expected}. Received: {name}={_short(received)}")
    return tf.constant(value, dtype)


def _warn_cut_off(finished):
    """A `TruncatedOutputWarning` naming the sentences whose translation `finished` flags as cut off."""
    if finished is None or not tf.executing_eagerly():
        return
    cut = np.flatnonzero(~np.asarray(finished))
    if cut.size:
        names = ", ".join(f"sentences[{i}]" for i in cut[:5]) + (", ..." if cut.size > 5 else "")
        warnings.warn(
            f"{cut.size} of {len(finished)} translations reached the maximum output length before END "
            f"and are cut off: {names}",
            decoding.TruncatedOutputWarning,
            stacklevel=4,
        )


def _check_vocab(name, tokenizer, model_vocab):
    vocab = getattr(tokenizer, "vocab_size", model_vocab)
    if vocab != model_vocab:
        raise ValueError(
            f"`{name}` does not fit the model: its vocab_size is {vocab}, the model's is "
            f"{model_vocab}. Received: {name}={tokenizer!r}"
        )


def _pad_to_buckets(ids, max_source_length):
    """Ragged ids -> dense `(batch', width)`: batch to a power of two, width to a multiple of 16."""
    batch = tf.shape(ids.row_lengths())[0]
    width = tf.reduce_max(tf.concat([ids.row_lengths(), [1]], 0))
    width = tf.minimum(
        (width + SOURCE_BUCKET - 1) // SOURCE_BUCKET * SOURCE_BUCKET, tf.cast(max_source_length, width.dtype)
    )
    rows = tf.cast(2.0 ** tf.round(tf.math.log(tf.cast(batch, tf.float32)) / tf.math.log(2.0)), tf.int32)
    rows = tf.where(rows < batch, 2 * rows, rows)
    dense = ids.to_tensor(0)
    pad = [[0, rows - batch], [0, tf.cast(width, tf.int32) - tf.shape(dense)[1]]]
    return tf.pad(dense, pad)


def load(path, *, beam_size=None, alpha=None, max_length=None, jit_compile=True):
    """A translator from a training run directory or an exported SavedModel.

    A run directory (`config.json` + `model.keras` + `tokenizers/`, or an
    ensemble's `config.json` + `tokenizers/` + members) gives a
    live `Translator` built with the given decoding options (defaults from
    the config's `decoding` section: `beam_size`, `length_penalty`,
    `max_length`; else beam 4 and alpha 0.6). A SavedModel gives the
    loaded module in a `LoadedTranslator`, whose beam size was fixed at
    export: `beam_size` may only be `None`, 1 (its `greedy` signature) or
    the exported one. Anything else, or a corrupt model, is a one-line
    `ValueError`, never a TensorFlow trace. An export's files are checked
    against its `MANIFEST.sha256` first, when it has one
    (`manifest.verify_manifest`).

    Load only models you trust: a SavedModel is a program, and loading and
    calling it runs whatever graph it holds.

    Both kinds answer `translator(strings)`, `.greedy(strings)`,
    `.sample(strings, temperature, top_k, top_p, seed)`, `.source_lengths`,
    the `*_with_status` methods, `.beam_size` and `.max_source_length`, and
    both check their inputs before any TensorFlow call (a bad input is a
    `ValueError` naming the argument, and never blocks later calls) and warn
    with `TruncatedOutputWarning` about translations cut off before END.

    Example:

    >>> translator = load("saved_models/multi30k-en-de", beam_size=4)
    >>> translator(tf.constant(["A dog runs."]))
    """
    path = pathlib.Path(path)
    if not path.exists():
        raise ValueError(f"{path} does not exist: pass a training run directory or a SavedModel")
    if run_dir.is_run_dir(path):
        return _load_run_dir(path, beam_size, alpha, max_length, jit_compile)
    if run_dir.is_saved_model(path):
        manifest.verify_manifest(path)
        translator = _guarded(path, "SavedModel", lambda: tf.saved_model.load(str(path)))
        if not hasattr(translator, "greedy") or not hasattr(translator, "beam_size"):
            raise ValueError(
                f"{path} is a SavedModel but not a Translator export (`keras-transformer export` writes those)"
            )
        if alpha is not None or max_length is not None:
            raise ValueError(
                f"{path} is a SavedModel: its length penalty and max length were fixed "
                "at export; export again from the run directory to change them"
            )
        exported = int(translator.beam_size.numpy())
        if beam_size not in (None, 1, exported):
            raise ArgumentError(
                f"{path} was exported with beam_size={exported}: use {{beam_size=1}} (greedy) or "
                f"{{beam_size={exported}}}, or export again from the run directory. Received: beam_size={beam_size}"
            )
        return LoadedTranslator(translator)
    raise ValueError(
        f"{path} is not a model: expected a training run directory (config.json + model.keras) "
        "or an exported SavedModel (saved_model.pb)"
    )


def _load_run_dir(path, beam_size, alpha, max_length, jit_compile):
    import keras

    from keras_transformer.tokenizers import SubwordTokenizer

    config = run_dir.read_config(path)
    models = [
        _guarded(model_path, "model", lambda p=model_path: keras.saving.load_model(p, compile=False))
        for model_path in run_dir.model_paths(path)
    ]
    model = models[0] if len(models) == 1 else models  # a list: an ensemble
    source = _guarded(
        path / run_dir.SOURCE_TOKENIZER, "tokenizer", lambda: SubwordTokenizer.load(path / run_dir.SOURCE_TOKENIZER)
    )
    target_path = path / run_dir.TARGET_TOKENIZER
    target = (
        _guarded(target_path, "tokenizer", lambda: SubwordTokenizer.load(target_path))
        if target_path.is_dir()
        else source
    )
    defaults = config.get("decoding") or {}  # written by `keras-transformer train`
    beam_size = defaults.get("beam_size", 4) if beam_size is None else beam_size
    alpha = defaults.get("length_penalty", 0.6) if alpha is None else alpha
    if max_length is None and defaults.get("max_length"):
        max_length = min(int(defaults["max_length"]), decoding.resolve_max_length(model))
    return _guarded(
        path,
        "run",
        lambda: Translator(
            model,
            source,
            target,
            beam_size=beam_size,
            alpha=alpha,
            max_length=max_length,
            add_source_end=bool(_setting(config, "add_source_end", False)),
            jit_compile=jit_compile,
        ),
        passthrough=(ValueError,),
    )


def _setting(config, key, default):
    """`config[key]`, or `config[section][key]` for a nested section, or `default`."""
    if key in config:
        return config[key]
    for value in config.values():
        if isinstance(value, dict) and key in value:
            return value[key]
    return default


def _guarded(path, what, load_fn, passthrough=()):
    """Runs `load_fn`, turning any failure into a one-line `ValueError` naming `path`."""
    try:
        return load_fn()
    except passthrough:
        raise
    except Exception as error:  # noqa: BLE001  (TF, Keras, zip, JSON... all mean "corrupt")
        raise ValueError(f"{path}: could not load the {what} (corrupt or incompatible?): {first_line(error)}") from None
