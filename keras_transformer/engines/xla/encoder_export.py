"""An encoder-only run (BERT) as a SavedModel that takes strings: `classify`, `fill_mask`, `embed` signatures.

`export_encoder(run, output)` writes the run's model and its tokenizer (as
TensorFlow ops: `tokenizers.wordpiece_graph`) into one SavedModel whose
signatures answer as `engines.xla.encoder.Encoder` does, each taking `texts`,
a 1-D string tensor, and only those the run's head can answer:

- `classify` (a classifier run): `labels` `(batch, classes)`, every label
  of the run, highest score first, and their `scores` (softmax, or the
  sigmoid of a multi-label or one-label model, or a regression's raw
  values); `classify_pairs` takes `texts` and `text_pairs` ("" for none),
  read as BERT reads two segments;
- `fill_mask` (a masked-LM run): at each mask token of each text, the
  `top_k` candidates (5): `scores`, `tokens` (ids), `token_strs` and
  `sequences` (the text with the mask filled), each `(batch, masks, 5)`,
  `masks` the most masks of a text in the batch (a text with fewer has
  scores 0, ids -1 and empty strings there), and `mask_counts` `(batch,)`;
- `embed` (every run): `embeddings` `(batch, width)` float32, pooled and
  normalized as the run records (`pretrained.sentence_embedding`; texts cut
  to its `max_length` tokens).

`serving_default` is the head's own: `classify`, `fill_mask`, or `embed`.
A text longer than the model's positions given to `classify` or
`fill_mask`, or a text without a mask given to `fill_mask`, fails the call
with an `InvalidArgumentError` that says so (`keras-transformer serve`: a
400). A tokenizer that has no TensorFlow form (`wordpiece_graph.graph_form`)
is a one-line `ValueError`: serve the run directory's `Encoder` in Python
instead.

Example:

>>> export_encoder("saved_models/bert-classifier", "saved_models/bert-classifier-export")  # doctest: +SKIP
>>> module = tf.saved_model.load("saved_models/bert-classifier-export")  # doctest: +SKIP
>>> module.signatures["classify"](texts=tf.constant(["I loved it."]))["labels"]  # doctest: +SKIP
"""

import tensorflow as tf

from keras_transformer.engines.xla.encoder import open_encoder
from keras_transformer.engines.xla.translator_graph import check_export_destination
from keras_transformer.files import atomic, destinations, manifest

TEXTS = tf.TensorSpec([None], tf.string, name="texts")
PAIRS = tf.TensorSpec([None], tf.string, name="text_pairs")
TOP_K = 5  # fill_mask's candidates at each mask, as the fill-mask pipeline's default
SIGNATURES = {"classifier": ("classify", "classify_pairs", "embed"), "masked_lm": ("fill_mask", "embed")}


class EncoderModule(tf.Module):
    """An `Encoder`'s model and tokenizer as a `tf.Module` (what `export_encoder` saves; see the module)."""

    def __init__(self, encoder):
        from keras_transformer.tokenizers.wordpiece_graph import graph_form

        super().__init__(name="encoder")
        try:
            self.tokenizer = graph_form(encoder.tokenizer)
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(
                f"{encoder.name}: its tokenizer cannot run in TensorFlow ({error}), so a SavedModel cannot hold it: "
                "use the run directory instead (`keras-transformer classify`/`fill-mask`/`embed`, "
                "`keras-transformer serve --model RUN`)"
            ) from None
        self.model, self.head = encoder.model, encoder.head
        self._hidden = self.model.hidden_states_model()
        self.max_length = self.model.max_length
        self._pad, self._segments = self.model.config.pad_id, bool(self.model.config.segment_vocab_size)
        self._embedding = dict(encoder.embedding)
        if self.head == "classifier":
            classes = self.model.config.num_classes
            self.labels = tf.constant(encoder.labels or [f"LABEL_{index}" for index in range(classes)])
            self._problem_type = encoder.problem_type
        if self.head == "masked_lm":
            self._mask = int(encoder.tokenizer.mask_id)
            self.top_k = min(TOP_K, self.model.source_vocab_size)
        specs = {"classify_pairs": [TEXTS, PAIRS]}
        for name in self.signature_names:  # only those the head answers: the others would not trace
            setattr(self, name, tf.function(getattr(self, f"_{name}"), input_signature=specs.get(name, [TEXTS])))

    @property
    def signature_names(self):
        """The signatures the head answers; the first is also `serving_default`."""
        return SIGNATURES.get(self.head, ("embed",))

    def signatures(self):
        """`{name: concrete function}` for `tf.saved_model.save`, `serving_default` among them."""
        chosen = {name: getattr(self, name).get_concrete_function() for name in self.signature_names}
        return {"serving_default": chosen[self.signature_names[0]], **chosen}

    # -- the model -------------------------------------------------------------------------------

    def _inputs(self, ids, segments):
        tokens = tf.cast(ids.to_tensor(self._pad), tf.int32)
        inputs = {"token_ids": tokens}
        if self._segments:
            inputs["segment_ids"] = tf.cast(segments.to_tensor(0), tf.int32)
        return inputs

    def _checked_length(self, ids):
        longest = tf.reduce_max(tf.concat([ids.row_lengths(), [0]], 0))
        return tf.debugging.assert_less_equal(
            longest,
            tf.constant(self.max_length, tf.int64),
            message=f"a text is longer than the {self.max_length} tokens the model reads",
        )

    # -- classify ----------------------------------------------------------------------------------

    def _classify(self, texts):
        """Every label of each text, highest score first (see the module)."""
        return self._ranked(*self.tokenizer.encode(texts))

    def _classify_pairs(self, texts, text_pairs):
        """Every label of each pair of texts, highest score first (see the module)."""
        return self._ranked(*self.tokenizer.encode(texts, text_pairs))

    def _ranked(self, ids, segments):
        with tf.control_dependencies([self._checked_length(ids)]):
            logits = tf.cast(self.model(self._inputs(ids, segments), training=False), tf.float32)
        if self._problem_type == "regression":
            scores = logits
        elif self._problem_type == "multi_label_classification" or self.model.config.num_classes == 1:
            scores = tf.sigmoid(logits)
        else:
            scores = tf.nn.softmax(logits, axis=-1)
        order = tf.argsort(scores, axis=-1, direction="DESCENDING", stable=True)
        return {"labels": tf.gather(self.labels, order), "scores": tf.gather(scores, order, batch_dims=1)}

    # -- fill_mask ---------------------------------------------------------------------------------

    def _fill_mask(self, texts):
        """The `top_k` candidates at each mask of each text (see the module)."""
        ids, segments = self.tokenizer.encode(texts)
        is_mask = tf.equal(ids, self._mask)
        counts = tf.reduce_sum(tf.cast(is_mask, tf.int64), axis=1)
        has_mask = tf.debugging.assert_greater(
            tf.concat([counts, [1]], 0), tf.constant(0, tf.int64), message="a text holds no mask token"
        )
        with tf.control_dependencies([self._checked_length(ids), has_mask]):
            logits = self.model(self._inputs(ids, segments), training=False)
        dense = ids.to_tensor(self._pad)
        where = tf.where(tf.equal(dense, self._mask))  # (masks, 2): row, position, row-major
        probabilities = tf.nn.softmax(tf.cast(tf.gather_nd(logits, where), tf.float32), axis=-1)
        scores, tokens = tf.math.top_k(probabilities, k=self.top_k)  # (masks, k)
        tokens = tf.cast(tokens, tf.int64)
        rows = where[:, 0]
        filled = tf.repeat(tf.gather(dense, rows), self.top_k, axis=0)  # (masks * k, width)
        positions = tf.repeat(where[:, 1], self.top_k)
        columns = tf.range(tf.shape(dense, out_type=tf.int64)[1])
        filled = tf.where(tf.equal(columns[None, :], positions[:, None]), tf.reshape(tokens, [-1, 1]), filled)
        lengths = tf.repeat(tf.gather(ids.row_lengths(), rows), self.top_k)
        filled = tf.RaggedTensor.from_tensor(filled, lengths=lengths)
        single = tf.repeat(tf.equal(tf.gather(counts, rows), 1), self.top_k)
        sequences = tf.reshape(self.tokenizer.decode(filled, skip_special_tokens=single), [-1, self.top_k])
        flat_tokens = tf.RaggedTensor.from_row_lengths(tf.reshape(tokens, [-1]), tf.ones_like(lengths))
        token_strs = tf.reshape(self.tokenizer.decode(flat_tokens, skip_special_tokens=False), [-1, self.top_k])
        batch = ids.nrows()

        def per_text(values, default):
            return tf.RaggedTensor.from_value_rowids(values, rows, nrows=batch).to_tensor(default)

        return {
            "scores": per_text(scores, 0.0),
            "tokens": per_text(tokens, tf.constant(-1, tf.int64)),
            "token_strs": per_text(token_strs, ""),
            "sequences": per_text(sequences, ""),
            "mask_counts": counts,
        }

    # -- embed -----------------------------------------------------------------------------------

    def _embed(self, texts):
        """Each text's sentence embedding (see the module)."""
        settings = self._embedding
        if settings.get("lowercase"):
            texts = tf.strings.lower(texts, encoding="utf-8")
        ids, segments = self.tokenizer.encode(texts, max_pieces=max(0, int(settings["max_length"]) - 2))
        states = tf.cast(self._hidden(self._inputs(ids, segments), training=False), tf.float32)
        return {"embeddings": pool(states, ids.row_lengths(), settings["pooling"], settings["normalize"])}


def pool(states, lengths, modes, normalize=False):
    """`pooling.pool` in TensorFlow: `(texts, len(modes) * width)` of `states` `(texts, length, width)`."""
    lengths = tf.cast(lengths, tf.int32)
    real = tf.sequence_mask(lengths, tf.shape(states)[1])[..., None]  # (texts, length, 1)
    count = tf.cast(tf.maximum(lengths, 1), tf.float32)[:, None]
    vectors = []
    for mode in modes:
        if mode == "cls":
            vectors.append(states[:, 0])
        elif mode == "max":
            vectors.append(tf.reduce_max(tf.where(real, states, float("-inf")), axis=1))
        elif mode in ("mean", "mean_sqrt_len_tokens"):
            total = tf.reduce_sum(tf.where(real, states, 0.0), axis=1)
            vectors.append(total / (count if mode == "mean" else tf.sqrt(count)))
        elif mode == "weightedmean":
            weights = tf.where(real, tf.cast(tf.range(1, tf.shape(states)[1] + 1), tf.float32)[None, :, None], 0.0)
            vectors.append(tf.reduce_sum(states * weights, axis=1) / tf.maximum(tf.reduce_sum(weights, axis=1), 1e-9))
        elif mode == "lasttoken":
            vectors.append(tf.gather(states, tf.maximum(lengths - 1, 0), batch_dims=1))
        else:
            raise ValueError(f"pooling mode {mode!r} is not one of the sentence-transformers modes")
    embeddings = tf.concat(vectors, axis=-1)
    if normalize:
        embeddings = embeddings / tf.maximum(tf.norm(embeddings, axis=-1, keepdims=True), 1e-12)
    return embeddings


def export_encoder(run, output, *, overwrite=False, **options):
    """Writes the encoder-only run `run` as a SavedModel at `output` (see the module); returns the module.

    `output` must be new, empty, or (with `overwrite`) an export of this
    package. An encoder has no search: a decoding option is a one-line
    `ValueError` naming it.
    """
    given = sorted(name for name, value in options.items() if value is not None)
    if given:
        raise ValueError(
            f"{run} is an encoder-only run (BERT): it has no search, so `{given[0]}` does not apply to its export"
        )
    destinations.check_separate(run, output, what="the export")
    check_export_destination(output, overwrite)
    module = EncoderModule(open_encoder(run))
    signatures = module.signatures()
    saving = tf.saved_model.SaveOptions(experimental_custom_gradients=False)

    def write(tmp):
        tf.saved_model.save(module, tmp, signatures=signatures, options=saving)
        manifest.write_manifest(tmp)

    atomic.replace_dir(write, output, destinations.remove_previous)
    return module
