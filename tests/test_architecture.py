"""The picture of the house in docs/architecture.md, held against the code: no import runs up a room.

Every `keras_transformer` import of every module of the package (those
inside functions too) is read with `ast` and checked against the rooms the
document lists, top to bottom: an import may go down or sideways, never up.
The rules the document lists beside the rooms are checked here too (no
module outside `engines/` and `opener.py` imports an engine; no module
outside `tokenizers/` branches on a tokenizer's kind, read with `ast`; no
function but the edges' takes a `target_lang`: inside, a call's languages,
prefix and banned words travel as one `Controls`).
"""

import ast
import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = REPO / "keras_transformer"


def rooms():
    """`{wing: room index}` from the ```rooms block of docs/architecture.md (0 = the top)."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = re.search(r"```rooms\n(.*?)```", text, re.S).group(1)
    return {wing.strip(): index for index, line in enumerate(block.splitlines()) for wing in line.split(",")}


def wing_of(module):
    """The wing of a dotted module name: `serving` for `keras_transformer.serving.rest`; None for the package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def imports(path):
    """The `keras_transformer` modules that the file at `path` imports, anywhere in it."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "keras_transformer":
            if node.module == "keras_transformer":
                found += [f"keras_transformer.{alias.name}" for alias in node.names]
            else:
                found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.split(".")[0] == "keras_transformer"]
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE)


def module_name(path):
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_wing_of_the_package_has_a_room():
    wings = {wing_of(module_name(path)) for path in MODULES}
    assert wings - set(rooms()) == set(), "wings the picture does not show"


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(PACKAGE)) for p in MODULES])
def test_no_import_runs_up_a_room(path):
    room = rooms()
    source = wing_of(module_name(path))
    for imported in imports(path):
        target = wing_of(imported)
        if target in (source, None, "__version__"):
            continue
        assert room[target] >= room[source], f"{module_name(path)} imports {imported}: up from {source} to {target}"


def test_serving_litert_and_pretrained_never_import_training():
    for wing in ("engines", "serving", "litert", "ctranslate2", "pretrained"):
        for path in (PACKAGE / wing).rglob("*.py"):
            assert not [m for m in imports(path) if wing_of(m) == "training"], path


# Who may import an engine: the engines themselves, the opener (the one door to them), and `export.py`, which
# re-exports the xla engine's `Translator`, `LoadedTranslator` and `SIGNATURES` for users who build one by hand.
ENGINE_DOORS = ("engines", "opener.py", "export.py")


def test_no_module_outside_the_engines_and_the_opener_imports_an_engine():
    found = [
        f"{path.relative_to(PACKAGE)} imports {imported}"
        for path in MODULES
        if path.relative_to(PACKAGE).parts[0] not in ENGINE_DOORS
        for imported in imports(path)
        if wing_of(imported) == "engines"
    ]
    assert found == [], "open folders through keras_transformer.opener"


def test_the_engine_check_sees_an_engine_import(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("def f():\n    from keras_transformer.engines.xla import translator\n", encoding="utf-8")
    assert [wing_of(m) for m in imports(module)] == ["engines"]


@pytest.mark.parametrize(
    "definition, home",
    [
        ("length_penalty", "decoding/rules.py"),
        ("warn_cut_off", "translators/interface.py"),
        ("banned_ids_of", "translators/interface.py"),  # each engine gives its vocabulary, `_banning_vocabulary`
        ("decoding_precision", "translators/precision.py"),  # the rule, which `opener.precision_for` alone calls
    ],
)
def test_a_rule_is_defined_once(definition, home):
    pattern = re.compile(rf"^\s*def _?{definition}\(", re.M)
    homes = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if pattern.search(p.read_text("utf-8"))]
    assert homes == [home]


def test_the_precision_is_decided_in_the_opener_alone():
    callers = [
        str(path.relative_to(PACKAGE))
        for path in MODULES
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", None)) == "decoding_precision"
    ]
    assert callers == ["opener.py"]


def test_no_module_reads_a_translators_private_members():
    """Streams, in-flight rows and the rest use a translator's public methods: `translator._x` is its own business."""
    found = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            owner = node.value if isinstance(node, ast.Attribute) else None
            name = getattr(owner, "id", getattr(owner, "attr", None))
            if name == "translator" and node.attr.startswith("_") and not node.attr.startswith("__"):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {name}.{node.attr}")
    assert found == []


def tokenizer_kinds():
    """The tokenizer kinds' names: each `FORMAT = "..."` under keras_transformer/tokenizers/ (the registry's keys)."""
    names = set()
    for path in (PACKAGE / "tokenizers").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(target, ast.Name) and target.id == "FORMAT" for target in node.targets)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                names.add(node.value.value)
    return names


def branches_on_a_kind(source, kinds):
    """`[(line, kind)]` where `source` branches on a tokenizer kind's name.

    A comparison with one (`==`, `!=`, `in` a tuple that holds one), a
    `match` case of one, or a dict keyed by one. `"fairseq"` is also a
    position layout (`config.POSITION_LAYOUTS`): a comparison with a
    `...layout` is that, not a tokenizer's kind.
    """

    def named(node):
        values = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        return [v.value for v in values if isinstance(v, ast.Constant) and v.value in kinds]

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any("layout" in ast.unparse(operand) for operand in operands):
                continue
            found += [(node.lineno, kind) for operand in operands for kind in named(operand)]
        elif isinstance(node, ast.match_case):
            found += [
                (node.pattern.lineno, p.value.value)
                for p in ast.walk(node.pattern)
                if isinstance(p, ast.MatchValue) and named(p.value)
            ]
        elif isinstance(node, ast.Dict):
            found += [(node.lineno, kind) for key in node.keys if key is not None for kind in named(key)]
    return found


def test_the_tokenizer_kinds_are_read_from_the_registry():
    assert {"sentencepiece", "marian", "fairseq", "t5", "huggingface"} <= tokenizer_kinds()


@pytest.mark.parametrize(
    "source, branches",
    [
        ('if config.get("format") == "marian":\n    pass', True),
        ('if _format(folder) in ("fairseq", "t5"):\n    pass', True),
        ('match kind:\n    case "huggingface":\n        pass', True),
        ('readers = {"marian": 1, "sentencepiece": 2}', True),
        ('if self.position_layout == "fairseq":\n    pass', False),
        ('MODEL_TYPE = "marian"', False),
    ],
)
def test_the_kind_check_sees_a_branch_on_a_kind(source, branches):
    assert bool(branches_on_a_kind(source, tokenizer_kinds())) == branches


def test_no_module_outside_tokenizers_branches_on_a_tokenizer_kind():
    kinds = tokenizer_kinds()
    found = [
        f"{path.relative_to(PACKAGE)}:{line} names the tokenizer kind {kind!r}"
        for path in MODULES
        if path.relative_to(PACKAGE).parts[0] != "tokenizers"
        for line, kind in branches_on_a_kind(path.read_text(encoding="utf-8"), kinds)
    ]
    assert found == [], "ask keras_transformer.tokenizers.kinds instead"


# Where a function may take a `target_lang` (docs/architecture.md): `Controls`'s own module, which makes the one
# value of a call's languages, prefix and banned words, and the edges that turn what a user gives into one or into a
# default: the translator's public methods and the line helpers (Python's keyword arguments), each engine's
# constructor and opener (a default language: `export.load`, `--target-lang`), the SavedModel's functions (their
# arguments are the export's input names, which the REST fields reach), the server's default, the LiteRT export's
# recorded default, a tokenizer's own default (read from a checkpoint), and training's languages (`train`).
# Everything between them and the engines' searches passes a `Controls` whole.
TARGET_LANG_EDGES = {
    "translators/controls.py": {"Languages.with_defaults", "resolve"},
    "translators/interface.py": {
        "TranslatorInterface.score",
        "TranslatorInterface.align",
        "TranslatorInterface._controls",
    },
    "translators/translation.py": {"translate_lines", "translate_lines_with_status", "nbest_lines", "score_lines"},
    "engines/xla/translator.py": {"Translator.__init__"},
    "engines/xla/opening.py": {"open_run_translator"},
    "engines/xla/translator_graph.py": {
        f"TranslatorGraph._tf_{name}_with_controls" for name in ("call", "greedy", "sample", "nbest", "score")
    },
    "engines/savedmodel/translator.py": {"LoadedTranslator.__init__", "open_saved_model"},
    "engines/ctranslate2/translator.py": {"CTranslate2Translator.__init__"},
    "engines/litert/translator.py": {"Translator.__init__"},
    "serving/signatures.py": {"ServedModel.__init__"},
    "litert/export.py": {"export_run", "_languages"},
    "tokenizers/fairseq.py": {"FairseqTokenizer.__init__"},
    "tokenizers/t5.py": {"T5Tokenizer.__init__", "from_t5_files"},
    "training/run.py": {"train"},
    "training/fine_tuning.py": {"languages"},
}


def functions_taking(source, parameter):
    """The qualified names (`Class.method`, `outer.inner`) of the functions of `source` with a `parameter`."""
    found = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                arguments = child.args
                names = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
                if parameter in names:
                    found.append(prefix + child.name)
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(ast.parse(source), "")
    return found


def test_the_target_lang_check_sees_a_parameter():
    source = "class A:\n    def f(self, *, target_lang=None):\n        def g(target_lang): pass\ndef h(lang): pass\n"
    assert functions_taking(source, "target_lang") == ["A.f", "A.f.g"]


def test_target_lang_is_taken_only_by_controls_and_the_edges():
    found = [
        f"{path.relative_to(PACKAGE).as_posix()}: {name}"
        for path in MODULES
        for name in functions_taking(path.read_text(encoding="utf-8"), "target_lang")
        if name not in TARGET_LANG_EDGES.get(path.relative_to(PACKAGE).as_posix(), ())
    ]
    assert found == [], "pass a translators.controls.Controls whole"
    edges = {
        (path.relative_to(PACKAGE).as_posix(), name)
        for path in MODULES
        for name in functions_taking(path.read_text(encoding="utf-8"), "target_lang")
    }
    listed = {(module, name) for module, names in TARGET_LANG_EDGES.items() for name in names}
    assert listed - edges == set(), "an edge that takes no `target_lang` any more leaves TARGET_LANG_EDGES"
