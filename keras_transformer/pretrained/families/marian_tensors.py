"""Which tensor of a Marian checkpoint is which weight of this package's model: both directions read this table.

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


def transposed(value):
    """A PyTorch linear layer's `(outputs, inputs)` matrix as a Keras kernel, and back."""
    return value.T


def as_is(value):
    """A tensor that both libraries lay out alike (biases, LayerNorms, embeddings)."""
    return value


def embedding_names(config, names):
    """The tensors of the source embedding and of the target embedding (None where the two are shared)."""
    if config.share_embeddings:
        shared = "model.shared.weight" if "model.shared.weight" in names else "model.encoder.embed_tokens.weight"
        return shared, None
    decoder = "model.decoder.embed_tokens.weight"
    return "model.encoder.embed_tokens.weight", decoder if decoder in names else "lm_head.weight"


def outer_names(tensors):
    """The names among `tensors` that are not a layer's: what a checkpoint's layout says beyond its config."""
    return sorted(name for name in tensors if not name.startswith(("model.encoder.layers.", "model.decoder.layers.")))


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
    for side, count in (("encoder", config.num_layers), ("decoder", config.decoder_layers)):
        for index in range(count):
            required.update(_layer_shapes(f"model.{side}.layers.{index}", config, cross=side == "decoder"))
    return required, optional


def _layer_shapes(prefix, config, cross):
    d, ffn = config.d_model, config.d_ff
    blocks = [("self_attn", "self_attn_layer_norm")] + ([("encoder_attn", "encoder_attn_layer_norm")] if cross else [])
    layer = {}
    for attention, norm in blocks:
        for projection in ("q_proj", "k_proj", "v_proj", "out_proj"):
            layer[f"{prefix}.{attention}.{projection}.weight"] = (d, d)
            layer[f"{prefix}.{attention}.{projection}.bias"] = (d,)
        layer[f"{prefix}.{norm}.weight"] = layer[f"{prefix}.{norm}.bias"] = (d,)
    layer.update({f"{prefix}.fc1.weight": (ffn, d), f"{prefix}.fc1.bias": (ffn,)})
    layer.update({f"{prefix}.fc2.weight": (d, ffn), f"{prefix}.fc2.bias": (d,)})
    layer[f"{prefix}.final_layer_norm.weight"] = layer[f"{prefix}.final_layer_norm.bias"] = (d,)
    return layer


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
    for prefix, layers in (("model.encoder", model.encoder_layers), ("model.decoder", model.decoder_layers)):
        for index, layer in enumerate(layers):
            sources += _layer_sources(layer, f"{prefix}.layers.{index}")
    return sources


_ATTENTION = {"query": "q_proj", "key": "k_proj", "value": "v_proj"}


def _layer_sources(layer, prefix):
    blocks = [("self_attention", "self_attn", "self_attention_norm", "self_attn_layer_norm")]
    if hasattr(layer, "cross_attention"):
        blocks.append(("cross_attention", "encoder_attn", "cross_attention_norm", "encoder_attn_layer_norm"))
    sources = []
    for ours, theirs, our_norm, their_norm in blocks:
        attention = getattr(layer, ours)
        for part, name in _ATTENTION.items():
            dense = getattr(attention, f"{part}_dense")
            sources.append((dense.kernel, f"{prefix}.{theirs}.{name}.weight", transposed))
            sources.append((dense.bias, f"{prefix}.{theirs}.{name}.bias", as_is))
        sources.append((attention.output_dense.kernel, f"{prefix}.{theirs}.out_proj.weight", transposed))
        sources.append((attention.output_dense.bias, f"{prefix}.{theirs}.out_proj.bias", as_is))
        sources += _norm_sources(getattr(layer, our_norm), f"{prefix}.{their_norm}")
    for ours, theirs in (("inner_dense", "fc1"), ("output_dense", "fc2")):
        dense = getattr(layer.ffn, ours)
        sources.append((dense.kernel, f"{prefix}.{theirs}.weight", transposed))
        sources.append((dense.bias, f"{prefix}.{theirs}.bias", as_is))
    sources += _norm_sources(layer.ffn_norm, f"{prefix}.final_layer_norm")
    return sources


def _norm_sources(norm, prefix):
    return [(norm.gamma, f"{prefix}.weight", as_is), (norm.beta, f"{prefix}.bias", as_is)]
