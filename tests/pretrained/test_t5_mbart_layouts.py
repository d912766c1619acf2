"""T5, mBART-50 and MADLAD-400 checkpoints laid out as uploaded import and translate as transformers reads them.

The variants under tests/data/t5_mbart/layouts/ (make_fixtures.py
`--layouts`, tests/data/old_layouts.py): T5 as transformers 3 saved it (no
generation settings, `pytorch_model.bin` in PyTorch's legacy format with the
embedding under four names and an unused bias table, `spiece.model` alone),
mBART-50 as transformers 4.4 did (generation settings in config.json, a
`.bin` with the tied copies and `final_logits_bias`, `sentencepiece.bpe.model`
and an old tokenizer_config.json) and MADLAD-400 in bfloat16 shards. Each
`reference.json` holds what transformers 5.24 generates on that folder
(24 new tokens at most); each variant is imported once, without torch. The
2020 T5 runs in every run, the others with the long checks (`-m slow`).
"""

import json
import pathlib
import warnings

import numpy as np
import pytest

from keras_transformer import export, runs
from keras_transformer.decoding import TruncatedOutputWarning
from keras_transformer.pretrained import import_pretrained

import checkpoint_edits as edits

LAYOUTS = pathlib.Path(__file__).resolve().parents[1] / "data" / "t5_mbart" / "layouts"
# variant: the languages its references were generated with
LANGUAGES = {"mbart50-2021": dict(source_lang="ko_KR", target_lang="en_XX"), "madlad-2023": dict(target_lang="en")}


@pytest.fixture(
    scope="module",
    params=["t5-2020", *(pytest.param(name, marks=pytest.mark.slow) for name in ("mbart50-2021", "madlad-2023"))],
)
def imported(request, tmp_path_factory):
    """`(variant, run directory, reference)`: each variant assembled and imported once."""
    work = tmp_path_factory.mktemp(request.param)
    import_pretrained(edits.assemble(LAYOUTS / request.param, work / "checkpoint"), work / "run")
    reference = json.loads((LAYOUTS / request.param / "reference.json").read_text(encoding="utf-8"))
    return request.param, work / "run", reference


def strings(tensor):
    return [text.decode("utf-8") for text in np.asarray(tensor).tolist()]


def test_greedy_and_beam_4_strings_equal_transformers_on_the_same_folder(imported):
    variant, run, reference = imported
    languages = LANGUAGES.get(variant, {})
    sentences = [text.removeprefix("<2en> ") for text in reference["sentences"]]  # MADLAD's language: target_lang
    translator = export.load(run, beam_size=4, max_length=reference["max_new_tokens"], **languages)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedOutputWarning)  # transformers cut some off too
        greedy = strings(translator.greedy(sentences))
        beam = strings(translator(sentences))
    assert greedy == reference["greedy"]
    assert sum(a == b for a, b in zip(beam, reference["beam"])) >= 0.95 * len(beam)


def test_the_generation_settings_are_the_folders_own(imported):
    variant, run, reference = imported
    decoding = runs.RunConfig.read(run).decoding
    settings = reference["generation_config"]  # what transformers' model.generation_config held
    assert decoding.beam_size == settings.get("num_beams", 1)
    assert decoding.stopping == ("beams_ended" if settings.get("early_stopping") else "cannot_improve")
    assert decoding.force_end == (settings.get("forced_eos_token_id") == settings["eos_token_id"])
    if "max_length" in settings:
        assert decoding.max_new_tokens == settings["max_length"] - 1
