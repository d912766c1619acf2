"""The run directory: what `train` and `import` write and every command reads.

A run is a folder (`layout`): `config.json` (`RunConfig`, every field
checked when it is read), `model.keras` (or an ensemble's members), the
source and target tokenizers, and what training adds (history, logs,
backups). `open_run(path)` opens one whole (config, models, tokenizers);
`write_run` writes one. The record in `config.json` of the files a run
wrote is what lets a command replace or delete exactly those files
(`keras_transformer.files`).

This wing imports `config`, `presets`, `errors`, `files`, `models` and
`tokenizers`, and nothing of training, serving or the commands: it is the
one contract between what writes runs and what reads them.

Example:

>>> from keras_transformer import runs
>>> run = runs.open_run("saved_models/chatbot-ko")  # doctest: +SKIP
>>> runs.is_run_dir("saved_models/chatbot-ko")  # doctest: +SKIP
True
"""

from keras_transformer.runs.layout import (
    BACKUP,
    CONFIG,
    FILES,
    HISTORY,
    LOGS,
    MODEL,
    REWRITTEN,
    SNAPSHOTS,
    SOURCE_TOKENIZER,
    TARGET_TOKENIZER,
    is_run_dir,
    is_saved_model,
)
from keras_transformer.runs.opening import Run, open_run, single_model_run
from keras_transformer.runs.run_config import (
    SECTIONS,
    RunConfig,
    UnfinishedRunWarning,
    check_config_fields,
    model_paths,
    read_config,
    update_config,
    warn_if_unfinished,
)
from keras_transformer.runs.tokenizers import Tokenizers, load_tokenizers, with_languages
from keras_transformer.runs.writing import write_run

__all__ = [
    "BACKUP",
    "CONFIG",
    "FILES",
    "HISTORY",
    "LOGS",
    "MODEL",
    "REWRITTEN",
    "SNAPSHOTS",
    "SOURCE_TOKENIZER",
    "TARGET_TOKENIZER",
    "Run",
    "RunConfig",
    "SECTIONS",
    "Tokenizers",
    "UnfinishedRunWarning",
    "check_config_fields",
    "is_run_dir",
    "is_saved_model",
    "load_tokenizers",
    "model_paths",
    "open_run",
    "single_model_run",
    "read_config",
    "update_config",
    "warn_if_unfinished",
    "with_languages",
    "write_run",
]
