"""The registry of tokenizer kinds: each kind has its parts, and a new kind is one module and one registry line.

Only JSON files and stand-in kinds: no tokenizer is trained or run here
(tests/test_tokenizers.py, tests/litert/ and tests/serving/ do that with
real ones, through the registry).
"""

import json
import re
import types

import pytest

from keras_transformer import tokenizers
from keras_transformer.ctranslate2 import conversion as ctranslate2
from keras_transformer.litert import text as host_text
from keras_transformer.tokenizers import kinds
from keras_transformer.tokenizers.kinds.vocabularies import Vocabulary


def _folder(tmp_path, config, name="tokenizer"):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "tokenizer.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def test_every_kind_has_its_parts_and_is_keyed_by_the_format_its_tokenizers_write():
    assert set(kinds.KINDS) == {"sentencepiece", "marian", "fairseq", "t5", "huggingface"}
    for name, kind in kinds.KINDS.items():
        assert kind.FORMAT == name
        assert all(callable(getattr(kind, part, None)) for part in kinds.PARTS[1:]), kind.__name__


def test_a_new_kind_is_one_module_and_one_registry_line(tmp_path, monkeypatch):
    echo = types.ModuleType("echo")
    echo.FORMAT = "echo"
    echo.load = lambda directory, name=None: ("loaded", directory.name, name)
    echo.host_text = lambda directory, config: ("host text", config["pieces"])
    echo.ctranslate2_vocabulary = lambda directory, config, vocab_size=None: Vocabulary(config["pieces"])
    monkeypatch.setitem(kinds.KINDS, echo.FORMAT, echo)
    folder = _folder(tmp_path, {"format": "echo", "pieces": ["<unk>", "a", "b"]})

    assert tokenizers.load_tokenizer(folder, name="t") == ("loaded", "tokenizer", "t")
    assert host_text.load_text(folder) == ("host text", ["<unk>", "a", "b"])
    assert ctranslate2.read_pieces(folder) == ["<unk>", "a", "b"]
    assert kinds.ctranslate2_vocabularies(folder, tmp_path / "no-target") == (["<unk>", "a", "b"],) * 2 + (None,)


@pytest.mark.parametrize("kind", ["t5", "huggingface"])
def test_a_kind_without_a_litert_form_or_ctranslate2_vocabulary_is_one_line_naming_the_folder(tmp_path, kind):
    folder = _folder(tmp_path, {"format": kind})
    with pytest.raises(ValueError, match="no LiteRT form") as error:
        host_text.load_text(folder)
    assert str(folder) in str(error.value) and "\n" not in str(error.value)
    if kind == "huggingface":
        with pytest.raises(ValueError, match="no CTranslate2 vocabulary") as error:
            ctranslate2.read_pieces(folder)
        assert str(folder) in str(error.value)


@pytest.mark.parametrize("config", [{"format": "bpe-of-another-library"}, {"format": ["marian"]}])
def test_a_format_of_no_kind_is_read_as_this_packages_own_which_names_it(tmp_path, config):
    folder = _folder(tmp_path, config)
    assert kinds.kind_of(config) is kinds.OWN and kinds.kind_of(["marian"]) is kinds.OWN
    with pytest.raises(ValueError, match="must have format 'sentencepiece'"):
        tokenizers.load_tokenizer(folder)


def test_a_folder_without_tokenizer_json_is_named(tmp_path):
    with pytest.raises(ValueError, match="not a tokenizer of this package"):
        tokenizers.load_tokenizer(tmp_path)
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path} is not a tokenizer folder of this package")):
        host_text.load_text(tmp_path)
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path} is not a tokenizer saved by this package")):
        ctranslate2.read_pieces(tmp_path)
