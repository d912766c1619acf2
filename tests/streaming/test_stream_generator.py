"""A GPT-2's `Generator.stream`: words as they are decoded, joined equal to transformers' `generate` strings.

The fixture in tests/data/gpt2/ is a tiny `GPT2LMHeadModel`, and
tests/data/layouts/gpt2-model/ the same weights as a `GPT2Model` of 2019
with its generation settings in config.json; their reference.json holds the
strings transformers' `generate` gave (tests/data/make_gpt2_bert_fixtures.py
and make_bert_gpt2_layouts.py rebuild them; the tests need neither torch nor
transformers).
"""

import asyncio
import io
import json
import pathlib
import sys
import threading

import pytest
from checkpoint_layouts import LAYOUTS, assemble

from keras_transformer import engines, export
from keras_transformer.commands import cli
from keras_transformer.pretrained import import_pretrained
from keras_transformer.serving import sse
from keras_transformer.serving.served_translator import ServedTranslator

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "data" / "gpt2"
REFERENCE = json.loads((FIXTURE / "reference.json").read_text(encoding="utf-8"))
SHORT = [0, 1, 2, 3, 4, 5, 12, 14, 15]  # the prompts of at most 8 tokens: one compiled width
SAMPLING = dict(temperature=1.3, top_k=40, top_p=0.95, seed=7)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpt2") / "run"
    import_pretrained(FIXTURE, path)
    return path


@pytest.fixture(scope="module")
def generator(run):
    return export.load(run)


def test_greedy_streams_joined_are_transformers_generate_strings(generator):
    prompts = [REFERENCE["prompts"][i] for i in SHORT] + [REFERENCE["prompts"][7]]  # and one of 16 tokens
    expected = [REFERENCE["greedy"][i] for i in SHORT] + [REFERENCE["greedy"][7]]
    streams = [list(generator.stream_pieces(prompt)) for prompt in prompts]
    assert ["".join(piece.text for piece in pieces) for pieces in streams] == expected
    reasons = [pieces[-1].finish_reason for pieces in streams]
    assert reasons == ["end" if REFERENCE["greedy_ids"][i][-1] == 699 else "length" for i in SHORT + [7]]
    traces = generator._streams.traces
    list(generator.stream_pieces(REFERENCE["prompts"][3]))
    assert generator._streams.traces == traces  # compiled once per width: nothing traced per step or per prompt


def test_a_stream_gives_each_word_once_it_is_complete(generator):
    pieces = generator.stream_pieces(REFERENCE["prompts"][3])  # ' 씈여를 너이 있어.': three words, END
    first = next(pieces)
    assert first.text == " 씈여를" and first.finish_reason is None  # given before the rest is decoded
    rest = list(pieces)
    assert [piece.text for piece in rest] == [" 너이", " 있어."] and rest[-1].finish_reason == "end"
    ids = [i for piece in [first, *rest] for i in piece.ids]
    assert ids == REFERENCE["greedy_ids"][3][:-1]  # every id once, END left out
    assert list(generator.stream(REFERENCE["prompts"][3])) == [" 씈여를", " 너이", " 있어."]


def test_sampled_streams_joined_are_the_seeded_generate_strings(generator):
    prompts = [REFERENCE["prompts"][i] for i in (2, 3, 5, 14)]
    streamed = ["".join(generator.stream(prompt, "sample", **SAMPLING)) for prompt in prompts]
    alone = [generator.generate_with_status([prompt], **SAMPLING)[0][0] for prompt in prompts]
    assert streamed == alone
    sampled = generator.sample(prompts[:1], *SAMPLING.values()).numpy()[0].decode("utf-8")
    assert streamed[0] == sampled
    greedy = [REFERENCE["greedy"][i] for i in (2, 3, 5, 14)]
    assert streamed != greedy  # the draws change the words
    zero = "".join(generator.stream(prompts[1], "sample", temperature=0.0, seed=1))
    assert zero == greedy[1]


def test_cancel_and_beam_search(generator, run):
    cancel = threading.Event()
    stream = generator.stream_pieces(REFERENCE["prompts"][3], cancel=cancel)
    assert next(stream).text == " 씈여를"
    cancel.set()
    assert next(stream).finish_reason == "cancelled" and next(stream, None) is None
    beams = export.load(run, beam_size=4)
    prompt = REFERENCE["prompts"][3]
    (whole,) = beams.stream_pieces(prompt)  # beam search: its text once, at the end
    best = beams._texts([REFERENCE["beam_ids"][3][0]])[0]  # transformers' best of 4 beams
    assert whole.text == best == beams([prompt]).numpy()[0].decode("utf-8")
    assert whole.finish_reason == "end"


def test_a_prompt_too_long_or_a_translators_control_is_refused_before_the_first_piece(generator):
    with pytest.raises(
        ValueError,
        match=r"prompts\[0\] has 35 tokens, more than .*: to generate max_length=60 tokens, a prompt may have 5 ",
    ):
        generator.stream_pieces(REFERENCE["prompts"][11], max_length=60)
    with pytest.raises(ValueError, match="generator continues its prompt"):
        generator.stream_pieces(REFERENCE["prompts"][0], target_prefix="Hi")
    with pytest.raises(ValueError, match="one str"):
        generator.stream_pieces(REFERENCE["prompts"][:2])


def _main(capsys, argv):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_generate_stream_prints_the_lines_generate_writes(run, generator, capsys, monkeypatch):
    from keras_transformer.engines.xla import generator as generator_module

    monkeypatch.setattr(generator_module, "open_generator", lambda *args, **options: generator)  # compiled once
    prompts = [REFERENCE["prompts"][i] for i in (3, 0)]
    code, out, err = _main(capsys, ["generate", "--model", str(run), "--stream", *prompts])
    assert code == 0 and out == "".join(REFERENCE["greedy"][i] + "\n" for i in (3, 0))
    assert "prompt 2: the continuation reached --max-length before END" in err
    numbers = ["--temperature", "1.3", "--top-k", "40", "--top-p", "0.95", "--seed", "7"]
    code, out, _ = _main(capsys, ["generate", "--model", str(run), "--stream", "--quiet", *numbers, prompts[0]])
    assert code == 0 and out == _main(capsys, ["generate", "--model", str(run), "--quiet", *numbers, prompts[0]])[1]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a\n" + "가 ".join([""] * 40).encode())))
    code, out, err = _main(capsys, ["generate", "--model", str(run), "--stream", "--max-length", "30"])
    assert code == 2 and out == "" and "prompts[1] has" in err and err.count("\n") == 1  # nothing printed
    code, _, err = _main(capsys, ["generate", "--model", str(run), "--stream", "--output", "x.txt", "a"])
    assert code == 2 and "--stream prints to stdout" in err


def test_a_served_gpt2_streams_its_predict_strings(run, generator):
    assert not engines.ENGINES["xla"].serves_signatures(run)  # served through its Generator, not a SavedModel
    served = ServedTranslator(generator, run)
    prompts = [REFERENCE["prompts"][i] for i in (3, 14)]
    for body in ({"signature_name": "greedy", "instances": prompts}, {"instances": prompts}):
        request = served.parse(body)
        predicted = served.render(request, served.run(request.signature, request.inputs, request.scalars))
        events = asyncio.run(_events(served, sse.check(request), generator))
        texts = ["".join(e["token"]["text"] for e in events if e["token"] and e["instance"] == i) for i in (0, 1)]
        assert texts == [row["translations"] for row in predicted["predictions"]]
        assert texts == [REFERENCE["greedy"][i] for i in (3, 14)]
        finals = [e for e in events if e["generated_text"] is not None]
        assert [(e["generated_text"], e["details"]["finish_reason"]) for e in finals] == [(t, "end") for t in texts]


async def _events(served, request, generator):
    class Client:
        async def is_disconnected(self):
            return False

    lines = sse.events(Client(), request, sse.Streams(generator), 60)
    return [json.loads(line[len("data: ") :]) async for line in lines]


def test_a_gpt2_model_of_2019_streams_transformers_strings_with_its_config_json_settings(tmp_path):
    expected = json.loads((LAYOUTS / "gpt2-model" / "reference.json").read_text(encoding="utf-8"))
    import_pretrained(assemble(LAYOUTS / "gpt2-model", {}, tmp_path / "gpt2-model"), tmp_path / "run")
    generator = export.load(tmp_path / "run")
    assert generator.beams == expected["float32_num_beams"] == 1
    streamed = ["".join(generator.stream(prompt, max_length=10)) for prompt in expected["prompts"]]
    assert streamed == expected["float32_generated"]
