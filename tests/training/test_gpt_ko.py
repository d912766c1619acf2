"""The `gpt-ko` preset: a decoder-only language model trained by `train` on the chatbot corpus, then generating."""

import csv
import re

import pytest

from keras_transformer import export, runs
from keras_transformer.engines.xla.generator import Generator
from keras_transformer.presets import get_preset
from keras_transformer.training import train

HANGUL = re.compile("[\uac00-\ud7a3]")
SMALL = dict(num_layers=1, d_model=64, d_ff=128, vocab_size=1000, character_coverage=0.98, max_examples=1500)
PROMPTS = ["오늘 너무", "배고파", ""]


def _losses(run):
    with open(run / runs.HISTORY, encoding="utf-8") as handle:
        return [float(row["loss"]) for row in csv.DictReader(handle)]


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("gpt-ko") / "run"
    summary = train("gpt-ko", run, epochs=2, verbose=0, **SMALL)
    assert summary["completed_epochs"] == 2
    return run


def test_the_preset_is_gpt_from_the_decoder():
    model = get_preset("gpt-ko").model
    assert (model.architecture, model.position_layout, model.activation, model.norm_first) == (
        "decoder_only",
        "learned",
        "gelu_tanh",
        True,
    )


def test_train_writes_a_language_model_whose_loss_falls_and_that_generates(small_run):
    losses = _losses(small_run)
    assert losses[1] < losses[0]
    assert runs.RunConfig.read(small_run).model.architecture == "decoder_only"
    generator = export.load(small_run)
    assert isinstance(generator, Generator) and generator.add_start
    continuations, finished = generator.generate_with_status(PROMPTS, max_length=8)
    assert len(continuations) == 3 and all(isinstance(text, str) for text in continuations)


@pytest.mark.slow  # a decoder-only export and server: a minute
def test_the_savedmodel_continues_prompts_as_the_run_does_and_serves(small_run, tmp_path):
    import tensorflow as tf

    from keras_transformer.serving.signatures import ServedModel

    output = tmp_path / "export"
    export.export_run(small_run, output, max_length=8)
    module = tf.saved_model.load(str(output))
    outputs = module.signatures["serving_default"](prompts=tf.constant(PROMPTS))
    continuations = [text.decode("utf-8") for text in outputs["continuations"].numpy()]
    assert continuations == export.load(small_run).generate_with_status(PROMPTS, beam_size=1, max_length=8)[0]
    served = ServedModel(output)
    request = served.parse({"instances": PROMPTS[:2]})
    rendered = served.render(request, served.run(request.signature, request.inputs))
    assert [row["continuations"] for row in rendered["predictions"]] == continuations[:2]


@pytest.mark.slow
def test_a_longer_run_writes_korean(tmp_path):
    run = tmp_path / "gpt-ko"
    train("gpt-ko", run, epochs=6, verbose=0, num_layers=2)
    losses = _losses(run)
    assert losses[-1] < losses[0] - 1.0
    prompts = ["오늘 너무", "배고파", "주말에"]
    samples = export.load(run).generate_with_status(prompts, temperature=0.8, seed=1, max_length=16)[0]
    assert sum(bool(HANGUL.search(text)) for text in samples) >= 2, samples
