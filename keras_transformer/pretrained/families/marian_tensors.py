"""Which tensor of a Marian checkpoint is which weight of this package's model: both directions read this table.

The layers' tensors are named as in every BART-derived family (`bart`); this
module adds Marian's embeddings, output bias and position tables.

A Marian checkpoint names its tensors as PyTorch's `MarianMTModel` does
(`model.encoder.layers.0.self_attn.q_proj.weight`, ...), a linear layer's
matrix as `(outputs, inputs)`; a Keras kernel is `(inputs, outputs)`, so
those are transposed (`transposed`), the rest taken as they are (`as_is`).
`tensor_shapes(config, names)` says which tensors a model of `config` has
and their shapes; `weight_sources(model, config, names)` pairs each of
`model`'s weights with its tensor. `names` are the tensors a checkpoint
holds, which decide the names of the embeddings (`model.shared.weight`, or
the encoder's `embed_tokens`) and whether it has a `final_logits_bias`.

Example:

>>> from keras_transformer.config import ModelConfig
>>> config = ModelConfig(source_vocab_size=10, target_vocab_size=10, num_layers=1, d_model=8, num_heads=2,
...                      d_ff=16, share_embeddings=True, tie_output_embedding=True)
>>> required, optional = tensor_shapes(config, {"model.shared.weight"})
>>> required["model.shared.weight"], required["model.encoder.layers.0.fc1.weight"]
((10, 8), (16, 8))
"""

from keras_transformer.pretrained.families.bart import outer_names, stack_shapes, stack_sources
from keras_transformer.pretrained.families.weights import as_is, transposed

__all__ = ["as_is", "embedding_names", "outer_names", "tensor_shapes", "tied_copies", "transposed", "weight_sources"]


def embedding_names(config, names):
    """The tensors of the source embedding and of the target embedding (None where the two are shared)."""
    if config.share_embeddings:
        shared = "model.shared.weight" if "model.shared.weight" in names else "model.encoder.embed_tokens.weight"
        return shared, None
    decoder = "model.decoder.embed_tokens.weight"
    return "model.encoder.embed_tokens.weight", decoder if decoder in names else "lm_head.weight"


def tied_copies(config, names):
    """`{copy: original}`: the tensors among `names` that transformers ties to another (each must equal it)."""
    source, target = embedding_names(config, names)
    copies = {name: source for name in ("model.shared.weight", "model.encoder.embed_tokens.weight")}
    if config.share_embeddings:
        copies["model.decoder.embed_tokens.weight"] = source
    if config.tie_output_embedding:
        copies["lm_head.weight"] = target or source
    return {copy: original for copy, original in copies.items() if copy != original}


def tensor_shapes(config, names):
    """`(required, optional)`: the tensors' names and shapes of a Marian model of `config`."""
    d, source, target = config.d_model, config.source_vocab_size, config.target_vocab_size
    encoder_embedding, decoder_embedding = embedding_names(config, names)
    required = {encoder_embedding: (source, d)}
    if decoder_embedding:
        required[decoder_embedding] = (target, d)
    if not config.tie_output_embedding:
        required["lm_head.weight"] = (target, d)
    optional = {
        "final_logits_bias": (1, target),
        "model.shared.weight": (source, d),
        "model.encoder.embed_tokens.weight": (source, d),
        "model.decoder.embed_tokens.weight": (target, d),
        "lm_head.weight": (target, d),
        "model.encoder.embed_positions.weight": (config.max_length, d),
        "model.decoder.embed_positions.weight": (config.max_length, d),
    }
    required.update(stack_shapes(config))
    return required, optional


def weight_sources(model, config, names):
    """`(model weight, tensor name or None for zeros, transform)` for every weight of `model`."""
    encoder_embedding, decoder_embedding = embedding_names(config, names)
    sources = [(model.encoder_embedding.embeddings, encoder_embedding, as_is)]
    if decoder_embedding:
        sources.append((model.decoder_embedding.embeddings, decoder_embedding, as_is))
    bias = "final_logits_bias" if "final_logits_bias" in names else None
    if config.tie_output_embedding:
        if config.output_bias:
            sources.append((model.decoder_embedding.logits_bias, bias, as_is))
    else:
        sources.append((model.output_layer.kernel, "lm_head.weight", transposed))
        sources.append((model.output_layer.bias, bias, as_is))
    return sources + stack_sources(model)
