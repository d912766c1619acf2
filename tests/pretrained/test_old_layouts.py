"""Checkpoints laid out as older transformers uploaded them import and translate as transformers 5.24 reads them.

Each variant under tests/data/{marian,m2m100}/layouts/ is a tiny fixture
rewritten by tests/data/old_layouts.py into a layout of 2020-2022: the
generation settings in config.json without generation_config.json, BART-era
config keys, `pytorch_model.bin` (PyTorch's legacy and zip formats), tied
copies and position tables stored, shards with an index, the base model's
names without `model.`, float16 and bfloat16 weights, old tokenizer files
(each variant's `layout.json` says which). Its `reference.json` holds what
transformers 5.24 generates after `from_pretrained` on that same folder,
greedy and with 4 beams, with the folder's own settings (24 new tokens at
most). Each variant is imported once, without torch, and must give the same
strings.
"""

import json
import warnings

import numpy as np
import pytest

from keras_transformer import export, runs
from keras_transformer.decoding import TruncatedOutputWarning
from keras_transformer.pretrained import import_pretrained

import checkpoint_edits as edits

# variant: the source and target language of a multilingual one
LANGUAGES = {"m2m100-2021": "ko", "nllb-2022": "kor_Hang"}


@pytest.fixture(scope="module", params=sorted(edits.LAYOUTS))
def imported(request, tmp_path_factory):
    """`(variant, run directory, translator options, reference)`: each variant assembled and imported once."""
    folder, language = edits.LAYOUTS[request.param], LANGUAGES.get(request.param)
    work = tmp_path_factory.mktemp(request.param)
    run = work / "run"
    import_pretrained(edits.assemble(folder, work / "checkpoint"), run)
    reference = json.loads((folder / "reference.json").read_text(encoding="utf-8"))
    languages = dict(source_lang=language, target_lang=language) if language else {}
    return request.param, run, languages, reference


def strings(tensor):
    return [text.decode("utf-8") for text in np.asarray(tensor).tolist()]


# The issue's case (OPUS-MT as uploaded in 2020) and M2M100's of 2021 decode in every run of the suite; the other
# layouts, whose tensors the checkpoint tests compare with their fixture's, with the long checks (`-m slow`): a
# variant's two searches take some 20 s to compile on 2 cores.
DECODED = ["opus-2020", "m2m100-2021"] + [
    pytest.param(name, marks=pytest.mark.slow) for name in ("opus-2022", "base-fp16", "nllb-2022")
]


@pytest.mark.parametrize("imported", DECODED, indirect=True)
def test_greedy_and_beam_4_strings_equal_transformers_on_the_same_folder(imported):
    """20 of 20 strings each way, with the run's own settings (banned ids, forced END, early stopping, ...)."""
    _, run, languages, reference = imported
    translator = export.load(run, beam_size=4, max_length=reference["max_new_tokens"], **languages)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedOutputWarning)  # transformers cut some off too
        greedy = strings(translator.greedy(reference["sentences"]))
        beam = strings(translator(reference["sentences"]))
    assert greedy == reference["greedy"]
    assert beam == reference["beam"]


def test_the_generation_settings_are_the_folders_own(imported):
    """config.json's settings where there is no generation_config.json; generation_config.json's where there is."""
    variant, run, _, reference = imported
    decoding = runs.RunConfig.read(run).decoding
    settings = reference["generation_config"]  # what transformers' model.generation_config held
    assert decoding.beam_size == settings.get("num_beams", 1)
    assert decoding.max_new_tokens == settings["max_length"] - 1
    assert decoding.stopping == ("beams_ended" if settings.get("early_stopping") else "cannot_improve")
    assert decoding.softmax_over == ("allowed" if settings.get("renormalize_logits") else "vocabulary")
    expected = {"opus-2020": (4, 511), "opus-2022": (4, 511), "base-fp16": (4, 511), "m2m100-2021": (5, 199)}
    assert (decoding.beam_size, decoding.max_new_tokens) == expected.get(variant, (1, 199))


@pytest.mark.parametrize("imported", ["opus-2020", "m2m100-2021", "nllb-2022"], indirect=True)
def test_the_import_hint_names_translate_with_language_codes_the_model_has(imported):
    from keras_transformer.commands.import_checkpoint import _next_command, _stacks
    from keras_transformer.translators.controls import languages_of

    _, run, languages, _ = imported
    model = runs.RunConfig.read(run).model
    hint = _next_command(model, run)
    assert _stacks(model) == "2 encoder + 2 decoder layers"
    assert hint.startswith(f"Translate with `keras-transformer translate --model {run}") and hint.endswith(" TEXT`.")
    if languages:  # M2M100 and NLLB: a --target-lang the run has (its source language has a default)
        target = hint.split("--target-lang ")[1].split()[0]
        assert target in languages_of(*runs.load_tokenizers(run)).codes
    else:
        assert "--target-lang" not in hint and "--source-lang" not in hint
