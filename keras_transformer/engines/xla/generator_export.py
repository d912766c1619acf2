"""A decoder-only run (GPT) as a SavedModel whose `serving_default` continues prompts: strings in, strings out.

`export_generator(run, output)` writes the run's model, its tokenizer and a
compiled search into one SavedModel, whose signatures `serving_default`
(the run's search, greedy by default) and `greedy` take `prompts`, a 1-D
string tensor, and return `continuations` (strings) and `finished` (False
where a continuation reached `max_length` before END). `keras-transformer
serve` serves it as TF Serving would.

A prompt fills a fixed width of `model.max_length - max_length + 1` tokens
(the XLA program has one shape per batch size): a longer prompt keeps its
last tokens. The tokenizer must be a TensorFlow one (this package's own);
an imported GPT-2's runs in Python, so its run does not export.

Example:

>>> export_generator("saved_models/gpt-ko", "saved_models/gpt-ko-export")  # doctest: +SKIP
>>> module = tf.saved_model.load("saved_models/gpt-ko-export")  # doctest: +SKIP
>>> module.signatures["serving_default"](prompts=tf.constant(["오늘 너무"]))  # doctest: +SKIP
"""

import tensorflow as tf

from keras_transformer import decoding
from keras_transformer.engines.xla.generator import open_generator
from keras_transformer.engines.xla.translator_graph import check_export_destination
from keras_transformer.files import atomic, destinations, manifest

PROMPTS = tf.TensorSpec([None], tf.string, name="prompts")


class GeneratorModule(tf.Module):
    """A `Generator`'s model, tokenizer and searches as a `tf.Module` (what `export_generator` saves)."""

    def __init__(self, generator, jit_compile=True):
        super().__init__(name="generator")
        if not isinstance(generator.tokenizer, tf.Module):
            raise ValueError(
                "This run's tokenizer runs in Python (an imported GPT-2's): a SavedModel cannot hold it. "
                "Generate from the run directory instead (`keras-transformer generate`, `export.load`)"
            )
        self.model, self.tokenizer = generator.model, generator.tokenizer
        config = self.model.config
        self._start, self._end, self._pad = config.start_id, config.end_id, config.target_pad
        self._add_start = generator.add_start
        self.max_length = generator.max_length
        self.beam_size = tf.constant(generator.beams)  # what `export` reports
        self.width = self.model.max_length - self.max_length + 1
        if self.width < 1:
            raise ValueError(f"max_length={self.max_length} leaves no room for a prompt in {self.model.max_length}")
        options = generator.decoding.search_options()
        searches = {
            "default": decoding.search_for(generator.beams, generator.alpha, **options),
            "greedy": decoding.search_for(1, generator.alpha, **options),
        }
        self._searches = {
            name: decoding.compile_search(self.model, search, self.max_length, jit_compile=jit_compile)
            for name, search in searches.items()
        }

    def _prompt_ids(self, prompts):
        ids = tf.cast(self.tokenizer.tokenize(prompts), tf.int32)
        if self._add_start:
            rows = tf.shape(ids.row_lengths())[0]
            ids = tf.concat([tf.fill([rows, 1], self._start), ids], axis=1)
        ids = ids[:, -self.width :]  # a longer prompt keeps its last tokens
        return ids.to_tensor(self._pad, shape=[None, self.width])

    def _continue(self, name, prompts):
        result = self._searches[name](self._prompt_ids(prompts)).best()
        ids = result.ids
        before_end = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, self._end), tf.int32), axis=1), 0)
        kept = tf.ragged.boolean_mask(ids, before_end)
        return {"continuations": self.tokenizer.detokenize(kept), "finished": result.finished}

    @tf.function(input_signature=[PROMPTS])
    def serving_default(self, prompts):
        """The continuation of each prompt with the run's search."""
        return self._continue("default", prompts)

    @tf.function(input_signature=[PROMPTS])
    def greedy(self, prompts):
        """The greedy continuation of each prompt."""
        return self._continue("greedy", prompts)


def export_generator(run, output, *, overwrite=False, beam_size=None, alpha=None, max_length=None, jit_compile=True):
    """Writes the decoder-only run `run` as a SavedModel at `output` (see the module); returns the module.

    `output` must be new, empty, or (with `overwrite`) an export of this package.
    """
    destinations.check_separate(run, output, what="the export")
    check_export_destination(output, overwrite)
    generator = open_generator(run, beam_size=beam_size, alpha=alpha, max_length=max_length)
    module = GeneratorModule(generator, jit_compile=jit_compile)
    signatures = {"serving_default": module.serving_default, "greedy": module.greedy}
    options = tf.saved_model.SaveOptions(experimental_custom_gradients=False)

    def write(tmp):
        tf.saved_model.save(module, tmp, signatures=signatures, options=options)
        manifest.write_manifest(tmp)

    atomic.replace_dir(write, output, destinations.remove_previous)
    return module
