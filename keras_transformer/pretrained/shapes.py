"""A checkpoint's config held against its tensors' shapes, before any model is built.

The weights file's header says how large the model is. A config field that
disagrees with it (a million layers where the file holds two, a width of
10^9 where the embedding has 512 columns) is one line naming the field; a
tensor of another shape than the config needs (a transposed `fc1.weight`,
whose element count is the same) is one line naming the tensor. So nothing
is allocated from a number that only the config claims.

Example:

>>> tensors = {"model.encoder.layers.0.fc1.weight": None, "model.encoder.layers.1.fc1.weight": None}
>>> layer_count(tensors, "model.encoder.layers")
2
"""

import re

from keras_transformer.pretrained.checkpoints import FLOAT_DTYPES


def layer_count(tensors, prefix):
    """How many layers `prefix.N.` the tensors hold (N = 0, 1, ...); a gap in N is a `ValueError`."""
    pattern = re.compile(re.escape(prefix) + r"\.(\d+)\.")
    indices = {int(match.group(1)) for name in tensors if (match := pattern.match(name))}
    if indices and indices != set(range(len(indices))):
        missing = min(set(range(max(indices) + 1)) - indices)
        raise ValueError(f"the weights hold {prefix}.{max(indices)} but no {prefix}.{missing}")
    return len(indices)


def check_field(where, field, value, found, what, weights):
    """`ValueError` "`where`: `field` is value, but `weights` holds `found` `what`" where the two differ."""
    if value != found:
        raise ValueError(f"{where}: `{field}` is {value}, but {weights} holds {found} {what}")


def check_shapes(required, optional, tensors, weights, family):
    """Every `required` tensor present with its shape; every other tensor one of `optional`, with its shape.

    `required` and `optional` map names to shapes; `tensors` maps names to
    `TensorInfo`s (`Checkpoint.tensors()`). A `ValueError` names the first
    tensor that is missing, unknown, of another shape or not of floats, by
    the name the file stores it under.
    """
    stored = getattr(tensors, "stored_name", lambda name: name)
    missing = sorted(set(required) - set(tensors))
    if missing:
        model = f"{_article(family)} {family} model"
        raise ValueError(f"{weights} has no tensor `{missing[0]}`, which {model} of this config holds")
    for name, info in sorted(tensors.items()):
        expected = required.get(name, optional.get(name))
        if expected is None:
            raise ValueError(
                f"{weights} holds a tensor `{stored(name)}` that {_article(family)} {family} model does not have"
            )
        if tuple(info.shape) != tuple(expected):
            raise ValueError(
                f"{weights}: tensor `{stored(name)}` has shape {tuple(info.shape)}, where {_article(family)} {family} "
                f"model of this config needs {tuple(expected)}"
            )
        if info.dtype not in FLOAT_DTYPES:
            raise ValueError(
                f"{weights}: tensor `{stored(name)}` has dtype {info.dtype}; weights must be floats "
                f"({', '.join(FLOAT_DTYPES)})"
            )


def _article(word):
    """ "an" before a vowel sound ("an M2M100", "a Marian"), "a" otherwise."""
    initialism = len(word) > 1 and not word[1].islower()  # read letter by letter: M2M100, NLLB
    return "an" if word[:1].upper() in ("AEFHILMNORSX" if initialism else "AEIOU") else "a"
