"""Rebuilds the tiny M2M100 and NLLB fixtures in this folder and what transformers computes with them.

Two tiny `M2M100ForConditionalGeneration`s (`model_type: m2m_100`, the
architecture of both M2M100 and NLLB-200), written by transformers'
`save_pretrained` with their tokenizers:

- `m2m100/`: `M2M100Tokenizer` (`vocab.json` + `sentencepiece.bpe.model`,
  language tokens `__ko__`, `__en__`, ... after the pieces);
- `nllb/`: `NllbTokenizer` (`tokenizer.json` alone, as transformers 5 saves
  it: the SentencePiece pieces shifted by fairseq's offset, `kor_Hang`,
  `eng_Latn`, ... as added tokens).

The configuration is the real checkpoints' wherever size allows: pre-norm
layers with a final LayerNorm per stack, ReLU, embeddings scaled by
√d_model and tied, 1024 positions, `<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3,
decoding from `</s>`, and the real generation settings (M2M100's five
beams, early stopping and `max_length` 200; NLLB's `max_length` 200). Only
the widths and depths are small. Each model is trained a few hundred steps
on the bundled Korean chatbot corpus to answer a question when asked for
Korean and to copy it when asked for English, so that the forced target
language changes the output and outputs end at different lengths.

Beside each, `reference.json` holds transformers' outputs for `SENTENCES`
into two target languages: the source and target ids the tokenizer gives
(language tokens included), greedy and beam-4 `generate` ids and strings
(forced BOS, `max_new_tokens`, a `length_penalty` of 1.0), the beams'
scores, and the teacher-forced logits of a few pairs
(`reference_logits.npz`); and under `training`, the ids of fine-tuning
pairs as transformers frames them for `model(**batch)`: `input_ids` and
`labels` of `tokenizer(sources, text_target=targets)` with `src_lang` and
`tgt_lang` set, and `decoder_input_ids` of `shift_tokens_right(labels)`,
for a pair of languages each way (NLLB's also under `legacy_behaviour`).

The tests need neither torch nor transformers. To rebuild (CPU, a few minutes):

    python -m venv /tmp/m2m-ref
    /tmp/m2m-ref/bin/pip install torch transformers sentencepiece protobuf safetensors
    /tmp/m2m-ref/bin/python tests/data/m2m100/make_fixtures.py

`--layouts` rebuilds only `layouts/`: the two fixtures rewritten into the
layouts older transformers uploaded (tests/data/old_layouts.py), each with
transformers' outputs computed on it (`LAYOUTS` says what each holds).

`--references-only` rewrites reference.json and reference_logits.npz from
the committed checkpoints, leaving their files as they are (the
`training` ids were added so, with the same outputs as before elsewhere).

Written with torch 2.13 and transformers 5.24.
"""

import csv
import json
import pathlib
import random
import shutil
import sys
import tempfile

import numpy as np
import sentencepiece as spm
import torch
import transformers
from transformers import M2M100Config, M2M100ForConditionalGeneration, M2M100Tokenizer, NllbTokenizer
from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding, shift_tokens_right
from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES as M2M100_CODES
from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES

HERE = pathlib.Path(__file__).resolve().parent
CORPUS = HERE.parents[2] / "keras_transformer" / "data" / "korean_chatbot" / "ChatbotData.csv"
MAX_NEW_TOKENS = 24
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
# (source language, (target language, what it asks for)) of each family, in its own codes.
LANGUAGES = {
    "m2m100": ("ko", ("ko", "en")),
    "nllb": ("kor_Hang", ("kor_Hang", "eng_Latn")),
}


def pairs(count=400, seed=0):
    with open(CORPUS, encoding="utf-8", newline="") as handle:
        rows = [(row["Q"].strip(), row["A"].strip()) for row in csv.DictReader(handle)]
    random.Random(seed).shuffle(rows)
    return rows[:count]


def train_spm(texts, folder):
    """A SentencePiece BPE model on `texts`, as fairseq's models have (`<unk>` 0, `<s>` 1, `</s>` 2)."""
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(folder / "spm"),
        vocab_size=1200,
        model_type="bpe",
        character_coverage=0.995,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        num_threads=1,
        minloglevel=2,
    )
    return folder / "spm.model"


def m2m100_tokenizer(spm_model, work):
    """An `M2M100Tokenizer`: vocab.json (`<s> <pad> </s> <unk>`, then the pieces) beside the SentencePiece model."""
    processor = spm.SentencePieceProcessor(model_file=str(spm_model))
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for index in range(3, processor.get_piece_size()):
        vocab.setdefault(processor.id_to_piece(index), len(vocab))
    (work / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    return M2M100Tokenizer(str(work / "vocab.json"), str(spm_model), src_lang="ko", tgt_lang="ko")


def nllb_tokenizer(spm_model, work):
    """An `NllbTokenizer`, converted from the SentencePiece model with the 202 language codes."""
    folder = work / "nllb-spm"
    folder.mkdir()
    shutil.copyfile(spm_model, folder / "sentencepiece.bpe.model")
    return NllbTokenizer.from_pretrained(
        folder, src_lang="kor_Hang", tgt_lang="kor_Hang", additional_special_tokens=list(FAIRSEQ_LANGUAGE_CODES)
    )


def vocab_size(tokenizer, kind):
    """The embedding rows: every id the tokenizer gives (M2M100's eight made-up words after its languages too)."""
    if kind == "m2m100":
        return max(tokenizer.lang_code_to_id.values()) + 1 + tokenizer.num_madeup_words
    return len(tokenizer)


def build(kind, folder, seed):
    print("building", folder, flush=True)
    folder.mkdir(parents=True, exist_ok=True)
    data = pairs()
    work = pathlib.Path(tempfile.mkdtemp())
    spm_model = train_spm([q for q, _ in data] + [a for _, a in data], work)
    tokenizer = m2m100_tokenizer(spm_model, work) if kind == "m2m100" else nllb_tokenizer(spm_model, work)
    config = M2M100Config(
        vocab_size=vocab_size(tokenizer, kind),
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=1024,
        activation_function="relu",
        scale_embedding=True,
        dropout=0.1,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
    )
    torch.manual_seed(seed)
    model = M2M100ForConditionalGeneration(config)
    fit(model, tokenizer, kind, data)
    generation = dict(bos_token_id=0, decoder_start_token_id=2, eos_token_id=2, max_length=200, pad_token_id=1)
    if kind == "m2m100":
        generation.update(num_beams=5, early_stopping=True)
    model.generation_config = transformers.GenerationConfig(**generation)
    model.eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    references(model, tokenizer, kind, folder)


def fit(model, tokenizer, kind, data, steps=400):
    """Adam steps on 64 questions: answered when the target language is the first, copied for the second."""
    source, (answer, copy) = LANGUAGES[kind]
    questions, answers = [q for q, _ in data[:64]], [a for _, a in data[:64]]
    tokenizer.src_lang = source
    batches = []
    for target, texts in ((answer, answers), (copy, questions)):
        tokenizer.tgt_lang = target
        batch = tokenizer(questions, text_target=texts, padding=True, return_tensors="pt")
        batch["labels"][batch["labels"] == tokenizer.pad_token_id] = -100
        batches.append(batch)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for step in range(steps):
        optimizer.zero_grad()
        loss = sum(model(**batch).loss for batch in batches)
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            print(f"step {step}: loss {float(loss):.3f}", flush=True)


def references(model, tokenizer, kind, folder):
    """transformers' tokenization, generate outputs, scores and logits into two targets, in reference.json and .npz."""
    source, targets = LANGUAGES[kind]
    tokenizer.src_lang = source
    encoded = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    reference = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "max_new_tokens": MAX_NEW_TOKENS,
        "sentences": SENTENCES,
        "source_lang": source,
        "source_ids": [tokenizer(s)["input_ids"] for s in SENTENCES],
        "targets": {},
    }
    logits = {}
    for target in targets:
        tokenizer.tgt_lang = target
        forced = tokenizer.convert_tokens_to_ids(target if kind == "nllb" else f"__{target}__")
        common = dict(max_new_tokens=MAX_NEW_TOKENS, return_dict_in_generate=True, output_scores=True)
        with torch.no_grad():
            greedy = model.generate(**encoded, num_beams=1, do_sample=False, forced_bos_token_id=forced, **common)
            beam = model.generate(
                **encoded,
                num_beams=4,
                length_penalty=1.0,
                num_return_sequences=4,
                forced_bos_token_id=forced,
                **common,
            )
        greedy_ids = [row[1:] for row in _unpadded(greedy.sequences.tolist(), tokenizer)]
        beam_ids = [row[1:] for row in _unpadded(beam.sequences.tolist(), tokenizer)]
        strings = tokenizer.batch_decode
        reference["targets"][target] = {
            "forced_bos_token_id": forced,
            "target_ids": [tokenizer(text_target=s)["input_ids"] for s in SENTENCES],
            "greedy_ids": greedy_ids,
            "greedy": strings(greedy.sequences, skip_special_tokens=True),
            "beam_ids": [beam_ids[i : i + 4] for i in range(0, len(beam_ids), 4)],
            "beam": [strings(beam.sequences[i : i + 4], skip_special_tokens=True) for i in range(0, len(beam_ids), 4)],
            "beam_scores": beam.sequences_scores.view(-1, 4).tolist(),
        }
        pairs_in = tokenizer(SENTENCES[:4], text_target=SENTENCES[4:8], padding=True, return_tensors="pt")
        decoder_inputs = shift_tokens_right(pairs_in["labels"], 1, model.config.decoder_start_token_id)
        with torch.no_grad():
            out = model(
                input_ids=pairs_in["input_ids"],
                attention_mask=pairs_in["attention_mask"],
                decoder_input_ids=decoder_inputs,
            )
        logits[f"{target}_input_ids"] = pairs_in["input_ids"].numpy()
        logits[f"{target}_decoder_input_ids"] = decoder_inputs.numpy()
        logits[f"{target}_logits"] = out.logits.numpy()
    reference["training"] = training_references(model, tokenizer, kind)
    (folder / "reference.json").write_text(json.dumps(reference, ensure_ascii=False, indent=1), encoding="utf-8")
    np.savez_compressed(folder / "reference_logits.npz", **logits)


# Fine-tuning pairs whose ids `training` records: chatbot questions and answers, and spacing a tokenizer normalizes.
TRAINING_PAIRS = [
    ("요즘 너무 바빠", "쉬엄쉬엄 하세요."),
    ("주말에 비 온대", "우산 챙기세요."),
    ("  두 칸  띄운 질문 ", "답 "),
    ("English and 한국어 mixed", "섞어 써도 돼요."),
]
# (source language, target language) of each family's fine-tuning pairs: each way.
TRAINING_LANGUAGES = {
    "m2m100": (("ko", "en"), ("en", "ko")),
    "nllb": (("kor_Hang", "eng_Latn"), ("eng_Latn", "kor_Hang")),
}


def training_references(model, tokenizer, kind):
    """The ids transformers gives fine-tuning pairs: `input_ids`, `labels`, `decoder_input_ids`, per pair of languages.

    NLLB's `legacy_behaviour` puts the language last on both sides
    (`X </s> [src]`, labels `Y </s> [tgt]`), unlike the forced BOS that
    `generate` decodes with: recorded as transformers gives it.
    """
    sources, targets = [s for s, _ in TRAINING_PAIRS], [t for _, t in TRAINING_PAIRS]
    framings = []
    legacy_options = (False, True) if kind == "nllb" else (False,)
    for source_lang, target_lang in TRAINING_LANGUAGES[kind]:
        for legacy in legacy_options:
            if kind == "nllb":
                tokenizer.legacy_behaviour = legacy
            tokenizer.src_lang, tokenizer.tgt_lang = source_lang, target_lang
            encoded = tokenizer(sources, text_target=targets)
            start = model.config.decoder_start_token_id
            shifted = [
                shift_tokens_right(torch.tensor([labels]), model.config.pad_token_id, start)[0].tolist()
                for labels in encoded["labels"]
            ]
            framings.append(
                {
                    "source_lang": source_lang,
                    "target_lang": target_lang,
                    "legacy_behaviour": legacy,
                    "input_ids": encoded["input_ids"],
                    "labels": encoded["labels"],
                    "decoder_input_ids": shifted,
                }
            )
    if kind == "nllb":
        tokenizer.legacy_behaviour = False
    return {"pairs": [list(pair) for pair in TRAINING_PAIRS], "framings": framings}


def rebuild_references(kind, folder):
    """reference.json and reference_logits.npz again, from the committed checkpoint in `folder` (left unchanged)."""
    print("references of", folder, flush=True)
    model = M2M100ForConditionalGeneration.from_pretrained(folder).eval()
    tokenizer = (M2M100Tokenizer if kind == "m2m100" else NllbTokenizer).from_pretrained(folder)
    references(model, tokenizer, kind, folder)


def _unpadded(rows, tokenizer):
    """Generated rows without the padding after END."""
    return [[i for i in row if i != tokenizer.pad_token_id] for row in rows]


# What each variant in layouts/ is, and the fixture it comes from: how M2M100 and NLLB were uploaded in 2021-2022.
LAYOUTS = {
    "m2m100-2021": (
        "m2m100",
        "transformers 4.4's M2M100ForConditionalGeneration: generation settings (five beams, early stopping, "
        "max_length 200) in config.json, no generation_config.json; pytorch_model.bin (zip) holding the tied "
        "embedding under four names and the sinusoidal position tables of the time (`embed_positions.weights`, "
        "a buffer then); an old tokenizer_config.json and special_tokens_map.json",
    ),
    "nllb-2022": (
        "nllb",
        "an M2M100Model (no head: names without `model.`, no lm_head) in bfloat16, model.safetensors in two shards "
        "with model.safetensors.index.json; generation settings in config.json, no generation_config.json",
    ),
}


def build_layouts():
    """layouts/: each fixture rewritten into its variant of `LAYOUTS`, with transformers' outputs (reference.json)."""
    sys.path.insert(0, str(HERE.parent))
    import old_layouts

    for name, (kind, about) in LAYOUTS.items():
        print("layout", name, flush=True)
        base, folder = HERE / kind, HERE / "layouts" / name
        model = M2M100ForConditionalGeneration.from_pretrained(base, dtype=torch.float32).eval()
        config = json.loads((base / "config.json").read_text(encoding="utf-8"))
        generation = json.loads((base / "generation_config.json").read_text(encoding="utf-8"))
        generation.pop("transformers_version")
        old_keys = dict(gradient_checkpointing=False, num_hidden_layers=config["encoder_layers"])
        if kind == "m2m100":
            old_layouts.start(folder, kind, ["vocab.json", "sentencepiece.bpe.model"], about)
            architectures = ["M2M100ForConditionalGeneration"]
            old_layouts.old_config(folder, config, generation, transformers_version="4.4.0.dev0", **old_keys)
            rows = config["max_position_embeddings"] + 2  # the buffer's rows: fairseq's offset of 2
            table = M2M100SinusoidalPositionalEmbedding.get_embedding(rows, config["d_model"], config["pad_token_id"])
            tables = {f"model.{side}.embed_positions.weights": table for side in ("encoder", "decoder")}
            old_layouts.write_weights(folder, old_layouts.state_dict(model, extra=tables), "bin")
            old_layouts.write_json(folder / "tokenizer_config.json", M2M100_TOKENIZER_CONFIG)
            special = {key: value for key, value in M2M100_TOKENIZER_CONFIG.items() if key.endswith("_token")}
            languages = [f"__{code}__" for code in M2M100_CODES["m2m100"]]
            old_layouts.write_json(
                folder / "special_tokens_map.json", {**special, "additional_special_tokens": languages}
            )
        else:
            old_layouts.start(folder, kind, ["tokenizer.json", "tokenizer_config.json"], about)
            architectures = ["M2M100Model"]
            old_layouts.old_config(folder, config, generation, transformers_version="4.21.0.dev0", **old_keys)
            state = old_layouts.state_dict(model, prefix="model.", dtype=torch.bfloat16)
            old_layouts.write_weights(folder, state, "safetensors", shards=2)
        config_path = folder / "config.json"
        old_layouts.write_json(config_path, {**json.loads(config_path.read_text()), "architectures": architectures})
        tokenizer_class = M2M100Tokenizer if kind == "m2m100" else NllbTokenizer
        source, (target, _) = LANGUAGES[kind]
        tokenizer = tokenizer_class.from_pretrained(base)
        forced = tokenizer.convert_tokens_to_ids(target if kind == "nllb" else f"__{target}__")
        old_layouts.references(
            M2M100ForConditionalGeneration,
            tokenizer_class,
            folder,
            SENTENCES,
            MAX_NEW_TOKENS,
            src_lang=source,
            forced_bos_token_id=forced,
        )


# facebook/m2m100_418M's tokenizer_config.json as uploaded in 2021 (its language_codes and madeup words implied).
M2M100_TOKENIZER_CONFIG = {
    "src_lang": None,
    "tgt_lang": None,
    "bos_token": "<s>",
    "eos_token": "</s>",
    "sep_token": "</s>",
    "pad_token": "<pad>",
    "unk_token": "<unk>",
    "model_max_length": 1024,
    "tokenizer_file": None,
    "special_tokens_map_file": "m2m_100_1.2B_v2/special_tokens_map.json",
    "name_or_path": "m2m_100_1.2B_v2",
    "tokenizer_class": "M2M100Tokenizer",
}


if __name__ == "__main__":
    if sys.argv[1:] == ["--layouts"]:
        build_layouts()
    elif sys.argv[1:] == ["--references-only"]:
        rebuild_references("m2m100", HERE / "m2m100")
        rebuild_references("nllb", HERE / "nllb")
    else:
        build("m2m100", HERE / "m2m100", seed=0)
        build("nllb", HERE / "nllb", seed=1)
