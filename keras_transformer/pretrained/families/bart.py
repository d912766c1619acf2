"""What the BART-derived families share (Marian, M2M100, NLLB): their layers' tensor names, shapes and places.

Every layer of these checkpoints names its tensors alike
(`model.encoder.layers.N.self_attn.q_proj.weight`, `fc1`, `final_layer_norm`,
...), in PyTorch's layout (a `Linear`'s weight is `(out, in)`). A family
module says what differs around them (embeddings, final norms, biases).

Example:

>>> sorted(layer_shapes("model.encoder.layers.0", d_model=4, ffn=8, cross=False))[:2]
['model.encoder.layers.0.fc1.bias', 'model.encoder.layers.0.fc1.weight']
"""

import numpy as np


def matrix(info, name, weights):
    """The `(rows, columns)` of a 2-D tensor's `TensorInfo`; another rank is a `ValueError` naming it."""
    if len(info.shape) != 2:
        raise ValueError(f"{weights}: tensor `{name}` has shape {tuple(info.shape)}; a matrix was expected")
    return info.shape


def rate(fields, name, default):
    """A dropout rate field: a number in [0, 1)."""
    value = fields.number(name, default, low=0)
    if value >= 1:
        raise ValueError(f"{fields.where}: `{name}` must be a number in [0, 1). Received: {name}={value!r}")
    return value


def layer_shapes(prefix, d_model, ffn, cross):
    """`{name: shape}` of one encoder (or, with `cross`, decoder) layer's tensors."""
    d = d_model
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


def stack_shapes(config):
    """`{name: shape}` of every encoder and decoder layer of a model of `config`."""
    shapes = {}
    for side, count in (("encoder", config.num_layers), ("decoder", config.decoder_layers)):
        for index in range(count):
            prefix = f"model.{side}.layers.{index}"
            shapes.update(layer_shapes(prefix, config.d_model, config.d_ff, cross=side == "decoder"))
    return shapes


def transposed(value):
    return value.T


def as_is(value):
    return value


def stack_sources(model):
    """`(model weight, tensor name, transform)` of every encoder and decoder layer's weights."""
    sources = []
    for prefix, layers in (("model.encoder", model.encoder_layers), ("model.decoder", model.decoder_layers)):
        for index, layer in enumerate(layers):
            sources += layer_sources(layer, f"{prefix}.layers.{index}")
    return sources


def assign(model, checkpoint, sources):
    """Sets `model`'s weights from `sources` (`(weight, tensor name or None for zeros, transform)`), one at a time.

    Every weight of the model is set exactly once; one that no source sets
    is a `ValueError` naming it.
    """
    assigned = set()
    for weight, name, transform in sources:
        value = np.zeros(weight.shape, np.float32) if name is None else transform(checkpoint.tensor(name))
        weight.assign(value.reshape(weight.shape))
        assigned.add(weight.path)
    missing = [w.path for w in model.weights if w.path not in assigned]
    if missing:
        raise ValueError(f"no checkpoint weight was found for {missing[:5]}")


ATTENTION = {"query": "q_proj", "key": "k_proj", "value": "v_proj"}


def layer_sources(layer, prefix):
    blocks = [("self_attention", "self_attn", "self_attention_norm", "self_attn_layer_norm")]
    if hasattr(layer, "cross_attention"):
        blocks.append(("cross_attention", "encoder_attn", "cross_attention_norm", "encoder_attn_layer_norm"))
    sources = []
    for ours, theirs, our_norm, their_norm in blocks:
        attention = getattr(layer, ours)
        for part, name in ATTENTION.items():
            dense = getattr(attention, f"{part}_dense")
            sources.append((dense.kernel, f"{prefix}.{theirs}.{name}.weight", transposed))
            sources.append((dense.bias, f"{prefix}.{theirs}.{name}.bias", as_is))
        sources.append((attention.output_dense.kernel, f"{prefix}.{theirs}.out_proj.weight", transposed))
        sources.append((attention.output_dense.bias, f"{prefix}.{theirs}.out_proj.bias", as_is))
        sources += norm_sources(getattr(layer, our_norm), f"{prefix}.{their_norm}")
    for ours, theirs in (("inner_dense", "fc1"), ("output_dense", "fc2")):
        dense = getattr(layer.ffn, ours)
        sources.append((dense.kernel, f"{prefix}.{theirs}.weight", transposed))
        sources.append((dense.bias, f"{prefix}.{theirs}.bias", as_is))
    sources += norm_sources(layer.ffn_norm, f"{prefix}.final_layer_norm")
    return sources


def norm_sources(norm, prefix):
    return [(norm.gamma, f"{prefix}.weight", as_is), (norm.beta, f"{prefix}.bias", as_is)]
