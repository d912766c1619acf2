"""The options of `train`, grouped: what the data comes from, how long to train, on which devices, and the seed.

`Options.check` raises the ValueErrors that name a bad argument, before any
work; a run records its `Sources` in config.json (`Sources.record`).
"""

import dataclasses
import math
import os

STRATEGIES = ("default", "mirrored", "multi-worker")
MIXED_PRECISION = (None, "mixed_float16", "mixed_bfloat16")


@dataclasses.dataclass(frozen=True)
class Sources:
    """Where a run's data and its starting point come from.

    Args:
        data_dir: a folder of the preset's corpus files, or the
            tensorflow-datasets data dir to download them into; None for
            the bundled corpus.
        corpus_files: the user's own corpus (`corpora.load_file_splits`), or None.
        init_from: a run directory to fine-tune, or None.
        source_lang, target_lang: the language pair of the data, in a
            multilingual `init_from`'s codes (`fine_tuning.languages`), or None.
    """

    data_dir: object = None
    corpus_files: dict = None
    init_from: object = None
    source_lang: str = None
    target_lang: str = None

    @property
    def languages(self):
        """`{"source_lang", "target_lang"}` where either is given, else None."""
        if self.source_lang is None and self.target_lang is None:
            return None
        return {"source_lang": self.source_lang, "target_lang": self.target_lang}

    def record(self):
        """What config.json records of them: `data_dir` always, `corpus_files`, `init_from`, `languages` when given.

        `corpus_files` are recorded with each file's sha256, and `init_from` as
        its absolute path with its model's sha256, beside what a fine-tuned
        run keeps of it (`fine_tuning.inherited_fields`); `languages` are
        the pair a multilingual model is fine-tuned on, its translations'
        default.
        """
        recorded = {"data_dir": None if self.data_dir is None else str(self.data_dir)}
        if self.corpus_files is not None:
            from keras_transformer.datasets import corpora

            recorded["corpus_files"] = corpora.describe_files(self.corpus_files)
        if self.init_from is not None:
            from keras_transformer.training import fine_tuning

            recorded["init_from"] = fine_tuning.record(self.init_from)
            recorded.update(fine_tuning.inherited_fields(self.init_from))
        if self.languages is not None:
            recorded["languages"] = self.languages
        return recorded


@dataclasses.dataclass(frozen=True)
class Budget:
    """How long to train: `epochs` (a positive int) and `minutes` of this call; None for the preset's."""

    epochs: int = None
    minutes: float = None

    def share(self, count):
        """What each of `count` models trained in turn gets: every epoch, and `1/count` of the minutes."""
        return Budget(self.epochs, self.minutes and self.minutes / count)


@dataclasses.dataclass(frozen=True)
class Devices:
    """Where to train: a `strategy`, a mixed precision policy, and the CPU's logical devices.

    Args:
        strategy: one of `STRATEGIES`; `"multi-worker"` reads TF_CONFIG.
        mixed_precision: one of `MIXED_PRECISION`.
        cpu_devices: split the CPU into this many logical devices (to run
            `"mirrored"` without accelerators); None leaves it whole.
    """

    strategy: str = "default"
    mixed_precision: str = None
    cpu_devices: int = None

    @property
    def distributed(self):
        """Whether a `tf.distribute` strategy other than the default one trains."""
        return self.strategy != "default"


@dataclasses.dataclass(frozen=True)
class Options:
    """How `train` trains each model, besides the preset and the destination.

    Args:
        budget: how long (`Budget`).
        devices: where (`Devices`).
        seed: the seed of the weights, the shuffling and the dropout.
        verbose: Keras's `fit` verbosity; `"auto"` is 1 on a terminal, else 2.
    """

    budget: Budget = Budget()
    devices: Devices = Devices()
    seed: int = 0
    verbose: object = "auto"

    def check(self):
        """ValueErrors naming the argument of `train`, before any work."""
        (epochs, minutes), seed = dataclasses.astuple(self.budget), self.seed
        strategy, mixed_precision, cpu_devices = dataclasses.astuple(self.devices)
        if epochs is not None and (not is_int(epochs) or epochs < 1):
            raise ValueError(f"`epochs` must be a positive int. Received: epochs={epochs!r}")
        if minutes is not None and (
            isinstance(minutes, bool)
            or not isinstance(minutes, (int, float))
            or not math.isfinite(minutes)
            or minutes <= 0
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
        if not is_int(seed) or seed < 0:
            raise ValueError(f"`seed` must be a non-negative int. Received: seed={seed!r}")
        if cpu_devices is not None and (not is_int(cpu_devices) or cpu_devices < 1):
            raise ValueError(f"`cpu_devices` must be a positive int. Received: cpu_devices={cpu_devices!r}")

    def for_member(self, index, count):
        """The options of member `index` of an ensemble of `count`: its share of the budget, `seed + index`."""
        return dataclasses.replace(self, budget=self.budget.share(count), seed=self.seed + index)


def is_int(value):
    """Whether `value` is an int (a bool is not)."""
    return isinstance(value, int) and not isinstance(value, bool)
