"""Serving inputs: wrong ones are one-line ValueErrors that never freeze a server; cut-offs, NULs reported.

TensorFlow bug (TF 2.21): a `tf.function` whose input signature rejects a
call keeps its lock, so every later call from another thread blocks forever.
The `Translator` and what `export.load` returns (a `LoadedTranslator` for a
SavedModel) check their inputs in Python first; these tests make one bad
call of each kind, then run 8 threads of good calls as daemon threads that
must all finish within a deadline (a regression fails, it does not hang).
"""

import base64
import io
import math
import os
import re
import sys
import threading
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import build_transformer, decoding, runs
from keras_transformer.commands import cli
from keras_transformer.export import LoadedTranslator, Translator, load
from keras_transformer.files import atomic
from keras_transformer.input_rules import utf8_error
from keras_transformer.serving import request_values, signatures

from trained_runs import trained_export  # the tiny preset trained once per session, and its export

THREADS, DEADLINE_S = 8, 120
SENTENCES_MESSAGE = "`sentences` must be a 1-D string tensor or a list of str. Received: "
BAD_SENTENCES = [
    (lambda: tf.constant([["a 2-D", "string tensor"]]), "a 2-D string tensor of shape (1, 2)"),
    (lambda: tf.constant("a scalar"), "a scalar string tensor"),
    (lambda: "a bare str", "wrap a single sentence in a list"),
    (lambda: tf.constant([1, 2]), "a 1-D int32 tensor"),
    (lambda: [1, 2], "a list holding int 1 at index 0"),
    (lambda: ["fine", None], "a list holding NoneType None at index 1"),
    (lambda: tf.ragged.constant([["a"], ["b", "c"]]), "a RaggedTensor"),
    (lambda: np.array([["a"]]), "a 2-D <U1 numpy array"),
]
GOOD_SAMPLING = dict(temperature=0.8, top_k=0, top_p=0.9, seed=1)
BAD_SAMPLING = [
    ("temperature", math.nan),
    ("temperature", -0.5),
    ("temperature", math.inf),
    ("temperature", tf.constant(math.nan)),
    ("top_k", -1),
    ("top_k", 2.5),
    ("top_p", 0.0),
    ("top_p", 1.5),
    ("top_p", math.nan),
    ("seed", math.nan),
    ("seed", "1"),
    # Huge numbers (10**400 raised OverflowError) and numbers float32 cannot hold.
    ("temperature", 10**400),
    ("temperature", 1e39),
    ("temperature", -math.inf),
    ("temperature", np.float64(1e300)),
    ("top_k", 10**400),
    ("top_k", math.inf),
    ("top_p", 10**400),
    ("top_p", 1e-50),
    ("seed", 10**400),
    ("seed", -(10**5000)),
    ("seed", math.inf),
]
INVALID_UTF8 = {
    "the issue's bytes": b"\xff\xfe bad",
    "Latin-1": b"caf\xe9",
    "overlong slash": b"\xc0\xaf",
    "encoded surrogate": b"\xed\xa0\x80",
    "past U+10FFFF": b"\xf4\x90\x80\x80",
    "cut after a lead byte": b"ok \xe2\x82",
    "lone surrogate str": "lone \ud800 surrogate",
}


@pytest.fixture(scope="module", params=["run directory", "SavedModel"])
def translator(request):
    """What `load` returns for the trained run directory (a `Translator`) and for its export."""
    run, export = trained_export()
    translator = load(run if request.param == "run directory" else export)
    assert isinstance(translator, Translator if request.param == "run directory" else LoadedTranslator)
    return translator


def _methods(translator):
    """Every entry point that takes `sentences`, as `name -> call(sentences)`."""
    return {
        "__call__": translator,
        "greedy": translator.greedy,
        "source_lengths": translator.source_lengths,
        "call_with_status": translator.call_with_status,
        "sample": lambda sentences: translator.sample(sentences, **GOOD_SAMPLING),
    }


@pytest.mark.parametrize("make_input, received", BAD_SENTENCES)
def test_wrong_sentences_are_one_line_value_errors_naming_the_argument(translator, make_input, received):
    for name, method in _methods(translator).items():
        with pytest.raises(ValueError) as error:
            method(make_input())
        message = str(error.value)
        assert message.startswith(SENTENCES_MESSAGE) and received in message, (name, message)
        assert "\n" not in message


def _sampling_id(argument, value):
    """The test id; an int too long to print (as pytest would) is named by its size."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"{argument}={'-' if value < 0 else ''}int of {value.bit_length()} bits"
    return f"{argument}={value!r}"


@pytest.mark.parametrize("argument, value", BAD_SAMPLING, ids=[_sampling_id(a, v) for a, v in BAD_SAMPLING])
def test_wrong_sampling_numbers_are_value_errors_naming_them(translator, argument, value):
    options = dict(GOOD_SAMPLING, **{argument: value})
    for method in (translator.sample, translator.sample_with_status):
        with pytest.raises(ValueError, match=rf"^`{argument}` must be .* Received: {argument}="):
            method(["A question?"], **options)


@pytest.mark.parametrize("case", sorted(INVALID_UTF8))
def test_invalid_utf8_is_a_value_error_as_the_rest_server_answers_400(translator, case):
    """Before: translated silently (the tokenizer replaced the bytes), while `serve` answered 400."""
    bad = INVALID_UTF8[case]
    calls = {
        **_methods(translator),
        "nbest": translator.nbest,
        "sample_with_status": lambda s: translator.sample_with_status(s, **GOOD_SAMPLING),
        "score sources": lambda s: translator.score(s, ["fine", "fine"]),
        "score targets": lambda s: translator.score(["fine", "fine"], s),
    }
    forms = [["fine", bad], ("fine", bad)]
    if isinstance(bad, bytes):
        forms += [tf.constant([b"fine", bad]), np.array([b"fine", bad], dtype=object)]
    reason = re.escape(utf8_error(bad))
    for name, call in calls.items():
        argument = "targets" if name == "score targets" else "sources" if name == "score sources" else "sentences"
        for sentences in forms:
            with pytest.raises(ValueError, match=rf"^`{argument}\[1\]` is not valid UTF-8 text \({reason}\)"):
                call(sentences)


@pytest.mark.parametrize("case", sorted(INVALID_UTF8))
def test_the_python_api_and_the_rest_server_share_one_utf8_rule(case):
    """`serve` refuses a JSON string or `{"b64": ...}` for the reason `utf8_error` gives the Python API."""
    bad = INVALID_UTF8[case]
    reason = utf8_error(bad)
    assert reason
    value = {"b64": base64.b64encode(bad).decode("ascii")} if isinstance(bad, bytes) else bad
    with pytest.raises(signatures.RequestError, match=rf"not valid UTF-8.*\({re.escape(reason)}\)"):
        request_values.string_value(value, "instances[0]")
    for good in ("café ☕ 𝄞", "caf\u00e9".encode(), "\U0010ffff".encode()):
        assert utf8_error(good) is None
        assert request_values.string_value(
            good if isinstance(good, str) else {"b64": base64.b64encode(good).decode()}, "x"
        )


@pytest.mark.filterwarnings("ignore::keras_transformer.decoding.TruncatedOutputWarning")  # 1 epoch: cut-offs
def test_good_calls_from_8_threads_finish_after_bad_calls(translator):
    good = ["안녕하세요", "오늘 날씨 어때?"]
    expected = translator.greedy(good).numpy().tolist()  # compiled here, before the clock starts
    translator(good)
    for make_input, _ in BAD_SENTENCES:
        with pytest.raises(ValueError):
            translator.greedy(make_input())
        with pytest.raises(ValueError):
            translator(make_input())
    for bad in INVALID_UTF8.values():
        with pytest.raises(ValueError):
            translator.nbest([bad])
    with pytest.raises(ValueError):
        translator.sample(good, math.nan, 0, 1.0, -1)
    results, errors = [], []

    def client(index):
        try:
            for _ in range(3):
                outputs = translator.greedy(good) if index % 2 else translator(good)
                results.append(outputs.numpy().tolist() if index % 2 else len(outputs.numpy()))
        except Exception as error:  # noqa: BLE001  (reported below)
            errors.append(repr(error))

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=DEADLINE_S)  # the threads run together: one deadline in all
    hung = sum(thread.is_alive() for thread in threads)
    assert hung == 0, f"{hung} of {THREADS} threads still blocked after {DEADLINE_S} s"
    assert errors == [] and len(results) == 3 * THREADS
    assert all(r == expected for r in results if isinstance(r, list))


@pytest.mark.filterwarnings("ignore::keras_transformer.decoding.TruncatedOutputWarning")  # 1 epoch: cut-offs
def test_nul_bytes_are_rejected_naming_the_sentence(translator):
    for sentences in (["fine", "nul\0inside"], tf.constant(["fine", "nul\0inside"]), [b"fine", b"nul\0"]):
        with pytest.raises(ValueError, match=r"^`sentences\[1\]` contains a NUL byte"):
            translator(sentences)
    assert translator(["fine", ""]).shape == (2,)


def test_the_saved_models_own_sample_rejects_bad_numbers():
    """`tf.saved_model.load` users skip the Python checks: the graph's asserts name the number."""
    _, export = trained_export()
    raw = tf.saved_model.load(str(export))
    sentences = tf.constant(["오늘 날씨 어때?"])
    for argument, value in [
        ("temperature", math.nan),
        ("temperature", -1.0),
        ("temperature", math.inf),
        ("top_k", -3),
        ("top_p", 0.0),
        ("top_p", 1.5),
        ("top_p", math.nan),
    ]:
        options = dict(GOOD_SAMPLING, **{argument: value})
        args = (options["temperature"], options["top_k"], options["top_p"], options["seed"])
        for method in (raw.sample, raw.sample_with_status):
            with pytest.raises(tf.errors.InvalidArgumentError, match=f"`{argument}` must be"):
                method(sentences, *args)
    assert raw.sample(sentences, 0.0, 0, 1.0, -1).numpy() == raw.greedy(sentences).numpy()


@pytest.fixture(scope="module")
def never_ends(tmp_path_factory):
    """A run directory holding a tiny untrained model that never emits END (its END bias is -1e4).

    It uses the trained run's tokenizer; decoding stops after 4 tokens.
    """
    run, _ = trained_export()
    from keras_transformer.tokenizers import SubwordTokenizer

    vocab = SubwordTokenizer.load(run / runs.SOURCE_TOKENIZER).vocab_size
    keras.utils.set_random_seed(4)
    config = dict(
        source_vocab_size=vocab,
        target_vocab_size=vocab,
        num_layers=1,
        d_model=16,
        num_heads=2,
        d_ff=32,
        dropout=0.0,
        max_length=16,
    )
    model = build_transformer(**config)
    kernel, bias = model.get_layer("logits").get_weights()
    bias[decoding.END_ID] = -1e4
    model.get_layer("logits").set_weights([kernel, bias])
    path = tmp_path_factory.mktemp("never-ends") / "run"
    path.mkdir()
    model.save(path / runs.MODEL)
    for tokenizer in (runs.SOURCE_TOKENIZER, runs.TARGET_TOKENIZER):
        SubwordTokenizer.load(run / tokenizer).save(path / tokenizer)
    atomic.write_json(
        path / runs.CONFIG,
        {"model": config, "decoding": {"beam_size": 2, "length_penalty": 0.6, "max_length": 4}, "finished": True},
    )
    return path


def _cut_off_warnings(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message) for w in caught if w.category is decoding.TruncatedOutputWarning]


# The exported translator's copy (a SavedModel written and loaded: a minute more) runs with the long checks.
@pytest.mark.parametrize("exported", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["live", "exported"])
def test_cut_off_translations_warn_and_are_flagged(never_ends, tmp_path, exported):
    translator = load(never_ends, jit_compile=False)  # the same decode without XLA: compiles faster
    if exported:
        translator = load(translator.save(tmp_path / "export"))
    for method in (
        translator,
        translator.greedy,
        lambda s: translator.sample(s, temperature=1.0, top_k=0, top_p=1.0, seed=3),
    ):
        outputs, caught = _cut_off_warnings(lambda m=method: m(["A dog runs.", "", "Hi"]))
        assert outputs.shape == (3,) and outputs.numpy()[1] == b""
        assert caught == [
            "2 of 3 translations reached the maximum output length before END and are "
            "cut off: sentences[0], sentences[2]"
        ]
    status, caught = _cut_off_warnings(lambda: translator.call_with_status(["A dog runs.", ""]))
    assert caught == []  # the flags instead of a warning
    assert status["finished"].numpy().tolist() == [False, True]
    _, caught = _cut_off_warnings(lambda: translator([""]))
    assert caught == []


def _main(capsys, monkeypatch, argv, stdin=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_translate_warns_for_each_cut_off_sentence(never_ends, capsys, monkeypatch):
    code, out, err = _main(capsys, monkeypatch, ["translate", "--model", never_ends, "A dog runs.", "", "Hi"])
    assert code == 0 and len(out.split("\n")) == 4
    cut_off = [line for line in err.splitlines() if "maximum output length before END" in line]
    assert cut_off == [
        f"warning: sentence {n}: the translation reached the maximum output length before END; it is cut off"
        for n in (1, 3)
    ]


@pytest.mark.parametrize(
    "argv, stdin, message",
    [
        (["translate", "--model", "{run}"], b"fine\nnul\0inside\n", "stdin, line 2: contains a NUL byte"),
        (["translate", "--model", "{run}", "fine", "nul\0"], None, "argument 2 contains a NUL byte"),
        (["translate", "--model", "{run}", "--input", "{tmp}/in"], None, "in, line 3: contains a NUL byte"),
        (
            ["evaluate", "--model", "{run}", "--source", "{tmp}/in", "--reference", "{tmp}/in"],
            None,
            "in, line 3: contains a NUL byte",
        ),
        (["chat", "--model", "{run}", "--temperature", "0"], b"fine\n\0\n", "input line 2 contains a NUL byte"),
    ],
)
def test_commands_reject_nul_bytes_naming_the_line(capsys, monkeypatch, tmp_path, argv, stdin, message):
    run, _ = trained_export()
    (tmp_path / "in").write_bytes(b"one\ntwo\nthr\0ee\n")
    argv = [a.format(run=run, tmp=tmp_path) for a in argv]
    code, out, err = _main(capsys, monkeypatch, argv, stdin)
    assert code == 2 and message in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_translate_reads_a_pipe_and_names_what_it_cannot_read(capsys, monkeypatch, tmp_path):
    """`--input /dev/stdin` and `--input <(cmd)` (a pipe) failed: "`path` must be an existing file"."""
    run, _ = trained_export()
    argv = ["translate", "--model", run, "--beam", "1", "--quiet"]
    code, expected, _ = _main(capsys, monkeypatch, [*argv, "A dog runs.", "Two men."])
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    writer = threading.Thread(target=lambda: pipe.write_text("A dog runs.\nTwo men.\n", encoding="utf-8"))
    writer.start()
    code, out, err = _main(capsys, monkeypatch, [*argv, "--input", pipe])
    writer.join(timeout=30)
    assert code == 0 and out == expected and len(expected.splitlines()) == 2, err
    for path, message in (("/dev/zero", "/dev/zero, line 1: contains a NUL byte"), (tmp_path, "is a folder")):
        code, _, err = _main(capsys, monkeypatch, [*argv, "--input", path])  # /dev/zero: refused at once
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_an_export_from_before_special_tokens_were_recorded_refuses_them_in_a_prefix():
    """Its special tokens are the pieces of the ids banned words never ban (START, END, PAD, UNK)."""
    from keras_transformer.translators.exported import exported_special_tokens

    class EarlierExport:
        target_pieces = tf.Variable(["<pad>", "<unk>", "<s>", "</s>", "\u2581a"])
        unbanned_ids = tf.Variable([0, 1, 2, 3])

        def greedy_with_status(self, sentences):
            raise AssertionError("refused before decoding")

    assert exported_special_tokens(EarlierExport()) == ("<pad>", "<unk>", "</s>", "<s>")
    with pytest.raises(ValueError, match="^`target_prefix` holds the special token '<s>'"):
        LoadedTranslator(EarlierExport()).greedy(["a"], target_prefix="a <s>")


def test_a_saved_model_without_the_flags_still_translates_and_checks_its_inputs():
    """An export from before `*_with_status`: translations without flags (None), no warning."""
    from keras_transformer.translators.translation import translate_lines_with_status

    class OldExport:
        beam_size, max_source_length, other = tf.Variable(4), tf.Variable(32), "passed through"

        def __call__(self, sentences):
            return tf.strings.upper(sentences)

        greedy = __call__

    translator = LoadedTranslator(OldExport())
    outputs, caught = _cut_off_warnings(lambda: translator(["a", "b"]))
    assert outputs.numpy().tolist() == [b"A", b"B"] and caught == []
    assert translator.greedy_with_status(["c"])["finished"] is None
    greedy = LoadedTranslator(OldExport(), greedy=True)  # opened with beam_size=1
    assert translate_lines_with_status(greedy, ["x", "yy"]) == (["X", "YY"], [None, None])
    assert translator.other == "passed through" and int(translator.beam_size.numpy()) == 4
    with pytest.raises(ValueError, match="`sentences` must be"):
        translator(tf.constant([[b"a"]]))
