"""One model trained into one run directory, in named steps: claim, tokenizer, datasets, model, fit, finish.

`train_model` runs a `ModelRun`: a whole run of one model, or one member of an
ensemble (`ensembles`). What comes before (the checks, the data, the
destination's state) is `run.TrainingRun`'s.
"""

import contextlib
import sys
import time

from keras_transformer import __version__, runs
from keras_transformer.files import destinations, run_files
from keras_transformer.training import callbacks, data, destination, distribution, fine_tuning, precision
from keras_transformer.training.data import training_data_sha256
from keras_transformer.training.keras_workarounds import unknown_length_warnings_ignored
from keras_transformer.training.recipe import compile_model


def train_model(preset, output, state, splits, options, **start):
    """Trains one model into the run directory `output`; returns `train`'s summary (see `ModelRun`).

    An imported BERT fine-tuned on labelled texts trains as a classifier
    (`text_classification`); an imported GPT-2 continues as a causal language
    model (`language_model`).
    """
    from keras_transformer.training import language_model, text_classification

    init_from = start["recorded"].get("init_from", {}).get("run")
    if text_classification.fine_tunes_classifier(init_from):
        run = text_classification.ClassifierRun
    elif language_model.continues_pretrained(preset, start["recorded"]):
        run = language_model.LanguageModelRun
    else:
        run = ModelRun
    return run(preset, output, state, splits, options, **start).train()


class ModelRun:
    """The training of one model into the run directory `output`, step by step.

    `train()` takes the steps in turn: `set_up` (devices, seed, precision),
    `claim` (the folder, before anything else is written), `load_tokenizers`,
    `write_config`, `make_datasets`, `build_model`, `fit` and `finish`.

    Args:
        preset: the `Preset` to train.
        output: the run directory (a `pathlib.Path`).
        state: what to do with `output` (`destination.check_output`):
            `"fresh"`, `"replace"` (its old files removed already) or `"resume"`.
        splits: `{"train": pairs, "validation": pairs, ...}`.
        options: an `options.Options`.
        recorded: what config.json records of the sources
            (`options.Sources.record`); its `init_from["run"]`, if any, is
            the run whose tokenizer is reused.
        initial_weights: the weights the model starts from (fine-tuning), or None.
        tokenizer_from: a run directory whose tokenizer to reuse (an ensemble's).
    """

    def __init__(self, preset, output, state, splits, options, *, recorded, initial_weights=None, tokenizer_from=None):
        self.preset, self.output, self.state, self.splits, self.options = preset, output, state, splits, options
        self.strategy = options.devices.strategy
        self.recorded, self.initial_weights = recorded, initial_weights
        self.init_from = recorded.get("init_from", {}).get("run")
        self.tokenizer_from = tokenizer_from or self.init_from
        self.config, self.prior_minutes = runs.RunConfig(), 0.0
        self.recorder = run_files.FileRecorder(output)
        self.is_chief, self.worker_index = distribution.worker_role(self.strategy)

    def train(self):
        """Takes the steps in turn; returns the summary of `train`."""
        tf_strategy = self.set_up()
        self.started = time.monotonic()
        self.claim()
        self.load_tokenizers()
        self.write_config()
        self.make_datasets()
        with tf_strategy.scope():
            self.build_model()
        self.fit()
        return self.finish()

    def set_up(self):
        """Configures the devices, seeds Keras and sets the precision policy; returns the `tf.distribute.Strategy`."""
        import keras

        devices = self.options.devices
        strategy = distribution.configure_devices(devices.strategy, devices.cpu_devices)
        keras.utils.set_random_seed(self.options.seed)
        precision.use_policy(devices.mixed_precision, devices.strategy)
        return strategy

    def claim(self):
        """Creates the folder and marks it as this package's run (`destination.claim`)."""
        destination.claim(self.output, self.state, self.splits, self.is_chief)

    def load_tokenizers(self):
        """The run's tokenizers: the resumed run's, the shared ones, or one trained now (`data.run_tokenizers`)."""
        self.tokenizers = data.run_tokenizers(
            self.preset, self.output, self.splits["train"], self.state, self.is_chief, self.tokenizer_from
        )

    def write_config(self):
        """Writes the run's config.json as training starts (not finished) and records the files so far."""
        devices = self.options.devices
        self.config = start_config(
            self.preset,
            self.output,
            self.state,
            self.tokenizers,
            **self.recorded,
            seed=self.options.seed,
            mixed_precision=devices.mixed_precision,
            strategy=devices.strategy,
            train_data_sha256=training_data_sha256(self.splits["train"]),
            model_vocab=None if self.init_from is None else runs.RunConfig.read(self.init_from).model,
        )
        self.prior_minutes = self.config.train_minutes or 0.0  # of the run before a resume
        if self.is_chief:
            self.config.write(self.output)
        self.record_files()

    def make_datasets(self):
        """The training and validation batches (`data.make_datasets`), sharded by data under a strategy."""
        if self.config.model.architecture == "encoder_only":  # BERT: masked-LM batches (`masked_lm`)
            from keras_transformer.training import masked_lm

            self.train_batches, self.validation_batches = masked_lm.make_datasets(
                self.preset, self.splits, self.tokenizers, self.options.seed, self.config.model.source_vocab_size
            )
            return
        self.train_batches, self.validation_batches = data.make_datasets(
            self.preset,
            self.splits,
            self.tokenizers,
            self.options.seed,
            distributed=self.options.devices.distributed,
            add_source_end=self.config.add_source_end,
            languages=self.config.languages,
        )

    def build_model(self):
        """The compiled model and its learning-rate schedule (call it in the strategy's scope)."""
        from keras_transformer.models.architectures import build_model

        self.model = build_model(self.config.model)  # the paper's, or GPT's (`gpt-ko`)
        if self.initial_weights is not None:
            fine_tuning.set_initial_weights(self.model, self.initial_weights, self.init_from)
        self.schedule = compile_model(
            self.model, self.preset, jit_compile=distribution.uses_xla(self.strategy), cooldown=self.config.cooldown
        )
        distribution.prepare_model(self.model, self.strategy, self.train_batches)

    def fit(self):
        """`model.fit` with the run's callbacks; the files written are recorded however it ends."""
        run_callbacks, epoch_limit = callbacks.run_callbacks(self, self.schedule, self.options.budget)
        verbose = self.options.verbose
        if verbose == "auto":
            verbose = 1 if sys.stdout.isatty() else 2
        try:
            with unknown_length_warnings_ignored():
                self.model.fit(
                    self.train_batches,
                    validation_data=self.validation_batches,
                    epochs=epoch_limit or 10_000,
                    callbacks=run_callbacks,
                    verbose=verbose,
                )
        finally:
            with contextlib.suppress(OSError, ValueError):  # a run that stops here still owns what it wrote
                self.record_files()

    def finish(self):
        """Averages the last epochs' weights if the preset asks, marks the run finished, removes its backups."""
        average_last, output = self.preset.training.average_last, self.output
        config = runs.RunConfig.read(output) if self.is_chief else self.config
        snapshots = callbacks.snapshot_paths(output / runs.SNAPSHOTS)[-average_last:]
        if self.is_chief and average_last > 1 and len(snapshots) > 1:
            averaged = callbacks.average_snapshots(self.model, snapshots)
            with unknown_length_warnings_ignored():
                loss = averaged.evaluate(self.validation_batches, verbose=0, return_dict=True)["loss"]
            config = config.replace(averaged={"epochs": len(snapshots), "val_loss": loss})
            if config.best_val_loss is None or loss < config.best_val_loss:
                callbacks.save_model_atomic(averaged, output / runs.MODEL)
                config = config.replace(best_val_loss=loss, best_epoch="averaged")
        minutes_used = self.minutes()
        chief_folders = [output / runs.SNAPSHOTS, output / runs.BACKUP] if self.is_chief else []
        destination.remove_rewritten(output, [self.backup] + chief_folders)
        if self.is_chief:
            config = self.held_out_figures(config)
        if self.is_chief:
            # One write: the run is finished exactly when its record holds its final files.
            config = config.replace(
                finished=True, train_minutes=round(self.prior_minutes + minutes_used, 2), files=self.recorder.files()
            )
            config.write(output)
        return summary(output, config, minutes_used)

    def held_out_figures(self, config):
        """`config` with what the run measures at its end: an encoder-only preset's classifier (`bert-ko`)."""
        if self.config.model.architecture != "encoder_only":
            return config
        from keras_transformer.training import masked_lm

        figures = masked_lm.fine_tune_classifier(
            self.output, self.splits, self.tokenizers.source, self.options.seed, verbose=self.options.verbose
        )
        return config.replace(classifier=figures)

    def minutes(self):
        """Minutes since the run started (after `set_up`)."""
        return (time.monotonic() - self.started) / 60.0

    def record(self, **fields):
        """Updates config.json (the chief's only)."""
        if self.is_chief:
            runs.update_config(self.output, **fields)

    def record_files(self):
        """Records in config.json what the run has written (the chief's only; see `run_files.FileRecorder`)."""
        if self.is_chief:
            self.recorder.record()

    @property
    def backup(self):
        """The resume backup's folder: one per worker in a multi-worker run."""
        backup = self.output / runs.BACKUP
        return backup / f"worker-{self.worker_index}" if self.strategy == "multi-worker" else backup


def start_config(preset, output, state, tokenizers, model_vocab=None, **fields):
    """The run's `RunConfig` at the start of training (the resumed run's, updated), not yet finished.

    `tokenizers` are the run's `data.Tokenizers`; `fields` the other fields
    to record (the sources, the seed, `add_source_end` of a fine-tuned import...).
    `model_vocab` is the `ModelConfig` of the model fine-tuned from, whose
    embedding rows are kept where the tokenizer has fewer ids (T5's
    checkpoints round their rows up: 32128 for 32100 ids).
    """
    config = runs.RunConfig.read(output) if state == "resume" else runs.RunConfig()
    source_size, target_size = tokenizers.source.vocab_size, tokenizers.target.vocab_size
    if model_vocab is not None and model_vocab.source_vocab_size is not None:
        source_size = max(source_size, model_vocab.source_vocab_size)
        target_size = max(target_size, model_vocab.target_vocab_size)
    if preset.model.architecture == "encoder_only":  # BERT: one row more, for [MASK] (`masked_lm.mask_id`)
        source_size = target_size = source_size + 1
    return config.replace(
        created_by=destinations.CREATOR,
        version=__version__,
        preset=preset,
        model=preset.model.with_vocabulary(source_size, target_size),
        **fields,
        decoding=preset.decoding.replace(max_new_tokens=preset.decoding.max_new_tokens or preset.model.max_length),
        finished=False,
    )


def summary(output, config, minutes):
    """What `train` returns: the output, the epochs completed, the best validation loss and epoch, the minutes."""
    return {
        "output": str(output),
        "completed_epochs": config.completed_epochs,
        "best_val_loss": config.best_val_loss,
        "best_epoch": config.best_epoch,
        "minutes": round(minutes, 2),
    }
