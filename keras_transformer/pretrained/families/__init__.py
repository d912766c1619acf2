"""The registry of checkpoint families: one module a family, chosen by `config.json`'s `model_type`.

Each family module says what its checkpoints are in this package's terms,
in the same four parts (after keras-hub's `utils/transformers/convert_*.py`):

- the model: `model_config(hf_config, tensors, where, weights)` -> `ModelConfig`,
  held against the weights file's tensors, and `check_tensors(config,
  tensors, weights)`, every tensor's name and shape;
- the weights: `assign_weights(model, checkpoint)`, one tensor at a time;
- the tokenizer: `tokenizers(checkpoint, config)` -> `runs.Tokenizers`;
- the generation settings: `decoding_config(generation, config, where)` -> `DecodingConfig`;

and its `MODEL_TYPE` (transformers' name), `FAMILY` (for messages),
`ADD_SOURCE_END` (whether its sources end with END); optionally
`outer_names(tensors)` (the tensors beyond the layers', which an export
writes again), `license_of(checkpoint)` (its family's license where the
repository's README names none) and `run_record(checkpoint, hf_config,
config)` (what else the run records of the checkpoint: BERT's labels and
sentence-embedding settings), and `fine_tuning_preset(preset)` (the recipe
`train --init-from` fine-tunes its imports with, where it is not the
translation models'). A family whose model is not the encoder-decoder has
`build_model(config)` (`gpt2`: the decoder alone, `bert`: the encoder
alone), and one whose special ids are its tokenizer's
`config_with_tokenizers(config, tokenizers)`. A new family is one module
like `marian`, added to `FAMILIES`: `marian` (OPUS-MT), `m2m100` (M2M100 and
NLLB-200), `gpt2`, `bert`, `t5` (T5, flan-T5, MADLAD-400), `mt5`, `mbart`
(mBART-50).

A family that runs are written back as (`pretrained.export_checkpoint`) has
a writer module in the same four parts the other way (`marian_export`,
`m2m100_export`, `gpt2_export`, `bert_export`, `t5_export`, `mt5_export`,
`mbart_export`: its `hf_config`, `checkpoint_tensors`, `tokenizer_files`
and `tokenizer_config`, `generation_config`, each with its `reads_as_*`
that keeps a source's file where it still holds), registered in `WRITERS`,
and a `card(state)` for the model card. This package's own runs are
written as Marian checkpoints (`own_runs`, `writer_of`); the writer of
their family also says which model settings its checkpoints fix
(`FIXED_SETTINGS`, which `train --marian-compatible` sets) and refuses a
model it cannot hold (`check_model`).

Example:

>>> sorted(FAMILIES), sorted(WRITERS)
(['bert', 'gpt2', 'm2m_100', 'marian', 'mbart', 'mt5', 't5'], ['bert', 'gpt2', 'm2m_100', 'marian', 'mbart', 'mt5', 't5'])
>>> family_of({"model_type": "bart"}, "config.json")
Traceback (most recent call last):
...
ValueError: config.json: model_type 'bart' is not one keras-transformer imports. Supported: ['bert', 'gpt2', 'm2m_100', 'marian', 'mbart', 'mt5', 't5']
"""  # noqa: E501  (a doctest's output is one line)

from keras_transformer.pretrained.families import (
    bert,
    bert_export,
    gpt2,
    gpt2_export,
    m2m100,
    m2m100_export,
    marian,
    marian_export,
    mbart,
    mbart_export,
    mt5,
    mt5_export,
    t5,
    t5_export,
)

PARTS = ("model_config", "check_tensors", "assign_weights", "tokenizers", "decoding_config")
FAMILIES = {module.MODEL_TYPE: module for module in (marian, m2m100, gpt2, bert, t5, mt5, mbart)}
WRITERS = {
    module.MODEL_TYPE: module
    for module in (marian_export, m2m100_export, gpt2_export, bert_export, t5_export, mt5_export, mbart_export)
}
OWN_RUNS = marian.MODEL_TYPE  # the family this package's own runs are written as


def family_of(hf_config, where):
    """The family module of a checkpoint's `config.json` (a dict, read from `where`); a one-line `ValueError` else."""
    model_type = hf_config.get("model_type")
    if not isinstance(model_type, str):
        raise ValueError(
            f"{where}: `model_type` must be a string naming the family of the checkpoint. Received: {model_type!r}"[
                :300
            ]
        )
    if model_type not in FAMILIES:
        raise ValueError(
            f"{where}: model_type {model_type!r} is not one keras-transformer imports. Supported: {sorted(FAMILIES)}"
        )
    return FAMILIES[model_type]


def own_runs():
    """`(family module, writer module)` that this package's own runs are written back as (`OWN_RUNS`)."""
    return writer_of(None)


def writer_of(pretrained):
    """`(family module, writer module)` for a run whose config.json records `pretrained` (None: one of ours)."""
    model_type = (pretrained or {}).get("model_type", OWN_RUNS)
    if model_type not in WRITERS:
        raise ValueError(
            f"the run was imported from a {model_type!r} checkpoint, which keras-transformer does not write back. "
            f"It writes: {sorted(WRITERS)}"[:300]
        )
    return FAMILIES[model_type], WRITERS[model_type]


__all__ = ["FAMILIES", "OWN_RUNS", "PARTS", "WRITERS", "family_of", "own_runs", "writer_of"]
