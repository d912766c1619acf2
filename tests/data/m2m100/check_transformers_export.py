"""Checks that transformers loads what `export --format transformers` writes of M2M100 and NLLB runs.

Not a test of the CI, which has no torch: run it where torch, transformers
and sentencepiece are installed, naming the Python that has keras-transformer
(a CPU, a few minutes):

    /tmp/m2m-ref/bin/python tests/data/m2m100/check_transformers_export.py --keras-python "$(which python)"

(`make_fixtures.py` says how to make `/tmp/m2m-ref`.) It runs in two processes:

1. With `--keras-python` (this file with `--ours WORK`): each fixture
   (`m2m100`, `nllb`) is imported, and fine-tuned for one epoch on 200 pairs
   of the bundled chatbot corpus from Korean into English (`train
   --init-from --source-lang --target-lang`). The import and the fine-tuned
   run are exported with `export --format transformers`; what each run
   computes goes beside it: the teacher-forced logits of six pairs framed
   with their language tokens, and its greedy and beam-search strings
   into English (its own generation settings, `MAX_NEW_TOKENS` tokens at
   most). The import is told its languages; the fine-tuned run translates
   into its pair by default, and so must its export.
2. Here: transformers loads each export (`AutoTokenizer`,
   `M2M100ForConditionalGeneration.from_pretrained`), tokenizes the same
   texts, and computes the same logits and `generate` strings (greedy, and
   the beams of the export's generation_config.json). The fine-tuned
   export is used with its own defaults alone: the tokenizer's `src_lang`
   and `tgt_lang`, generation_config.json's `forced_bos_token_id`.

It prints one line per run with the figures, and exits with 1 unless, for
every run, the ids are ours, the logits are within `TOLERANCE` of ours and
every greedy string is ours. docs/pretrained.md quotes what it printed.
"""

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
TESTS = HERE.parents[1]
PAIRS = {"m2m100": ("ko", "en"), "nllb": ("kor_Hang", "eng_Latn")}
MAX_NEW_TOKENS = 24
TOLERANCE = 1e-4
TEACHER_FORCED = 6  # pairs: sentence i and sentence TEACHER_FORCED + i


def ours(work):
    """The keras-transformer side: imported and fine-tuned runs, their exports, and what they compute."""
    sys.path[:0] = [str(TESTS.parent), str(TESTS / "pretrained")]  # this checkout's package, and own_runs.py
    from keras_transformer.commands import cli
    from keras_transformer.pretrained import export_checkpoint, import_pretrained

    import own_runs

    tsv = work / "pairs.tsv"
    tsv.write_text("".join(f"{s}\t{t}\n" for s, t in own_runs.chatbot_pairs(200, skip=3000)), encoding="utf-8")
    summary = {}
    for kind, (source_lang, target_lang) in PAIRS.items():
        imported, tuned = work / kind / "imported", work / kind / "tuned"
        import_pretrained(HERE / kind, imported)
        argv = ["train", "--init-from", str(imported), "--train-tsv", str(tsv), "--epochs", "1"]
        argv += ["--source-lang", source_lang, "--target-lang", target_lang, "--output", str(tuned)]
        if cli.main(argv) != 0:
            raise SystemExit(f"fine-tuning {kind} failed")
        sentences = json.loads((HERE / kind / "reference.json").read_text(encoding="utf-8"))["sentences"]
        for name, run, named in ((f"{kind}, imported", imported, True), (f"{kind}, fine-tuned", tuned, False)):
            folder = work / name.replace(", ", "-")
            export_checkpoint(run, folder / "hf")
            summary[name] = _compute(run, folder, sentences, (source_lang, target_lang), named)
    (work / "ours.json").write_text(json.dumps(summary, ensure_ascii=False, indent=1), encoding="utf-8")


def _compute(run, folder, sentences, languages, named):
    """What the run computes: teacher-forced logits (saved in `folder`), greedy and beam strings into the target."""
    import numpy as np
    import tensorflow as tf

    from keras_transformer import runs
    from keras_transformer.export import load

    opened = runs.open_run(run)
    model, (source_tokenizer, target_tokenizer) = opened.model, opened.tokenizers
    source_id, target_id = source_tokenizer.language_id(languages[0]), target_tokenizer.language_id(languages[1])
    last = source_tokenizer.source_position == "last"
    sources, targets = sentences[:TEACHER_FORCED], sentences[TEACHER_FORCED : 2 * TEACHER_FORCED]
    source_ids = [
        (row + [source_tokenizer.end_id, source_id]) if last else ([source_id] + row + [source_tokenizer.end_id])
        for row in source_tokenizer.tokenize(tf.constant(sources)).to_list()
    ]
    start = [target_tokenizer.start_id, target_id]
    target_ids = [start + row for row in target_tokenizer.tokenize(tf.constant(targets)).to_list()]
    source_ids, source_lengths = _padded(source_ids, model.config.pad_id)
    decoder_ids, decoder_lengths = _padded(target_ids, model.config.target_pad)
    logits = model({"encoder_inputs": source_ids, "decoder_inputs": decoder_ids}, training=False)
    np.savez(
        folder / "ours.npz",
        source_ids=source_ids,
        source_lengths=source_lengths,
        decoder_ids=decoder_ids,
        decoder_lengths=decoder_lengths,
        logits=np.asarray(logits),
    )
    options = dict(source_lang=languages[0], target_lang=languages[1]) if named else {}
    translator = load(run, max_length=MAX_NEW_TOKENS, **options)
    return {
        "folder": folder.name,
        "languages": languages,
        "named": named,
        "sentences": sentences,
        "pairs": [sources, targets],
        "greedy": _strings(translator.greedy(sentences)),
        "beam": _strings(translator(sentences)),
        "beam_size": int(translator.beam_size.numpy()),
    }


def _padded(rows, pad):
    import numpy as np

    width = max(len(row) for row in rows)
    return np.array([row + [pad] * (width - len(row)) for row in rows], np.int32), np.array([len(r) for r in rows])


def _strings(tensor):
    return [text.decode("utf-8", errors="replace") for text in tensor.numpy().tolist()]


def theirs(work):
    """The transformers side: each export loaded and compared with what the run computed. True if all agree."""
    import torch

    torch.set_num_threads(1)
    summary = json.loads((work / "ours.json").read_text(encoding="utf-8"))
    agree = True
    for name, case in summary.items():
        ok, line, differing = _compare(work / case["folder"], case)
        agree = agree and ok
        print(f"{name}: {line}" + ("" if ok else "  <- FAILS"), flush=True)
        for ours_text, their_text in differing:
            print(f"    ours {ours_text!r} transformers {their_text!r}")
    return agree


def _compare(folder, case):
    """`(agrees, the figures' line, [(ours, theirs)] of differing beam strings)` of one export."""
    import numpy as np
    import torch
    from transformers import AutoTokenizer, M2M100ForConditionalGeneration
    from transformers.models.m2m_100.modeling_m2m_100 import shift_tokens_right

    tokenizer = AutoTokenizer.from_pretrained(folder / "hf")
    model = M2M100ForConditionalGeneration.from_pretrained(folder / "hf").eval()
    source_lang, target_lang = case["languages"]
    defaults = (tokenizer.src_lang, tokenizer.tgt_lang) == (source_lang, target_lang)
    forced = tokenizer.convert_tokens_to_ids(target_lang if "nllb" in folder.name else f"__{target_lang}__")
    if case["named"]:
        tokenizer.src_lang, tokenizer.tgt_lang = source_lang, target_lang
    else:  # the export's own defaults: the tokenizer's languages, generation_config.json's forced language
        defaults = defaults and model.generation_config.forced_bos_token_id == forced
    data = np.load(folder / "ours.npz")
    sources, targets = case["pairs"]
    encoded = tokenizer(sources, text_target=targets)
    start, pad = model.config.decoder_start_token_id, model.config.pad_token_id
    shifted = [shift_tokens_right(torch.tensor([row]), pad, start)[0].tolist() for row in encoded["labels"]]
    same_ids = _real(data["source_ids"], data["source_lengths"]) == encoded["input_ids"]
    same_ids = same_ids and _real(data["decoder_ids"], data["decoder_lengths"]) == shifted
    with torch.no_grad():
        logits = model(
            input_ids=torch.tensor(data["source_ids"], dtype=torch.long),
            attention_mask=torch.tensor(np.arange(data["source_ids"].shape[1]) < data["source_lengths"][:, None]),
            decoder_input_ids=torch.tensor(data["decoder_ids"], dtype=torch.long),
        ).logits.numpy()
    real = np.arange(data["decoder_ids"].shape[1]) < data["decoder_lengths"][:, None]
    difference = float(np.abs(logits - data["logits"])[real].max())
    batch = tokenizer(case["sentences"], padding=True, return_tensors="pt")
    options = dict(max_new_tokens=MAX_NEW_TOKENS, **({"forced_bos_token_id": forced} if case["named"] else {}))
    with torch.no_grad():
        greedy = model.generate(**batch, num_beams=1, **options)
        beam = model.generate(**batch, **options)
    greedy, beam = (tokenizer.batch_decode(ids, skip_special_tokens=True) for ids in (greedy, beam))
    same_greedy = sum(a == b for a, b in zip(greedy, case["greedy"]))
    same_beam = sum(a == b for a, b in zip(beam, case["beam"]))
    count = len(case["sentences"])
    ok = same_ids and defaults and difference <= TOLERANCE and same_greedy == count
    line = (
        f"ids {'equal' if same_ids else 'DIFFER'}; languages {'as ours' if defaults else 'NOT ours'}"
        f"{'' if case['named'] else ' by default'}; teacher-forced logits max |difference| {difference:.2e}; "
        f"generate strings equal to ours: greedy {same_greedy}/{count}, beam {model.generation_config.num_beams or 1} "
        f"{same_beam}/{count} (ours: beam {case['beam_size']})"
    )
    return ok, line, [(a, b) for a, b in zip(case["beam"], beam) if a != b]


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
    work = args.work or pathlib.Path(tempfile.mkdtemp(prefix="check-m2m100-export-"))
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run([args.keras_python, __file__, "--ours", str(work)], check=True, cwd=TESTS.parent)
    print(f"runs and exports in {work}", flush=True)
    return 0 if theirs(work) else 1


if __name__ == "__main__":
    sys.exit(main())
