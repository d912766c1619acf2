"""The registry of checkpoint families: one module a family, chosen by `config.json`'s `model_type`.

Each family module says what its checkpoints are in this package's terms,
in the same four parts (after keras-hub's `utils/transformers/convert_*.py`):

- the model: `model_config(hf_config, tensors, where, weights)` -> `ModelConfig`,
  held against the weights file's tensors, and `check_tensors(config,
  tensors, weights)`, every tensor's name and shape;
- the weights: `assign_weights(model, checkpoint)`, one tensor at a time;
- the tokenizer: `tokenizers(checkpoint, config)` -> `runs.Tokenizers`;
- the generation settings: `decoding_config(generation, config, where)` -> `DecodingConfig`;

and its `MODEL_TYPE` (transformers' name), `FAMILY` (for messages) and
`ADD_SOURCE_END` (whether its sources end with END). A family whose model is
not the encoder-decoder has `build_model(config)` (`gpt2`: the decoder alone,
`bert`: the encoder alone), and one whose special ids are its tokenizer's
`config_with_tokenizers(config, tokenizers)`. A new family is one module
like `marian`, added to `FAMILIES`.

Example:

>>> sorted(FAMILIES)
['bert', 'gpt2', 'marian']
>>> family_of({"model_type": "t5"}, "config.json")
Traceback (most recent call last):
...
ValueError: config.json: model_type 't5' is not one keras-transformer imports. Supported: ['bert', 'gpt2', 'marian']
"""

from keras_transformer.pretrained.families import bert, gpt2, marian

PARTS = ("model_config", "check_tensors", "assign_weights", "tokenizers", "decoding_config")
FAMILIES = {module.MODEL_TYPE: module for module in (marian, gpt2, bert)}


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


__all__ = ["FAMILIES", "PARTS", "family_of"]
