"""Alignments: one `i-j` pair per output word, indices in range, the argmax of the cross-attention read by words.

The tests' tiny Multi30k run (`trained_runs.tiny_run_dir`) gives the real
attention; a constructed attention (`alignments.cross_attention` replaced)
checks that the pairs are its argmax, word by word.
"""

import warnings

import numpy as np
import pytest

from keras_transformer.commands import cli
from keras_transformer.export import load
from keras_transformer.translators import alignments

from trained_runs import tiny_run_dir


@pytest.fixture(scope="module")
def run():
    path, pairs = tiny_run_dir()
    return path, [source for source, _ in pairs[:6]]


@pytest.fixture(scope="module")
def translator(run):
    return load(run[0])


@pytest.fixture(scope="module")
def outputs(translator, run):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [t.decode("utf-8") for t in translator.greedy(run[1]).numpy().tolist()]


def test_one_pair_per_output_word_with_indices_in_range(translator, run, outputs):
    sources = [*run[1], "", "A dog"]
    targets = [*outputs, "Ein Hund", ""]
    for layer in (None, 0, -1):
        for source, output, pairs in zip(sources, targets, translator.align(sources, targets, layer=layer)):
            if not source.split():
                assert pairs == []
                continue
            assert [j for _, j in pairs] == list(range(len(output.split())))
            assert all(0 <= i < len(source.split()) for i, _ in pairs)


def test_the_pairs_are_the_argmax_of_a_known_attention(translator, monkeypatch):
    """Source "a bb" and output "x yy z": each word one piece here or more; the attention names the answer."""
    tokenize = {"a": [5], "bb": [6, 7], "x": [8], "yy": [9, 10], "z": [11]}
    monkeypatch.setattr(
        "keras_transformer.engines.xla.model_inputs.tokenize_words", lambda _, ws: [tokenize[w] for w in ws]
    )
    known = np.zeros((1, 8, 4), np.float32)  # (batch, decoder inputs, source ids: a b b END-or-pad)
    known[0, 0] = [0.9, 0.05, 0.05, 0]  # x -> a
    known[0, 1] = [0.1, 0.2, 0.7, 0]  # y|y -> bb (its pieces' weights summed)
    known[0, 2] = [0.6, 0.2, 0.2, 0]
    known[0, 3] = [0.2, 0.4, 0.4, 0]  # z -> bb
    monkeypatch.setattr(alignments, "cross_attention", lambda *args: known)
    assert translator.align(["a bb"], ["x yy z"]) == [[(0, 0), (1, 1), (1, 2)]]


def test_word_alignment_sums_source_pieces_and_averages_output_pieces():
    attention = np.array([[0.4, 0.3, 0.3], [0.5, 0.25, 0.25]])
    assert alignments.word_alignment(attention, [0, 1, 1], [0, 0]) == [(1, 0)]  # 0.45 < 0.55
    assert alignments.word_alignment(attention, [0, 1, 2], [0, 1]) == [(0, 0), (0, 1)]
    assert alignments.word_alignment(attention, [], [0, 1]) == []


def test_bad_inputs_are_one_line(translator):
    for call, message in (
        (lambda: translator.align(["a"], ["b"], layer=5), "`layer` must be a decoder layer"),
        (lambda: translator.align(["a"], ["b"], layer="last"), "`layer` must be a decoder layer"),
        (lambda: translator.align(["a", "b"], ["b"]), "as many sentences"),
    ):
        with pytest.raises(ValueError, match=message) as error:
            call()
        assert "\n" not in str(error.value)


def test_translate_alignments_prints_moses_pairs(run, outputs, tmp_path, capsys):
    source = tmp_path / "source.txt"
    source.write_text("".join(s + "\n" for s in run[1]), encoding="utf-8")
    argv = ["translate", "--model", str(run[0]), "--input", str(source), "--beam", "1", "--quiet", "--alignments"]
    assert cli.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" ||| ")[0] for line in lines] == outputs
    for line, sentence in zip(lines, run[1]):
        text, pairs = line.split(" ||| ")
        pairs = [tuple(map(int, pair.split("-"))) for pair in pairs.split()]
        assert [j for _, j in pairs] == list(range(len(text.split())))
        assert all(0 <= i < len(sentence.split()) for i, _ in pairs)
    assert cli.main([*argv, "--n-best", "2"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    # --stream printed the text alone (the pairs dropped, exit 0): now each line ends with them once it is decoded
    assert cli.main([*argv, "--stream"]) == 0
    assert capsys.readouterr().out.splitlines() == lines
