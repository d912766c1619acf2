"""`train(marian_compatible=True)` (`train --marian-compatible`): a new run that `export --format transformers` writes.

This package's own runs are written back as one checkpoint family's
(`pretrained.families.own_runs`: Marian, OPUS-MT), which holds what a
Marian model is: sources that end with END (`MarianTokenizer`
appends `</s>`) and LayerNorms of epsilon 1e-5 (torch's, which Marian's
config.json cannot change). This package's defaults differ (no END after
the source, epsilon 1e-6), so a run trained with them is refused at export.
The option trains a run with Marian's two, and with the beams' length
penalty that transformers' `generate` has (a score divided by `length **
alpha`, where the presets use GNMT's), and refuses in one line, before any
work, a preset whose model Marian cannot hold (pre-norm layers, an
activation it lacks). What the family is (its sources' END, the settings
its checkpoints fix, what its writer refuses) is read from the registry.

Example:

>>> from keras_transformer.presets import get_preset
>>> preset = marian_preset(get_preset("tiny"), {})
>>> preset.model.layer_norm_epsilon, preset.decoding.normalization, RECORDED
(1e-05, 'length', {'add_source_end': True})
>>> marian_preset(get_preset("tiny"), {"layer_norm_epsilon": 1e-6})
Traceback (most recent call last):
...
ValueError: `marian_compatible` sets layer_norm_epsilon=1e-05, as Marian has. Received: layer_norm_epsilon=1e-06
"""

from keras_transformer.pretrained.families import own_runs

FAMILY, WRITER = own_runs()  # the family module this package's own runs are written back as, and its writer
RECORDED = {"add_source_end": FAMILY.ADD_SOURCE_END}  # config.json's: sources end with END
# The preset's settings it sets: those the family's checkpoints fix (Marian's LayerNorms), and the beams' length
# penalty transformers' `generate` has.
SETTINGS = {**WRITER.FIXED_SETTINGS, "normalization": "length"}


def check_new_run(init_from):
    """A fine-tuned run (`init_from` not None) keeps how the run it starts from was trained: a `ValueError`."""
    if init_from is not None:
        raise ValueError(
            "`marian_compatible` trains a new run; a fine-tuned run keeps how its `init_from` run was trained. "
            f"Received: init_from={str(init_from)!r}"
        )


def marian_preset(preset, overrides):
    """`preset` (a `Preset`, `overrides` applied) with `SETTINGS`; a `ValueError` where it cannot have them."""
    for name, value in SETTINGS.items():
        if overrides.get(name, value) != value:
            raise ValueError(
                f"`marian_compatible` sets {name}={value!r}, as {FAMILY.FAMILY} has. "
                f"Received: {name}={overrides[name]!r}"
            )
    preset = preset.replace(**SETTINGS)
    try:
        WRITER.check_model(preset.model)
    except ValueError as error:
        raise ValueError(f"`marian_compatible`: preset {preset.name!r}'s {error}") from None
    return preset
