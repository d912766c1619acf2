"""Checks that transformers loads the GPT-2 checkpoints `keras-transformer export --format transformers` writes.

Not a test of the CI, which has no torch: run it where torch and
transformers are installed, naming the Python that has keras-transformer
(a CPU, a few minutes):

    /path/to/torch-venv/bin/python tests/data/gpt2/check_transformers_export.py --keras-python "$(which python)"

It runs in two processes:

1. With `--keras-python`, and this checkout's keras_transformer (this file
   with `--ours WORK`): the fixture (tests/data/gpt2) is imported, and
   fine-tuned for one epoch on 2,000 texts of the bundled chatbot corpus
   (`train --init-from --train-text`), and the 2019 `GPT2Model` layout
   (tests/data/layouts/gpt2-model: no prefix, causal-mask buffers, its
   generation settings in config.json) is imported. Each run is exported
   with `export --format transformers`; what the run computes goes beside
   it (the fine-tuned run's with `--beam 4`): the prompts' ids, the logits
   of each prompt followed by its continuation, and its greedy and
   beam-search strings (its own generation settings, `MAX_NEW_TOKENS`
   tokens at most), and the fine-tuned run's held-out perplexity before
   and after.
2. Here: transformers loads each export (`AutoTokenizer`,
   `GPT2LMHeadModel.from_pretrained`), tokenizes the prompts, and computes
   the same logits and `generate` strings (greedy, and the beams of the
   export's generation_config.json).

It prints one line per run with the figures, and exits with 1 unless, for
every run, the ids are ours, the logits are within `TOLERANCE` of ours and
every string is ours. docs/pretrained.md quotes what it printed.
"""

import argparse
import csv
import json
import pathlib
import random
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
TESTS = HERE.parents[1]
CORPUS = TESTS.parent / "keras_transformer" / "data" / "korean_chatbot" / "ChatbotData.csv"
MAX_NEW_TOKENS = 20
BEAMS = 4  # the fine-tuned run's export: generation_config.json written from the run, num_beams 4
TOLERANCE = 1e-4
PROMPTS = json.loads((HERE / "reference.json").read_text(encoding="utf-8"))["prompts"] + ["", "Hello there"]


def chatbot_texts(count, skip=0, seed=3):
    """`count` texts `question answer` of the bundled chatbot corpus, shuffled with `seed`, after the first `skip`."""
    with open(CORPUS, encoding="utf-8", newline="") as handle:
        rows = [f"{row['Q'].strip()} {row['A'].strip()}" for row in csv.DictReader(handle)]
    random.Random(seed).shuffle(rows)
    return rows[skip : skip + count]


def ours(work):
    """The keras-transformer side: imported and fine-tuned runs, their exports, and what they compute."""
    sys.path[:0] = [str(TESTS.parent), str(TESTS)]  # this checkout's package, and checkpoint_layouts.py
    import numpy as np
    from checkpoint_layouts import LAYOUTS, assemble

    from keras_transformer import runs
    from keras_transformer.commands import cli
    from keras_transformer.export import load
    from keras_transformer.pretrained import export_checkpoint, import_pretrained

    texts = work / "texts.txt"
    texts.write_text("".join(text + "\n" for text in chatbot_texts(2000)), encoding="utf-8")
    import_pretrained(HERE, work / "imported")
    argv = ["train", "--init-from", str(work / "imported"), "--train-text", str(texts), "--epochs", "1"]
    if cli.main([*argv, "--output", str(work / "tuned")]) != 0:
        raise SystemExit("fine-tuning failed")
    import_pretrained(assemble(LAYOUTS / "gpt2-model", {}, work / "gpt2-model"), work / "layout")
    summary = {}
    cases = (("imported", "imported", None), ("fine-tuned", "tuned", BEAMS), ("GPT2Model of 2019", "layout", None))
    for name, folder, beams in cases:
        export_checkpoint(work / folder, work / f"{folder}-hf", beam_size=beams)  # the fine-tuned run's: 4 beams
        generator = load(work / folder, beam_size=beams)
        model, tokenizer = generator.model, generator.tokenizer
        prompt_ids = tokenizer.tokenize(PROMPTS).to_list()
        greedy = generator.generate_with_status(PROMPTS, beam_size=1, max_length=MAX_NEW_TOKENS)[0]
        beam = generator.generate_with_status(PROMPTS, max_length=MAX_NEW_TOKENS)[0]
        # The logits of each prompt (START for an empty one) and its greedy continuation, END included.
        greedy_ids = generator._search(PROMPTS, {"beam_size": 1}, MAX_NEW_TOKENS)
        rows = []
        for prompt, (ids, _, _) in zip(prompt_ids, greedy_ids):
            continuation = [int(i) for i in ids[0]]
            end = model.config.end_id
            continuation = continuation[: continuation.index(end) + 1] if end in continuation else continuation
            rows.append((prompt or [model.config.start_id]) + continuation)
        logits = {f"ids_{i}": np.array([row], np.int32) for i, row in enumerate(rows)}
        logits.update({f"logits_{i}": np.asarray(model(np.array([row], np.int32))) for i, row in enumerate(rows)})
        np.savez(work / f"{folder}.npz", **logits)
        summary[name] = {
            "folder": folder,
            "prompt_ids": prompt_ids,
            "greedy": greedy,
            "beam": beam,
            "beam_size": generator.beams,
            "perplexity": runs.RunConfig.read(work / folder).perplexity,
        }
    (work / "ours.json").write_text(json.dumps(summary, ensure_ascii=False, indent=1), encoding="utf-8")


def theirs(work):
    """The transformers side: each export loaded and compared with what the run computed. True if all agree."""
    import numpy as np
    import torch
    from transformers import AutoTokenizer, GPT2LMHeadModel

    torch.set_num_threads(1)
    summary = json.loads((work / "ours.json").read_text(encoding="utf-8"))
    agree = True
    for name, case in summary.items():
        export = work / f"{case['folder']}-hf"
        tokenizer = AutoTokenizer.from_pretrained(export)
        model = GPT2LMHeadModel.from_pretrained(export).eval()
        same_ids = [tokenizer(prompt)["input_ids"] for prompt in PROMPTS] == case["prompt_ids"]
        data = np.load(work / f"{case['folder']}.npz")
        difference = 0.0
        with torch.no_grad():
            for index in range(len(PROMPTS)):
                logits = model(torch.tensor(data[f"ids_{index}"], dtype=torch.long)).logits.numpy()
                difference = max(difference, float(np.abs(logits - data[f"logits_{index}"]).max()))
        greedy, beam = [], []
        end = model.generation_config.eos_token_id
        for prompt in PROMPTS:
            ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
            if ids.shape[1] == 0:  # an empty prompt starts from <|endoftext|>, as ours does
                ids = torch.tensor([[model.generation_config.bos_token_id]])
            with torch.no_grad():
                outputs = [
                    model.generate(ids, num_beams=1, do_sample=False, max_new_tokens=MAX_NEW_TOKENS, pad_token_id=end),
                    model.generate(ids, max_new_tokens=MAX_NEW_TOKENS, pad_token_id=end),
                ]
            texts = [tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True) for out in outputs]
            greedy.append(texts[0])
            beam.append(texts[1])
        same_greedy = sum(a == b for a, b in zip(greedy, case["greedy"]))
        same_beam = sum(a == b for a, b in zip(beam, case["beam"]))
        count = len(PROMPTS)
        ok = same_ids and difference <= TOLERANCE and same_greedy == count == same_beam
        agree = agree and ok
        perplexity = case["perplexity"]
        held_out = (
            f"; held-out perplexity {perplexity['before']:.1f} -> {perplexity['after']:.1f} "
            f"({perplexity['held_out_tokens']} tokens)"
            if perplexity
            else ""
        )
        print(
            f"{name}: ids {'equal' if same_ids else 'DIFFER'}; logits max |difference| {difference:.2e}; generate "
            f"strings equal to ours: greedy {same_greedy}/{count}, beam {model.generation_config.num_beams or 1} "
            f"{same_beam}/{count} (ours: beam {case['beam_size']}){held_out}" + ("" if ok else "  <- FAILS"),
            flush=True,
        )
        for ours_text, their_text in zip(case["greedy"] + case["beam"], greedy + beam):
            if ours_text != their_text:
                print(f"    ours {ours_text!r} transformers {their_text!r}")
    return agree


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
    work = args.work or pathlib.Path(tempfile.mkdtemp(prefix="check-gpt2-export-"))
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run([args.keras_python, __file__, "--ours", str(work)], check=True, cwd=TESTS.parent)
    print(f"runs and exports in {work}", flush=True)
    return 0 if theirs(work) else 1


if __name__ == "__main__":
    sys.exit(main())
