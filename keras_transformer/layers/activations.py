"""The feed-forward activations by name: Keras's, and `"gelu_tanh"`, GPT-2's tanh approximation of GELU.

Keras's `"gelu"` is the exact (erf) GELU, BERT's; GPT-2 trained with the
tanh approximation (transformers' `"gelu_new"`), which differs from it by up
to about 1e-3. `get_activation` is what the layers resolve an activation
name with, so `"gelu_tanh"` is one more name a `ModelConfig` may hold.

Example:

>>> x = keras.ops.convert_to_tensor([-1.0, 0.0, 2.0])
>>> [round(float(v), 4) for v in keras.ops.convert_to_numpy(get_activation("gelu_tanh")(x))]
[-0.1588, 0.0, 1.9546]
>>> get_activation("relu") is keras.activations.relu
True
"""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
def gelu_tanh(x):
    """`0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`: GELU as GPT-2 computes it."""
    return ops.gelu(x, approximate=True)


ACTIVATIONS = {"gelu_tanh": gelu_tanh}


def get_activation(identifier):
    """The activation function `identifier` names: one of `ACTIVATIONS`, else `keras.activations.get`'s."""
    if isinstance(identifier, str) and identifier in ACTIVATIONS:
        return ACTIVATIONS[identifier]
    return keras.activations.get(identifier)
