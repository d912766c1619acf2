"""An imported BERT fine-tuned as a text classifier: `train --init-from BERT_RUN --train-tsv text<TAB>label`.

A run imported from a BERT checkpoint (`keras-transformer import`), given a
file of `text<TAB>label` lines, trains a classifier, as transformers'
`BertForSequenceClassification` is fine-tuned (`[CLS] text [SEP]`, the
pooled first token, cross-entropy over the classes):

- **The labels come from the file** (its second column, each a class).
  The head is the checkpoint's own where it has one and every label of
  the file is among its `id2label`: then its classes keep their ids and
  order. Otherwise the head is new, its classes the file's labels in
  sorted order, over a pooler and a classifier drawn anew (the encoder's
  weights are the checkpoint's). A file with a single label, labels of
  which some are the checkpoint's and some not, or a validation label no
  training line has, is a one-line `ValueError` before anything is written
  (`check_labels`).
- **The package's recipe**: the warmup schedule (`WarmupSchedule`, the
  preset's warmup and rate: an import's is BERT's, a peak of 5e-5 after 100
  steps, annealed to 0 over the last third of the epochs), Adam, length
  buckets and a token budget, mixed precision, `--resume`, `--minutes`, the
  best epoch by validation loss.
- **The tokenizer files** are the checkpoint's, copied byte for byte.
- **Held-out accuracy**: at the end the best model classifies the
  validation texts; config.json's `classifier` records its accuracy beside
  that of always answering the most common training label (the summary
  `train` returns shows both), and `pretrained.labels` the run's classes,
  which `classify` and `export --format transformers` (`id2label`) use.

Texts are tokenized as transformers tokenizes them (`[CLS] ... [SEP]`, cut
to the model's positions or the largest bucket, the shorter).

Example:

>>> train(init_from="saved_models/bert-base-uncased", corpus_files={"train": "reviews.tsv"})  # doctest: +SKIP
{'output': 'saved_models/bert-base-uncased-finetuned', ..., 'classifier': {'accuracy': 0.91, 'majority': 0.5, ...}}
"""

import collections

from keras_transformer import runs
from keras_transformer.training.keras_workarounds import unknown_length_warnings_ignored
from keras_transformer.training.model_run import ModelRun

MAX_CLASSES = 1024  # more distinct labels than this: the second column is likely not a label
NEW, CHECKPOINT = "new", "checkpoint's"


def fine_tunes_classifier(init_from):
    """Whether a run fine-tuned from `init_from` trains a text classifier: an imported encoder-only (BERT) run."""
    if init_from is None:
        return False
    config = runs.RunConfig.read(init_from)
    return config.model is not None and config.model.architecture == "encoder_only" and config.pretrained is not None


def check_labels(init_from, splits, corpus_files=None):
    """`(labels, head)` of a classifier fine-tuned from `init_from` on `splits`; a one-line `ValueError` if none.

    `labels` are the classes by id; `head` is `"checkpoint's"` (its own
    classifier, every label of the file among its `id2label`) or `"new"`.
    `corpus_files` names the files in messages. None where `init_from` is
    not an imported BERT (`fine_tunes_classifier`).
    """
    if not fine_tunes_classifier(init_from):
        return None
    train_file, valid_file = _file_names(corpus_files)
    counts = collections.Counter(label for _, label in splits["train"])
    if len(counts) < 2:
        label = next(iter(counts), "")
        raise ValueError(
            f"{train_file}: every line has the label {label!r}: a classifier tells two labels or more apart "
            "(the second column of text<TAB>label)"
        )
    if len(counts) > MAX_CLASSES:
        raise ValueError(
            f"{train_file} has {len(counts):,} different labels, more than the {MAX_CLASSES} a classifier here "
            "tells apart: its lines must be text<TAB>label"
        )
    given = set(counts) | {label for _, label in splits["validation"]}
    init = runs.RunConfig.read(init_from)
    own = list(init.pretrained.get("labels") or []) if init.model.encoder_head == "classifier" else []
    if own and given <= set(own):
        return tuple(own), CHECKPOINT
    if own and given & set(own):
        absent = sorted(given - set(own))[0]
        where = train_file if absent in counts else valid_file
        raise ValueError(
            f"{where}: the label {absent!r} is not one of the {len(own)} labels of {init_from}'s classifier "
            f"({', '.join(repr(label) for label in own[:8])}{', ...' if len(own) > 8 else ''}): label every "
            "line with its labels to fine-tune its classifier, or with none of them to train a new one"
        )
    unseen = sorted(given - set(counts))
    if unseen:
        raise ValueError(
            f"{valid_file}: the label {unseen[0]!r} is on no line of {train_file}: a new classifier learns the "
            "training file's labels"
        )
    return tuple(sorted(counts)), NEW


def _file_names(corpus_files):
    """How messages name the training and validation files."""
    names = []
    for split in ("train", "validation"):
        paths = (corpus_files or {}).get(split)
        if paths is None:
            names.append(f"the lines held out of {names[0]} for validation" if split == "validation" else "--")
        elif isinstance(paths, (tuple, list)):
            names.append(" and ".join(str(path) for path in paths))
        else:
            names.append(str(paths))
    return names


class ClassifierRun(ModelRun):
    """A `ModelRun` that fine-tunes an imported BERT as a text classifier (see the module)."""

    def __init__(self, preset, output, state, splits, options, *, recorded, initial_weights=None, **start):
        super().__init__(preset, output, state, splits, options, recorded=recorded, initial_weights=initial_weights)
        self.labels, self.head = check_labels(self.init_from, splits)
        self.init_model = runs.RunConfig.read(self.init_from).model
        self.preset = preset.replace(encoder_head="classifier", num_classes=len(self.labels))

    def write_config(self):
        """config.json as training starts: the classifier's model, and its classes among the checkpoint's record."""
        from keras_transformer import __version__
        from keras_transformer.files import destinations
        from keras_transformer.training.data import training_data_sha256

        devices = self.options.devices
        recorded = dict(self.recorded)
        pretrained = dict(recorded.pop("pretrained"))
        pretrained["labels"] = list(self.labels)
        pretrained["problem_type"] = pretrained.get("problem_type") if self.head == CHECKPOINT else None
        config = runs.RunConfig.read(self.output) if self.state == "resume" else runs.RunConfig()
        self.config = config.replace(
            created_by=destinations.CREATOR,
            version=__version__,
            preset=self.preset,
            model=self.init_model.replace(encoder_head="classifier", num_classes=len(self.labels)).check(),
            pretrained=pretrained,
            **recorded,
            seed=self.options.seed,
            mixed_precision=devices.mixed_precision,
            strategy=devices.strategy,
            train_data_sha256=training_data_sha256(self.splits["train"]),
            decoding=self.preset.decoding,
            finished=False,
        )
        self.prior_minutes = self.config.train_minutes or 0.0
        if self.is_chief:
            self.config.write(self.output)
        self.record_files()

    def make_datasets(self):
        """`({"token_ids", "segment_ids"}, class id)` batches of the training and validation texts."""
        self.train_batches = self._batches(self.splits["train"], shuffle=True)
        self.validation_batches = self._batches(self.splits["validation"], shuffle=False)

    def _batches(self, pairs, shuffle):
        import tensorflow as tf

        data, model = self.preset.data, self.config.model
        buckets = tuple(data.bucket_boundaries)
        limit = min(model.max_length, buckets[-1])
        ids = self.tokenizers.source.encode([text for text, _ in pairs], max_length=limit)
        index = {label: number for number, label in enumerate(self.labels)}
        classes = tf.constant([index[label] for _, label in pairs], tf.int32)
        rows = tf.RaggedTensor.from_row_lengths(
            tf.constant([i for row in ids for i in row], tf.int32), [len(row) for row in ids]
        )
        dataset = tf.data.Dataset.from_tensor_slices((rows, classes))
        dataset = dataset.map(lambda tokens, label: (tf.reshape(tokens, [-1]), label)).cache()  # a plain vector each
        if shuffle:
            dataset = dataset.shuffle(min(len(pairs), 50_000), seed=self.options.seed, reshuffle_each_iteration=True)
        dataset = dataset.bucket_by_sequence_length(
            lambda tokens, label: tf.shape(tokens)[0],
            [boundary + 1 for boundary in buckets],
            [max(1, data.token_budget // boundary) for boundary in buckets] + [1],
            padding_values=(model.pad_id, 0),
            pad_to_bucket_boundary=True,
        )

        def inputs(tokens, label):
            return {"token_ids": tokens, "segment_ids": tf.zeros_like(tokens)}, label

        return dataset.map(inputs).prefetch(tf.data.AUTOTUNE)

    def build_model(self):
        """The classifier: the checkpoint's encoder (and its head, where it is the checkpoint's), compiled."""
        from keras_transformer.models.architectures import build_model
        from keras_transformer.training import distribution

        self.model = build_model(self.config.model)
        if self.initial_weights is not None:
            start = build_model(self.init_model)
            start.set_weights(self.initial_weights)
            _copy_weights(start, self.model, keep_head=self.head == CHECKPOINT)
            del start
        self.schedule = compile_classifier(
            self.model, self.preset, jit_compile=distribution.uses_xla(self.strategy), cooldown=self.config.cooldown
        )
        distribution.prepare_model(self.model, self.strategy, self.train_batches)

    def held_out_figures(self, config):
        """`config` with `classifier`: the best model's accuracy on the validation texts, and the majority's."""
        import keras

        best = keras.saving.load_model(self.output / runs.MODEL, compile=False)
        self.model.set_weights(best.get_weights())  # its evaluation is compiled already
        with unknown_length_warnings_ignored():
            accuracy = float(self.model.evaluate(self.validation_batches, verbose=0, return_dict=True)["accuracy"])
        counts = collections.Counter(label for _, label in self.splits["train"])
        majority_class = counts.most_common(1)[0][0]
        validation = [label for _, label in self.splits["validation"]]
        majority = sum(label == majority_class for label in validation) / len(validation)
        figures = {
            "accuracy": round(accuracy, 4),
            "majority": round(majority, 4),
            "majority_class": majority_class,
            "held_out": len(validation),
            "epochs": config.completed_epochs,
            "head": self.head,
        }
        return config.replace(classifier=figures)

    def finish(self):
        result = super().finish()
        config = runs.RunConfig.read(self.output) if self.is_chief else self.config
        return {**result, "classifier": config.classifier}


def _copy_weights(source, target, keep_head):
    """Sets each weight of `target` that `source` has (by its path, of its shape); the head's only if `keep_head`."""
    weights = {weight.path: weight for weight in source.weights}
    for weight in target.weights:
        if not keep_head and weight.path.startswith("classifier_head/"):
            continue
        found = weights.get(weight.path)
        if found is not None and tuple(found.shape) == tuple(weight.shape):
            weight.assign(found)


def _loss():
    import keras

    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def compile_classifier(model, preset, jit_compile=True, cooldown=None):
    """Compiles the classifier with the package's recipe (Adam, `WarmupSchedule`); returns the schedule."""
    import keras

    from keras_transformer.optimizers import Adam
    from keras_transformer.schedules import WarmupSchedule
    from keras_transformer.training.precision import compile_arguments

    recipe = preset.training
    schedule = WarmupSchedule(
        preset.model.d_model, recipe.warmup_steps, scale=recipe.learning_rate_scale, cooldown=cooldown
    )
    loss, jit_compile = compile_arguments(model, _loss(), jit_compile)
    model.compile(
        optimizer=Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9),
        loss=loss,
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=jit_compile,
    )
    return schedule
