"""A decoder step traced into one TensorFlow graph function for every phase, segment and batch.

A search runs its step in one loop per phase (`search.phases`: three), and
the compacting decoder once per segment, so a step written as plain ops is
traced into the graph once per loop: thousands of ops each time, most of a
`Translator`'s first call. `traced_once(step_fn)` makes it one graph
function whose signature leaves the batch and the cache length open: it is
traced at its first call and called from every loop. XLA still compiles
each loop with its own static shapes.

On other backends `step_fn` is returned as it is (JAX traces its loops itself).

Example:

>>> def step_fn(tokens, index, state):
...     return ops.one_hot(tokens, 5), state
>>> step = traced_once(step_fn)
>>> tuple(step(ops.convert_to_tensor([1, 2]), 0, ops.zeros((2, 3)))[0].shape)
(2, 5)
"""

import keras
from keras import ops  # noqa: F401  (the example above)


def traced_once(step_fn):
    """`step_fn(tokens, index, state) -> (logits, state)` as one TensorFlow graph function (see the module)."""
    if keras.backend.backend() != "tensorflow":
        return step_fn
    import tensorflow as tf

    traced = []

    def step(tokens, index, state):
        if not traced:
            signature = tf.nest.map_structure(_open_sizes, (tokens, index, state))
            traced.append(tf.function(step_fn, input_signature=signature, autograph=False))
        return traced[0](tokens, index, state)

    return step


def _open_sizes(x):
    """The spec of `x` with every size unknown but the last of a tensor of rank 2 or more (widths, heads' size).

    A boolean tensor's sizes are all unknown: a padding mask's last is the
    source's width, which differs between calls (`SteppedSearch` traces
    its step with each width's concrete shapes).
    """
    import tensorflow as tf

    x = tf.convert_to_tensor(x)
    shape = x.shape.as_list()
    if len(shape) >= 2 and x.dtype != tf.bool:
        shape = [None] * (len(shape) - 1) + shape[-1:]
    else:
        shape = [None] * len(shape)
    return tf.TensorSpec(shape, x.dtype)
