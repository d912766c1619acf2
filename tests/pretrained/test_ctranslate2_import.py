"""An imported OPUS-MT run as a CTranslate2 model gives transformers' greedy outputs (needs ctranslate2)."""

import json
import pathlib

import pytest

from keras_transformer import runs
from keras_transformer.ctranslate2.conversion import convert_run, read_pieces
from keras_transformer.pretrained import import_pretrained

ctranslate2 = pytest.importorskip("ctranslate2")
FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "marian"


@pytest.mark.parametrize("kind", ["shared", "separate"])
def test_greedy_ids_equal_transformers(tmp_path, kind):
    run = tmp_path / "run"
    import_pretrained(FIXTURES / kind, run)
    convert_run(run, tmp_path / "ct2")
    reference = json.loads((FIXTURES / kind / "reference.json").read_text(encoding="utf-8"))
    source_pieces = read_pieces(run / runs.SOURCE_TOKENIZER)
    target_pieces = read_pieces(run / runs.TARGET_TOKENIZER)
    # The reference source ids end with </s>: CTranslate2 appends it itself (add_source_eos).
    batch = [[source_pieces[i] for i in ids[:-1]] for ids in reference["source_ids"]]
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), intra_threads=1)
    results = translator.translate_batch(
        batch, beam_size=1, max_decoding_length=reference["max_new_tokens"], suppress_sequences=[["<pad>"]]
    )
    end = target_pieces[0]
    compared = 0
    for source, result, expected in zip(batch, results, reference["greedy_ids"]):
        if len(expected) >= reference["max_new_tokens"] or not source:
            continue  # transformers forced </s> at the last step; CTranslate2 translates "" to "" unread
        assert [target_pieces.index(piece) for piece in result.hypotheses[0]] + [0] == expected
        compared += 1
    assert end == "</s>" and compared >= len(results) // 2
