"""An imported model built without random weights, and a checkpoint's tensors copied into it block by block.

An import sets every weight from the checkpoint, so its peak memory is the
model's weights plus what it takes to get them there. Two things used to take
more than the weights themselves, and this module removes both:

- **Random initial values.** Keras draws every weight from its initializer
  when the model is built, and the import then overwrites them all. For
  NLLB-200's embedding (256,206 × 1,024 floats, 1 GiB) TensorFlow's random
  normal holds three tensors of that size at once, and TensorFlow's BFC
  allocator (which `keras_transformer` turns on) keeps that memory for the
  rest of the process. `zero_initialized(build)` builds the model with its
  variables deferred (`keras.StatelessScope(initialize_variables=False)`),
  gives each weight a zeros initializer, and only then creates them: each
  variable's memory is allocated once, zero-filled.
- **Whole copies of large tensors.** A 1 GiB tensor read whole is one copy,
  and its conversion to a TensorFlow tensor for `assign` a second.
  `set_weight` copies a tensor larger than `BLOCK_BYTES` into its weight a
  block of rows at a time (`Checkpoint.row_blocks`, each block read,
  converted and checked apart), into those rows of the variable, and every
  tensor into the variable's own memory.

Neither changes a value: the weights end as `weight.assign(tensor)` leaves
them, and the model's configuration (its initializers included) is the one
`build` gives. Swapping the initializers reaches into Keras's deferred
variables (`Variable._initializer`, set while a `StatelessScope` defers
them); on a Keras without that attribute the model is built as before.

Example:

>>> model = zero_initialized(lambda: build_transformer(config=config))  # doctest: +SKIP
>>> set_weight(model.encoder_embedding.embeddings, checkpoint, "model.shared.weight", as_is)  # doctest: +SKIP
"""

import keras
import numpy as np

# The largest block of a tensor held at once while it is copied into its weight (float32 bytes).
BLOCK_BYTES = 64 * 2**20


def zero_initialized(build):
    """The model `build()` returns, its weights created zero-filled rather than drawn from their initializers.

    The configuration is unchanged (each layer keeps its initializer); only
    the first values of this one model are zeros, for an import to overwrite.
    """
    with keras.StatelessScope(initialize_variables=False):  # variables are created deferred: nothing allocated
        model = build()
    zeros = keras.initializers.Zeros()
    for weight in model.weights:
        if getattr(weight, "_initializer", None) is not None:  # a deferred variable (Keras 3's own attribute)
            weight._initializer = zeros
    with keras.StatelessScope():  # on leaving a scope, Keras creates the variables that were deferred
        pass
    return model


def set_weight(weight, checkpoint, name, transform, shape):
    """Sets `weight` to `transform(tensor name)` of `checkpoint`; `shape` is the tensor's, from its header.

    The values are written into the variable's own memory (`scatter_update`
    of its rows), never by `assign`, which hands the variable the incoming
    tensor's buffer (TensorFlow may take it from NumPy's memory) and leaves
    its own, zero-filled, in TensorFlow's allocator: the weights twice over.
    A tensor larger than `BLOCK_BYTES` that goes in as it is (`transform`
    marked `streams`) and has the weight's shape is read and written a
    block of rows at a time; any other is read whole. A backend whose
    variables take no row updates (JAX) gets `assign`.
    """
    target = weight.value  # the backend's variable
    if not hasattr(target, "scatter_update") or not weight.shape:
        weight.assign(transform(checkpoint.tensor(name)).reshape(weight.shape))
        return
    streams = getattr(transform, "streams", False) and tuple(shape) == tuple(weight.shape)
    if streams and 4 * int(np.prod(shape, dtype=np.int64)) > BLOCK_BYTES:
        blocks = checkpoint.row_blocks(name, BLOCK_BYTES)
    else:
        blocks = [(0, transform(checkpoint.tensor(name)).reshape(weight.shape))]
    import tensorflow as tf

    for start, rows in blocks:
        rows = tf.constant(rows, target.dtype)
        target.scatter_update(tf.IndexedSlices(rows, tf.range(start, start + rows.shape[0])))
