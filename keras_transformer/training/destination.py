"""What a run may do with its output folder: the checks before any work, the claim, and the clean-up at the end.

A run writes only into a new or empty folder or a run directory of this
package (`files.destinations`); it claims the folder (its config.json) before
writing anything else there, and deletes, file by file, only what it wrote.
"""

import pathlib

from keras_transformer import runs
from keras_transformer.files import destinations, ownership
from keras_transformer.training.data import training_data_sha256


def output_path(preset, output, init_from):
    """`output`, or `saved_models/<preset>` (`<preset>-finetuned` for a fine-tuned run).

    An `output` that is `init_from`, inside it or holds it is a ValueError.
    """
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


def check_output(output, resume, overwrite):
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
    config = runs.RunConfig.read(output)
    unfinished_ensemble = bool(config.members) and not config.finished
    interrupted = (output / runs.BACKUP).exists() or unfinished_ensemble
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


def check_same_data(output, splits, data_dir):
    """Refuses to resume `output` on training data other than the data it started on."""
    recorded = runs.RunConfig.read(output).train_data_sha256
    if recorded is not None and recorded != training_data_sha256(splits["train"]):
        holds = f"a run started on other training data than data_dir={data_dir!r} gives (resume it on that data)"
        raise destinations.DestinationInUseError(output, holds, ["overwrite"])


def claim(output, state, splits, is_chief=True):
    """Creates `output` and marks it as this package's run before anything else is written there.

    `state` is `check_output`'s; a run to resume is this package's already. A
    run that fails before its first epoch (bad data, an interrupt while the
    tokenizer trains) is then a run directory that `resume` restarts and
    `overwrite` replaces, never a folder that only the user can clear.
    """
    output.mkdir(parents=True, exist_ok=True)
    if is_chief and state != "resume":
        claimed = runs.RunConfig(
            created_by=destinations.CREATOR, train_data_sha256=training_data_sha256(splits["train"])
        )
        claimed.write(output)


def remove_rewritten(output, folders):
    """Deletes, file by file, the files in `folders` (inside `output`) at the paths a run rewrites (`REWRITTEN`)."""
    written = {
        path.relative_to(output).as_posix()
        for folder in folders
        for path in folder.rglob("*")
        if runs.REWRITTEN.fullmatch(path.relative_to(output).as_posix())
    }
    ownership.remove_files(output, sorted(written))
