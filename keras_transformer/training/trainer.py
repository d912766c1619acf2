"""Training a Transformer on a named corpus: the engine of `keras-transformer train`."""

import contextlib
import hashlib
import json
import math
import os
import pathlib
import sys
import time

from keras_transformer import __version__
from keras_transformer.errors import ArgumentError, first_line, literal
from keras_transformer.files import destinations, ownership, run_files
from keras_transformer.presets import get_preset
from keras_transformer.training import keras_workarounds, run_dir
from keras_transformer.training.keras_workarounds import unknown_length_warnings_ignored

STRATEGIES = ("default", "mirrored", "multi-worker")
MIXED_PRECISION = (None, "mixed_float16", "mixed_bfloat16")


def _check_output(output, resume, overwrite):
    """What training will do with `output`; changes nothing.

    Returns:
        `"fresh"` (a new or empty folder, or a run that never finished an
        epoch, restarted when resuming), `"replace"` (a run of this package,
        whose recorded files are deleted once every other check has passed),
        `"resume"` or `"finished"`.

    Raises:
        destinations.UnsafeDestinationError: `output` is protected, a file,
            or a non-empty folder that is no run of this package, or holds
            anything the run did not record (named); a run to resume whose
            file has a second name (a hard link), which appending would change.
        destinations.DestinationInUseError: `output` holds a run and neither
            `resume` nor `overwrite` says what to do with it.
    """
    output = pathlib.Path(output)
    if destinations.check_destination(output, destinations.RUN) != "ours":
        return "fresh"
    if overwrite and not resume:
        return "replace"
    config = run_dir.RunConfig.read(output)
    unfinished_ensemble = bool(config.members) and not config.finished
    interrupted = (output / run_dir.BACKUP).exists() or unfinished_ensemble
    if resume:
        if config.finished and not interrupted:
            return "finished"
        _refuse_hard_links(output)
        started = interrupted or config.completed_epochs
        return "resume" if started else "fresh"
    if interrupted or not config.finished:
        raise destinations.DestinationInUseError(output, "an interrupted run", ["resume", "overwrite"])
    raise destinations.DestinationInUseError(output, "a trained model", ["overwrite"])


def _refuse_hard_links(output):
    """Refuses to resume a run with a file of more than one name: appending to it would change the other too."""
    for path in sorted(pathlib.Path(output).rglob("*")):
        if path.is_file() and not path.is_symlink() and path.stat().st_nlink > 1:
            raise destinations.UnsafeDestinationError(
                output, "has another name (a hard link)", path.relative_to(output).as_posix()
            )


def _check_arguments(epochs, minutes, strategy, mixed_precision, seed, cpu_devices):
    """ValueErrors naming the argument, before any work (see `train`)."""
    if epochs is not None and (not _is_int(epochs) or epochs < 1):
        raise ValueError(f"`epochs` must be a positive int. Received: epochs={epochs!r}")
    if minutes is not None and (
        isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not math.isfinite(minutes) or minutes <= 0
    ):
        raise ValueError(f"`minutes` must be a positive, finite number. Received: minutes={minutes!r}")
    if strategy not in STRATEGIES:
        raise ValueError(f"`strategy` must be one of {STRATEGIES}. Received: strategy={strategy!r}")
    if strategy == "multi-worker" and "TF_CONFIG" not in os.environ:
        raise ValueError("`strategy='multi-worker'` needs the TF_CONFIG environment variable of each worker.")
    if mixed_precision not in MIXED_PRECISION:
        raise ValueError(
            f"`mixed_precision` must be one of {MIXED_PRECISION}. Received: mixed_precision={mixed_precision!r}"
        )
    if not _is_int(seed) or seed < 0:
        raise ValueError(f"`seed` must be a non-negative int. Received: seed={seed!r}")
    if cpu_devices is not None and (not _is_int(cpu_devices) or cpu_devices < 1):
        raise ValueError(f"`cpu_devices` must be a positive int. Received: cpu_devices={cpu_devices!r}")


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def training_data_sha256(pairs):
    """The sha256 of training `pairs`: a resumed run must see the data it started on.

    Example:

    >>> training_data_sha256([("a", "b")]) == training_data_sha256([("a", "b")]) != training_data_sha256([("a", "c")])
    True
    """
    digest = hashlib.sha256()
    for source, target in pairs:
        digest.update(f"{source}\t{target}\n".encode())
    return digest.hexdigest()


def _check_same_data(output, splits, data_dir):
    """Refuses to resume `output` on training data other than the data it started on."""
    recorded = run_dir.RunConfig.read(output).train_data_sha256
    if recorded is not None and recorded != training_data_sha256(splits["train"]):
        holds = f"a run started on other training data than data_dir={data_dir!r} gives (resume it on that data)"
        raise destinations.DestinationInUseError(output, holds, ["overwrite"])


def _configure_devices(strategy, cpu_devices):
    import tensorflow as tf

    if cpu_devices and cpu_devices > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(cpu_devices)]
        )
    if strategy == "default":
        return tf.distribute.get_strategy()
    if strategy == "mirrored":
        devices = [d.name for d in tf.config.list_logical_devices("GPU")] or [
            d.name for d in tf.config.list_logical_devices("CPU")
        ]
        return tf.distribute.MirroredStrategy(devices)
    return tf.distribute.MultiWorkerMirroredStrategy()  # `_check_arguments` allowed no other


def _file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _worker_role():
    """(is_chief, worker index) from TF_CONFIG; a single process is the chief."""
    config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    task = config.get("task", {})
    kind, index = task.get("type", "chief"), int(task.get("index", 0))
    has_chief = "chief" in config.get("cluster", {})
    return (kind == "chief" or (kind == "worker" and index == 0 and not has_chief)), index


def load_splits(preset, data_dir, corpus_files=None):
    """The preset's corpus splits, or those of the user's `corpus_files` (see `corpora.load_file_splits`).

    `preset.dev_examples` training pairs are held out as a `"dev"` split (see
    `hold_out_dev`); then the training split is cut to `preset.max_examples`.
    """
    from keras_transformer.datasets import load_file_splits, load_split_pairs

    data = preset.data
    if corpus_files is not None:
        splits = load_file_splits(corpus_files)
    else:
        splits = load_split_pairs(data.corpus, data_dir)
    if data.dev_examples:
        splits.update(hold_out_dev(splits["train"], data.dev_examples))
    if data.max_examples:
        splits["train"] = splits["train"][: data.max_examples]
    return splits


def hold_out_dev(pairs, size):
    """Splits training `pairs` into `{"train": ..., "dev": ...}` with about `size` pairs in `"dev"`.

    The dev pairs are a seeded, order-independent sample of the training data
    (`readers.seeded_split` with the corpora's split seed), so a dev set has the
    training data's sentence lengths, which a corpus's own validation split may
    not. A run with `dev_examples` never trains on them, and
    `benchmarks/multi30k.py` chooses the length penalty on them.

    Example:

    >>> splits = hold_out_dev([(f"s{i}", f"t{i}") for i in range(100)], 10)
    >>> len(splits["dev"]), len(splits["train"])
    (10, 90)
    """
    from keras_transformer.datasets import corpora, readers

    if not 0 < size < len(pairs):
        raise ValueError(
            f"`dev_examples` must be between 1 and {len(pairs) - 1}, fewer than the {len(pairs)} training pairs. "
            f"Received: dev_examples={size}"
        )
    return readers.seeded_split(pairs, {"dev": size / len(pairs)}, seed=corpora.SPLIT_SEED)


def train_tokenizer(preset, pairs):
    """A shared SentencePiece vocabulary learned from both sides of `pairs` with the preset's settings."""
    from keras_transformer.tokenizers import SubwordTokenizer

    texts = [text for pair in pairs for text in pair]
    return SubwordTokenizer.train(
        texts, preset.data.vocab_size, character_coverage=preset.data.character_coverage, seed=0
    )


def _tokenizer(preset, output, pairs, resume_state, is_chief, shared_from=None):
    """The run's tokenizer: loaded when resuming, else `shared_from`'s (a run directory) or a new one.

    Call it after seeding: `keras.utils.set_random_seed` drops the tokenizers
    made before it (see `SubwordTokenizer`).
    """
    from keras_transformer.tokenizers import SubwordTokenizer

    path = pathlib.Path(output) / run_dir.SOURCE_TOKENIZER
    if resume_state == "resume" and path.is_dir():
        try:
            return SubwordTokenizer.load(path)
        except Exception as error:  # noqa: BLE001  (SentencePiece, JSON, I/O: all mean "corrupt")
            raise ArgumentError(
                f"{path}: cannot resume, the tokenizer does not load: "
                f"{literal(first_line(error))}. Pass {{overwrite=True}} to start again."
            ) from None
    if shared_from is not None:
        tokenizer = SubwordTokenizer.load(pathlib.Path(shared_from) / run_dir.SOURCE_TOKENIZER)
    else:
        tokenizer = train_tokenizer(preset, pairs)
    if is_chief:
        for relative in (run_dir.SOURCE_TOKENIZER, run_dir.TARGET_TOKENIZER):
            tokenizer.save(pathlib.Path(output) / relative)
    return tokenizer


def make_datasets(preset, splits, tokenizer, seed, distributed=False):
    """`(train, validation)` batches of `splits` for `preset`: bucketed by length, padded to a token budget.

    The training batches are shuffled with `seed` and tokenized with subword
    sampling where the preset asks for it; `distributed` shards them by data.
    """
    import tensorflow as tf

    from keras_transformer.datasets import make_batches, make_eval_batches

    def strings(pairs):
        sources, targets = zip(*pairs)
        return tf.data.Dataset.from_tensor_slices({"source": list(sources), "target": list(targets)})

    data = preset.data
    batching = dict(
        token_budget=data.token_budget,
        bucket_boundaries=tuple(data.bucket_boundaries),
        max_length=preset.model.max_length,
    )
    sampling_tokenizer = tokenizer.sampler(data.subword_sampling) if data.subword_sampling else tokenizer
    train = make_batches(strings(splits["train"]), sampling_tokenizer, seed=seed, **batching)
    validation = make_eval_batches(strings(splits["validation"]), tokenizer, pad_batches=True, **batching)
    if distributed:
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
        train, validation = train.with_options(options), validation.with_options(options)
    return train, validation


def compile_model(model, preset, jit_compile=True, cooldown=None):
    """Compiles `model` with the paper's recipe (Adam, `WarmupSchedule`, label smoothing); returns the schedule.

    Example:

    >>> schedule = compile_model(build_transformer(config=preset.model_config(8000)), preset)
    """
    from keras_transformer.losses import MaskedSparseCategoricalCrossentropy
    from keras_transformer.metrics import MaskedAccuracy
    from keras_transformer.optimizers import Adam
    from keras_transformer.schedules import WarmupSchedule
    from keras_transformer.training.precision import compile_arguments

    # mixed_bfloat16 on a CPU with bf16 units: the model without XLA, the loss with it (see precision.py).
    loss, jit_compile = compile_arguments(
        model, MaskedSparseCategoricalCrossentropy(label_smoothing=preset.training.label_smoothing), jit_compile
    )
    recipe = preset.training
    schedule = WarmupSchedule(
        preset.model.d_model, recipe.warmup_steps, scale=recipe.learning_rate_scale, cooldown=cooldown
    )
    model.compile(
        optimizer=Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9),
        loss=loss,
        metrics=[MaskedAccuracy(name="accuracy")],
        jit_compile=jit_compile,
    )
    return schedule


# What must match between a preset and the run it fine-tunes: the model's shape, and the vocabulary.
SHAPE_FIELDS = (
    "num_layers",
    "num_decoder_layers",
    "d_model",
    "num_heads",
    "d_ff",
    "max_length",
    "norm_first",
    "share_embeddings",
    "tie_output_embedding",
    "vocab_size",
)


def _init_run_config(init_from):
    """The `RunConfig` of the run that `init_from` names; a run it cannot start from is a ValueError."""
    path = pathlib.Path(init_from)
    if not run_dir.is_run_dir(path):
        raise ValueError(
            f"`init_from` must be a run directory of this package (with {run_dir.CONFIG} and "
            f"{run_dir.MODEL}). Received: init_from={str(init_from)!r}"
        )
    config = run_dir.RunConfig.read(path)
    if config.members:
        raise ValueError(
            f"`init_from` must be one model's run, not an ensemble. Received: init_from={str(init_from)!r}"
        )
    if not (path / run_dir.MODEL).is_file() or config.preset is None:
        raise ValueError(
            f"`init_from` must be a run with a trained {run_dir.MODEL} and its preset in "
            f"{run_dir.CONFIG}. Received: init_from={str(init_from)!r}"
        )
    return config


def _shape_setting(preset, field):
    return getattr(preset.data if field == "vocab_size" else preset.model, field)


def _check_same_shape(preset, init_config, init_from):
    """A preset whose model differs from the run being fine-tuned is a ValueError naming the fields."""
    recorded = init_config.preset
    differing = [
        f"{field} {_shape_setting(preset, field)!r} (run: {_shape_setting(recorded, field)!r})"
        for field in SHAPE_FIELDS
        if _shape_setting(preset, field) != _shape_setting(recorded, field)
    ]
    if differing:
        raise ValueError(
            f"`preset` {preset.name!r} gives a model other than the one in `init_from`: {', '.join(differing)}. "
            f"Leave `preset` out to fine-tune with the run's ({recorded.name!r}), or change those fields. "
            f"Received: preset={preset.name!r}, init_from={str(init_from)!r}"
        )


def _initial_weights(init_from):
    """The weights of `init_from`'s model (its best or averaged epoch); a model that does not load is a ValueError."""
    import keras

    path = pathlib.Path(init_from) / run_dir.MODEL
    try:
        return keras.saving.load_model(path, compile=False).get_weights()
    except Exception as error:  # noqa: BLE001  (zip, HDF5, JSON, Keras: all mean "corrupt")
        message = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        raise ValueError(f"{path}: cannot fine-tune from it, the model does not load: {message}") from None


def _set_initial_weights(model, weights, init_from):
    shapes = [tuple(w.shape) for w in weights], [tuple(w.shape) for w in model.get_weights()]
    if shapes[0] != shapes[1]:
        raise ValueError(
            f"`init_from`'s {run_dir.MODEL} does not fit the model its {run_dir.CONFIG} describes. "
            f"Received: init_from={str(init_from)!r}"
        )
    model.set_weights(weights)


def train(
    preset=None,
    output=None,
    data_dir=None,
    corpus_files=None,
    init_from=None,
    epochs=None,
    minutes=None,
    resume=False,
    overwrite=False,
    strategy="default",
    mixed_precision=None,
    seed=0,
    cpu_devices=None,
    verbose="auto",
    **overrides,
):
    """Trains preset `preset` and writes a run directory (see `run_dir`) to `output`.

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
    config_preset = _resolve_preset(preset, overrides, init_from, corpus_files, data_dir)
    _check_arguments(epochs, minutes, strategy, mixed_precision, seed, cpu_devices)
    _check_combination(config_preset, strategy, init_from)
    output = _output_path(config_preset, output, init_from)
    resume_state = _check_output(output, resume, overwrite)
    if resume_state == "finished":
        config = run_dir.RunConfig.read(output)
        return {**_summary(output, config, 0.0), "message": "a finished run: nothing to resume"}
    splits = load_splits(config_preset, data_dir, corpus_files)  # checked before anything is deleted
    if resume_state == "resume":
        _check_same_data(output, splits, data_dir)
    # Loaded before anything is written or deleted; a resumed run restores its own weights.
    initial_weights = _initial_weights(init_from) if init_from is not None and resume_state != "resume" else None
    if resume_state == "replace":
        destinations.remove_own(output, destinations.RUN)
    options = dict(
        data_dir=data_dir,
        sources=_sources(corpus_files, init_from),
        initial_weights=initial_weights,
        epochs=epochs,
        minutes=minutes,
        strategy=strategy,
        mixed_precision=mixed_precision,
        seed=seed,
        cpu_devices=cpu_devices,
        verbose=verbose,
    )
    if config_preset.training.ensemble > 1:
        return _train_ensemble(config_preset, output, resume_state, splits, **options)
    return _train_run(config_preset, output, resume_state, splits, **options)


def _resolve_preset(preset, overrides, init_from, corpus_files, data_dir):
    """The preset to train: named, or `init_from`'s recorded one; with `overrides`, and the user's corpus."""
    init_config = _init_run_config(init_from) if init_from is not None else None
    if preset is None and init_config is not None:
        config_preset = init_config.preset.replace(**overrides)
    else:
        config_preset = get_preset(preset or "chatbot-ko").replace(**overrides)
    if init_config is not None:
        _check_same_shape(config_preset, init_config, init_from)
    if corpus_files is not None:
        from keras_transformer.datasets import corpora

        corpora.check_corpus_files(corpus_files)
        if data_dir is not None:
            raise ValueError(
                f"`data_dir` locates a preset's corpus; leave it out with `corpus_files`. "
                f"Received: data_dir={str(data_dir)!r}"
            )
        config_preset = config_preset.replace(corpus=corpora.OWN_FILES)
    ensemble = config_preset.training.ensemble
    if not _is_int(ensemble) or ensemble < 1:
        raise ValueError(f"`ensemble` must be a positive int (the number of models). Received: ensemble={ensemble!r}")
    return config_preset


def _check_combination(preset, strategy, init_from):
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


def _output_path(preset, output, init_from):
    """`output`, or `saved_models/<preset>` (`<preset>-finetuned` for a fine-tuned run)."""
    default_name = preset.name + ("-finetuned" if init_from is not None else "")
    output = pathlib.Path(output or pathlib.Path("saved_models") / default_name)
    overlap = None if init_from is None else _overlap(output, init_from)
    if overlap is not None:
        raise ValueError(
            f"`output` must be another folder than `init_from`, which the fine-tuned run starts from{overlap}. "
            f"Received: output={str(output)!r}, init_from={str(init_from)!r}"
        )
    return output


def _overlap(output, init_from):
    """How `output` overlaps the run `init_from`, as the end of a sentence; None when they are apart."""
    output, init_from = output.resolve(), pathlib.Path(init_from).resolve()
    if output == init_from:
        return ""
    if init_from in output.parents:
        return ", and not a folder inside it (the run would then hold files it did not write)"
    if output in init_from.parents:
        return ", and not a folder that holds it"
    return None


def _sources(corpus_files, init_from):
    """What config.json records of the user's corpus files and of the run fine-tuned from."""
    sources = {}
    if corpus_files is not None:
        from keras_transformer.datasets import corpora

        sources["corpus_files"] = corpora.describe_files(corpus_files)
    if init_from is not None:
        sources["init_from"] = {
            "run": str(pathlib.Path(init_from).resolve()),
            "model_sha256": _file_sha256(pathlib.Path(init_from) / run_dir.MODEL),
        }
    return sources


def _claim(output, resume_state, splits, is_chief=True):
    """Creates `output` and marks it as this package's run before anything else is written there.

    A run that fails before its first epoch (bad data, an interrupt while the
    tokenizer trains) is then a run directory that `resume` restarts and
    `overwrite` replaces, never a folder that only the user can clear.
    """
    output.mkdir(parents=True, exist_ok=True)
    if is_chief and resume_state != "resume":
        claim = run_dir.RunConfig(
            created_by=destinations.CREATOR, train_data_sha256=training_data_sha256(splits["train"])
        )
        claim.write(output)


def _run_config(preset, output, resume_state, tokenizer, data_dir, **fields):
    """The run's `RunConfig` at the start of training (the resumed run's, updated), not yet finished."""
    config = run_dir.RunConfig.read(output) if resume_state == "resume" else run_dir.RunConfig()
    return config.replace(
        created_by=destinations.CREATOR,
        version=__version__,
        preset=preset,
        model=preset.model_config(tokenizer.vocab_size),
        data_dir=None if data_dir is None else str(data_dir),
        **fields,
        decoding=preset.decoding.replace(max_length=preset.model.max_length),
        finished=False,
    )


def _train_ensemble(
    preset, output, resume_state, splits, *, data_dir, sources, epochs, minutes, strategy, seed, **options
):
    """Trains the members of an ensemble preset one after the other (see `train`)."""
    started = time.monotonic()
    count = preset.training.ensemble
    member_preset = preset.replace(ensemble=1, max_minutes=preset.training.max_minutes / count)
    members = [f"member-{index}" for index in range(count)]
    _claim(output, resume_state, splits)
    tokenizer = _tokenizer(preset, output, splits["train"], resume_state, is_chief=True)
    config = _run_config(
        preset,
        output,
        resume_state,
        tokenizer,
        data_dir,
        **sources,
        seed=seed,
        members=tuple(members),
        train_data_sha256=training_data_sha256(splits["train"]),
    )
    config.write(output)
    recorder = run_files.FileRecorder(output)
    recorder.record()
    for index, member in enumerate(members):
        member_state = _check_output(output / member, resume=True, overwrite=False)
        if member_state != "finished":
            _train_run(
                member_preset,
                output / member,
                member_state,
                splits,
                data_dir=data_dir,
                epochs=epochs,
                minutes=minutes and minutes / count,
                strategy=strategy,
                seed=seed + index,
                tokenizer_from=output,
                sources=sources,
                **options,
            )
    member_configs = [run_dir.RunConfig.read(output / member) for member in members]
    config = config.replace(
        finished=True,
        train_minutes=round(sum(member.train_minutes or 0.0 for member in member_configs), 2),
        completed_epochs=[member.completed_epochs for member in member_configs],
        best_val_loss=[member.best_val_loss for member in member_configs],
        files=recorder.files(),
    )
    config.write(output)
    return _summary(output, config, (time.monotonic() - started) / 60.0)


class _Run:
    """What the steps of `_train_run` share: the preset, the folder, this worker's role, the clock and config.json."""

    def __init__(self, preset, output, strategy, started):
        self.preset, self.output, self.strategy, self.started = preset, output, strategy, started
        self.is_chief, self.worker_index = _worker_role() if strategy == "multi-worker" else (True, 0)
        self.config, self.prior_minutes = run_dir.RunConfig(), 0.0
        self.recorder = run_files.FileRecorder(output)

    def minutes(self):
        """Minutes since this call started."""
        return (time.monotonic() - self.started) / 60.0

    def record(self, **fields):
        """Updates config.json (the chief's only)."""
        if self.is_chief:
            run_dir.update_config(self.output, **fields)

    def record_files(self):
        """Records in config.json what the run has written (the chief's only; see `run_files.FileRecorder`)."""
        if self.is_chief:
            self.recorder.record()

    @property
    def backup(self):
        backup = self.output / run_dir.BACKUP
        return backup / f"worker-{self.worker_index}" if self.strategy == "multi-worker" else backup


def _train_run(
    config_preset,
    output,
    resume_state,
    splits,
    *,
    data_dir,
    epochs,
    minutes,
    strategy,
    mixed_precision,
    seed,
    cpu_devices,
    verbose,
    sources,
    initial_weights=None,
    tokenizer_from=None,
):
    """Trains one model into the run directory `output` (see `train`), with `tokenizer_from`'s tokenizer if given.

    `sources` (recorded in config.json) may name a run to start from, `sources["init_from"]["run"]`:
    its tokenizer is then reused, and `initial_weights` (its model's) are loaded into the new model.
    """
    import keras

    distribution = _configure_devices(strategy, cpu_devices)
    keras.utils.set_random_seed(seed)
    if mixed_precision:
        keras.mixed_precision.set_global_policy(mixed_precision)
        _prepare_precision(mixed_precision, strategy)
    run = _Run(config_preset, output, strategy, time.monotonic())
    init_from = sources.get("init_from", {}).get("run")
    tokenizer = _start(
        run,
        resume_state,
        splits,
        tokenizer_from or init_from,
        data_dir=data_dir,
        **sources,
        seed=seed,
        mixed_precision=mixed_precision,
        strategy=strategy,
    )
    train_batches, validation_batches = make_datasets(
        config_preset, splits, tokenizer, seed, distributed=strategy != "default"
    )
    with distribution.scope():
        model, schedule = _build_model(run, train_batches, initial_weights, init_from)
    callbacks, epoch_limit = _callbacks(run, schedule, epochs, minutes)
    if verbose == "auto":
        verbose = 1 if sys.stdout.isatty() else 2
    try:
        with unknown_length_warnings_ignored():
            model.fit(
                train_batches,
                validation_data=validation_batches,
                epochs=epoch_limit or 10_000,
                callbacks=callbacks,
                verbose=verbose,
            )
    finally:
        with contextlib.suppress(OSError, ValueError):  # a run that stops here still owns what it wrote
            run.record_files()
    return _finish(run, model, validation_batches)


def _prepare_precision(mixed_precision, strategy):
    """Before any graph runs: the hybrid bf16 route's autoclustering flags, where that route applies."""
    import warnings

    from keras_transformer.training.precision import enable_elementwise_autoclustering, training_route

    with warnings.catch_warnings():  # `compile_model` warns about a CPU without bf16 units, once
        warnings.simplefilter("ignore")
        route = training_route(mixed_precision)
    if strategy == "default" and route == "hybrid":
        enable_elementwise_autoclustering()


def _start(run, resume_state, splits, tokenizer_from, data_dir, **fields):
    """Claims the folder, gets the tokenizer and writes the run's config.json; returns the tokenizer."""
    _claim(run.output, resume_state, splits, run.is_chief)
    tokenizer = _tokenizer(run.preset, run.output, splits["train"], resume_state, run.is_chief, tokenizer_from)
    run.config = _run_config(
        run.preset,
        run.output,
        resume_state,
        tokenizer,
        data_dir,
        **fields,
        train_data_sha256=training_data_sha256(splits["train"]),
    )
    run.prior_minutes = run.config.train_minutes or 0.0  # of the run before a resume
    if run.is_chief:
        run.config.write(run.output)
    run.record_files()
    return tokenizer


def _build_model(run, train_batches, initial_weights, init_from):
    """The compiled model and its learning-rate schedule (call it in the strategy's scope)."""
    import tensorflow as tf

    from keras_transformer.models import build_transformer

    model = build_transformer(config=run.config.model)
    if initial_weights is not None:
        _set_initial_weights(model, initial_weights, init_from)
    # XLA has no collectives on CPU devices (b/194942685): data-parallel
    # runs without accelerators go without it; everything else uses it.
    cpu_distributed = run.strategy != "default" and not tf.config.list_logical_devices("GPU")
    schedule = compile_model(model, run.preset, jit_compile=not cpu_distributed, cooldown=run.config.cooldown)
    if run.strategy != "default":
        keras_workarounds.build_metrics_from_a_real_batch(model, train_batches)
    if run.strategy == "multi-worker":
        keras_workarounds.reduce_logs_across_workers(model)
    return model, schedule


def _callbacks(run, schedule, epochs, minutes):
    """`(callbacks, epoch limit)`: checkpoints, logs, the time budget, the cooldown and the resume backup."""
    import keras

    from keras_transformer.training.callbacks import AtomicBestCheckpoint, BackupAndRestore, EpochSnapshots

    class EpochCounter(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            run.record(completed_epochs=epoch + 1, train_minutes=round(run.prior_minutes + run.minutes(), 2))

    callbacks = [
        AtomicBestCheckpoint(
            run.output / run_dir.MODEL,
            best=float("inf") if run.config.best_val_loss is None else run.config.best_val_loss,
            on_improvement=lambda epoch, value: run.record(best_val_loss=value, best_epoch=epoch + 1),
            enabled=run.is_chief,
        ),
        EpochSnapshots(run.output / run_dir.SNAPSHOTS, keep=run.preset.training.average_last, enabled=run.is_chief),
        EpochCounter(),
    ]
    if run.is_chief:
        callbacks += [
            keras.callbacks.CSVLogger(str(run.output / run_dir.HISTORY), append=True),
            keras.callbacks.TensorBoard(str(run.output / run_dir.LOGS), write_graph=False),
        ]
    schedule_callbacks, epoch_limit = _schedule_callbacks(run, schedule, epochs, minutes)
    # Last: an epoch counts as done for resuming only once its checkpoint, status
    # and log row are written; if the run dies before, resuming trains it again.
    # Then the record of the files written (see `run_files.files_record`).
    # Keras's own deletion at the end would remove the whole folder: `_finish` removes the backup's files.
    backup = BackupAndRestore(str(run.backup), double_checkpoint=True, delete_checkpoint=False)
    record = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: run.record_files())
    return callbacks + schedule_callbacks + [backup, record], epoch_limit


def _schedule_callbacks(run, schedule, epochs, minutes):
    """`(callbacks, epoch limit)` that end the run in time: the time budget and the learning rate's cooldown."""
    from keras_transformer.training.callbacks import CooldownToEnd, TimeLimit

    recipe, callbacks = run.preset.training, []
    epoch_limit = epochs or (None if minutes else recipe.epochs)
    budget = minutes or recipe.max_minutes  # this call's, or the preset's for the whole run
    if not minutes and recipe.max_minutes:
        minutes = recipe.max_minutes - run.prior_minutes  # the whole run's, earlier (resumed) parts included
    if minutes:
        minutes = max(minutes - run.minutes(), 0.0)  # counted from the start of `train`: the data included
        callbacks.append(TimeLimit(minutes))
    if recipe.cooldown_fraction:
        callbacks.append(
            CooldownToEnd(
                schedule,
                recipe.cooldown_fraction,
                minutes=minutes or None,
                total_minutes=budget or None,
                epochs=epoch_limit,
                on_update=lambda start, end: run.record(cooldown=(start, end)),
            )
        )
    return callbacks, epoch_limit


def _remove_backups(run):
    """Deletes, file by file, the resume backup and (the chief) the epoch snapshots, once the run is done."""
    folders = [run.backup] + ([run.output / run_dir.SNAPSHOTS, run.output / run_dir.BACKUP] if run.is_chief else [])
    written = {
        path.relative_to(run.output).as_posix()
        for folder in folders
        for path in folder.rglob("*")
        if run_dir.REWRITTEN.fullmatch(path.relative_to(run.output).as_posix())
    }
    ownership.remove_files(run.output, sorted(written))


def _finish(run, model, validation_batches):
    """Averages the last epochs' weights if the preset asks, marks the run finished, removes its backups."""
    from keras_transformer.training.callbacks import average_snapshots, save_model_atomic, snapshot_paths

    average_last, output = run.preset.training.average_last, run.output
    config = run_dir.RunConfig.read(output) if run.is_chief else run.config
    snapshots = snapshot_paths(output / run_dir.SNAPSHOTS)[-average_last:]
    if run.is_chief and average_last > 1 and len(snapshots) > 1:
        averaged = average_snapshots(model, snapshots)
        with unknown_length_warnings_ignored():
            loss = averaged.evaluate(validation_batches, verbose=0, return_dict=True)["loss"]
        config = config.replace(averaged={"epochs": len(snapshots), "val_loss": loss})
        if config.best_val_loss is None or loss < config.best_val_loss:
            save_model_atomic(averaged, output / run_dir.MODEL)
            config = config.replace(best_val_loss=loss, best_epoch="averaged")
    minutes_used = run.minutes()
    _remove_backups(run)
    if run.is_chief:
        # One write: the run is finished exactly when its record holds its final files.
        config = config.replace(
            finished=True, train_minutes=round(run.prior_minutes + minutes_used, 2), files=run.recorder.files()
        )
        config.write(output)
    return _summary(output, config, minutes_used)


def _summary(output, config, minutes):
    return {
        "output": str(output),
        "completed_epochs": config.completed_epochs,
        "best_val_loss": config.best_val_loss,
        "best_epoch": config.best_epoch,
        "minutes": round(minutes, 2),
    }
