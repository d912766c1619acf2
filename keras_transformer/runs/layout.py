"""The layout of a run directory: the names of its files, and how to tell a run from an export.

`keras-transformer train --output saved_models/NAME` writes::

    saved_models/NAME/
      config.json           preset, model hyper-parameters, max lengths, decoding defaults
      model.keras           the best model by validation loss (written atomically)
      tokenizers/source/    the source tokenizer (`SubwordTokenizer.save`)
      tokenizers/target/    the target tokenizer (the same files when shared)
      history.csv           one row per epoch
      logs/                 TensorBoard
      backup/               `--resume` state (removed when the run finishes)
      snapshots/            the last epochs' weights, for averaging (removed when the run finishes)

config.json's `"files"` is the run's record of what this package wrote in
it: each file's path, size and sha256 (`files.run_files.FileRecorder`,
after every epoch). Only those files are ever deleted or replaced.

An ensemble preset (`Preset.ensemble = n`) writes one run directory per
member, `member-0/` ... `member-{n-1}/` (each as above), beside the
ensemble's own `config.json` (listing them under `"members"`) and
`tokenizers/`; the commands load all members from the ensemble's directory.

`keras-transformer export --model saved_models/NAME --output saved_models/NAME-export`
writes a SavedModel directory (`saved_model.pb`) that needs no project code.
"""

from keras_transformer.files import folders, run_files
from keras_transformer.files.folders import is_run_dir, is_saved_model  # noqa: F401  (the one decision of a folder's kind)

CONFIG = run_files.CONFIG
MODEL = folders.MODEL
SOURCE_TOKENIZER = "tokenizers/source"
TARGET_TOKENIZER = "tokenizers/target"
HISTORY = "history.csv"
LOGS = "logs"
BACKUP = "backup"
SNAPSHOTS = "snapshots"
FILES, REWRITTEN = run_files.FILES, run_files.REWRITTEN  # the record of the files a run wrote
