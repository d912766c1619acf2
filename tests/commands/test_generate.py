"""`keras-transformer generate` and `export.load` of an imported GPT-2: transformers' continuations, as text."""

import io
import json
import pathlib
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import export
from keras_transformer.commands import cli
from keras_transformer.engines.xla.generator import Generator
from keras_transformer.pretrained import import_pretrained
from keras_transformer.translators import TranslatorInterface

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "data" / "gpt2"
REFERENCE = json.loads((FIXTURE / "reference.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpt2") / "run"
    import_pretrained(FIXTURE, path)
    return path


def _main(capsys, monkeypatch, argv, stdin=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _texts(rows, generator):
    return generator._texts(rows)


def test_generate_from_a_file_writes_transformers_greedy_and_beam_continuations(run, capsys, monkeypatch, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("".join(p + "\n" for p in REFERENCE["prompts"]), encoding="utf-8")
    generator = export.load(run)
    assert isinstance(generator, Generator)
    for beam, reference in ((1, REFERENCE["greedy_ids"]), (4, [beams[0] for beams in REFERENCE["beam_ids"]])):
        output = tmp_path / f"beam{beam}.txt"
        argv = ["generate", "--model", str(run), "--input", str(prompts), "--output", str(output)]
        code, _, err = _main(capsys, monkeypatch, [*argv, "--beam", str(beam), "--max-length", "20", "--quiet"])
        assert code == 0 and err == ""
        lines = output.read_text(encoding="utf-8").split("\n")[:-1]
        assert lines == _texts(reference, generator)


def test_prompts_from_arguments_and_stdin_and_a_cut_off_warning(run, capsys, monkeypatch):
    code, out, err = _main(capsys, monkeypatch, ["generate", "--model", str(run), REFERENCE["prompts"][0]])
    assert code == 0 and out == REFERENCE["greedy"][0] + "\n"
    assert "prompt 1: the continuation reached --max-length before END" in err  # 20 tokens, no END
    stdin = (REFERENCE["prompts"][1] + "\n").encode("utf-8")
    code, out, _ = _main(capsys, monkeypatch, ["generate", "--model", str(run)], stdin)
    assert code == 0 and out == REFERENCE["greedy"][1] + "\n"


@pytest.mark.slow  # seeded sampling: test_stream_generator.py
def test_sampling_with_a_seed_repeats_and_differs_from_another_seed(run, capsys, monkeypatch):
    argv = ["generate", "--model", str(run), "--temperature", "1.5", "--quiet", *REFERENCE["prompts"][:6]]
    first = _main(capsys, monkeypatch, [*argv, "--seed", "1"])[1]
    assert first == _main(capsys, monkeypatch, [*argv, "--seed", "1"])[1]
    assert first != _main(capsys, monkeypatch, [*argv, "--seed", "2"])[1]


def _strings(tensor):
    return [s.decode("utf-8") for s in tensor.numpy().reshape(-1)]


def test_the_generator_answers_a_translators_methods(run):
    generator = export.load(run, beam_size=3)
    assert isinstance(generator, TranslatorInterface)
    prompts = REFERENCE["prompts"][:3]
    assert _strings(generator.greedy(prompts)) == REFERENCE["greedy"][:3]
    assert _strings(generator.sample(prompts, 0.0, 0, 1.0, -1)) == REFERENCE["greedy"][:3]  # temperature 0: greedy
    best = generator.nbest(prompts)
    assert best["translations"].shape == (3, 3)
    assert _strings(best["translations"][:, 0]) == _strings(generator(prompts))
    status = generator.call_with_status(prompts)
    assert status["scores"].shape == (3,) and status["finished"].dtype == tf.bool
    texts, finished = generator.generate_with_status(["", prompts[1]])
    assert len(texts) == 2 and finished[1]
    lengths = generator.source_lengths(prompts).numpy().tolist()
    assert lengths == [len(ids) for ids in REFERENCE["prompt_ids"][:3]]


def test_a_generator_refuses_a_translators_controls_in_one_line(run):
    generator = export.load(run)
    with pytest.raises(ValueError, match="generator continues its prompt"):
        generator.greedy(REFERENCE["prompts"][:1], target_prefix="Hello")
    with pytest.raises(ValueError, match="applies to multilingual models"):
        generator.nbest(REFERENCE["prompts"][:1], target_lang="de")
    assert _strings(generator.greedy(REFERENCE["prompts"][:1], target_prefix="")) == REFERENCE["greedy"][:1]


def test_score_is_the_log_probability_greedy_search_reports(run):
    generator = export.load(run)
    # Continuations that end before the length limit and whose text tokenizes back to their ids.
    end, tokenize = generator.model.config.end_id, generator.tokenizer.tokenize
    chosen = [
        i
        for i, ids in enumerate(REFERENCE["greedy_ids"])
        if ids[-1] == end and len(ids) > 2 and tokenize([REFERENCE["greedy"][i]]).to_list()[0] == ids[:-1]
    ]
    assert len(chosen) >= 3
    prompts = [REFERENCE["prompts"][i] for i in chosen]
    status = generator.greedy_with_status(prompts)
    continuations = _strings(status["translations"])
    scored = generator.score(prompts, continuations)
    lengths = [len(REFERENCE["greedy_ids"][i]) for i in chosen]
    assert scored["target_lengths"].numpy().tolist() == lengths
    # Greedy's score is the log-probability over the length penalty `length ** 1.0` (the run's normalization).
    expected = status["scores"].numpy() * np.array(lengths, np.float32)
    np.testing.assert_allclose(scored["log_probs"].numpy(), expected, atol=1e-3)


def test_a_prompt_too_long_for_the_positions_is_one_line(run, capsys, monkeypatch):
    code, _, err = _main(capsys, monkeypatch, ["generate", "--model", str(run), "--max-length", "60", "가 " * 20])
    assert (
        code == 2 and "prompts[0] has" in err and "to generate max_length=60 tokens, a prompt may have 5 at most" in err
    )
    code, _, err = _main(capsys, monkeypatch, ["generate", "--model", str(run), "가" * 100_000])
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "more than the model's 64 positions leave room for: a prompt may have 64 tokens at most" in err
    assert "max_length" not in err  # the user gave none (it read "with max_length=1 new tokens" before)


def test_generate_says_what_is_wrong_with_a_nul_byte_or_a_translation_run(run, capsys, monkeypatch, tmp_path):
    from trained_runs import tiny_run_dir

    prompts = tmp_path / "nul.txt"
    prompts.write_bytes(b"fine\na\0b\n")
    code, _, err = _main(capsys, monkeypatch, ["generate", "--model", str(run), "--input", str(prompts)])
    assert code == 2 and "line 2: contains a NUL byte, which the model cannot read" in err
    translation_run = tiny_run_dir()[0]
    code, _, err = _main(capsys, monkeypatch, ["generate", "--model", str(translation_run), "a"])
    assert code == 2 and "holds an encoder-decoder (translation) model: it does not continue prompts" in err


def test_an_imported_gpt_2_does_not_export_its_python_tokenizer(run, tmp_path):
    with pytest.raises(ValueError, match="runs in Python"):
        export.export_run(run, tmp_path / "export")
    assert not (tmp_path / "export").exists()


@pytest.mark.slow  # a generator's n-best: test_the_generator_answers_a_translators_methods
def test_translate_n_best_continues_with_a_decoder_only_run(run, capsys, monkeypatch):
    prompt = REFERENCE["prompts"][1]
    code, out, _ = _main(
        capsys, monkeypatch, ["translate", "--model", str(run), "--beam", "4", "--n-best", "2", prompt]
    )
    first = out.splitlines()[0].split("\t")
    assert code == 0 and first[2] == REFERENCE["greedy"][1]
    assert abs(float(first[1]) - REFERENCE["beam_scores"][1][0]) < 1e-4
