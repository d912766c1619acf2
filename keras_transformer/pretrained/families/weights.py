"""What the families share when they set a model's weights: transposes, and every weight set once."""

import numpy as np

from keras_transformer.pretrained import weight_blocks


def transposed(value):
    """A torch `Linear` weight `(out, in)` as a Keras kernel `(in, out)`, and back."""
    return value.T


def as_is(value):
    """A tensor that both libraries lay out alike (biases, LayerNorms, embeddings)."""
    return value


as_is.streams = True  # copied into its weight a block of rows at a time where it is large (`weight_blocks.set_weight`)


def assign(model, checkpoint, sources):
    """Sets each `(weight, tensor name or None for zeros, transform)` of `sources`; every weight exactly once.

    A weight of `model` that no source sets is a `ValueError` naming it. A
    large tensor is copied a block of rows at a time (`weight_blocks.set_weight`).
    """
    tensors = checkpoint.tensors()
    assigned = set()
    for weight, name, transform in sources:
        if name is None:
            weight.assign(np.zeros(weight.shape, np.float32))
        else:
            weight_blocks.set_weight(weight, checkpoint, name, transform, tensors[name].shape)
        assigned.add(weight.path)
    missing = [w.path for w in model.weights if w.path not in assigned]
    if missing:
        raise ValueError(f"no checkpoint weight was found for {missing[:5]}")


def norm_sources(norm, prefix, names=("weight", "bias")):
    """A LayerNorm's `(gamma, beta)` from `prefix.weight` and `prefix.bias` (or the `names` given)."""
    return [(norm.gamma, f"{prefix}.{names[0]}", as_is), (norm.beta, f"{prefix}.{names[1]}", as_is)]


def dense_sources(dense, prefix, transform=transposed):
    """A dense layer's kernel and bias from `prefix.weight` (a `Linear`'s, transposed) and `prefix.bias`."""
    return [(dense.kernel, f"{prefix}.weight", transform), (dense.bias, f"{prefix}.bias", as_is)]
