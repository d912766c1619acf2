"""The docstring examples of the layers, models, losses, metrics, schedules, decoders and readers run as shown."""

import doctest
import importlib

import pytest

from keras_transformer import build_transformer, decoding

MODULES = [
    "keras_transformer.kinds",
    "keras_transformer.layers.attention",
    "keras_transformer.layers.blockwise_attention",
    "keras_transformer.layers.decoder",
    "keras_transformer.layers.decoder_layer",
    "keras_transformer.layers.embedding",
    "keras_transformer.layers.encoder",
    "keras_transformer.layers.encoder_layer",
    "keras_transformer.layers.feed_forward",
    "keras_transformer.layers.hash_dropout",
    "keras_transformer.layers.masks",
    "keras_transformer.layers.positional_encoding",
    "keras_transformer.layers.shapes",
    "keras_transformer.layers.token_sums",
    "keras_transformer.layers.activations",
    "keras_transformer.layers.learned_positions",
    "keras_transformer.layers.masked_lm_head",
    "keras_transformer.layers.classification_head",
    "keras_transformer.models.decoder_only",
    "keras_transformer.models.encoder_only",
    "keras_transformer.decoding.prompts",
    "keras_transformer.models",
    "keras_transformer.losses",
    "keras_transformer.metrics",
    "keras_transformer.schedules",
    "keras_transformer.optimizers",
    "keras_transformer.training.precision",
    "keras_transformer.cpu_units",
    "keras_transformer.translators.precision",
    "keras_transformer.decoding.search",
    "keras_transformer.decoding.greedy_search",
    "keras_transformer.decoding.sampling_search",
    "keras_transformer.decoding.beam_search",
    "keras_transformer.decoding.settings",
    "keras_transformer.decoding.cache",
    "keras_transformer.decoding.ensembles",
    "keras_transformer.decoding.model_search",
    "keras_transformer.decoding.functions",
    "keras_transformer.training.data",
    "keras_transformer.decoding.compaction",
    "keras_transformer.decoding.traced_step",
    "keras_transformer.litert.search",
    "keras_transformer.files.text_files",
    "keras_transformer.files.destinations",
    "keras_transformer.files.ownership",
    "keras_transformer.files.run_files",
    "keras_transformer.files.manifest",
    "keras_transformer.files.atomic",
    "keras_transformer.files.output_files",
    "keras_transformer.engines.xla.pooling",
    "keras_transformer.errors",
    "keras_transformer.runs",
    "keras_transformer.datasets.splits",
    "keras_transformer.commands.cli",
    "keras_transformer.commands.arguments",
    "keras_transformer.serving.batching",
    "keras_transformer.serving.request_values",
    "keras_transformer.serving.connections",
    "keras_transformer.serving.logs",
    "keras_transformer.serving.page",
    "keras_transformer.config",
    "keras_transformer.config_fields",
    "keras_transformer.input_rules",
    "keras_transformer.decoding.rules",
    "keras_transformer.files.json_files",
    "keras_transformer.files.folders",
    "keras_transformer.engines",
    "keras_transformer.engines.engine",
    "keras_transformer.pretrained.fields",
    "keras_transformer.pretrained.families.bert_export",
    "keras_transformer.pretrained.shapes",
    "keras_transformer.pretrained.tensor_names",
    "keras_transformer.pretrained.sources",
    "keras_transformer.pretrained.families",
    "keras_transformer.pretrained.families.generation",
    "keras_transformer.pretrained.families.marian_tensors",
    "keras_transformer.pretrained.families.marian_export",
    "keras_transformer.pretrained.families.gpt2_export",
    "keras_transformer.training.causal_lm",
    "keras_transformer.pretrained.model_card",
    "keras_transformer.translators.interface",
    "keras_transformer.translators.controls",
    "keras_transformer.translators.streaming",
    "keras_transformer.compile_cache",
    "keras_transformer.tokenizers.kinds",
    "keras_transformer.tokenizers.kinds.vocabularies",
    "keras_transformer.export_formats.options",
    "keras_transformer.training.marian_compatible",
]


# The decoding modules whose examples decode with a model.
MODEL_EXAMPLES = {
    f"keras_transformer.decoding.{name}" for name in ("cache", "ensembles", "model_search", "functions", "compaction")
}


def _extra_globals(module_name):
    """The decoders' examples use a `model` (and `decoding`) they do not bring: a tiny one stands in."""
    if module_name not in MODEL_EXAMPLES:
        return {}
    model = build_transformer(300, 300, num_layers=1, d_model=32, num_heads=4, d_ff=64, max_length=32)
    return {"model": model, "decoding": decoding}


@pytest.mark.parametrize("module_name", MODULES)
def test_every_docstring_example_runs_and_prints_what_it_shows(module_name):
    module = importlib.import_module(module_name)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    report = []
    examples = 0
    for test in finder.find(module, module_name, globs=vars(module).copy(), extraglobs=_extra_globals(module_name)):
        examples += len(test.examples)
        runner.run(test, out=report.append)
    assert examples > 0, f"{module_name} has no docstring example"
    assert runner.failures == 0, "".join(report)
