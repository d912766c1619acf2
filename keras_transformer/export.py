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

Empty or whitespace-only inputs translate to an empty string; sources longer
than `max_source_length` tokens are truncated (`source_lengths` tells which),
so one long sentence never fails a batch.
"""

import pathlib

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops for loading)

from keras_transformer import decoding, destinations, manifest, run_dir

SOURCE_BUCKET = 16  # sources are padded to a multiple of this (few XLA programs)


class Translator(tf.Module):
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
        sentences: string tensor `(batch,)`.

    Returns:
        string tensor `(batch,)`, the translations.

    Example:

    >>> translator = Translator(model, tokenizer, beam_size=4)
    >>> translator(tf.constant(["Ein Hund läuft."])).numpy()
    array([b'A dog runs.'], dtype=object)
    >>> translator.save("saved_models/demo")
    """

    def __init__(self, model, source_tokenizer, target_tokenizer=None, *, beam_size=4,
                 alpha=0.6, max_length=None, max_source_length=None, add_source_end=False,
                 jit_compile=True, name=None):
        super().__init__(name=name)
        first = decoding.ensemble_members(model)[0]  # the members share vocabularies and lengths
        model_max = first.get_layer("encoder_embedding").max_length
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
        _check_vocab("source_tokenizer", self.source_tokenizer,
                     first.get_layer("encoder_embedding").vocab_size)
        _check_vocab("target_tokenizer", self.target_tokenizer, first.outputs[0].shape[-1])
        self._source_limit = max_source_length - int(add_source_end)
        self._add_source_end = add_source_end
        self._decode_length = decoding.resolve_max_length(model, max_length)
        settings = dict(max_length=self._decode_length)
        self._greedy = decoding.compile_decoder(model, "greedy", jit_compile, **settings)
        self._beam = (self._greedy if beam_size == 1 else decoding.compile_decoder(
            model, "beam", jit_compile, beam_size=beam_size, alpha=alpha, **settings))

        def sample(source_ids, noise, temperature, top_k, top_p):
            return decoding.sample_decode(model, source_ids, temperature, top_k, top_p,
                                          noise=noise, **settings)

        self._sample = tf.function(sample, jit_compile=jit_compile, reduce_retracing=True)
        # Read back by the commands, also after `tf.saved_model.load`.
        self.beam_size = tf.Variable(beam_size, trainable=False, name="beam_size")
        self.max_source_length = tf.Variable(max_source_length, trainable=False,
                                             name="max_source_length")

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def __call__(self, sentences):
        """Beam search (greedy when `beam_size=1`): strings `(batch,)` -> strings."""
        return self._translate(sentences, self._beam)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def greedy(self, sentences):
        """Greedy decoding: strings `(batch,)` -> strings."""
        return self._translate(sentences, self._greedy)

    @tf.function(input_signature=[
        tf.TensorSpec([None], tf.string), tf.TensorSpec([], tf.float32),
        tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.int64),
    ])
    def sample(self, sentences, temperature, top_k, top_p, seed):
        """Sampling: `temperature` (0 = greedy), `top_k` (0 = off), `top_p` (1 = off), `seed` (-1 = random)."""
        seed = tf.cond(seed < 0, lambda: tf.random.uniform([], 0, 2**62, tf.int64), lambda: seed)

        def decode(source_ids):
            shape = tf.stack([tf.shape(source_ids)[0], self._decode_length])
            noise = tf.random.stateless_uniform(shape, tf.stack([seed, 0]))
            return self._sample(source_ids, noise, temperature, top_k, top_p)

        return self._translate(sentences, decode)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def source_lengths(self, sentences):
        """Source tokens per sentence before truncation (END included if added)."""
        ids = self.source_tokenizer.tokenize(tf.strings.strip(sentences))
        return tf.cast(ids.row_lengths(), tf.int32) + int(self._add_source_end)

    def _translate(self, sentences, decode):
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
            output = decode(source)[:batch]
            return self.target_tokenizer.detokenize(output)

        return tf.cond(batch > 0, run, lambda: tf.zeros([0], tf.string))

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

        run_dir.replace_dir_atomic(write, path)
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
        raise ValueError(f"{model} is {kind}: `model` must be a run directory "
                         "(config.json + model.keras + tokenizers/)")
    destinations.check_separate(model, output, what="the export")
    _check_export_destination(output, overwrite)
    translator = load(model, **options)
    translator.save(output, overwrite=overwrite)
    return translator


def _check_export_destination(path, overwrite):
    if destinations.check_destination(path, destinations.EXPORT) == "ours" and not overwrite:
        raise destinations.DestinationInUseError(path, "an export", ["overwrite"])


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
    width = tf.minimum((width + SOURCE_BUCKET - 1) // SOURCE_BUCKET * SOURCE_BUCKET,
                       tf.cast(max_source_length, width.dtype))
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
    loaded module, whose beam size was fixed at export: `beam_size` may only
    be `None`, 1 (its `greedy` signature) or the exported one. Anything else,
    or a corrupt model, is a one-line `ValueError`, never a TensorFlow trace.
    An export's files are checked against its `MANIFEST.sha256` first, when it
    has one (`manifest.verify_manifest`).

    Load only models you trust: a SavedModel is a program, and loading and
    calling it runs whatever graph it holds.

    Both kinds answer `translator(strings)`, `.greedy(strings)`,
    `.sample(strings, temperature, top_k, top_p, seed)`, `.source_lengths`,
    `.beam_size` and `.max_source_length`.

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
            raise ValueError(f"{path} is a SavedModel but not a Translator export "
                             "(`keras-transformer export` writes those)")
        if alpha is not None or max_length is not None:
            raise ValueError(f"{path} is a SavedModel: its length penalty and max length were fixed "
                             "at export; export again from the run directory to change them")
        exported = int(translator.beam_size.numpy())
        if beam_size not in (None, 1, exported):
            raise ValueError(
                f"{path} was exported with beam_size={exported}: use --beam 1 (greedy) or "
                f"--beam {exported}, or export again from the run directory. Received: beam_size={beam_size}"
            )
        return translator
    raise ValueError(
        f"{path} is not a model: expected a training run directory (config.json + model.keras) "
        "or an exported SavedModel (saved_model.pb)"
    )


def _load_run_dir(path, beam_size, alpha, max_length, jit_compile):
    import keras

    from keras_transformer.tokenizers import SubwordTokenizer

    config = run_dir.read_config(path)
    models = [_guarded(model_path, "model", lambda p=model_path: keras.saving.load_model(p, compile=False))
              for model_path in run_dir.model_paths(path)]
    model = models[0] if len(models) == 1 else models  # a list: an ensemble
    source = _guarded(path / run_dir.SOURCE_TOKENIZER, "tokenizer",
                      lambda: SubwordTokenizer.load(path / run_dir.SOURCE_TOKENIZER))
    target_path = path / run_dir.TARGET_TOKENIZER
    target = (_guarded(target_path, "tokenizer", lambda: SubwordTokenizer.load(target_path))
              if target_path.is_dir() else source)
    defaults = config.get("decoding") or {}  # written by `keras-transformer train`
    beam_size = defaults.get("beam_size", 4) if beam_size is None else beam_size
    alpha = defaults.get("length_penalty", 0.6) if alpha is None else alpha
    if max_length is None and defaults.get("max_length"):
        max_length = min(int(defaults["max_length"]), decoding.resolve_max_length(model))
    return _guarded(path, "run", lambda: Translator(
        model, source, target, beam_size=beam_size, alpha=alpha, max_length=max_length,
        add_source_end=bool(_setting(config, "add_source_end", False)), jit_compile=jit_compile,
    ), passthrough=(ValueError,))


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
        message = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        raise ValueError(f"{path}: could not load the {what} (corrupt or incompatible?): {message}") from None
