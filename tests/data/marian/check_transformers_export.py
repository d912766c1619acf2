"""Checks that transformers loads what `keras-transformer export --format transformers` writes, and computes ours.

Not a test of the CI, which has no torch: run it where torch, transformers
and sentencepiece are installed, naming the Python that has keras-transformer
(a CPU, about three minutes):

    /tmp/marian-ref/bin/python tests/data/marian/check_transformers_export.py --keras-python "$(which python)"

(`make_fixtures.py` says how to make `/tmp/marian-ref`.) It runs in two
processes:

1. With `--keras-python`, and this checkout's keras_transformer (this file with `--ours WORK`): each Marian fixture
   (`shared`, `separate`) is imported and fine-tuned for one epoch on 200
   pairs of the bundled chatbot corpus (`train --init-from`), and a tiny run
   is trained from scratch (`tests/pretrained/own_runs.py`: this package's
   tokenizer and its interleaved positions). Each run is exported with
   `export --format transformers`; what the run computes goes beside it:
   the teacher-forced logits of six pairs, and its greedy and beam-search
   strings (its own generation settings, `MAX_NEW_TOKENS` tokens at most).
2. Here: transformers loads each export (`MarianTokenizer`,
   `MarianMTModel.from_pretrained`), tokenizes the same texts, and computes
   the same logits and `generate` strings (greedy, and the beams of the
   export's generation_config.json).

It prints one line per run with the figures, and exits with 1 unless, for
every run, the ids are ours, the logits are within `TOLERANCE` of ours and
every string is ours. docs/pretrained.md quotes what it printed.
"""

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
TESTS = HERE.parents[1]
KINDS = ("shared", "separate")
MAX_NEW_TOKENS = 24
TOLERANCE = 1e-4
TEACHER_FORCED = 6  # pairs: sentence i and sentence TEACHER_FORCED + i


def ours(work):
    """The keras-transformer side: fine-tuned and scratch-trained runs, their exports, and what they compute."""
    sys.path[:0] = [str(TESTS.parent), str(TESTS / "pretrained")]  # this checkout's package, and own_runs.py
    import numpy as np
    import tensorflow as tf

    from keras_transformer import runs
    from keras_transformer.commands import cli
    from keras_transformer.export import load
    from keras_transformer.pretrained import export_checkpoint, import_pretrained

    import own_runs

    cases = {}
    pairs = own_runs.chatbot_pairs(200, skip=3000)
    tsv = work / "pairs.tsv"
    tsv.write_text("".join(f"{source}\t{target}\n" for source, target in pairs), encoding="utf-8")
    for kind in KINDS:
        import_pretrained(HERE / kind, work / kind / "imported")
        tuned = work / kind / "tuned"
        argv = ["train", "--init-from", str(work / kind / "imported"), "--train-tsv", str(tsv), "--epochs", "1"]
        if cli.main([*argv, "--output", str(tuned)]) != 0:
            raise SystemExit(f"fine-tuning {kind} failed")
        cases[f"{kind}, fine-tuned"] = (
            kind,
            tuned,
            json.loads((HERE / kind / "reference.json").read_text())["sentences"],
        )
    scratch, trained_on = own_runs.scratch_run(work / "scratch" / "run")
    sentences = [source for source, _ in trained_on] + ["", "오늘 뭐 하지?", "비가 와서 우울해"]
    cases["scratch-trained"] = ("scratch", scratch, sentences)
    summary = {}
    for name, (folder, run, sentences) in cases.items():
        export_checkpoint(run, work / folder / "hf")
        translator = load(run, max_length=MAX_NEW_TOKENS)
        opened = runs.open_run(run)
        model, (source_tokenizer, target_tokenizer) = opened.model, opened.tokenizers
        sources, targets = sentences[:TEACHER_FORCED], sentences[TEACHER_FORCED : 2 * TEACHER_FORCED]
        source_ids = [
            row + [source_tokenizer.end_id] for row in source_tokenizer.tokenize(tf.constant(sources)).to_list()
        ]
        target_ids = [
            [target_tokenizer.start_id] + row for row in target_tokenizer.tokenize(tf.constant(targets)).to_list()
        ]
        source_ids, source_lengths = _padded(source_ids, model.config.pad_id)
        decoder_ids, decoder_lengths = _padded(target_ids, model.config.target_pad)
        logits = model({"encoder_inputs": source_ids, "decoder_inputs": decoder_ids}, training=False)
        np.savez(
            work / folder / "ours.npz",
            source_ids=source_ids,
            source_lengths=source_lengths,
            decoder_ids=decoder_ids,
            decoder_lengths=decoder_lengths,
            logits=np.asarray(logits),
        )
        summary[name] = {
            "folder": folder,
            "sentences": sentences,
            "pairs": [sources, targets],
            "greedy": _strings(translator.greedy(sentences)),
            "beam": _strings(translator(sentences)),
            "beam_size": int(translator.beam_size.numpy()),
        }
    (work / "ours.json").write_text(json.dumps(summary, ensure_ascii=False, indent=1), encoding="utf-8")


def _padded(rows, pad):
    import numpy as np

    width = max(len(row) for row in rows)
    return np.array([row + [pad] * (width - len(row)) for row in rows], np.int32), np.array([len(r) for r in rows])


def _strings(tensor):
    return [text.decode("utf-8", errors="replace") for text in tensor.numpy().tolist()]


def theirs(work):
    """The transformers side: each export loaded and compared with what the run computed. True if all agree."""
    import numpy as np
    import torch
    from transformers import MarianMTModel, MarianTokenizer

    torch.set_num_threads(1)
    summary = json.loads((work / "ours.json").read_text(encoding="utf-8"))
    agree = True
    for name, case in summary.items():
        folder = work / case["folder"]
        tokenizer = MarianTokenizer.from_pretrained(folder / "hf")
        model = MarianMTModel.from_pretrained(folder / "hf").eval()
        data = np.load(folder / "ours.npz")
        sources, targets = case["pairs"]
        encoded = tokenizer(sources, text_target=targets)
        starts = [model.config.decoder_start_token_id]
        same_ids = [_real(data["source_ids"], data["source_lengths"]) == encoded["input_ids"]]
        same_ids.append(
            _real(data["decoder_ids"], data["decoder_lengths"]) == [starts + row[:-1] for row in encoded["labels"]]
        )
        with torch.no_grad():
            logits = model(
                input_ids=torch.tensor(data["source_ids"], dtype=torch.long),
                attention_mask=torch.tensor(np.arange(data["source_ids"].shape[1]) < data["source_lengths"][:, None]),
                decoder_input_ids=torch.tensor(data["decoder_ids"], dtype=torch.long),
            ).logits.numpy()
        real = np.arange(data["decoder_ids"].shape[1]) < data["decoder_lengths"][:, None]
        difference = float(np.abs(logits - data["logits"])[real].max())
        batch = tokenizer(case["sentences"], padding=True, return_tensors="pt")
        with torch.no_grad():
            greedy = model.generate(**batch, num_beams=1, max_new_tokens=MAX_NEW_TOKENS)
            beam = model.generate(**batch, max_new_tokens=MAX_NEW_TOKENS)
        # Without the decoder's start token, which a model of two vocabularies decodes as "<pad>" (not its own).
        greedy, beam = (tokenizer.batch_decode(ids[:, 1:], skip_special_tokens=True) for ids in (greedy, beam))
        same_greedy = sum(a == b for a, b in zip(greedy, case["greedy"]))
        same_beam = sum(a == b for a, b in zip(beam, case["beam"]))
        count = len(case["sentences"])
        ok = all(same_ids) and difference <= TOLERANCE and same_greedy == count == same_beam
        agree = agree and ok
        print(
            f"{name}: ids {'equal' if all(same_ids) else 'DIFFER'}; teacher-forced logits max |difference| "
            f"{difference:.2e}; generate strings equal to ours: greedy {same_greedy}/{count}, beam "
            f"{model.generation_config.num_beams} {same_beam}/{count} (ours: beam {case['beam_size']})"
            + ("" if ok else "  <- FAILS"),
            flush=True,
        )
        for ours_text, their_text in zip(case["beam"], beam):
            if ours_text != their_text:
                print(f"    ours {ours_text!r} transformers {their_text!r}")
        if _has_ctranslate2():
            print(f"    {_ctranslate2_line(folder, tokenizer, model, case)}", flush=True)
    return agree


def _has_ctranslate2():
    try:
        import ctranslate2  # noqa: F401
    except ModuleNotFoundError:
        return False
    return True


def _ctranslate2_line(folder, tokenizer, model, case):
    """What CTranslate2's converter makes of the export: its greedy strings against ours (a figure, not a check).

    Its Marian loader starts the decoder from a zero embedding, where the
    model starts from its start token's row: the two agree where that row is 0.
    """
    import ctranslate2

    try:
        ctranslate2.converters.TransformersConverter(str(folder / "hf")).convert(str(folder / "ct2"), force=True)
    except Exception as error:  # noqa: BLE001  (the converter's own limits: a figure, not a check)
        return f"CTranslate2 {ctranslate2.__version__} (ct2-transformers-converter) cannot convert it: {error}"
    translator = ctranslate2.Translator(str(folder / "ct2"), intra_threads=1)
    pieces = [tokenizer.convert_ids_to_tokens(tokenizer(text)["input_ids"]) for text in case["sentences"]]
    results = translator.translate_batch(pieces, beam_size=1, max_decoding_length=MAX_NEW_TOKENS)
    vocab = tokenizer.get_tgt_vocab() if tokenizer.separate_vocabs else tokenizer.get_vocab()
    texts = [tokenizer.decode([vocab[t] for t in r.hypotheses[0]], skip_special_tokens=True) for r in results]
    ended = [i for i, r in enumerate(results) if len(r.hypotheses[0]) < MAX_NEW_TOKENS - 1 and case["sentences"][i]]
    same = sum(texts[i] == case["greedy"][i] for i in ended)
    start = model.get_decoder().embed_tokens.weight[model.config.decoder_start_token_id].abs().max().item()
    return (
        f"CTranslate2 {ctranslate2.__version__} (ct2-transformers-converter): greedy strings equal to ours for "
        f"{same}/{len(ended)} outputs that end before the limit; the start token's embedding: max |value| "
        f"{start:.3g}"
    )


def _real(ids, lengths):
    return [row[:length].tolist() for row, length in zip(ids, lengths)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keras-python", help="the Python with keras-transformer (step 1)")
    parser.add_argument("--ours", type=pathlib.Path, help=argparse.SUPPRESS)  # step 1 itself, in that Python
    parser.add_argument("--work", type=pathlib.Path, help="keep the runs and exports here (default: a temporary one)")
    args = parser.parse_args()
    if args.ours:
        ours(args.ours)
        return 0
    if not args.keras_python:
        parser.error("--keras-python is required: the Python in which keras-transformer is installed")
    work = args.work or pathlib.Path(tempfile.mkdtemp(prefix="check-transformers-export-"))
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run([args.keras_python, __file__, "--ours", str(work)], check=True, cwd=TESTS.parent)
    print(f"runs and exports in {work}", flush=True)
    return 0 if theirs(work) else 1


if __name__ == "__main__":
    sys.exit(main())
