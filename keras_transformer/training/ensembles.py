"""Ensembles: a preset with `ensemble=n` trains n models in turn into one run directory, sharing a tokenizer.

The ensemble's directory holds its config.json (listing the members) and the
tokenizers; each member is a run directory of its own (`member-0/`, ...),
trained by `model_run.train_model` with seed `seed + index` and `1/n` of the
time budget. An interrupted ensemble resumes at its first unfinished member.
"""

import time

from keras_transformer import runs
from keras_transformer.files import run_files
from keras_transformer.training import data, destination, model_run
from keras_transformer.training.data import training_data_sha256


def member_names(count):
    """The members' folders: `member-0`, ..., `member-{count - 1}`."""
    return [f"member-{index}" for index in range(count)]


def train_ensemble(preset, output, state, splits, options, *, recorded):
    """Trains the members of an ensemble preset one after the other into `output`; returns `train`'s summary.

    `state` is what to do with `output` (`destination.check_output`),
    `options` an `options.Options` (each member gets `options.for_member`),
    `recorded` what config.json records of the sources. An ensemble is not
    fine-tuned and trains with the default strategy (`run.check_combination`).
    """
    started = time.monotonic()
    count = preset.training.ensemble
    member_preset = preset.replace(ensemble=1, max_minutes=preset.training.max_minutes / count)
    members = member_names(count)
    destination.claim(output, state, splits)
    tokenizers = data.run_tokenizers(preset, output, splits["train"], state, is_chief=True)
    config = model_run.start_config(
        preset,
        output,
        state,
        tokenizers,
        **recorded,
        seed=options.seed,
        members=tuple(members),
        train_data_sha256=training_data_sha256(splits["train"]),
    )
    config.write(output)
    recorder = run_files.FileRecorder(output)
    recorder.record()
    for index, member in enumerate(members):
        member_state = destination.check_output(output / member, resume=True, overwrite=False)
        if member_state != "finished":
            model_run.train_model(
                member_preset,
                output / member,
                member_state,
                splits,
                options.for_member(index, count),
                recorded=recorded,
                tokenizer_from=output,
            )
    return _finish(output, config, members, recorder, started)


def _finish(output, config, members, recorder, started):
    """Marks the ensemble finished with its members' epochs, losses and minutes, and the files it wrote."""
    member_configs = [runs.RunConfig.read(output / member) for member in members]
    config = config.replace(
        finished=True,
        train_minutes=round(sum(member.train_minutes or 0.0 for member in member_configs), 2),
        completed_epochs=[member.completed_epochs for member in member_configs],
        best_val_loss=[member.best_val_loss for member in member_configs],
        files=recorder.files(),
    )
    config.write(output)
    return model_run.summary(output, config, (time.monotonic() - started) / 60.0)
