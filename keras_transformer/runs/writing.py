"""`write_run`: a whole run directory written at once: its model, tokenizers, config.json and record.

An import writes a run so (`keras_transformer.pretrained`); training writes
the same files epoch by epoch (`keras_transformer.training`). Write it into a
temporary folder and swap it in (`files.atomic.replace_dir`), so that a crash
leaves nothing half-written.

Example:

>>> write_run(tmp, model, run_config, Tokenizers(source, target))  # doctest: +SKIP
"""

import pathlib

from keras_transformer.files import run_files
from keras_transformer.runs.layout import MODEL, SOURCE_TOKENIZER, TARGET_TOKENIZER


def write_run(folder, model, config, tokenizers):
    """Writes `model` (`model.keras`), `tokenizers` (each with its `save(directory)`) and `config` in `folder`.

    The run's `config.json` then records every file written (`run_files`),
    which is what lets `--overwrite` replace exactly those files later.
    """
    folder = pathlib.Path(folder)
    model.save(folder / MODEL)
    tokenizers.source.save(folder / SOURCE_TOKENIZER)
    tokenizers.target.save(folder / TARGET_TOKENIZER)
    config.write(folder)
    run_files.FileRecorder(folder).record()
