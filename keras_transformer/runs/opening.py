"""`open_run`: a run directory's config, model (or an ensemble's models) and tokenizers, each checked as it loads.

Every reader of a run goes through it (the translators, the exports, the
CTranslate2 conversion, `plot attention`), so a damaged file is one line
naming it wherever it is read.

Example:

>>> run = open_run("saved_models/chatbot-ko")  # doctest: +SKIP
>>> run.config.model.d_model, run.model.max_length, run.tokenizers.shared  # doctest: +SKIP
(256, 64, True)
"""

import pathlib
from typing import NamedTuple

from keras_transformer.errors import literal
from keras_transformer.runs.layout import is_run_dir, is_saved_model
from keras_transformer.runs.run_config import RunConfig, model_paths
from keras_transformer.runs.tokenizers import Tokenizers, load_tokenizers


class Run(NamedTuple):
    """An opened run directory: its `path`, `config`, `models` (one, or an ensemble's) and `tokenizers`."""

    path: pathlib.Path
    config: RunConfig
    models: list
    tokenizers: Tokenizers

    @property
    def model(self):
        """The run's model, or the list of an ensemble's members (what the decoders take)."""
        return self.models[0] if len(self.models) == 1 else list(self.models)


def open_run(path, models=True):
    """The `Run` at `path`; with `models=False` its models are not loaded (`models` is then empty).

    Raises:
        ValueError: one line naming the file that is missing, corrupt or
            incompatible (the config, a `model.keras`, a tokenizer folder).
    """
    from keras_transformer.models.loading import load_model

    path = pathlib.Path(path)
    config = RunConfig.read(path)
    loaded = [load_model(model_path) for model_path in model_paths(path)] if models else []
    return Run(path, config, loaded, load_tokenizers(path))


def single_model_run(run, ensemble_refusal):
    """The path of the run directory `run`, which holds one model; a one-line `ValueError` otherwise.

    A writer of one model (a CTranslate2 model, a LiteRT export, a Hugging
    Face checkpoint) calls it: a SavedModel or any other folder is refused
    as not a run, and an ensemble with `ensemble_refusal` (why, and what to
    export instead).

    Example:

    >>> single_model_run("saved_models/ensemble", "a checkpoint holds one model")  # doctest: +SKIP
    Traceback (most recent call last):
    ValueError: saved_models/ensemble is an ensemble: a checkpoint holds one model
    """
    path = pathlib.Path(run)
    if not is_run_dir(path):
        kind = "a SavedModel" if is_saved_model(path) else "not a training run"
        raise ValueError(f"{literal(run)} is {kind}: `run` must be a run directory (config.json + model.keras)")
    if RunConfig.read(path).members:
        raise ValueError(f"{run} is an ensemble: {ensemble_refusal}")
    return path
