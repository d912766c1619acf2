"""sacreBLEU and chrF, cased and lowercased, from lists and files."""

import pytest
import sacrebleu

from keras_transformer import evaluation

HYPOTHESES = ["The cat sat on the mat.", "a dog runs in the snow"]
REFERENCES = ["The cat sat on the mat.", "A dog runs in the snow."]


def test_known_values():
    perfect = evaluation.score(REFERENCES, REFERENCES)
    assert perfect["bleu"] == pytest.approx(100.0) and perfect["chrf"] == pytest.approx(100.0)
    scores = evaluation.score(HYPOTHESES, REFERENCES)
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score)
    assert scores["chrf"] == pytest.approx(sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES]).score)
    assert scores["bleu"] < scores["bleu_lowercase"] < 100  # "a dog" vs "A dog" counts only cased
    assert scores["chrf"] < scores["chrf_lowercase"]
    assert scores["num_sentences"] == 2
    assert perfect["length_ratio"] == pytest.approx(1.0)
    reference = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES])  # 13a: "snow" vs "snow ."
    assert scores["length_ratio"] == pytest.approx(reference.sys_len / reference.ref_len)
    assert scores["length_ratio"] < 1
    assert evaluation.score(["a dog runs in the deep snow ."], ["a dog runs ."])["length_ratio"] == 2.0
    assert "case:lc" in scores["signatures"]["bleu_lowercase"]
    assert "case:mixed" in scores["signatures"]["bleu"]


def test_several_references_and_files(tmp_path):
    (tmp_path / "hyp").write_text("\n".join(HYPOTHESES) + "\n", encoding="utf-8")
    (tmp_path / "ref1").write_text("\n".join(REFERENCES) + "\n", encoding="utf-8")
    (tmp_path / "ref2").write_text("The cat sat on the mat.\na dog runs in the snow\n", encoding="utf-8")
    from_files = evaluation.score_files(tmp_path / "hyp", [tmp_path / "ref1", tmp_path / "ref2"])
    assert from_files["bleu"] == pytest.approx(100.0)  # the second reference matches exactly
    single = evaluation.score_files(tmp_path / "hyp", tmp_path / "ref1")
    assert single["bleu"] == pytest.approx(evaluation.score(HYPOTHESES, REFERENCES)["bleu"])
    assert "BLEU" in evaluation.format_scores(single) and "2 sentences" in evaluation.format_scores(single)


def test_empty_hypothesis_lines_are_kept(tmp_path):
    (tmp_path / "hyp").write_text("The cat sat on the mat.\n\n", encoding="utf-8")
    assert evaluation.read_lines(tmp_path / "hyp") == ["The cat sat on the mat.", ""]
    assert evaluation.score_files(tmp_path / "hyp", [tmp_path / "hyp"])["num_sentences"] == 2


def test_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="one line per hypothesis.*2 hypotheses and 1 references"):
        evaluation.score(HYPOTHESES, REFERENCES[:1])
    with pytest.raises(ValueError, match="must not be empty"):
        evaluation.score([], [])
    (tmp_path / "latin1").write_bytes("ok\nM\u00e4dchen\n".encode("latin-1"))
    with pytest.raises(ValueError, match="latin1, line 2: not valid UTF-8"):
        evaluation.read_lines(tmp_path / "latin1")
    with pytest.raises(ValueError, match="existing file"):
        evaluation.read_lines(tmp_path / "missing")
