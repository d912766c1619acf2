"""Rebuilds the tiny Marian fixtures in this folder and what transformers computes with them.

Two tiny `MarianMTModel`s, written by transformers' `save_pretrained` as a
Hugging Face MarianMT repository is laid out (config.json,
model.safetensors, generation_config.json, source.spm, target.spm,
vocab.json, tokenizer files, README.md):

- `shared/`: one vocabulary for both sides (vocab.json), shared and tied embeddings;
- `separate/`: `share_encoder_decoder_embeddings=False`, a source and a target
  vocabulary (vocab.json, target_vocab.json), source and target SentencePiece
  models of different sizes.

They differ from a real OPUS-MT checkpoint (Helsinki-NLP/opus-mt-en-de) only
where a fixture must: their width, depth and vocabularies are tiny. Every
other value is the real one: 512 positions (`max_position_embeddings`), a
`generation_config.json` of `max_length` 512, `num_beams` 4,
`bad_words_ids` [[PAD]], `forced_eos_token_id` 0 and `renormalize_logits`,
the ids laid out as OPUS-MT's (`</s>` 0, `<unk>` 1, PAD the last id and the
decoder's start), the position tables stored in `model.safetensors` as
OPUS-MT's files hold them, and a model card whose front matter names the
license. A fixture with the real values catches what a smaller one hides
(fine-tuning once stopped at a model of 512 positions).

Both are trained for a few hundred steps on pairs of the bundled Korean
chatbot corpus, so that their outputs end at different lengths (random
weights repeat one token until the maximum length). Beside each,
`reference.json` holds transformers' outputs for `SENTENCES`: the source and
target ids `MarianTokenizer` gives, greedy and beam-4 `generate` ids and
strings (with the checkpoint's generation settings, a `length_penalty` of
1.0 and `max_new_tokens` 24), the beams' scores, the log-probability of each
greedy output, and the teacher-forced logits of a few pairs
(`reference_logits.npz`).

Written with torch 2.13.0+cpu, transformers 5.24.0, sentencepiece 0.2.3,
safetensors 0.8.0 and NumPy 2.4.6. The tests need neither torch nor
transformers. To rebuild (CPU, a few minutes):

    python -m venv /tmp/marian-ref
    /tmp/marian-ref/bin/pip install torch transformers sentencepiece safetensors
    /tmp/marian-ref/bin/python tests/data/marian/make_fixtures.py

`--layouts` rebuilds only `layouts/`: `shared/` rewritten into the
layouts older transformers uploaded (tests/data/old_layouts.py), each with
transformers' outputs computed on it (`LAYOUTS` says what each holds).

`check_transformers_export.py`, beside this file, checks the other
direction: transformers loading what `keras-transformer export --format
transformers` writes.
"""

import csv
import json
import pathlib
import random
import sys
import tempfile

import numpy as np
import sentencepiece as spm
import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import MarianConfig, MarianMTModel, MarianTokenizer

HERE = pathlib.Path(__file__).resolve().parent
CORPUS = HERE.parents[2] / "keras_transformer" / "data" / "korean_chatbot" / "ChatbotData.csv"
MAX_NEW_TOKENS = 24
MAX_POSITIONS = 512  # OPUS-MT's max_position_embeddings, and its generation max_length
LICENSE = "apache-2.0"
SENTENCES = [
    "오늘 너무 힘들었어",
    "안녕하세요",
    "",
    "배고파",
    "주말에 뭐 하지?",
    "고마워 정말",
    "ㅋㅋㅋ " * 6,
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
    "집에 가고 싶다",
    "너무 추워",
]


def pairs(count=400, seed=0):
    with open(CORPUS, encoding="utf-8", newline="") as handle:
        rows = [(row["Q"].strip(), row["A"].strip()) for row in csv.DictReader(handle)]
    random.Random(seed).shuffle(rows)
    return rows[:count]


def train_spm(texts, prefix, vocab_size):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as handle:
        handle.write("\n".join(texts) + "\n")
    spm.SentencePieceTrainer.train(
        input=handle.name,
        model_prefix=str(prefix),
        vocab_size=vocab_size,
        character_coverage=0.98,
        model_type="unigram",
        bos_id=-1,
        eos_id=-1,
        unk_id=0,
        num_threads=1,
        minloglevel=2,
    )
    return prefix.with_suffix(".model")


def marian_vocab(*spm_models, extra=()):
    """vocab.json as MarianTokenizer reads it: </s> 0, <unk> 1, the pieces, the extras, <pad> last."""
    vocab = {"</s>": 0, "<unk>": 1}
    for model in spm_models:
        processor = spm.SentencePieceProcessor(model_file=str(model))
        for index in range(processor.get_piece_size()):
            piece = processor.id_to_piece(index)
            if piece not in vocab and piece not in ("<unk>", "<s>", "</s>"):
                vocab[piece] = len(vocab)
    for piece in extra:
        vocab[piece] = len(vocab)
    vocab["<pad>"] = len(vocab)
    return vocab


def build(folder, shared, seed):
    print("building", folder, flush=True)
    folder.mkdir(parents=True, exist_ok=True)
    data = pairs()
    work = pathlib.Path(tempfile.mkdtemp())
    source_spm = train_spm([q for q, _ in data], work / "source", 600 if shared else 520)
    target_spm = train_spm([a for _, a in data], work / "target", 600 if shared else 640)
    if shared:
        vocabs = {"vocab.json": marian_vocab(source_spm, target_spm, extra=[">>kor<<"])}
    else:
        vocabs = {"vocab.json": marian_vocab(source_spm), "target_vocab.json": marian_vocab(target_spm)}
    for name, vocab in vocabs.items():
        (work / name).write_text(json.dumps(vocab, ensure_ascii=False, indent=1), encoding="utf-8")
    tokenizer = MarianTokenizer(
        source_spm=str(source_spm),
        target_spm=str(target_spm),
        vocab=str(work / "vocab.json"),
        target_vocab_file=None if shared else str(work / "target_vocab.json"),
        separate_vocabs=not shared,
        source_lang="kor",
        target_lang="kor",
    )
    source_size = len(vocabs["vocab.json"])
    target_size = len(vocabs.get("target_vocab.json", vocabs["vocab.json"]))
    config = MarianConfig(
        vocab_size=source_size,
        decoder_vocab_size=target_size,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=MAX_POSITIONS,
        activation_function="swish",
        scale_embedding=True,
        pad_token_id=source_size - 1,
        bos_token_id=0,
        decoder_start_token_id=target_size - 1,
        eos_token_id=0,
        forced_eos_token_id=0,
        share_encoder_decoder_embeddings=shared,
        tie_word_embeddings=True,
        dropout=0.1,
    )
    torch.manual_seed(seed)
    model = MarianMTModel(config)
    fit(model, tokenizer, data)
    with torch.no_grad():
        model.final_logits_bias.normal_(0.0, 0.5)  # a bias that is not zero, so that its import is tested
    model.generation_config = transformers.GenerationConfig(
        bad_words_ids=[[config.pad_token_id if shared else target_size - 1]],
        bos_token_id=0,
        decoder_start_token_id=config.decoder_start_token_id,
        eos_token_id=0,
        forced_eos_token_id=0,
        max_length=MAX_POSITIONS,
        num_beams=4,
        pad_token_id=config.pad_token_id,
        renormalize_logits=True,
    )
    model.eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    store_position_tables(model, folder)
    (folder / "README.md").write_text(MODEL_CARD.format(license=LICENSE), encoding="utf-8")
    references(model, tokenizer, folder)


MODEL_CARD = """---
tags:
- translation
license: {license}
---

# A tiny MarianMT model for keras-transformer's tests

Trained for a few hundred steps on pairs of the Korean chatbot corpus; it translates nothing well.
"""


def store_position_tables(model, folder):
    """Adds the sinusoidal position tables to model.safetensors, as the OPUS-MT checkpoints on the Hub hold them.

    transformers 5 leaves them out of `save_pretrained` (it computes them);
    the files converted from OPUS-MT's PyTorch checkpoints carry both.
    """
    path = folder / "model.safetensors"
    tensors = load_file(str(path))
    for side in ("encoder", "decoder"):
        table = getattr(model.model, side).embed_positions.weight.detach().clone().contiguous()
        tensors[f"model.{side}.embed_positions.weight"] = table
    save_file(tensors, str(path), metadata={"format": "pt"})


def fit(model, tokenizer, data, steps=300):
    """A few hundred Adam steps on 64 pairs: outputs that end, at lengths that differ."""
    batch = tokenizer(
        [q for q, _ in data[:64]], text_target=[a for _, a in data[:64]], padding=True, return_tensors="pt"
    )
    batch["labels"][batch["labels"] == tokenizer.pad_token_id] = -100
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for step in range(steps):
        optimizer.zero_grad()
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            print(f"step {step}: loss {float(loss):.3f}", flush=True)


def references(model, tokenizer, folder):
    """transformers' tokenization, generate outputs, scores and logits, in reference.json and .npz."""
    source = [tokenizer(s)["input_ids"] for s in SENTENCES]
    target = [tokenizer(text_target=s)["input_ids"] for s in SENTENCES]
    encoded = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    common = dict(max_new_tokens=MAX_NEW_TOKENS, return_dict_in_generate=True, output_scores=True)
    with torch.no_grad():
        greedy = model.generate(**encoded, num_beams=1, do_sample=False, **common)
        beam = model.generate(**encoded, num_beams=4, length_penalty=1.0, num_return_sequences=4, **common)
    greedy_ids = [_strip(row, tokenizer) for row in greedy.sequences.tolist()]
    beam_ids = [_strip(row, tokenizer) for row in beam.sequences.tolist()]
    decode = lambda rows: [tokenizer.decode(row, skip_special_tokens=True) for row in rows]  # noqa: E731
    reference = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "max_new_tokens": MAX_NEW_TOKENS,
        "sentences": SENTENCES,
        "source_ids": source,
        "target_ids": target,
        "greedy_ids": greedy_ids,
        "greedy": decode(greedy_ids),
        "greedy_log_probs": log_probs(model, encoded, greedy_ids, tokenizer),
        "beam_ids": [beam_ids[i : i + 4] for i in range(0, len(beam_ids), 4)],
        "beam": [decode(beam_ids[i : i + 4]) for i in range(0, len(beam_ids), 4)],
        "beam_scores": [beam.sequences_scores.tolist()[i : i + 4] for i in range(0, len(beam_ids), 4)],
    }
    (folder / "reference.json").write_text(json.dumps(reference, ensure_ascii=False, indent=1), encoding="utf-8")
    teacher = tokenizer(SENTENCES[:6], text_target=SENTENCES[6:12], padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**teacher).logits.numpy()
    np.savez(
        folder / "reference_logits.npz",
        input_ids=teacher["input_ids"].numpy(),
        attention_mask=teacher["attention_mask"].numpy(),
        decoder_input_ids=model.prepare_decoder_input_ids_from_labels(teacher["labels"]).numpy(),
        logits=logits,
    )


def _strip(row, tokenizer):
    """Generated ids without the decoder's start token and the padding after END."""
    row = row[1:]
    return row[: row.index(0) + 1] if 0 in row else [t for t in row if t != tokenizer.pad_token_id]


def log_probs(model, encoded, outputs, tokenizer):
    """The sum of each output's tokens' log-probabilities, END included (teacher-forced), as `generate` takes them.

    With `renormalize_logits` (OPUS-MT's), the log-softmax is over the tokens
    that `bad_words_ids` leave.
    """
    generation = model.generation_config
    banned = [ids[0] for ids in generation.bad_words_ids or []] if generation.renormalize_logits else []
    sums = []
    for index, output in enumerate(outputs):
        labels = torch.tensor([output])
        with torch.no_grad():
            logits = model(
                input_ids=encoded["input_ids"][index : index + 1],
                attention_mask=encoded["attention_mask"][index : index + 1],
                labels=labels,
            ).logits
        logits[..., banned] = -float("inf")
        chosen = torch.log_softmax(logits, dim=-1)[0, torch.arange(len(output)), labels[0]]
        sums.append(float(chosen.sum()))
    return sums


# What each variant of `shared/` in layouts/ is: how OPUS-MT checkpoints were uploaded from 2020 to 2023.
LAYOUTS = {
    "opus-2020": "transformers 4.0's MarianMTModel: generation settings and BART-era keys in config.json, no "
    "generation_config.json; pytorch_model.bin in PyTorch's legacy (pre-1.6) format holding the tied embedding "
    "under three names, the sinusoidal position tables and a non-zero final_logits_bias; tokenizer_config.json "
    "of source_lang and target_lang, special_tokens_map.json",
    "opus-2022": "generation settings in config.json and in generation_config.json, which wins; pytorch_model.bin "
    "(zip format) in two shards with pytorch_model.bin.index.json, lm_head.weight stored too",
    "base-fp16": "a MarianModel (no head: names without `model.`, no lm_head or final_logits_bias) in float16, "
    "model.safetensors in two shards with model.safetensors.index.json",
}
TOKENIZER_FILES = ("source.spm", "target.spm", "vocab.json")
SPECIAL_TOKENS_MAP = {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}


def build_layouts():
    """layouts/: `shared/` rewritten into each of `LAYOUTS`, with transformers' outputs on each (reference.json)."""
    sys.path.insert(0, str(HERE.parent))
    import old_layouts

    base = HERE / "shared"
    model = MarianMTModel.from_pretrained(base, dtype=torch.float32).eval()
    config = json.loads((base / "config.json").read_text(encoding="utf-8"))
    generation = json.loads((base / "generation_config.json").read_text(encoding="utf-8"))
    generation.pop("transformers_version")
    bart_era = dict(
        static_position_embeddings=True,
        normalize_embedding=False,
        normalize_before=False,
        add_final_layer_norm=False,
        add_bias_logits=False,
        classif_dropout=0.0,
        num_hidden_layers=config["encoder_layers"],
        _name_or_path="/tmp/Helsinki-NLP/opus-mt-tiny-ko-ko",
    )
    for name, about in LAYOUTS.items():
        print("layout", name, flush=True)
        folder = HERE / "layouts" / name
        shared_files = [*TOKENIZER_FILES, "README.md"] + (["tokenizer_config.json"] if name != "opus-2020" else [])
        old_layouts.start(folder, "shared", shared_files, about)
        if name == "opus-2020":
            old = {key: value for key, value in config.items() if key not in NEWER_KEYS}
            settings = {key: value for key, value in generation.items() if key != "renormalize_logits"}
            old_layouts.old_config(folder, old, settings, transformers_version="4.0.0.dev0", **bart_era)
            state = old_layouts.state_dict(model, drop=("lm_head.weight",))
            old_layouts.write_weights(folder, state, "bin-legacy")
            old_layouts.write_json(folder / "tokenizer_config.json", {"source_lang": "kor", "target_lang": "kor"})
            old_layouts.write_json(folder / "special_tokens_map.json", SPECIAL_TOKENS_MAP)
        elif name == "opus-2022":
            in_config = {**generation, "num_beams": 6, "max_length": 64}  # read by nothing: generation_config wins
            old_layouts.old_config(folder, config, in_config, transformers_version="4.22.0", **bart_era)
            old_layouts.write_json(folder / "generation_config.json", generation)
            old_layouts.write_weights(folder, old_layouts.state_dict(model), "bin", shards=2)
        else:
            old_layouts.write_json(folder / "config.json", {**config, "architectures": ["MarianModel"]})
            old_layouts.write_json(folder / "generation_config.json", generation)
            tables = ("encoder.embed_positions.weight", "decoder.embed_positions.weight")
            state = old_layouts.state_dict(model, prefix="model.", drop=tables, dtype=torch.float16)
            old_layouts.write_weights(folder, state, "safetensors", shards=2)
        old_layouts.references(MarianMTModel, MarianTokenizer, folder, SENTENCES, MAX_NEW_TOKENS)


# config.json keys that transformers added after 4.0 (4.22's separate vocabularies; 5's dtype).
NEWER_KEYS = ("decoder_vocab_size", "share_encoder_decoder_embeddings", "tie_word_embeddings", "dtype")


if __name__ == "__main__":
    torch.set_num_threads(1)
    if sys.argv[1:] == ["--layouts"]:
        build_layouts()
        sys.exit()
    build(HERE / "shared", shared=True, seed=0)
    build(HERE / "separate", shared=False, seed=1)
    print("written:", sorted(str(p.relative_to(HERE)) for p in HERE.rglob("*") if p.is_file()))
