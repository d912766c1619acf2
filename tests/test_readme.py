"""The README's drop-in example runs as printed."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def _python_block_after(heading):
    text = README.read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_layers_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(_python_block_after("## The layers, in your own model"), "README.md", "exec"), {})
    assert (tmp_path / "classifier.keras").is_file()


def test_gpt_and_bert_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(_python_block_after("## GPT and BERT from the same layers"), "README.md", "exec"), scope)
    assert tuple(scope["continuations"].shape) == (2, 8) and tuple(scope["masked_lm_logits"].shape) == (1, 5, 1000)
    assert (tmp_path / "bert-classifier.keras").is_file()
