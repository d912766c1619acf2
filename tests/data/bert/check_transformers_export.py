"""Checks that transformers loads what `export --format transformers` writes of BERT runs, and computes ours.

Not a test of the CI, which has no torch: run it where torch, transformers
and sentence-transformers are installed, naming the Python that has
keras-transformer (a CPU, a few minutes):

    /tmp/lm-ref/bin/python tests/data/bert/check_transformers_export.py --keras-python "$(which python)"

(tests/data/make_bert_gpt2_layouts.py says how to make `/tmp/lm-ref`.) It
runs in two processes:

1. With `--keras-python`, and this checkout's keras_transformer: the BERT
   fixtures are imported (tests/data/bert/, a BertForMaskedLM; the
   BertForSequenceClassification, BertForPreTraining and
   sentence-transformers layouts of tests/data/layouts/), and two are
   fine-tuned for an epoch on 623 lines of the bundled chatbot corpus
   (`train --init-from RUN --train-tsv text<TAB>label`): the classifier on
   its own labels, the masked LM as a new classifier of other labels. Each
   run is exported (`export --format transformers`); what the run computes
   goes beside it: the ids of a few texts, its logits (or hidden states),
   and what its `Encoder` answers (`fill_mask`, `classify`, `embed`).
2. Here: transformers loads each export (`AutoTokenizer`, the export's own
   class), tokenizes the same texts, and computes the same logits, and its
   pipelines (`fill-mask`, `text-classification`) and sentence-transformers
   (`SentenceTransformer`) answer for the same texts.

It prints one line per run with the figures, and exits with 1 unless, for
every run, the ids are ours, the outputs are within `TOLERANCE` of ours and
the pipelines' answers are ours (the same tokens and labels, the scores
within `TOLERANCE`). docs/pretrained.md quotes what it printed.
"""

import argparse
import csv
import json
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
TESTS = HERE.parents[1]
LAYOUTS = TESTS / "data" / "layouts"
TOLERANCE = 1e-4
TEXTS = ["오늘 너무 힘들었어", "고마워 정말", "The Quick brown fox, Émile said. 😀", "", "헤어졌어 ㅠㅠ"]
MASKED = ["오늘 너무 [MASK]", "[MASK] 정말", "커피 [MASK] 싶다 [MASK]"]
PAIRS = [("오늘 너무 힘들었어", "많이 힘들었겠어요")]
CASES = {  # name: (fixture folder, fine-tuned on labels: None, or how the corpus's labels are named)
    "masked-lm": (HERE, None),
    "classifier": (LAYOUTS / "bert-classifier", None),
    "pretraining": (LAYOUTS / "bert-pretraining", None),
    "sentence-transformers": (LAYOUTS / "sbert", None),
    "classifier, fine-tuned": (LAYOUTS / "bert-classifier", {"0": "everyday", "1": "parting", "2": "love"}),
    "masked-lm, fine-tuned to a new head": (HERE, {"0": "calm", "1": "sad", "2": "happy"}),
}


def ours(work):
    """The keras-transformer side: imported and fine-tuned runs, their exports, and what they compute."""
    sys.path[:0] = [str(TESTS.parent)]  # this checkout's package
    import warnings

    import numpy as np

    from keras_transformer import export, runs
    from keras_transformer.pretrained import export_checkpoint, import_pretrained
    from keras_transformer.training import train

    warnings.simplefilter("ignore")
    with open(
        TESTS.parent / "keras_transformer" / "data" / "korean_chatbot" / "ChatbotData.csv", encoding="utf-8"
    ) as handle:
        rows = list(csv.reader(handle))[1:]
    summary = {}
    for index, (name, (folder, labels)) in enumerate(CASES.items()):
        case = work / f"case-{index}"
        run = case / "run"
        import_pretrained(folder, run)
        if labels is not None:
            chosen = rows[::19]  # 623 lines of all three labels (the file is sorted by label)
            tsv = case / "labels.tsv"
            tsv.write_text("".join(f"{q}\t{labels[label.strip()]}\n" for q, _, label in chosen), encoding="utf-8")
            train(init_from=case / "run", output=case / "tuned", corpus_files={"train": tsv}, epochs=1, verbose=0)
            run = case / "tuned"
        export_checkpoint(run, case / "hf")
        opened, encoder = runs.open_run(run), export.load(run)
        tokenizer = opened.tokenizers.source
        ids = tokenizer.encode(TEXTS)
        width = max(map(len, ids))
        tokens = np.array([row + [0] * (width - len(row)) for row in ids], np.int32)
        outputs = opened.model({"token_ids": tokens, "segment_ids": np.zeros_like(tokens)}, training=False)
        np.savez(case / "ours.npz", tokens=tokens, outputs=np.asarray(outputs))
        record = {"name": name, "head": encoder.head, "ids": ids, "embed": encoder.embed(TEXTS).tolist()}
        if encoder.head == "masked_lm":
            record["fill_mask"] = encoder.fill_mask(MASKED)
        if encoder.head == "classifier":
            record["classify"] = encoder.classify(TEXTS[:3] + [tuple(pair) for pair in PAIRS])
        summary[f"case-{index}"] = record
    (work / "ours.json").write_text(json.dumps(summary, ensure_ascii=False, indent=1), encoding="utf-8")


def theirs(work):
    """The transformers side: each export loaded and compared with what the run computed. True if all agree."""
    import numpy as np
    import sentence_transformers
    import torch
    import transformers

    torch.set_num_threads(1)
    summary = json.loads((work / "ours.json").read_text(encoding="utf-8"))
    agree = True
    for folder, case in summary.items():
        hf = str(work / folder / "hf")
        config = transformers.AutoConfig.from_pretrained(hf)
        model_class = getattr(transformers, config.architectures[0])
        model, info = model_class.from_pretrained(hf, output_loading_info=True)
        model.eval()
        tokenizer = transformers.AutoTokenizer.from_pretrained(hf)
        same_ids = [tokenizer(text)["input_ids"] for text in TEXTS] == case["ids"]
        data = np.load(work / folder / "ours.npz")
        tokens = torch.tensor(data["tokens"], dtype=torch.long)
        with torch.no_grad():
            result = model(input_ids=tokens, attention_mask=tokens != 0)
        theirs_out = (result.last_hidden_state if case["head"] == "none" else result.logits).numpy()
        real = data["tokens"] != 0
        ours_out = data["outputs"]
        difference = float(np.abs(theirs_out - ours_out)[real if ours_out.ndim == 3 else slice(None)].max())
        ok = same_ids and difference <= TOLERANCE
        figures = [f"ids {'equal' if same_ids else 'DIFFER'}", f"outputs max |difference| {difference:.1e}"]
        if case["head"] == "masked_lm":
            fill = transformers.pipeline("fill-mask", model=hf, tokenizer=hf, device="cpu")
            same, gap = _same_fills([fill(text, top_k=5) for text in MASKED], case["fill_mask"])
            ok, figures = ok and same, figures + [f"fill-mask top-5 {'equal' if same else 'DIFFER'} ({gap:.1e})"]
        if case["head"] == "classifier":
            classify = transformers.pipeline("text-classification", model=hf, tokenizer=hf, device="cpu", top_k=None)
            answers = [classify(text) for text in TEXTS[:3]]
            answers += [classify({"text": first, "text_pair": second}) for first, second in PAIRS]
            same, gap = _same_labels(answers, case["classify"])
            ok, figures = ok and same, figures + [f"classify labels {'equal' if same else 'DIFFER'} ({gap:.1e})"]
        encoder = sentence_transformers.SentenceTransformer(hf, device="cpu")
        embedded = encoder.encode(TEXTS, convert_to_numpy=True)
        gap = float(np.abs(embedded - np.array(case["embed"])).max())
        ok = ok and gap <= TOLERANCE
        figures.append(f"SentenceTransformer embeddings max |difference| {gap:.1e}")
        missing = sorted(info["missing_keys"])
        figures.append(f"initialized anew by transformers: {missing or 'nothing'}")
        agree = agree and ok
        print(f"{case['name']} ({config.architectures[0]}): " + "; ".join(figures) + ("" if ok else "  <- FAILS"))
    return agree


def _same_fills(theirs_rows, ours_rows):
    """Whether the fill-mask answers are ours (tokens, strings, sequences), and the largest score difference."""
    gap, same = 0.0, True
    for their, our in zip(theirs_rows, ours_rows, strict=True):
        their, our = ([their] if isinstance(their[0], dict) else their), ([our] if isinstance(our[0], dict) else our)
        for a_row, b_row in zip(their, our, strict=True):
            keys = ("token", "token_str", "sequence")
            same = same and [{k: c[k] for k in keys} for c in a_row] == [{k: c[k] for k in keys} for c in b_row]
            gap = max(gap, max(abs(a["score"] - b["score"]) for a, b in zip(a_row, b_row)))
    return same and gap <= TOLERANCE, gap


def _same_labels(theirs_rows, ours_rows):
    gap, same = 0.0, True
    for their, our in zip(theirs_rows, ours_rows, strict=True):
        their = their[0] if isinstance(their[0], list) else their  # a pair's answer comes in a list of its own
        same = same and [row["label"] for row in their] == [row["label"] for row in our]
        gap = max(gap, max(abs(a["score"] - b["score"]) for a, b in zip(their, our)))
    return same and gap <= TOLERANCE, gap


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
    work = args.work or pathlib.Path(tempfile.mkdtemp(prefix="check-bert-export-"))
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run([args.keras_python, __file__, "--ours", str(work)], check=True, cwd=TESTS.parent)
    print(f"runs and exports in {work}", flush=True)
    return 0 if theirs(work) else 1


if __name__ == "__main__":
    sys.exit(main())
