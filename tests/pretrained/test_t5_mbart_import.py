"""Imported T5, flan-T5, mT5, MADLAD-400 and mBART-50 runs compute and decode as transformers does.

The references in tests/data/t5_mbart/*/reference.json and
reference_logits.npz are transformers' (tests/data/t5_mbart/make_fixtures.py):
tokenizer ids (language tokens included), teacher-forced logits, greedy and
beam-4 `generate` outputs (`length_penalty` 1.0, `max_new_tokens` 24), into
two target languages for MADLAD and mBART-50. Each fixture is imported once
and decoded by one translator. The quick run checks every fixture's logits,
ids and greedy strings; beam search, sampling and the round trip run on some
fixtures there and on the others with the long checks (`-m slow`).
"""

import json
import pathlib
import shutil
import warnings

import numpy as np
import pytest
from keras import ops
from safetensors.numpy import load_file, save_file

from keras_transformer import export, runs
from keras_transformer.decoding import TruncatedOutputWarning
from keras_transformer.models.loading import load_model
from keras_transformer.pretrained import export_checkpoint, import_pretrained
from keras_transformer.serving.inflight import InflightBatcher

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "t5_mbart"
KINDS = ("t5", "flan_t5", "mt5", "madlad", "mbart50")
SOURCE_LANG = {"mbart50": "ko_KR"}


def kinds(*quick):
    """Every fixture, those not in `quick` with the long checks: to parametrize `imported`."""
    return [kind if kind in quick else pytest.param(kind, marks=pytest.mark.slow) for kind in KINDS]


@pytest.fixture(scope="module", params=KINDS)
def imported(request, tmp_path_factory):
    """`(kind, run directory, translator, reference)`: imported once, beam 4, transformers' limits."""
    kind = request.param
    run = tmp_path_factory.mktemp(kind) / "run"
    import_pretrained(FIXTURES / kind, run)
    reference = json.loads((FIXTURES / kind / "reference.json").read_text(encoding="utf-8"))
    options = dict(beam_size=4, alpha=1.0, max_length=reference["max_new_tokens"])
    translator = export.load(run, source_lang=SOURCE_LANG.get(kind), **options)
    return kind, run, translator, reference


def targets(reference):
    """`(controls, expected)` of each target language (none for a model of one pair)."""
    return [
        ({} if key == "default" else {"target_lang": key}, expected) for key, expected in reference["targets"].items()
    ]


def strings(tensor):
    return [text.decode("utf-8") for text in np.asarray(tensor).tolist()]


def quietly(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedOutputWarning)  # transformers cut some off too
        return function(*args, **kwargs)


def test_teacher_forced_logits_equal_transformers(imported):
    kind, run, _, reference = imported
    model = load_model(run / "model.keras")
    logits = np.load(FIXTURES / kind / "reference_logits.npz")
    pad = runs.load_tokenizers(run).target.pad_id
    for key in reference["targets"]:
        inputs = {"encoder_inputs": logits[f"{key}_input_ids"], "decoder_inputs": logits[f"{key}_decoder_input_ids"]}
        ours = ops.convert_to_numpy(model(inputs))
        real = logits[f"{key}_labels"] != pad  # transformers attends the decoder's padding: its rows differ
        np.testing.assert_allclose(ours[real], logits[f"{key}_logits"][real], atol=1e-4, rtol=0)


def test_ids_equal_transformers_tokenizer_with_language_tokens(imported):
    kind, run, _, reference = imported
    tokenizer = runs.load_tokenizers(run).source
    pieces = tokenizer.tokenize(reference["sentences"]).to_list()
    end = [tokenizer.end_id]
    for key, expected in reference["targets"].items():
        if kind == "mbart50":  # [src_lang] X </s>, and the target [tgt_lang] Y </s>
            source = [[tokenizer.language_id("ko_KR")] + ids + end for ids in pieces]
            target = [[tokenizer.language_id(key)] + ids + end for ids in pieces]
        else:  # X </s>; MADLAD's source starts with its target's <2xx>
            first = [tokenizer.language_id(key)] if kind == "madlad" else []
            source, target = [first + ids + end for ids in pieces], [ids + end for ids in pieces]
        assert source == expected["source_ids"]
        assert target == expected["target_ids"]


# flan-T5's and mT5's programs are T5 v1.1's, as MADLAD's: their greedy strings are checked with the long checks.
@pytest.mark.parametrize("imported", kinds("t5", "madlad", "mbart50"), indirect=True)
def test_greedy_strings_equal_transformers(imported):
    _, _, translator, reference = imported
    for controls, expected in targets(reference):
        assert strings(quietly(translator.greedy, reference["sentences"], **controls)) == expected["greedy"]


@pytest.mark.parametrize("imported", kinds("madlad"), indirect=True)
def test_beam_4_best_strings_equal_transformers(imported):
    _, _, translator, reference = imported
    for controls, expected in targets(reference):
        nbest = translator.nbest(reference["sentences"], **controls)
        ours = [strings(row)[0] for row in np.asarray(nbest["translations"])]
        equal = [a == beams[0] for a, beams in zip(ours, expected["beam"])]
        assert sum(equal) >= 0.95 * len(equal), controls
        for row, scores, same in zip(np.asarray(nbest["scores"]), expected["beam_scores"], equal):
            if same:  # transformers' score: log p / length ** length_penalty
                np.testing.assert_allclose(row[0], scores[0], atol=1e-4)


def test_the_multilingual_ones_refuse_a_language_without_its_token_in_one_line(imported):
    kind, _, translator, _ = imported
    if kind not in ("madlad", "mbart50"):
        with pytest.raises(ValueError, match="one language pair"):
            translator.greedy(["안녕"], target_lang="de")
        return
    with pytest.raises(ValueError) as error:
        translator.greedy(["안녕"], target_lang="xx")
    assert "\n" not in str(error.value) and "'xx' is not a language of this model" in str(error.value)
    if kind == "madlad":
        assert "<2xx>" in str(error.value)
    with pytest.raises(ValueError) as error:
        translator.greedy(["안녕"])
    assert "\n" not in str(error.value) and "--target-lang" in str(error.value)


def test_madlad_takes_a_source_language_and_needs_none(imported):
    kind, _, translator, reference = imported
    if kind != "madlad":
        pytest.skip("MADLAD's source language is the model's to find")
    sentences = reference["sentences"][:3]
    told = strings(quietly(translator.greedy, sentences, source_lang="ko", target_lang="en"))
    assert told == reference["targets"]["en"]["greedy"][:3]
    mixed = strings(quietly(translator.greedy, sentences, target_lang=["ko", "en", "ko"]))
    assert mixed == [reference["targets"]["ko"]["greedy"][0], told[1], reference["targets"]["ko"]["greedy"][2]]


def _copy(tmp_path, kind):
    folder = tmp_path / kind
    shutil.copytree(FIXTURES / kind, folder, ignore=shutil.ignore_patterns("reference*"))
    return folder


@pytest.mark.parametrize(
    "kind, edit, named",
    [
        ("flan_t5", {"config": {"feed_forward_proj": "gated-foo"}}, "feed_forward_proj 'gated-foo' is not one"),
        ("t5", {"config": {"feed_forward_proj": "relu-gated"}}, "feed_forward_proj 'relu-gated' is not one"),
        (
            "madlad",
            {"tensor": ("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", lambda t: t[:16])},
            "tensor `encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight` has shape (16, 4)",
        ),
        (
            "mt5",
            {"config": {"relative_attention_num_buckets": 64}},
            "relative_attention_bias.weight` has shape (32, 4)",
        ),
        ("mbart50", {"config": {"tokenizer_class": "MBartTokenizer"}}, "keras-transformer imports mBART-50"),
        (
            "mbart50",
            {"tensor": ("model.encoder.embed_positions.weight", lambda t: t[2:])},
            "tensor `model.encoder.embed_positions.weight` has shape (1024, 32)",
        ),
    ],
)
def test_bad_checkpoints_are_one_line_and_write_nothing(tmp_path, kind, edit, named):
    folder = _copy(tmp_path, kind)
    if "config" in edit:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        (folder / "config.json").write_text(json.dumps({**config, **edit["config"]}), encoding="utf-8")
    if "tensor" in edit:
        name, change = edit["tensor"]
        tensors = load_file(str(folder / "model.safetensors"))
        tensors[name] = np.ascontiguousarray(change(tensors[name]))
        save_file(tensors, str(folder / "model.safetensors"))
    with pytest.raises(ValueError) as error:
        import_pretrained(folder, tmp_path / "run")
    assert "\n" not in str(error.value) and named in str(error.value), str(error.value)
    assert not (tmp_path / "run").exists()


def test_a_tied_copy_of_the_embedding_must_equal_it(tmp_path):
    folder = _copy(tmp_path, "t5")
    tensors = load_file(str(folder / "model.safetensors"))
    tensors["lm_head.weight"] = tensors["shared.weight"].copy()
    save_file(tensors, str(folder / "model.safetensors"))
    import_pretrained(folder, tmp_path / "run")  # a copy, as a .bin holds it: the same model
    tensors["lm_head.weight"][3, 1] += 1.0
    save_file(tensors, str(folder / "model.safetensors"))
    with pytest.raises(ValueError, match="tensor `lm_head.weight` differs from `shared.weight` .row 3., but"):
        import_pretrained(folder, tmp_path / "other")
    assert not (tmp_path / "other").exists()


@pytest.mark.parametrize("imported", kinds("t5", "mt5", "mbart50"), indirect=True)
def test_an_import_exported_again_is_its_checkpoint_file_for_file(imported, tmp_path):
    kind, run, _, _ = imported
    written = export_checkpoint(run, tmp_path / "hf")
    source = sorted(path.name for path in (FIXTURES / kind).iterdir() if not path.name.startswith("reference"))
    for name in source:
        assert (tmp_path / "hf" / name).read_bytes() == (FIXTURES / kind / name).read_bytes(), name
    assert set(written["unchanged"]) == set(source)


@pytest.mark.parametrize("imported", kinds("madlad"), indirect=True)
def test_sampling_streaming_prefixes_and_bans_follow_the_languages(imported):
    """On the multilingual ones and T5: sampling with top_k=1 and the stream give greedy search's strings; a
    prefix begins the output after the forced language; a banned word never appears."""
    kind, _, translator, reference = imported
    if kind not in ("t5", "madlad", "mbart50"):
        pytest.skip("the same layers as t5's; the controls are the multilingual ones'")
    (controls, expected), *_ = targets(reference)[::-1]  # MADLAD and mBART-50: the second language
    sentences = reference["sentences"][:4]
    sampled = strings(quietly(translator.sample, sentences, 1.0, 1, 1.0, 7, **controls))
    assert sampled == expected["greedy"][:4]
    assert "".join(translator.stream(sentences[0], "greedy", **controls)) == expected["greedy"][0]
    words = expected["greedy"][0].split()
    again = strings(quietly(translator.greedy, sentences[:1], target_prefix=words[0], **controls))
    assert again == expected["greedy"][:1]
    banned = strings(quietly(translator.greedy, sentences[:1], banned=[words[0]], **controls))
    assert banned != expected["greedy"][:1] and words[0] not in banned[0].split()


def test_in_flight_rows_give_transformers_greedy_strings(imported):
    """`serve`'s in-flight rows: T5's relative positions read at each row's own offset, MADLAD's target token in the
    source of each request. Five requests in a pool of two rows join it as others leave."""
    kind, _, translator, reference = imported
    if kind not in ("t5", "madlad"):
        pytest.skip("T5's relative positions are t5's and madlad's; mBART-50's absolute ones decode as Marian's")
    (controls, expected), *_ = targets(reference)[::-1]  # MADLAD: the second language
    batcher = InflightBatcher(translator, max_rows=2, segment_steps=2)
    try:
        fields = {name: [value.encode()] for name, value in controls.items()}
        sentences = reference["sentences"][:5]
        futures = [batcher.submit(("greedy", ()), {"sentences": [s.encode()], **fields}) for s in sentences]
        outputs = [future.result(600)["translations"][0].decode("utf-8") for future in futures]
    finally:
        batcher.close()
    assert outputs == expected["greedy"][:5]
    assert max(batcher.segments) > 1  # rows side by side
