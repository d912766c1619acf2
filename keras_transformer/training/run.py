"""`train` and the run object behind it: `TrainingRun`, one call's steps from the checks to the trained models.

`TrainingRun.plan` resolves the preset and checks every argument without
touching a file; `TrainingRun.run` checks the destination, loads the data,
clears a replaced run, then trains one model (`model_run`) or an ensemble's
members (`ensembles`).
"""

import pathlib

from keras_transformer import runs
from keras_transformer.files import destinations
from keras_transformer.presets import get_preset
from keras_transformer.training import (
    destination,
    ensembles,
    fine_tuning,
    language_model,
    marian_compatible,
    model_run,
    text_classification,
)
from keras_transformer.training.options import Budget, Devices, Options, Sources, is_int


class TrainingRun:
    """One call of `train`, step by step.

    `run()` takes the steps in turn: `check` (what `output` holds, and so
    what to do with it), `check_languages` (a multilingual model is
    fine-tuned on one named pair), `load_data` (the splits; a resumed run's
    must be the data it started on), `load_initial_weights` (of the run
    fine-tuned from), `clear` (a replaced run's files, once every check has
    passed) and `train_models`.

    Args:
        preset: the `Preset` to train (`resolve_preset`).
        output: the run directory (`destination.output_path`).
        sources: an `options.Sources` (default: none but the preset's corpus).
        options: an `options.Options` (default: the preset's budget, one device).
        resume: continue the run in `output`.
        overwrite: replace the run in `output`.
        marian_compatible: a run that exports as a Marian checkpoint
            (`marian_compatible`): its sources end with END.

    Example:

    >>> run = TrainingRun.plan("tiny", output="saved_models/tiny", options=Options(Budget(epochs=1)))
    >>> summary = run.run()
    """

    def __init__(self, preset, output, sources, options, resume=False, overwrite=False, marian_compatible=False):
        self.preset, self.output, self.sources, self.options = preset, pathlib.Path(output), sources, options
        self.resume, self.overwrite, self.marian_compatible = resume, overwrite, marian_compatible
        self.state = self.splits = self.initial_weights = None

    @classmethod
    def plan(cls, preset=None, overrides=None, *, output=None, sources=None, options=None, **how):
        """The run of preset `preset` (a name; default `init_from`'s or `"chatbot-ko"`) with `overrides` (a dict).

        `how` holds `resume`, `overwrite` and `marian_compatible`. Every
        argument is checked here, before any file is read but `init_from`'s
        config.json: a bad one is a ValueError naming it.
        """
        sources, options = sources or Sources(), options or Options()
        if sources.init_from is None:  # languages without a multilingual model to fine-tune: refused now
            fine_tuning.languages(None, sources.source_lang, sources.target_lang)
        if how.get("marian_compatible"):
            marian_compatible.check_new_run(sources.init_from)
        resolved = resolve_preset(preset, overrides or {}, sources)
        if how.get("marian_compatible"):
            resolved = marian_compatible.marian_preset(resolved, overrides or {})
        options.check()
        check_combination(resolved, options.devices.strategy, sources.init_from)
        output = destination.output_path(resolved, output, sources.init_from)
        return cls(resolved, output, sources, options, **how)

    def run(self):
        """Takes the steps in turn; returns the summary of `train`."""
        self.check()
        if self.state == "finished":
            config = runs.RunConfig.read(self.output)
            return {**model_run.summary(self.output, config, 0.0), "message": "a finished run: nothing to resume"}
        self.check_languages()
        self.load_data()
        self.load_initial_weights()
        self.clear()
        return self.train_models()

    def check(self):
        """What to do with `output` (`destination.check_output`); changes nothing."""
        self.state = destination.check_output(self.output, self.resume, self.overwrite)

    def check_languages(self):
        """The pair a multilingual model is fine-tuned on: both named, each its code (`fine_tuning.languages`).

        A resumed run's must be the pair it started on.
        """
        sources = self.sources
        if sources.init_from is None:
            return
        fine_tuning.languages(sources.init_from, sources.source_lang, sources.target_lang)
        if self.state == "resume":
            recorded = runs.RunConfig.read(self.output).languages
            if recorded is not None and recorded != sources.languages:
                pair = f"{recorded['source_lang']} -> {recorded['target_lang']}"
                holds = f"a run fine-tuned on another language pair, {pair} (resume it on that pair)"
                raise destinations.DestinationInUseError(self.output, holds, ["overwrite"])

    def load_data(self):
        """The splits, checked before anything is deleted; a resumed run's must be the data it started on."""
        from keras_transformer.datasets.splits import load_splits

        self.splits = load_splits(self.preset, self.sources.data_dir, self.sources.corpus_files)
        text_classification.check_labels(self.sources.init_from, self.splits, self.sources.corpus_files)  # a BERT's
        language_model.check_known_tokens(self.sources.init_from, self.splits, self.sources.corpus_files)
        if self.state == "resume":
            destination.check_same_data(self.output, self.splits, self.sources.data_dir)

    def load_initial_weights(self):
        """The weights of the run fine-tuned from, loaded before anything is written or deleted.

        A resumed run restores its own weights instead.
        """
        if self.sources.init_from is not None and self.state != "resume":
            self.initial_weights = fine_tuning.initial_weights(self.sources.init_from)

    def clear(self):
        """Deletes, file by file, the files of the run that `overwrite` replaces."""
        if self.state == "replace":
            destinations.remove_own(self.output, destinations.RUN)

    def train_models(self):
        """Trains the model, or the members of an ensemble preset; returns the summary of `train`."""
        recorded = self.sources.record()
        if self.marian_compatible:
            recorded.update(marian_compatible.RECORDED)
        if self.preset.training.ensemble > 1:
            return ensembles.train_ensemble(
                self.preset, self.output, self.state, self.splits, self.options, recorded=recorded
            )
        return model_run.train_model(
            self.preset,
            self.output,
            self.state,
            self.splits,
            self.options,
            recorded=recorded,
            initial_weights=self.initial_weights,
        )


def resolve_preset(preset, overrides, sources):
    """The preset to train: named, or `init_from`'s recorded one; with `overrides`, and the user's corpus.

    A fine-tuned run's preset must give the model of the run it starts from
    (`fine_tuning.check_same_shape`).
    """
    init_from = sources.init_from
    init_config = fine_tuning.init_run_config(init_from) if init_from is not None else None
    if preset is None and init_config is not None:
        resolved = init_config.preset.replace(**overrides)
    else:
        resolved = get_preset(preset or "chatbot-ko").replace(**overrides)
    if init_config is not None:
        fine_tuning.check_same_shape(resolved, init_config, init_from)
    if sources.corpus_files is not None:
        from keras_transformer.datasets import corpora

        corpora.check_corpus_files(sources.corpus_files)
        language_model.check_text_corpus(resolved, sources.corpus_files)
        if sources.data_dir is not None:
            raise ValueError(
                f"`data_dir` locates a preset's corpus; leave it out with `corpus_files`. "
                f"Received: data_dir={str(sources.data_dir)!r}"
            )
        resolved = resolved.replace(corpus=corpora.OWN_FILES)
    ensemble = resolved.training.ensemble
    if not is_int(ensemble) or ensemble < 1:
        raise ValueError(f"`ensemble` must be a positive int (the number of models). Received: ensemble={ensemble!r}")
    return resolved


def check_combination(preset, strategy, init_from):
    """An ensemble trains with the default strategy, and is not fine-tuned."""
    ensemble = preset.training.ensemble
    if init_from is not None and ensemble > 1:
        raise ValueError(
            f"`init_from` fine-tunes one model; the preset trains an ensemble of "
            f"{ensemble}. Received: init_from={str(init_from)!r}"
        )
    if ensemble > 1 and strategy != "default":
        raise ValueError(
            f"An ensemble preset trains with the default strategy only. Received: "
            f"ensemble={ensemble}, strategy={strategy!r}"
        )


# Over 60 lines for its 14 documented arguments, kept for the command and the scripts that call
# `train(...)` with them; its body only groups them into a `TrainingRun`.
def train(
    preset=None,
    output=None,
    data_dir=None,
    corpus_files=None,
    init_from=None,
    source_lang=None,
    target_lang=None,
    epochs=None,
    minutes=None,
    resume=False,
    overwrite=False,
    strategy="default",
    mixed_precision=None,
    seed=0,
    cpu_devices=None,
    verbose="auto",
    marian_compatible=False,
    **overrides,
):
    """Trains preset `preset` and writes a run directory (see `keras_transformer.runs`) to `output`.

    The arguments, grouped (`options.Sources`, `options.Budget`,
    `options.Devices`, `options.Options`), make a `TrainingRun`, which trains.

    Args:
        preset: a name from `keras_transformer.presets.PRESETS`; default
            `init_from`'s preset, else `"chatbot-ko"`.
        output: the run directory; default `saved_models/<preset>` (with
            `init_from`: `saved_models/<preset>-finetuned`). It must
            be new, an empty folder, or a run directory of this package (see
            `keras_transformer.files.destinations`): any other folder is refused
            before any work, also with `overwrite=True`.
        data_dir: a folder of the preset's corpus files, or the
            tensorflow-datasets data dir to download them into (see
            `keras_transformer.datasets.corpora`); not needed for the bundled
            chatbot corpus.
        corpus_files: train on your own corpus instead of the preset's: a
            dict `{"train": (source_path, target_path) or tsv_path,
            "validation": ... (optional)}` (see
            `keras_transformer.datasets.corpora.load_file_splits`). The preset
            gives the model and the recipe; config.json records each file's
            path and sha256 under `corpus_files`.
        init_from: fine-tune: a run directory whose model (its best or
            averaged weights) is the starting point and whose tokenizer is
            reused, byte for byte. The model's shape is the run's; a `preset`
            (with `overrides`) of another shape is a ValueError naming the
            fields.
        source_lang, target_lang: the language pair of the data, where
            `init_from` is a multilingual model (an imported M2M100 or
            NLLB-200 run), in its codes (`deu_Latn` for NLLB, `de` for
            M2M100); both needed there, and refused for any other run. The
            pairs are framed with their language tokens as transformers'
            tokenizers frame them (`[src_lang] X </s>`; the decoder reads
            `</s> [tgt_lang] Y`, and learns `[tgt_lang] Y </s>`), and
            config.json records them (`languages`): the run translates from
            and into them unless told otherwise.
        epochs: number of epochs, a positive int; default the preset's.
        minutes: stop after this many minutes of this call (a positive,
            finite number; the epoch under way ends early); default: what
            remains of the preset's `max_minutes` for the whole run.
        resume: continue an interrupted run in `output` from its last epoch,
            on the same training data (its sha256 is recorded); a run that
            never finished an epoch starts again.
        overwrite: delete the run in `output` and train a new one. It is
            deleted only after the arguments and the data have been checked.
        strategy: `"default"`, `"mirrored"` or `"multi-worker"` (TF_CONFIG).
        mixed_precision: None, `"mixed_float16"` or `"mixed_bfloat16"`.
        seed: seed of the weights, the shuffling and the dropout.
        cpu_devices: split the CPU into this many logical devices (to run
            `mirrored` without accelerators).
        verbose: Keras's `fit` verbosity.
        marian_compatible: train a new run that `export --format transformers`
            writes as a Marian checkpoint: its sources end with END and its
            LayerNorms' epsilon is Marian's 1e-5 (this package's defaults are
            neither); a preset Marian cannot hold is refused
            (`training.marian_compatible`).
        **overrides: preset fields to change, e.g. `d_model=128`.

    Returns:
        A dict with the epochs completed, the best validation loss, the minutes
        and the output path; for a finished run asked to resume, a `message`
        saying so (nothing is trained).

    Raises:
        ValueError: a bad argument, named; `destinations.UnsafeDestinationError`
            for an `output` that is not this package's to write; and
            `destinations.DestinationInUseError` for a run in `output` that
            neither `resume` nor `overwrite` says what to do with.

    Example:

    >>> summary = train("tiny", output="saved_models/tiny", epochs=1)

    A preset with `ensemble=n` trains n models one after the other, with
    seeds `seed`, `seed + 1`, ..., into `output/member-0`, ... (each a run
    directory of its own), sharing one tokenizer; each gets `1/n` of the
    time budget (`max_minutes` or `minutes`) and `epochs` epochs. `output`
    then holds the ensemble's config.json and tokenizers, and every command
    that takes a run directory decodes with the members' mean distribution
    (`keras_transformer.decoding.make_ensemble_step_fn`).
    """
    sources = Sources(data_dir, corpus_files, init_from, source_lang, target_lang)
    options = Options(Budget(epochs, minutes), Devices(strategy, mixed_precision, cpu_devices), seed, verbose)
    how = dict(resume=resume, overwrite=overwrite, marian_compatible=marian_compatible)
    run = TrainingRun.plan(preset, overrides, output=output, sources=sources, options=options, **how)
    return run.run()
