"""`precision=` / `--precision`: low precision where the CPU has the units and the engine is faster, else one line."""

import warnings

import pytest

from keras_transformer import cpu_units
from keras_transformer.commands import cli
from keras_transformer.errors import KerasTransformerWarning
from keras_transformer.files import user_cache
from keras_transformer.opener import open_translator
from keras_transformer.translators import precision as precision_module
from keras_transformer.translators.precision import decoding_precision

from trained_runs import tiny_run_dir

WITH_UNITS = frozenset({"avx2", "avx512_bf16", "avx512_vnni"})
WITHOUT_UNITS = frozenset({"avx2", "fma"})


def cpu_with(monkeypatch, flags):
    monkeypatch.setattr(cpu_units, "cpu_flags", lambda cpuinfo_path="/proc/cpuinfo": flags)


def decoded(*args, **kwargs):
    """`(precision, [warning lines])` of `decoding_precision(*args, **kwargs)`."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        precision = decoding_precision(*args, **kwargs)
    return precision, [str(w.message) for w in caught if issubclass(w.category, KerasTransformerWarning)]


def test_units_are_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_vnni amx_bf16\n\nflags\t\t: avx512_bf16\n")
    assert cpu_units.units("int8", cpuinfo) == ("avx512_vnni",)
    assert cpu_units.units("bfloat16", cpuinfo) == ("amx_bf16",)  # the first CPU's line
    assert cpu_units.units("int8", tmp_path / "missing") == ()


@pytest.mark.parametrize("asked", [None, "float32"])
def test_float32_is_float32_without_a_word(asked, monkeypatch):
    cpu_with(monkeypatch, WITHOUT_UNITS)
    assert decoded(asked, "xla") == ("float32", [])


@pytest.mark.parametrize("asked", ["int8", "bfloat16"])
def test_a_cpu_without_the_units_decodes_float32_with_one_line(asked, monkeypatch):
    cpu_with(monkeypatch, WITHOUT_UNITS)
    precision, lines = decoded(asked, "ctranslate2", supported=["float32", "int8", "bfloat16"])
    assert precision == "float32"
    assert len(lines) == 1 and "\n" not in lines[0]
    assert f"this CPU has no {asked} units" in lines[0] and lines[0].endswith("decoding in float32")


def test_the_ctranslate2_engine_runs_int8_where_the_cpu_has_vnni(monkeypatch):
    cpu_with(monkeypatch, WITH_UNITS)
    assert decoded("int8", "ctranslate2", supported=["float32", "int8"], width=512) == ("int8", [])
    precision, lines = decoded("bfloat16", "ctranslate2", supported=["float32", "int8"], width=512)
    assert precision == "float32" and lines == [
        "the ctranslate2 engine has no bfloat16 kernels for this CPU: decoding in float32"
    ]


@pytest.mark.parametrize("width", [128, None])
def test_ctranslate2_int8_is_not_used_where_it_is_slower_than_float32(width, monkeypatch):
    cpu_with(monkeypatch, WITH_UNITS)
    precision, lines = decoded("int8", "ctranslate2", supported=["float32", "int8"], width=width)
    assert precision == "float32" and len(lines) == 1
    assert f"narrower than d_model {precision_module.INT8_MIN_WIDTH} slower than float32" in lines[0]


@pytest.mark.parametrize(
    "engine, saved_model, reason",
    [
        ("xla", False, "slower than float32"),
        ("xla", True, "fixed at export"),
        ("litert", False, "chosen at export"),
    ],
)
def test_engines_that_are_not_faster_in_low_precision_say_why(engine, saved_model, reason, monkeypatch):
    cpu_with(monkeypatch, WITH_UNITS)
    for asked in ("int8", "bfloat16"):
        precision, lines = decoded(asked, engine, saved_model=saved_model)
        assert precision == "float32" and len(lines) == 1 and reason in lines[0]


def test_an_unknown_precision_is_refused():
    with pytest.raises(ValueError, match=r"`precision` must be one of \('float32', 'bfloat16', 'int8'\)"):
        decoding_precision("float16", "xla")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(user_cache.CACHE_ENV, str(tmp_path_factory.mktemp("ct2-cache")))
        path, pairs = tiny_run_dir()
        yield path, [source for source, _ in pairs]


def test_ctranslate2_loads_its_conversion_as_int8(tiny_run, monkeypatch):
    pytest.importorskip("ctranslate2", reason="the ctranslate2 engine needs the ctranslate2 extra")
    path, sources = tiny_run
    cpu_with(monkeypatch, WITH_UNITS)
    with pytest.warns(KerasTransformerWarning, match="narrower than d_model 512"):  # the tiny run is
        narrow = open_translator(path, "ctranslate2", beam_size=1, precision="int8")
    assert narrow.translator.compute_type == "float32"
    monkeypatch.setattr(precision_module, "INT8_MIN_WIDTH", 0)  # as if it were wide
    plain = open_translator(path, "ctranslate2", beam_size=1)
    int8 = open_translator(path, "ctranslate2", beam_size=1, precision="int8")
    assert (plain.precision, plain.translator.compute_type) == ("float32", "float32")
    assert (int8.precision, int8.translator.compute_type) == ("int8", "int8_float32")
    assert len(int8.greedy(sources).numpy()) == len(sources)
    cpu_with(monkeypatch, WITHOUT_UNITS)
    with pytest.warns(KerasTransformerWarning, match="this CPU has no int8 units"):
        fallback = open_translator(path, "ctranslate2", beam_size=1, precision="int8")
    assert fallback.translator.compute_type == "float32"


def test_translate_precision_falls_back_in_one_line_with_the_float32_strings(tiny_run, monkeypatch, capsys, tmp_path):
    path, sources = tiny_run
    source = tmp_path / "input.txt"
    source.write_text("".join(s + "\n" for s in sources[:4]), encoding="utf-8")
    outputs = []
    for extra in ([], ["--precision", "bfloat16"]):
        code = cli.main(["translate", "--model", str(path), "--input", str(source), "--beam", "1", "--quiet", *extra])
        out, err = capsys.readouterr()
        assert code == 0, err
        outputs.append((out, err))
    (plain, _), (bf16, warned) = outputs
    assert bf16 == plain
    lines = [line for line in warned.splitlines() if "warning" in line]
    assert len(lines) == 1 and "decoding in float32" in lines[0], warned


def test_an_unknown_precision_flag_is_one_line(capsys):
    with pytest.raises(SystemExit):
        cli.main(["translate", "--model", "m", "--input", "i", "--precision", "fp16"])
    assert "invalid choice: 'fp16'" in capsys.readouterr().err
