"""Rebuilds the tiny GPT-2 and BERT fixtures in tests/data/gpt2/ and tests/data/bert/, and what transformers computes.

- `gpt2/`: a tiny `GPT2LMHeadModel` (2 layers, width 32) with a byte-level BPE
  tokenizer (`vocab.json`, `merges.txt`) trained by `tokenizers` on the
  bundled Korean chatbot corpus, written by `save_pretrained` (which writes
  `tokenizer.json`; the vocabulary files are copied beside it). It is trained
  for a few hundred steps on the corpus, so that its continuations differ
  from prompt to prompt and end at different lengths. `reference.json`
  holds the prompts' ids, greedy and beam-4 `generate` continuations (ids,
  strings, beam scores) and `reference_logits.npz` the logits of single
  prompts.
- `bert/`: a tiny random `BertForMaskedLM` with a lower-casing WordPiece
  vocabulary (`vocab.txt`) trained by `tokenizers` on the same corpus;
  `reference.json` holds texts with `[MASK]`s, their ids and the top-1 id
  at every mask, and `reference_logits.npz` their masked-LM logits.

The tests need neither torch nor transformers. To rebuild (CPU, a minute):

    python -m venv /tmp/lm-ref
    /tmp/lm-ref/bin/pip install torch transformers tokenizers safetensors
    /tmp/lm-ref/bin/python tests/data/make_gpt2_bert_fixtures.py
"""

import csv
import json
import pathlib
import random
import shutil
import tempfile

import numpy as np
import tokenizers
import torch
import transformers
from transformers import BertConfig, BertForMaskedLM, BertTokenizer, GPT2Config, GPT2LMHeadModel, GPT2Tokenizer

HERE = pathlib.Path(__file__).resolve().parent
CORPUS = HERE.parents[1] / "keras_transformer" / "data" / "korean_chatbot" / "ChatbotData.csv"
MAX_NEW_TOKENS = 20
PROMPTS = [
    "오늘 너무 힘들었어",
    "안녕하세요",
    "배고파",
    "주말에 뭐 하지?",
    "고마워 정말",
    "비 와",
    "영화 보러 갈까?",
    "시험 망쳤어",
    "커피 마시고 싶다",
    "요즘 잠을 못 자",
    "새해 복 많이 받으세요!",
    "English words, 123 and émojis 😀",
    "여행 가고 싶어",
    "친구랑 싸웠어",
    "헤어졌어",
    "운동 해야 하는데",
]
MASKED = [
    "오늘 [MASK] 힘들었어",
    "[MASK] 보러 갈까?",
    "The Quick [MASK] fox, Émile said.",
    "커피 [MASK] 싶다 [MASK]",
    "시험 망쳤어",
    "새해 복 많이 [MASK]!",
]


def texts(count=3000, seed=0):
    with open(CORPUS, encoding="utf-8", newline="") as handle:
        rows = [(row["Q"].strip(), row["A"].strip()) for row in csv.DictReader(handle)]
    random.Random(seed).shuffle(rows)
    return [f"{q} {a}" for q, a in rows[:count]]


def build_gpt2(folder):
    print("building", folder, flush=True)
    folder.mkdir(parents=True, exist_ok=True)
    corpus = texts()
    bpe = tokenizers.ByteLevelBPETokenizer()
    bpe.train_from_iterator(corpus, vocab_size=700, min_frequency=2, special_tokens=["<|endoftext|>"])
    work = pathlib.Path(tempfile.mkdtemp())
    bpe.save_model(str(work))
    vocab = json.loads((work / "vocab.json").read_text(encoding="utf-8"))
    end = vocab.pop("<|endoftext|>")  # GPT-2's one special token has the last id
    vocab = {piece: index - (index > end) for piece, index in sorted(vocab.items(), key=lambda item: item[1])}
    vocab["<|endoftext|>"] = len(vocab)
    (work / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    tokenizer = GPT2Tokenizer(vocab=vocab, merges=[tuple(line.split()) for line in _merges(work / "merges.txt")])
    eos = tokenizer.eos_token_id
    config = GPT2Config(
        vocab_size=len(vocab), n_positions=64, n_embd=32, n_layer=2, n_head=4, bos_token_id=eos, eos_token_id=eos
    )
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    fit(model, [tokenizer(text)["input_ids"] + [eos] for text in corpus[:256]])
    model.eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)  # tokenizer.json: transformers 5 writes no vocab.json or merges.txt
    for name in ("vocab.json", "merges.txt"):  # what GPT-2's own repository holds besides
        shutil.copy(work / name, folder / name)
    gpt2_references(model, tokenizer, folder)


def _merges(path):
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]


def fit(model, rows, steps=300):
    """A few hundred Adam steps on 256 texts: continuations that differ and end."""
    width = max(len(row) for row in rows)
    ids = torch.tensor([row + [row[-1]] * (width - len(row)) for row in rows])
    labels = torch.tensor([row + [-100] * (width - len(row)) for row in rows])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for step in range(steps):
        batch = torch.randint(0, len(rows), (32,))
        optimizer.zero_grad()
        loss = model(input_ids=ids[batch], labels=labels[batch]).loss
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            print(f"step {step}: loss {float(loss):.3f}", flush=True)


def gpt2_references(model, tokenizer, folder):
    prompt_ids = [tokenizer(prompt)["input_ids"] for prompt in PROMPTS]
    greedy, beam, beam_scores = [], [], []
    common = dict(max_new_tokens=MAX_NEW_TOKENS, pad_token_id=tokenizer.eos_token_id, return_dict_in_generate=True)
    with torch.no_grad():
        for ids in prompt_ids:
            inputs = torch.tensor([ids])
            out = model.generate(inputs, num_beams=1, do_sample=False, **common)
            greedy.append(out.sequences[0, len(ids) :].tolist())
            out = model.generate(
                inputs, num_beams=4, num_return_sequences=4, length_penalty=1.0, output_scores=True, **common
            )
            beam.append([_strip(row[len(ids) :], tokenizer.eos_token_id) for row in out.sequences.tolist()])
            beam_scores.append(out.sequences_scores.tolist())
    greedy = [_strip(row, tokenizer.eos_token_id) for row in greedy]
    reference = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "max_new_tokens": MAX_NEW_TOKENS,
        "prompts": PROMPTS,
        "prompt_ids": prompt_ids,
        "greedy_ids": greedy,
        "greedy": [tokenizer.decode(row, skip_special_tokens=True) for row in greedy],
        "beam_ids": beam,
        "beam_scores": beam_scores,
    }
    (folder / "reference.json").write_text(json.dumps(reference, ensure_ascii=False, indent=1), encoding="utf-8")
    logits = {}
    with torch.no_grad():
        for index in range(4):
            ids = torch.tensor([prompt_ids[index] + greedy[index]])
            logits[f"ids_{index}"] = ids.numpy()
            logits[f"logits_{index}"] = model(ids).logits.numpy()
    np.savez(folder / "reference_logits.npz", **logits)


def _strip(row, end):
    """Generated ids up to and including the first END (padding after it dropped)."""
    return row[: row.index(end) + 1] if end in row else row


def build_bert(folder):
    print("building", folder, flush=True)
    folder.mkdir(parents=True, exist_ok=True)
    wordpiece = tokenizers.BertWordPieceTokenizer(lowercase=True)
    wordpiece.train_from_iterator(texts() + ["The quick brown fox, Emile said."], vocab_size=900, min_frequency=2)
    work = pathlib.Path(tempfile.mkdtemp())
    wordpiece.save_model(str(work))
    tokenizer = BertTokenizer(vocab=str(work / "vocab.txt"), do_lower_case=True)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        type_vocab_size=2,
        pad_token_id=tokenizer.pad_token_id,
        initializer_range=0.2,  # a wider spread than BERT's 0.02: the top-1 at a mask is then never a near tie
    )
    torch.manual_seed(1)
    model = BertForMaskedLM(config)
    with torch.no_grad():
        model.cls.predictions.bias.normal_(0.0, 0.5)  # a bias that is not zero, so that its import is tested
    model.eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    shutil.copy(work / "vocab.txt", folder / "vocab.txt")  # what BERT's own repository holds besides
    encoded = [tokenizer(text)["input_ids"] for text in MASKED]
    pair = tokenizer(MASKED[0], MASKED[1])
    top, logits = [], {}
    with torch.no_grad():
        for index, ids in enumerate(encoded):
            out = model(torch.tensor([ids])).logits[0]
            logits[f"ids_{index}"] = np.array([ids])
            logits[f"logits_{index}"] = out.numpy()[None]
            top.append([int(out[i].argmax()) for i, t in enumerate(ids) if t == tokenizer.mask_token_id])
        pair_logits = model(**{k: torch.tensor([v]) for k, v in pair.items()}).logits
    logits["pair_ids"], logits["pair_segments"] = np.array([pair["input_ids"]]), np.array([pair["token_type_ids"]])
    logits["pair_logits"] = pair_logits.numpy()
    np.savez(folder / "reference_logits.npz", **logits)
    reference = {
        "transformers": transformers.__version__,
        "texts": MASKED,
        "ids": encoded,
        "top1_at_masks": top,
        "decoded": [tokenizer.decode(ids, skip_special_tokens=True) for ids in encoded],
    }
    (folder / "reference.json").write_text(json.dumps(reference, ensure_ascii=False, indent=1), encoding="utf-8")


if __name__ == "__main__":
    torch.set_num_threads(1)
    build_gpt2(HERE / "gpt2")
    build_bert(HERE / "bert")
    for name in ("gpt2", "bert"):
        print("written:", sorted(str(p.relative_to(HERE)) for p in (HERE / name).rglob("*") if p.is_file()))
