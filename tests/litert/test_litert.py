"""The LiteRT export: builtin ops only, the run's tokens, and the SavedModel's greedy and beam translations.

One float32 export of the tests' tiny Multi30k run (`trained_runs.tiny_run_dir`,
1 layer, d_model 32) is shared by the module; it is compared, on 500 Multi30k
validation sentences, with what `export.load(run)` gives. Needs ai-edge-litert
(`pip install 'keras-transformer[litert]'`).
"""

import json
import pathlib
import signal
import subprocess
import sys
import warnings

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import litert, runs
from keras_transformer.commands import cli
from keras_transformer.engines.litert.translator import Translator as LiteRTTranslator
from keras_transformer.files import destinations
from keras_transformer.litert import export as litert_export
from keras_transformer.litert import fast_text
from keras_transformer.litert.ops import check_operators, operators
from keras_transformer.tokenizers import load_tokenizer

from trained_runs import DATA, tiny_run_dir

pytest.importorskip("ai_edge_litert")
MARIAN = pathlib.Path(__file__).resolve().parents[1] / "data" / "marian"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """`(run, export folder, Translator, export.load(run))`."""
    from keras_transformer.export import load

    run, _ = tiny_run_dir()
    output = tmp_path_factory.mktemp("litert") / "export"
    litert.export_run(run, output)
    return run, output, LiteRTTranslator(output), load(run)


@pytest.fixture(scope="module")
def sentences():
    if not (DATA / "val.en").is_file():
        pytest.skip(f"Multi30k is not at {DATA}")
    return (DATA / "val.en").read_text(encoding="utf-8").splitlines()[:500]


def test_the_tflite_has_the_signatures_and_builtin_ops_only(exported):
    _, output, translator, _ = exported
    info = json.loads((output / "litert.json").read_text(encoding="utf-8"))
    assert info["signatures"] == ["encode", "decode_step", "tokenize", "detokenize"]
    assert info["tokenizer"]["in_model"] and info["tokenizer"]["detokenize_in_model"]
    names = check_operators((output / "model.tflite").read_bytes())
    custom = {name for name in names if name.startswith("custom:")}
    assert custom == {"custom:TFText>FastSentencepieceTokenize", "custom:TFText>FastSentencepieceDetokenize"}
    assert "DYNAMIC_UPDATE_SLICE" in names and not any("Flex" in name for name in names)
    assert destinations.is_own(output, destinations.LITERT)
    assert set(translator._interpreter.get_signature_list()) == set(info["signatures"])


def test_a_flex_op_is_named_in_one_line(tmp_path):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def match(strings):
        return tf.strings.regex_full_match(strings, "a.*")

    converter = tf.lite.TFLiteConverter.from_concrete_functions([match.get_concrete_function()], match)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS, tf.lite.OpsSet.SELECT_TF_OPS]
    data = converter.convert()
    assert "custom:FlexStaticRegexFullMatch" in operators(data)
    with pytest.raises(ValueError, match="uses the Flex op FlexStaticRegexFullMatch") as error:
        check_operators(data)
    assert "\n" not in str(error.value)


def test_tokenize_gives_the_run_tokenizers_ids(exported, sentences):
    run, _, translator, _ = exported
    tokenizer = load_tokenizer(run / runs.SOURCE_TOKENIZER)
    hard = ["日本語 and a dog 😀", "", "  two  spaces  "]
    texts = sentences + hard
    assert translator.tokenize(texts) == tokenizer.tokenize(tf.constant(texts)).to_list()


def test_detokenize_gives_the_run_tokenizers_strings(exported, sentences, monkeypatch):
    run, _, translator, _ = exported
    folder = run / runs.TARGET_TOKENIZER
    tokenizer = load_tokenizer(folder if folder.is_dir() else run / runs.SOURCE_TOKENIZER)
    german = (DATA / "val.de").read_text(encoding="utf-8").splitlines()[:500]
    rows = tokenizer.tokenize(tf.constant(german + ["日本語 😀", ""])).to_list()
    rows = [row + [3, 0, 0] for row in rows]  # END and padding, dropped as the run drops them
    expected = tokenizer.detokenize(tf.ragged.constant(rows)).numpy().tolist()
    calls = []
    runner = translator._runners["detokenize"]
    monkeypatch.setitem(translator._runners, "detokenize", lambda **kw: calls.append(1) or runner(**kw))
    assert translator.detokenize(rows) == expected
    # The .tflite detokenized every row but those with byte-fallback ids (many: a 400-piece vocabulary).
    on_host = [fast_text.detokenized_on_host(translator._target_text, row) for row in rows]
    assert len(calls) == on_host.count(False) >= len(rows) // 2 and on_host[-2]


def test_greedy_and_beam_equal_the_run_translators(exported, sentences):
    _, _, translator, reference = exported
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny model runs on, past max_length, for most of them
        greedy = translator.greedy(sentences).tolist()
        expected = reference.greedy(sentences).numpy().tolist()
        assert sum(a == b for a, b in zip(greedy, expected)) >= 0.99 * len(sentences)
        beam = translator.call_with_status(sentences)
        expected = reference.call_with_status(sentences)
    same = [a == b for a, b in zip(beam["translations"].tolist(), expected["translations"].numpy().tolist())]
    assert sum(same) >= 0.98 * len(sentences)
    np.testing.assert_allclose(beam["scores"][same], expected["scores"].numpy()[same], atol=1e-3)
    assert (beam["finished"] == expected["finished"].numpy()).mean() >= 0.98


def test_a_target_prefix_is_forced_as_the_run_translator_forces_it(exported):
    """The host search takes the prefix's pieces first, scored 0, for greedy and beam: the XLA decoder's outputs."""
    _, _, translator, reference = exported
    _, pairs = tiny_run_dir()
    sentences = [s for s, _ in pairs[:6]]
    prefixes = ["Ein Hund", "", "Ein Hund", None, "Zwei", "Ein Hund"]  # one per sentence; none: decoding as usual
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny model runs on, past max_length, for some of them
        for search in ("greedy_with_status", "call_with_status"):
            ours = getattr(translator, search)(sentences, target_prefix=prefixes)
            theirs = getattr(reference, search)(sentences, target_prefix=prefixes)
            assert ours["translations"].tolist() == theirs["translations"].numpy().tolist(), search
            np.testing.assert_allclose(ours["scores"], theirs["scores"].numpy(), atol=1e-4)
        plain = translator.greedy(sentences).tolist()
    forced = ours["translations"].tolist()
    assert [forced[1], forced[3]] == [plain[1], plain[3]] and forced != plain
    assert all(text.decode("utf-8").startswith(prefix) for text, prefix in zip(forced, prefixes) if prefix)


def test_nbest_score_and_empty_inputs_answer_as_load_does(exported):
    run, _, translator, reference = exported
    _, pairs = tiny_run_dir()
    sources, targets = [s for s, _ in pairs[:3]], [t for _, t in pairs[:3]]
    nbest = translator.nbest(sources + [""])
    assert nbest["translations"].shape == (4, 4) and nbest["scores"].numpy().shape == (4, 4)
    assert nbest["translations"][3, 0] == b"" and nbest["finished"][3].all()
    np.testing.assert_allclose(
        translator.score(sources, targets)["log_probs"], reference.score(sources, targets)["log_probs"], atol=1e-3
    )
    assert translator.greedy([]).shape == (0,)
    assert int(translator.beam_size.numpy()) == 4 and int(translator.max_source_length) == 32
    with pytest.raises(ValueError, match="NUL"):
        translator(["a\0b"])


def test_translate_command_takes_the_folder(exported, capsys):
    _, output, translator, _ = exported
    _, pairs = tiny_run_dir()
    assert cli.main(["translate", "--model", str(output), "--beam", "1", pairs[0][0]]) == 0
    assert capsys.readouterr().out == translator.greedy([pairs[0][0]])[0].decode("utf-8") + "\n"


def test_export_load_gives_the_litert_translator_and_refuses_what_is_fixed(exported):
    from keras_transformer.export import load

    _, output, translator, _ = exported
    loaded = load(output, beam_size=2, alpha=0.0)
    assert isinstance(loaded, LiteRTTranslator) and int(loaded.beam_size) == 2 and loaded._alpha == 0.0
    with pytest.raises(ValueError, match=r"LiteRT export: max_length=8 and compact=True does not apply \(fixed"):
        load(output, max_length=8, compact=True)
    with pytest.raises(ValueError, match="does not sample"):
        loaded.sample(["a"], 1.0, 0, 1.0, 0)


def test_evaluate_on_the_folder_gives_the_run_translators_strings(exported, sentences, tmp_path):
    _, output, _, reference = exported
    source, hypotheses = tmp_path / "source.txt", tmp_path / "hypotheses.txt"
    source.write_text("".join(s + "\n" for s in sentences[:40]), encoding="utf-8")
    reference_file = tmp_path / "reference.txt"
    german = (DATA / "val.de").read_text(encoding="utf-8").splitlines()[:40]
    reference_file.write_text("".join(line + "\n" for line in german), encoding="utf-8")
    args = ["evaluate", "--model", str(output), "--source", str(source), "--reference", str(reference_file)]
    assert cli.main([*args, "--hypotheses", str(hypotheses), "--quiet"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = [t.decode("utf-8") for t in reference(sentences[:40]).numpy().tolist()]
    assert hypotheses.read_text(encoding="utf-8").splitlines() == expected


def test_serve_on_the_folder_answers_as_the_run_translator(exported):
    from serving_fixtures import Server, ok, post

    _, output, _, reference = exported
    _, pairs = tiny_run_dir()
    sources, targets = [s for s, _ in pairs[:4]], [t for _, t in pairs[:4]]
    server = Server(output, "--no-batching", name="litert")
    try:
        beam = ok(post(server, {"instances": sources}))["predictions"]
        greedy = ok(post(server, {"signature_name": "greedy", "inputs": {"sentences": sources}}))["outputs"]
        scored = ok(post(server, {"signature_name": "score", "inputs": {"sources": sources, "targets": targets}}))
        sample = post(server, {"signature_name": "sample", "instances": sources})
    finally:
        assert server.stop() == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert [row["translations"] for row in beam] == [t.decode() for t in reference(sources).numpy().tolist()]
        assert greedy["translations"] == [t.decode() for t in reference.greedy(sources).numpy().tolist()]
    expected = reference.score(sources, targets)["log_probs"].numpy()
    np.testing.assert_allclose(scored["outputs"]["log_probs"], expected, atol=1e-3)
    assert sample.status_code == 400 and "sample" in sample.text


def test_destinations_follow_the_export_rules(exported, tmp_path):
    run, output, _, _ = exported
    with pytest.raises(destinations.DestinationInUseError, match="overwrite=True"):
        litert.export_run(run, output)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(destinations.UnsafeDestinationError, match="notes.txt|not empty"):
        litert.export_run(run, foreign)
    with pytest.raises(destinations.UnsafeDestinationError, match="overlaps"):
        litert.export_run(run, run / "litert")
    with pytest.raises(ValueError, match="quantization"):
        litert.export_run(run, tmp_path / "new", quantization="int4")


def test_a_max_length_beyond_the_fixed_cache_names_the_limit(exported, tmp_path, monkeypatch, capsys):
    run, _, _, _ = exported
    monkeypatch.setattr(litert_export, "MAX_CACHE_LENGTH", 16)
    with pytest.raises(ValueError, match=r"max_length 32 .* fixed self-attention cache holds \(16 positions\)"):
        litert.export_run(run, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert cli.main(["export", "--model", str(run), "--output", str(tmp_path / "out"), "--format", "litert"]) == 2
    assert "(16 positions): pass --max-length 16 or less" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def _edited_export(exported, tmp_path, edit):
    """A copy of the export whose litert.json `edit` changed, with its manifest written again to match."""
    import shutil

    from keras_transformer.files import manifest

    folder = tmp_path / "edited"
    shutil.copytree(exported[1], folder)
    info = json.loads((folder / "litert.json").read_text(encoding="utf-8"))
    edit(info)
    (folder / "litert.json").write_text(json.dumps(info), encoding="utf-8")
    manifest.write_manifest(folder)
    return folder


def _set(path, value):
    def edit(info):
        *parents, last = path.split(".")
        target = info
        for name in parents:
            target = target[name]
        target[last] = value

    return edit


def _languages(codes, target_lang=None, source_position="first"):
    return {"codes": codes, "source_lang": None, "target_lang": target_lang, "source_position": source_position}


@pytest.mark.parametrize(
    "edit, words",
    [
        (_set("decoding.beam_size", 10**6), "`beam_size` must be an int in [1, 128]"),
        (_set("max_length", 10**9), "`max_length` must be an int"),
        (_set("max_length", -1), "`max_length` must be an int"),
        (_set("max_length", 16), "give a decoder cache of"),  # in range, but not the .tflite's cache
        (_set("layers", 7), "give a decoder cache of"),
        (_set("start_id", -3), "`start_id` must be an int"),
        (_set("end_id", "3"), "`end_id` must be an int"),
        (_set("quantization", "int4"), "`quantization` must be one of"),
        (_set("decoding.alpha", float("nan")), "`alpha` must be a finite number"),
        (_set("decoding.force_end", "false"), "`force_end` must be true or false"),
        (_set("banned_ids", [10**9]), "`banned_ids` must hold ids"),
        (_set("target_vocab_size", 10), "`target_vocab_size`"),
        (_set("model_file", "../../model.tflite"), "`model_file` must be a file name"),
        (_set("tokenizer.source", "../../etc"), "`tokenizer.source` must be a folder inside the export"),
        (lambda info: info.pop("signatures"), "no `signatures`"),
        (_set("signatures", ["encode"]), "`signatures` must list"),
        (_set("languages", "all"), "`languages` must be null or an object"),
        (_set("languages", _languages({"de": 10**9})), "`languages.codes['de']` must be an int in [0, 399]"),
        (_set("languages", _languages({"../x": 5})), "holds '../x', which is not a language code"),
        (_set("languages", _languages({"de": 5, "fr": 5})), "must give each language a token of its own"),
        (_set("languages", _languages({"de": 5}, target_lang=["de"])), "`languages.target_lang` must be null or"),
        (_set("languages", _languages({"de": 5}, source_position="middle")), "`languages.source_position` must be"),
        (_set("languages", _languages({"de": 5})), "`languages` are not those of the tokenizer"),  # it has none
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_litert_json_values_are_checked_before_anything_is_allocated(exported, tmp_path, edit, words):
    folder = _edited_export(exported, tmp_path, edit)
    with pytest.raises(ValueError) as error:
        LiteRTTranslator(folder)
    message = str(error.value)
    assert "litert.json" in message and words in message and "\n" not in message, message


def test_a_signature_litert_json_lists_but_the_model_lacks_is_named(exported, tmp_path):
    folder = _edited_export(exported, tmp_path, lambda info: None)
    tiny = tf.lite.TFLiteConverter.from_concrete_functions([_identity.get_concrete_function()], _identity).convert()
    (folder / "model.tflite").write_bytes(tiny)
    from keras_transformer.files import manifest

    manifest.write_manifest(folder)
    with pytest.raises(ValueError, match="model.tflite has no signature 'encode', which .*litert.json lists"):
        LiteRTTranslator(folder)


@tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
def _identity(x):
    return x + 1


@pytest.mark.parametrize("content", [b"", b"TFL3" + b"\x00" * 64, b"not a flatbuffer" * 100])
def test_a_damaged_tflite_is_named(exported, tmp_path, capsys, content):
    folder = _edited_export(exported, tmp_path, lambda info: None)
    (folder / "model.tflite").write_bytes(content)
    from keras_transformer.files import manifest

    manifest.write_manifest(folder)
    with pytest.raises(ValueError, match="model.tflite is not a LiteRT model this export can run"):
        LiteRTTranslator(folder)
    assert cli.main(["translate", "--model", str(folder), "hello"]) == 2
    err = capsys.readouterr().err.strip()
    assert "model.tflite" in err and "\n" not in err


def test_a_truncated_model_keras_is_named_as_truncated_not_missing(exported, tmp_path, capsys):
    import shutil

    run = shutil.copytree(exported[0], tmp_path / "run")
    data = (run / runs.MODEL).read_bytes()
    (run / runs.MODEL).write_bytes(data[: len(data) // 2])
    assert cli.main(["export", "--model", str(run), "--output", str(tmp_path / "out"), "--format", "litert"]) == 2
    message = capsys.readouterr().err.strip()
    assert f"{run / runs.MODEL} is not a whole .keras file" in message and "truncated" in message, message
    assert "File not found" not in message and not (tmp_path / "out").exists()


def test_without_ai_edge_litert_one_line_says_what_to_install(exported, monkeypatch):
    _, output, _, _ = exported
    monkeypatch.setitem(sys.modules, "ai_edge_litert", None)
    monkeypatch.setitem(sys.modules, "ai_edge_litert.interpreter", None)
    with pytest.raises(ValueError, match=r"pip install 'keras-transformer\[litert\]'"):
        LiteRTTranslator(output)


def test_int8_export_is_smaller_and_translates(exported, tmp_path):
    run, output, translator, _ = exported
    info = litert.export_run(run, tmp_path / "int8", quantization="int8")
    assert info["quantization"] == "int8"
    assert (tmp_path / "int8" / "model.tflite").stat().st_size < (output / "model.tflite").stat().st_size
    _, pairs = tiny_run_dir()
    quantized = LiteRTTranslator(tmp_path / "int8").greedy([s for s, _ in pairs])
    assert sum(a == b for a, b in zip(quantized, translator.greedy([s for s, _ in pairs]))) >= 15


def test_an_int8_export_stores_a_tied_embedding_once():
    """GATHER and the output FULLY_CONNECTED share one int8 table (one scale a tensor: `int8_scales`)."""
    from ai_edge_litert.interpreter import Interpreter

    from keras_transformer.models import build_transformer

    model = build_transformer(
        300,
        300,
        num_layers=1,
        d_model=32,
        num_heads=4,
        d_ff=64,
        max_length=16,
        share_embeddings=True,
        tie_output_embedding=True,
    )
    assert litert_export.int8_scales(model) == "per-tensor"
    info = {"decoding": {"softmax_over": "allowed"}, "banned_ids": [0, 2]}
    data = litert_export.convert(model, 8, info, quantization="int8")
    details = Interpreter(model_content=data).get_tensor_details()
    tables = [detail["dtype"] for detail in details if tuple(detail["shape"]) == (300, 32)]
    assert tables == [np.int8]


# About a minute each on 2 cores: the shared vocabulary runs with the long checks (`-m slow`).
@pytest.mark.slow  # a LiteRT export of its own: the tiny run's checks the same searches
@pytest.mark.parametrize("kind", ["shared", "separate"])
def test_an_imported_marian_run_decodes_as_the_run_greedy_and_beam(tmp_path, kind):
    """Tokenizers outside; transformers' greedy strings; beam 4 with its stopping rule gives the run's strings.

    The empty sentence decodes from END alone, and `force_end`'s END scores 0, as in the run and transformers.
    """
    from keras_transformer.export import load
    from keras_transformer.pretrained import import_pretrained

    run = tmp_path / "run"
    import_pretrained(MARIAN / kind, run)
    reference = json.loads((MARIAN / kind / "reference.json").read_text(encoding="utf-8"))
    length, sentences = int(reference["max_new_tokens"]), reference["sentences"]
    with pytest.warns(litert_export.TokenizerOutsideWarning, match="Marian") as caught:
        info = litert.export_run(run, tmp_path / "litert", beam_size=4, alpha=1.0, max_length=length)
    assert len(caught) == 1 and "\n" not in str(caught[0].message)
    assert not info["tokenizer"]["in_model"] and not info["tokenizer"]["detokenize_in_model"]
    assert info["signatures"] == ["encode", "decode_step"] and info["decoding"]["stopping"] == "cannot_improve"
    translator = LiteRTTranslator(tmp_path / "litert")
    live = load(run, beam_size=4, alpha=1.0, max_length=length)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers cut some off too
        assert [t.decode("utf-8") for t in translator.greedy(sentences).tolist()] == reference["greedy"]
        greedy, expected = translator.greedy_with_status(sentences), live.greedy_with_status(sentences)
        ours, theirs = translator.nbest(sentences), live.nbest(sentences)
    np.testing.assert_allclose(greedy["scores"], expected["scores"].numpy(), atol=1e-4)  # the forced END adds 0
    assert ours["translations"].tolist() == theirs["translations"].numpy().tolist()
    np.testing.assert_allclose(ours["scores"], theirs["scores"].numpy(), atol=1e-4)
    assert (ours["finished"] == theirs["finished"].numpy()).all()


def test_tensorflow_texts_detokenizer_still_fails_on_two_sentences():
    """The reason `detokenize` takes one sentence per call: when this fails, the kernel is fixed (docs/litert.md)."""
    script = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "litert_detokenize_crash.py"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    one = next(line for line in done.stdout.splitlines() if line.startswith("one sentence:"))
    assert one.split(" tensorflow: ")[0].removeprefix("one sentence: ") == one.split(" tensorflow: ")[1]
    # Seen: SIGSEGV, SIGABRT ("corrupted double-linked list") or one string for two sentences, as the heap falls.
    crashed = done.returncode in (-signal.SIGSEGV, -signal.SIGABRT)
    assert crashed or (done.returncode == 0 and done.stdout.splitlines()[-1] == "wrong"), done.stdout
