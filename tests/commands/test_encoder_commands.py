"""`keras-transformer embed`, `classify` and `fill-mask`: what the Python `Encoder` gives, written whole, or one line.

The runs are imported from the old-layout fixtures of tests/data/layouts/
(a sentence-transformers BertModel, a BertForSequenceClassification, a
BertForPreTraining); test_encoder.py holds the Encoder against
sentence-transformers and transformers, these the commands against the
Encoder.
"""

import io
import json
import pathlib
import re
import sys

import numpy as np
import pytest
from checkpoint_layouts import LAYOUTS, assemble, sbert_variant

from keras_transformer import export
from keras_transformer.commands import cli
from keras_transformer.pretrained import import_pretrained

TEXTS = ["오늘 너무 힘들었어", "고마워 정말", "", "The Quick brown fox, Émile said. 😀"]
MASKED = ["오늘 [MASK] 힘들었어", "[MASK] 보러 갈까?", "커피 [MASK] 싶다 [MASK]"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    work = tmp_path_factory.mktemp("encoder-commands")
    folders = {
        "sbert": sbert_variant("mean-normalize", work / "sbert"),
        "classifier": assemble(LAYOUTS / "bert-classifier", {}, work / "classifier"),
        "pretraining": assemble(LAYOUTS / "bert-pretraining", {}, work / "pretraining"),
    }
    out = {}
    for name, folder in folders.items():
        import_pretrained(folder, work / f"{name}-run")
        out[name] = work / f"{name}-run"
    out["translation"] = pathlib.Path(__file__).resolve().parents[1] / "data" / "run_11d2bb5"  # one of this package
    return out


def _main(capsys, monkeypatch, argv, stdin=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8"))
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _lines(path, texts):
    path.write_text("".join(text + "\n" for text in texts), encoding="utf-8")
    return str(path)


def _jsonl(text):
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture(scope="module")
def embeddings(runs):
    """The Python `Encoder`'s embeddings of `TEXTS`."""
    return export.load(runs["sbert"]).embed(TEXTS)


def test_embed_writes_the_encoders_array_as_npy(runs, embeddings, capsys, monkeypatch, tmp_path):
    source, output = _lines(tmp_path / "texts.txt", TEXTS), tmp_path / "e.npy"
    argv = ["embed", "--model", str(runs["sbert"]), "--input", source, "--output", str(output)]
    assert _main(capsys, monkeypatch, argv) == (0, "", "")
    written = np.load(output)
    assert written.dtype == np.float32 and np.array_equal(written, embeddings)


def test_embed_reads_stdin_and_writes_json_lines(runs, embeddings, capsys, monkeypatch, tmp_path):
    argv = ["embed", "--model", str(runs["sbert"]), "--format", "jsonl", "--output", str(tmp_path / "e.jsonl")]
    assert _main(capsys, monkeypatch, argv, stdin="".join(text + "\n" for text in TEXTS))[0] == 0
    rows = _jsonl((tmp_path / "e.jsonl").read_text(encoding="utf-8"))
    assert np.array_equal(np.array(rows, np.float32), embeddings)  # every float32 written exactly


def test_embed_reads_arguments_and_prints_json_lines(runs, embeddings, capsys, monkeypatch):
    code, out, _ = _main(capsys, monkeypatch, ["embed", "--model", str(runs["sbert"]), *TEXTS])
    assert code == 0 and np.array_equal(np.array(_jsonl(out), np.float32), embeddings)


def test_classify_writes_the_encoders_labels_for_texts_and_pairs(runs, capsys, monkeypatch, tmp_path):
    encoder = export.load(runs["classifier"])
    output = tmp_path / "labels.jsonl"
    argv = ["classify", "--model", str(runs["classifier"]), "--output", str(output)]
    assert _main(capsys, monkeypatch, [*argv, "--input", _lines(tmp_path / "t.txt", TEXTS)])[0] == 0
    assert _jsonl(output.read_text(encoding="utf-8")) == encoder.classify(TEXTS)
    pairs = [("오늘 너무 힘들었어", "많이 힘들었겠어요"), ("커피 마시고 싶다", "좋아요")]
    tsv = _lines(tmp_path / "pairs.tsv", [f"{a}\t{b}" for a, b in pairs])
    assert _main(capsys, monkeypatch, [*argv, "--pairs", "--input", tsv])[0] == 0
    assert _jsonl(output.read_text(encoding="utf-8")) == encoder.classify(pairs)
    assert encoder.classify(pairs) != encoder.classify([a for a, _ in pairs])  # the second text is read


def test_fill_mask_writes_the_encoders_candidates(runs, capsys, monkeypatch):
    expected = export.load(runs["pretraining"]).fill_mask(MASKED, top_k=3)
    code, out, err = _main(
        capsys, monkeypatch, ["fill-mask", "--model", str(runs["pretraining"]), "--top-k", "3", *MASKED]
    )
    assert (code, err) == (0, "") and _jsonl(out) == expected
    assert len(expected[0]) == 3 and len(expected[2]) == 2  # one list of 3 per mask


@pytest.mark.parametrize(
    "command, run, extra, texts, message",
    [
        ("fill-mask", "pretraining", [], ["a text", "no mask"], r"texts\[0\] holds no \[MASK\]"),
        ("fill-mask", "classifier", [], ["[MASK]"], "has a classifier head: fill_mask needs"),
        ("classify", "pretraining", [], ["a text"], "has a masked-LM head: classify needs"),
        ("embed", "translation", [], ["a text"], "holds a translation model: embed, classify and fill-mask take"),
        ("classify", "classifier", ["--pairs"], ["no tab"], "text 1: --pairs reads TEXT<TAB>TEXT_PAIR"),
    ],
)
def test_bad_input_is_one_line_and_nothing_is_written(
    runs, capsys, monkeypatch, tmp_path, command, run, extra, texts, message
):
    output = tmp_path / "out.jsonl"
    argv = [command, "--model", str(runs[run]), *extra, "--input", _lines(tmp_path / "in.txt", texts)]
    code, _, err = _main(capsys, monkeypatch, [*argv, "--output", str(output)])
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"keras-transformer {command}: error:")
    assert re.search(message, err), err
    assert not output.exists()


def test_a_top_k_below_one_is_refused_while_parsing(runs, capsys):
    with pytest.raises(SystemExit) as caught:
        cli.main(["fill-mask", "--model", str(runs["pretraining"]), "--top-k", "0", "[MASK]"])
    assert caught.value.code == 2 and "argument --top-k: must be a positive integer" in capsys.readouterr().err


def test_embed_refuses_npy_on_stdout_and_an_output_inside_the_run(runs, capsys, monkeypatch):
    code, _, err = _main(capsys, monkeypatch, ["embed", "--model", str(runs["sbert"]), "--format", "npy", "a"])
    assert code == 2 and "--format npy writes a file: give --output FILE.npy" in err
    inside = runs["sbert"] / "e.npy"
    code, _, err = _main(capsys, monkeypatch, ["embed", "--model", str(runs["sbert"]), "--output", str(inside), "a"])
    assert code == 2 and "lies inside" in err and not inside.exists()
