"""The Transformer model: `build_transformer` and the interface of the model it builds.

The same layers build GPT (`build_decoder_only`, a `DecoderOnlyModel`) and
BERT (`build_encoder_only`, an `EncoderOnlyModel`), both `TransformerModel`s
with one side only.

`build_transformer` returns a `TransformerModel`: a functional `keras.Model`
(inputs `encoder_inputs` and `decoder_inputs`, output the logits) that also
exposes what decoding, export and inspection need, so that no other module
looks its layers up by name:

- its parts: `encoder_embedding`, `encoder_layers`, `encoder_norm`,
  `decoder_embedding`, `decoder_layers`, `decoder_norm`, `output_layer`, and
  `max_length`, `source_vocab_size`, `target_vocab_size`;
- `encode(source_ids)`: the encoder output;
- `decode(target_ids, encoder_outputs, encoder_padding_mask)`: teacher-forced logits;
- the cached decoder step: `cross_attention_caches(encoder_outputs)`,
  `empty_self_attention_caches(batch_size, length)` and `decoder_step(...)`.

The encoder and decoder forward passes are `encoder_forward` and
`decoder_forward` (`keras_transformer.layers.encoder` and `.decoder`), which the functional
graph, `encode`/`decode` and the `Encoder`/`Decoder` layers all run.
`as_transformer(model)` checks any model handed to the library and is the one
place where the layers are found by name: a `.keras` file saved by version
0.1.0 loads as a `TransformerModel` unchanged (same config, same weights).

Example:

>>> model = build_transformer(1000, 1000, num_layers=2, d_model=64, num_heads=4,
...                           d_ff=128, max_length=32)
>>> source = keras.ops.convert_to_tensor([[5, 6, 7, 0]])
>>> memory = model.encode(source)  # (batch, source_len, d_model)
>>> tuple(memory.shape), len(model.decoder_layers), model.max_length
((1, 4, 64), 2, 32)
"""

import keras  # noqa: F401  (the example above)

from keras_transformer.models.architectures import build_model
from keras_transformer.models.builder import build_transformer
from keras_transformer.models.decoder_only import DecoderOnlyModel, build_decoder_only, is_decoder_only
from keras_transformer.models.encoder_only import EncoderOnlyModel, build_encoder_only
from keras_transformer.models.transformer_model import TransformerModel, as_transformer, config_of

__all__ = [
    "DecoderOnlyModel",
    "EncoderOnlyModel",
    "TransformerModel",
    "as_transformer",
    "build_decoder_only",
    "build_model",
    "build_encoder_only",
    "build_transformer",
    "config_of",
    "is_decoder_only",
]
