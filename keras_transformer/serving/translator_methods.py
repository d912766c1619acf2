"""The Python side of a translator: inputs checked before any TensorFlow call, cut-off outputs warned about.

`TranslatorMethods` is what a `Translator` and a loaded SavedModel
(`keras_transformer.serving.export.LoadedTranslator`) share: each public
method checks its inputs in Python (`keras_transformer.serving.inputs`),
then calls the function of that name in the SavedModel interface, and the
plain translating methods warn with `decoding.TruncatedOutputWarning` about
translations cut off at the maximum output length before END.
"""

import warnings

import numpy as np
import tensorflow as tf

from keras_transformer.decoding import TruncatedOutputWarning
from keras_transformer.serving.inputs import pairs as checked_pairs
from keras_transformer.serving.inputs import sampling as checked_sampling
from keras_transformer.serving.inputs import sentences as checked_sentences


class TranslatorMethods:
    """The Python side of a translator: inputs checked before TensorFlow, cut-off outputs warned about.

    A subclass gives `_function(name)`: the function of that name in the
    SavedModel interface (`_EXPORTED`), or None where it lacks it.
    """

    def __call__(self, sentences):
        """Beam search (greedy when `beam_size=1`): strings `(batch,)` -> strings."""
        return self._translate("__call__", checked_sentences(sentences))

    def greedy(self, sentences):
        """Greedy decoding: strings `(batch,)` -> strings."""
        return self._translate("greedy", checked_sentences(sentences))

    def sample(self, sentences, temperature, top_k, top_p, seed):
        """Sampling: `temperature` (0 = greedy), `top_k` (0 = off), `top_p` (1 = off), `seed` (-1 = random)."""
        return self._translate("sample", *_sample_inputs(sentences, temperature, top_k, top_p, seed))

    def source_lengths(self, sentences):
        """Source tokens per sentence before truncation (END included if added)."""
        return self._function("source_lengths")(checked_sentences(sentences))

    def call_with_status(self, sentences):
        """`__call__` without the warning: `{"translations", "scores", "finished"}`, each `(batch,)`.

        `scores` are the length-normalised log-probabilities that the beam
        search ranks by (`log p / ((5 + length) / 6) ** alpha`, length
        counting END; None from a SavedModel exported before scores
        existed). `finished` is False where the translation was cut off at
        the maximum output length before END (None from a SavedModel
        exported before this flag existed).
        """
        return self._with_status("__call__", checked_sentences(sentences))

    def greedy_with_status(self, sentences):
        """`greedy` without the warning; see `call_with_status` (`scores` normalised the same way)."""
        return self._with_status("greedy", checked_sentences(sentences))

    def sample_with_status(self, sentences, temperature, top_k, top_p, seed):
        """`sample` without the warning; see `call_with_status`.

        `scores` are the model's log-probabilities of the sampled tokens
        (before temperature and filters), normalised as the beam's.
        """
        return self._with_status("sample", *_sample_inputs(sentences, temperature, top_k, top_p, seed))

    def nbest(self, sentences):
        """Every beam, best first: `{"translations", "scores", "finished"}`, each `(batch, beam_size)`.

        Row 0 is `__call__`'s translation; `scores` and `finished` as in
        `call_with_status`, sorted best first (ended hypotheses before
        cut-off ones).
        """
        return self._required("nbest")(checked_sentences(sentences))

    def score(self, sources, targets):
        """Teacher-forced log-probabilities of `targets` given `sources` (both strings `(batch,)`).

        Returns `{"log_probs": float32 (batch,), "target_lengths": int32
        (batch,)}`: the sum over the target's tokens, END included (not
        length-normalised), and that token count. A target longer than the
        maximum output length is scored on its first `max_length` tokens
        (without END): `target_lengths` says how many. Use it to filter a
        corpus or rerank candidates.
        """
        return self._required("score")(*checked_pairs(sources, targets))

    def _required(self, name):
        function = self._function(name)
        if function is None:
            raise ValueError(f"This SavedModel was exported before `{name}` existed: export it again to use it")
        return function

    def _with_status(self, name, *args):
        function = self._function(("call" if name == "__call__" else name) + "_with_status")
        if function is None:  # a SavedModel exported before the flag
            return {"translations": self._function(name)(*args), "scores": None, "finished": None}
        return {"scores": None, **function(*args)}

    def _translate(self, name, *args):
        result = self._with_status(name, *args)
        _warn_cut_off(result["finished"])
        return result["translations"]


def _sample_inputs(sentences, temperature, top_k, top_p, seed):
    return (checked_sentences(sentences), *checked_sampling(temperature, top_k, top_p, seed))


def _warn_cut_off(finished):
    """A `TruncatedOutputWarning` naming the sentences whose translation `finished` flags as cut off."""
    if finished is None or not tf.executing_eagerly():
        return
    cut = np.flatnonzero(~np.asarray(finished))
    if cut.size:
        names = ", ".join(f"sentences[{i}]" for i in cut[:5]) + (", ..." if cut.size > 5 else "")
        warnings.warn(
            f"{cut.size} of {len(finished)} translations reached the maximum output length before END "
            f"and are cut off: {names}",
            TruncatedOutputWarning,
            stacklevel=4,
        )
