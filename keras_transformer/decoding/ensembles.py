"""Ensembles: several models decoded as one, by the mean of their next-token distributions.

Each member runs its own cached step (`keras_transformer.decoding.cache`);
the ensemble's step returns the log of the mean of their probabilities
(`log (1/n) sum_i softmax(logits_i)`), which the searches use as logits. Its
state is the tuple of the members' states, which `per_member` resizes and
reorders. The members must share their vocabularies and `max_length`
(`ensemble_members`); one model in a list decodes as that model does.

Example:

>>> step_fn, state = make_ensemble_step_fn([model, model], [[5, 6, 7]], max_length=8)
>>> logits, state = step_fn(keras.ops.convert_to_tensor([START_ID]), 0, state)
>>> tuple(logits.shape)
(1, 300)
"""

import math

import keras  # noqa: F401  (the example above)
from keras import ops

from keras_transformer.config import START_ID  # noqa: F401  (the example above)
from keras_transformer.decoding.cache import cached_step, initial_state, reorder_beams, resize_cache
from keras_transformer.decoding.search import Step
from keras_transformer.models import as_transformer


def ensemble_members(models):
    """The models of `models` (one model, or a list of them), checked to fit together.

    The members of an ensemble must share their source and target
    vocabularies and their `max_length`: they decode one token sequence
    together. Anything else is a `ValueError` naming the member. Returns
    the members as `TransformerModel`s (see `as_transformer`).
    """
    members = list(models) if isinstance(models, (list, tuple)) else [models]
    if not members:
        raise ValueError("An ensemble needs at least one model. Received: models=[]")
    members = [as_transformer(member) for member in members]

    def shape(model):
        return (model.source_vocab_size, model.target_vocab_size, model.max_length)

    first = shape(members[0])
    for index, member in enumerate(members[1:], start=1):
        if shape(member) != first:
            raise ValueError(
                "The models of an ensemble must share (source vocab, target vocab, max_length). "
                f"Received: {first} for model 0 and {shape(member)} for model {index}"
            )
    return members


def make_ensemble_step_fn(models, source_ids, max_length=None, beam_size=1):
    """`cache.make_step_fn` for an ensemble: `(step_fn, state)`, the step `ensemble_step`'s."""
    members = ensemble_members(models)
    return ensemble_step(members, beam_size), ensemble_state(members, source_ids, max_length, beam_size)


def ensemble_state(models, source_ids, max_length=None, beam_size=1):
    """The tuple of the members' `cache.initial_state`s."""
    return tuple(initial_state(member, source_ids, max_length, beam_size) for member in models)


def ensemble_model_step(models, beam_size=1):
    """The `Step` of an ensemble: `ensemble_step` with the members' cache resized and reordered."""
    return Step(ensemble_step(models, beam_size), per_member(resize_cache), per_member(reorder_beams))


def ensemble_step(models, beam_size=1):
    """`step_fn(tokens, index, states) -> (logits, states)`: the members' steps and their mean distribution."""
    steps = [cached_step(member, beam_size) for member in ensemble_members(models)]
    log_count = math.log(len(steps))

    def step_fn(tokens, index, states):
        outputs = [step(tokens, index, state) for step, state in zip(steps, states)]
        log_probs = ops.stack([ops.log_softmax(logits, axis=-1) for logits, _ in outputs])
        return ops.logsumexp(log_probs, axis=0) - log_count, tuple(state for _, state in outputs)

    return step_fn


def per_member(state_fn):
    """`state_fn(state, x)` (`resize_cache`, `reorder_beams`) applied to each member's state of an ensemble."""

    def apply(states, x):
        return tuple(state_fn(state, x) for state in states)

    return apply
