"""Rebuilds the tiny T5-family and mBART-50 fixtures in this folder and what transformers computes with them.

Five tiny checkpoints, written by transformers' `save_pretrained` with their
tokenizers, each with the configuration values of the checkpoints it stands
for except its sizes (widths, depths, vocabularies):

- `t5/`: T5 v1.0 (google-t5/t5-small): ReLU feed-forward, embeddings tied to
  the output (which T5 rescales by `d_model ** -0.5`), 512 positions, the
  `task_specific_params` of its config.json, 100 `<extra_id_N>` pieces, an
  embedding of more rows than the tokenizer has ids (32128 for 32100), and
  its tokenizer as `spiece.model` alone (the older layout);
- `flan_t5/`: flan-T5 (google/flan-t5-small): "gated-gelu", an untied output
  projection, heads whose total width (6 x 8) is not `d_model` (flan-t5-small:
  6 x 64 = 384 of 512), its tokenizer as `tokenizer.json` alone (what
  transformers 5 saves);
- `mt5/`: mT5 (`model_type: mt5`, google/mt5-small): "gated-gelu", untied,
  no `<extra_id_N>` added (`extra_ids` 0), `spiece.model` and `tokenizer.json`;
- `madlad/`: MADLAD-400 (google/madlad400-3b-mt, `model_type: t5`):
  "gated-gelu", untied, `<unk>` 0, `<pad>` 1, `</s>` 2, decoding from id 0,
  and target languages as `<2xx>` pieces that the source starts with
  (`<2ko> ...` answers in Korean, `<2en> ...` copies the question);
- `mbart50/`: mBART-50 many-to-many (facebook/mbart-large-50-many-to-many-mmt,
  `model_type: mbart`): pre-norm layers with a final LayerNorm per stack and
  a `layernorm_embedding`, GELU, learned positions of offset 2, embeddings
  scaled and shared and tied with a `final_logits_bias`, `MBart50Tokenizer`
  (`<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3, fairseq's offset, 52 language
  codes and `<mask>`), decoding from `</s>` with the target language forced,
  its generation settings (5 beams, `max_length` 200, early stopping,
  `forced_eos_token_id`).

The relative position buckets are T5's (32 buckets, distance 128). Each
model is trained a few hundred steps on the bundled Korean chatbot corpus
(with a little English in the SentencePiece models), so that outputs end at
different lengths; the multilingual ones answer a question when asked for
Korean and copy it when asked for English, so that the target language
changes the output.

Beside each, `reference.json` holds transformers' outputs for `SENTENCES`
(into two target languages for MADLAD and mBART-50): the source and target
ids its tokenizer gives (language tokens included), greedy and beam-4
`generate` ids and strings (`max_new_tokens` 24, a `length_penalty` of 1.0)
with the beams' scores, and `reference_logits.npz` the teacher-forced logits
of a few pairs; `t5/reference_logits.npz` also holds transformers' relative
position buckets of distances -300 to 300, both directions.

`--layouts` rebuilds only `layouts/`: three fixtures rewritten into the
layouts they were uploaded in (tests/data/old_layouts.py, `LAYOUTS`), each
with transformers' outputs on that folder.

The tests need neither torch nor transformers. To rebuild (CPU, a few minutes):

    python -m venv /tmp/t5-ref
    /tmp/t5-ref/bin/pip install torch transformers sentencepiece protobuf safetensors
    /tmp/t5-ref/bin/python tests/data/t5_mbart/make_fixtures.py

Written with torch 2.13.0+cpu, transformers 5.24.0 and sentencepiece 0.2.
"""

import csv
import json
import pathlib
import random
import shutil
import tempfile

import numpy as np
import sentencepiece as spm
import torch
import transformers
from transformers import (
    MBart50Tokenizer,
    MBartConfig,
    MBartForConditionalGeneration,
    MT5Config,
    MT5ForConditionalGeneration,
    T5Config,
    T5ForConditionalGeneration,
    T5Tokenizer,
)
from transformers.models.t5.modeling_t5 import T5Attention

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
    "  친구랑   싸웠어 ",
    "헤어졌어",
    "운동 해야 하는데",
    "집에 가고 싶다",
    "너무 추워",
]
ENGLISH = [
    "Hello, how are you today?",
    "I love pizza and coffee.",
    "The weather is nice, let's go for a walk.",
    "Translate this sentence into Korean, please.",
    "My friend and I watched a movie last night.",
    "Where is the nearest train station?",
    "Thank you very much for your help.",
    "I am tired and I want to go home.",
]
# MADLAD's target languages in the tiny vocabulary: a few of its 419 `<2xx>` pieces.
MADLAD_LANGUAGES = ("ko", "en", "de", "fr", "ja", "zh", "es", "pt")
T5_TASKS = {  # t5-small's config.json: the prefixes it was trained with
    "summarization": {
        "early_stopping": True,
        "length_penalty": 2.0,
        "max_length": 200,
        "min_length": 30,
        "no_repeat_ngram_size": 3,
        "num_beams": 4,
        "prefix": "summarize: ",
    },
    "translation_en_to_de": {
        "early_stopping": True,
        "max_length": 300,
        "num_beams": 4,
        "prefix": "translate English to German: ",
    },
}


def pairs(count=400, seed=0):
    with open(CORPUS, encoding="utf-8", newline="") as handle:
        rows = [(row["Q"].strip(), row["A"].strip()) for row in csv.DictReader(handle)]
    random.Random(seed).shuffle(rows)
    return rows[:count]


def train_spm(folder, name, ids, user_defined=()):
    """A SentencePiece unigram model of 1000 pieces on the chatbot pairs and a little English."""
    data = pairs()
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join([q for q, _ in data] + [a for _, a in data] + ENGLISH * 3) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(folder / name),
        vocab_size=1000,
        model_type="unigram",
        character_coverage=0.995,
        user_defined_symbols=list(user_defined),
        num_threads=1,
        minloglevel=2,
        **ids,
    )
    return folder / f"{name}.model"


def t5_tokenizer(work, ids, extra_ids, user_defined=()):
    """transformers' `T5Tokenizer` of a new SentencePiece model (`spiece.model`), converted by `from_pretrained`."""
    spm_model = train_spm(work, "spiece", ids, user_defined)
    folder = work / "t5-tokenizer"
    folder.mkdir()
    shutil.copyfile(spm_model, folder / "spiece.model")
    settings = {"tokenizer_class": "T5Tokenizer", "extra_ids": extra_ids}
    settings.update(eos_token="</s>", unk_token="<unk>", pad_token="<pad>")
    (folder / "tokenizer_config.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")
    return T5Tokenizer.from_pretrained(folder), folder


def rounded(size, multiple=128):
    """An embedding's rows as T5's checkpoints round them up (t5-small: 32128 for 32100 ids)."""
    return -(-size // multiple) * multiple


def build_t5(kind, folder, seed):
    print("building", folder, flush=True)
    folder.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp())
    if kind == "madlad":
        ids = dict(unk_id=0, pad_id=1, eos_id=2, bos_id=-1)
        tokenizer, spm_folder = t5_tokenizer(work, ids, 0, [f"<2{code}>" for code in MADLAD_LANGUAGES])
    else:
        tokenizer, spm_folder = t5_tokenizer(
            work, dict(pad_id=0, eos_id=1, unk_id=2, bos_id=-1), 0 if kind == "mt5" else 100
        )
    sizes = dict(d_model=32, d_kv=8, num_heads=4, d_ff=64, num_layers=2, num_decoder_layers=2)
    common = dict(
        relative_attention_num_buckets=32,
        relative_attention_max_distance=128,
        dropout_rate=0.1,
        layer_norm_epsilon=1e-6,
        initializer_factor=1.0,
        decoder_start_token_id=0,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    if kind == "t5":
        config = T5Config(
            vocab_size=rounded(len(tokenizer)), feed_forward_proj="relu", n_positions=512, **sizes, **common
        )
        config.task_specific_params = T5_TASKS
        model_class = T5ForConditionalGeneration
    elif kind == "flan_t5":
        sizes.update(num_heads=6)  # 6 heads of 8: 48 wide, not d_model
        config = T5Config(
            vocab_size=rounded(len(tokenizer)),
            feed_forward_proj="gated-gelu",
            tie_word_embeddings=False,
            **sizes,
            **common,
        )
        model_class = T5ForConditionalGeneration
    elif kind == "mt5":
        config = MT5Config(
            vocab_size=rounded(len(tokenizer), 64),
            feed_forward_proj="gated-gelu",
            tie_word_embeddings=False,
            **sizes,
            **common,
        )
        model_class = MT5ForConditionalGeneration
    else:
        config = T5Config(
            vocab_size=len(tokenizer), feed_forward_proj="gated-gelu", tie_word_embeddings=False, **sizes, **common
        )
        model_class = T5ForConditionalGeneration
    torch.manual_seed(seed)
    model = model_class(config)
    if kind != "t5":  # an output projection of its own, as the real ones have (transformers 5 ties it at init)
        model.lm_head.weight = torch.nn.Parameter(model.shared.weight.detach().clone())
        model.config.tie_word_embeddings = False
        model.all_tied_weights_keys = {
            key: value for key, value in model.all_tied_weights_keys.items() if "lm_head" not in key
        }
    fit(model, t5_batches(tokenizer, kind))
    model.generation_config = transformers.GenerationConfig(
        decoder_start_token_id=0, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    model.eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if kind == "t5":  # the older layout: spiece.model (and its tokenizer_config.json), no tokenizer.json
        (folder / "tokenizer.json").unlink()
        shutil.copyfile(spm_folder / "tokenizer_config.json", folder / "tokenizer_config.json")
    if kind in ("t5", "mt5", "madlad"):
        shutil.copyfile(spm_folder / "spiece.model", folder / "spiece.model")
    tokenizer = T5Tokenizer.from_pretrained(folder)  # what a user of the folder gets
    targets = MADLAD_LANGUAGES[:2] if kind == "madlad" else (None,)
    references(model, tokenizer, folder, targets, t5_sources, t5_target_ids)
    if kind == "t5":
        store_buckets(folder)


def t5_sources(tokenizer, sentences, target):
    """A T5 model's sources: MADLAD's start with the target language's `<2xx>` piece, as its model card writes them."""
    return [f"<2{target}> {s}" for s in sentences] if target else list(sentences)


def t5_target_ids(tokenizer, sentences, target):
    return [tokenizer(text_target=s)["input_ids"] for s in sentences]


def t5_batches(tokenizer, kind):
    """The training batches: questions answered (and, for MADLAD, copied when asked for English)."""
    data = pairs()[:64]
    questions, answers = [q for q, _ in data], [a for _, a in data]
    tasks = [("ko", answers), ("en", questions)] if kind == "madlad" else [(None, answers)]
    batches = []
    for target, texts in tasks:
        batch = tokenizer(
            t5_sources(tokenizer, questions, target), text_target=texts, padding=True, return_tensors="pt"
        )
        batch["labels"][batch["labels"] == tokenizer.pad_token_id] = -100
        batches.append(batch)
    return batches


def build_mbart(folder, seed):
    print("building", folder, flush=True)
    folder.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp())
    spm_model = train_spm(work, "spm", dict(unk_id=0, bos_id=1, eos_id=2, pad_id=-1))
    spm_folder = work / "mbart-tokenizer"
    spm_folder.mkdir()
    shutil.copyfile(spm_model, spm_folder / "sentencepiece.bpe.model")
    tokenizer = MBart50Tokenizer.from_pretrained(spm_folder, src_lang="ko_KR", tgt_lang="ko_KR")
    config = MBartConfig(
        vocab_size=len(tokenizer),
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=1024,
        activation_function="gelu",
        scale_embedding=True,
        dropout=0.1,
        attention_dropout=0.0,
        activation_dropout=0.0,
        normalize_before=True,
        add_final_layer_norm=True,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
        forced_eos_token_id=2,
        tokenizer_class="MBart50Tokenizer",
    )
    torch.manual_seed(seed)
    model = MBartForConditionalGeneration(config)
    fit(model, mbart_batches(tokenizer))
    with torch.no_grad():
        model.final_logits_bias.normal_(0.0, 0.5)  # a bias that is not zero, so that its import is tested
    model.generation_config = transformers.GenerationConfig(
        bos_token_id=0,
        decoder_start_token_id=2,
        eos_token_id=2,
        forced_eos_token_id=2,
        pad_token_id=1,
        max_length=200,
        num_beams=5,
        early_stopping=True,
    )
    model.eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    shutil.copyfile(spm_model, folder / "sentencepiece.bpe.model")
    tokenizer = MBart50Tokenizer.from_pretrained(folder, src_lang="ko_KR")
    references(model, tokenizer, folder, ("ko_KR", "en_XX"), mbart_sources, mbart_target_ids)


def mbart_sources(tokenizer, sentences, target):
    tokenizer.src_lang = "ko_KR"
    return list(sentences)


def mbart_target_ids(tokenizer, sentences, target):
    tokenizer.tgt_lang = target
    return [tokenizer(text_target=s)["input_ids"] for s in sentences]


def mbart_batches(tokenizer):
    data = pairs()[:64]
    questions, answers = [q for q, _ in data], [a for _, a in data]
    tokenizer.src_lang = "ko_KR"
    batches = []
    for target, texts in (("ko_KR", answers), ("en_XX", questions)):
        tokenizer.tgt_lang = target
        batch = tokenizer(questions, text_target=texts, padding=True, return_tensors="pt")
        batch["labels"][batch["labels"] == tokenizer.pad_token_id] = -100
        batches.append(batch)
    return batches


def fit(model, batches, steps=300):
    """Adam steps on the batches: outputs that end, at lengths that differ."""
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for step in range(steps):
        optimizer.zero_grad()
        loss = sum(model(**batch).loss for batch in batches)
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            print(f"step {step}: loss {float(loss):.3f}", flush=True)


def references(model, tokenizer, folder, targets, sources_of, target_ids_of):
    """transformers' ids, generate outputs, scores and teacher-forced logits (per target language, if any)."""
    reference = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "max_new_tokens": MAX_NEW_TOKENS,
        "sentences": SENTENCES,
        "targets": {},
    }
    logits = {}
    for target in targets:
        key = target or "default"
        texts = sources_of(tokenizer, SENTENCES, target)
        encoded = tokenizer(texts, padding=True, return_tensors="pt")
        forced = {}
        if isinstance(tokenizer, MBart50Tokenizer):
            forced = {"forced_bos_token_id": tokenizer.convert_tokens_to_ids(target)}
        common = dict(max_new_tokens=MAX_NEW_TOKENS, return_dict_in_generate=True, output_scores=True, **forced)
        with torch.no_grad():
            greedy = model.generate(**encoded, num_beams=1, do_sample=False, **common)
            beam = model.generate(**encoded, num_beams=4, length_penalty=1.0, num_return_sequences=4, **common)
        greedy_ids = [_strip(row, tokenizer) for row in greedy.sequences.tolist()]
        beam_ids = [_strip(row, tokenizer) for row in beam.sequences.tolist()]
        decode = lambda rows: [tokenizer.decode(row, skip_special_tokens=True) for row in rows]  # noqa: E731
        reference["targets"][key] = {
            **forced,
            "source_ids": [tokenizer(s)["input_ids"] for s in texts],
            "target_ids": target_ids_of(tokenizer, SENTENCES, target),
            "greedy_ids": greedy_ids,
            "greedy": decode(greedy_ids),
            "beam_ids": [beam_ids[i : i + 4] for i in range(0, len(beam_ids), 4)],
            "beam": [decode(beam_ids[i : i + 4]) for i in range(0, len(beam_ids), 4)],
            "beam_scores": beam.sequences_scores.view(-1, 4).tolist(),
        }
        sources_of(tokenizer, (), target)
        if isinstance(tokenizer, MBart50Tokenizer):
            tokenizer.tgt_lang = target
        teacher = tokenizer(
            sources_of(tokenizer, SENTENCES[:4], target), text_target=SENTENCES[4:8], padding=True, return_tensors="pt"
        )
        decoder_inputs = model.prepare_decoder_input_ids_from_labels(labels=teacher["labels"])
        with torch.no_grad():
            out = model(
                input_ids=teacher["input_ids"],
                attention_mask=teacher["attention_mask"],
                decoder_input_ids=decoder_inputs,
            )
        logits[f"{key}_input_ids"] = teacher["input_ids"].numpy()
        logits[f"{key}_labels"] = teacher["labels"].numpy()
        logits[f"{key}_decoder_input_ids"] = decoder_inputs.numpy()
        logits[f"{key}_logits"] = out.logits.numpy()
    (folder / "reference.json").write_text(json.dumps(reference, ensure_ascii=False, indent=1), encoding="utf-8")
    np.savez_compressed(folder / "reference_logits.npz", **logits)


def store_buckets(folder):
    """transformers' relative position buckets of distances -300 to 300 (32 buckets, 128), beside the logits."""
    distances = torch.arange(-300, 301)
    stored = dict(np.load(folder / "reference_logits.npz"))
    for name, bidirectional in (("buckets_bidirectional", True), ("buckets_causal", False)):
        buckets = T5Attention._relative_position_bucket(distances, bidirectional, 32, 128)
        stored[name] = buckets.numpy().astype(np.int32)
    stored["bucket_distances"] = distances.numpy().astype(np.int32)
    np.savez_compressed(folder / "reference_logits.npz", **stored)


def _strip(row, tokenizer):
    """Generated ids without the decoder's start token and the padding after END."""
    row = row[1:]
    end = tokenizer.eos_token_id
    return row[: row.index(end) + 1] if end in row else [t for t in row if t != tokenizer.pad_token_id]


# What each variant in layouts/ is, and the fixture it comes from: how these families were uploaded in 2020-2023.
LAYOUTS = {
    "t5-2020": (
        "t5",
        "transformers 3's T5: config.json with the old keys (`output_past`, `id2label`, ...) and no generation "
        "settings, no generation_config.json; pytorch_model.bin (PyTorch's legacy format) holding the shared "
        "embedding under four names (`shared`, both `embed_tokens`, `lm_head`) and the unused relative bias of the "
        "decoder's first cross-attention, which transformers ignores; spiece.model alone",
    ),
    "mbart50-2021": (
        "mbart50",
        "transformers 4.4's mBART-50: generation settings (five beams, early stopping, max_length 200, forced "
        "END) in config.json, no generation_config.json; pytorch_model.bin (zip) holding the tied embedding under "
        "four names and final_logits_bias; sentencepiece.bpe.model and an old tokenizer_config.json, no "
        "tokenizer.json",
    ),
    "madlad-2023": (
        "madlad",
        "transformers 4.36's MADLAD-400: model.safetensors in bfloat16, in two shards with its index",
    ),
}
OLD_MBART50_TOKENIZER_CONFIG = {
    "src_lang": None,
    "tgt_lang": None,
    "bos_token": "<s>",
    "eos_token": "</s>",
    "sep_token": "</s>",
    "cls_token": "<s>",
    "unk_token": "<unk>",
    "pad_token": "<pad>",
    "mask_token": {
        "__type": "AddedToken",
        "content": "<mask>",
        "single_word": False,
        "lstrip": True,
        "rstrip": False,
        "normalized": True,
    },
    "model_max_length": 1024,
    "tokenizer_class": "MBart50Tokenizer",
}


def build_layouts():
    """layouts/: each fixture rewritten into its variant of `LAYOUTS`, with transformers' outputs (reference.json)."""
    import sys

    sys.path.insert(0, str(HERE.parent))
    import old_layouts

    for name, (kind, about) in LAYOUTS.items():
        print("layout", name, flush=True)
        base, folder = HERE / kind, HERE / "layouts" / name
        model_class = MBartForConditionalGeneration if kind == "mbart50" else T5ForConditionalGeneration
        model = model_class.from_pretrained(base, dtype=torch.float32).eval()
        config = json.loads((base / "config.json").read_text(encoding="utf-8"))
        generation = json.loads((base / "generation_config.json").read_text(encoding="utf-8"))
        generation.pop("transformers_version")
        if kind == "t5":
            old_layouts.start(folder, kind, ["spiece.model", "tokenizer_config.json"], about)
            for key in ("scale_decoder_outputs", "tie_word_embeddings", "dtype", "classifier_dropout"):
                config.pop(key, None)
            old_layouts.old_config(
                folder, config, {}, transformers_version="3.0.2", architectures=["T5WithLMHeadModel"]
            )
            unused = {"decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight": torch.randn(32, 4)}
            old_layouts.write_weights(folder, old_layouts.state_dict(model, extra=unused), "bin-legacy")
            sources, generate = SENTENCES, {}
        elif kind == "mbart50":
            old_layouts.start(folder, kind, ["sentencepiece.bpe.model"], about)
            old_layouts.old_config(folder, config, generation, transformers_version="4.4.0.dev0")
            old_layouts.write_weights(folder, old_layouts.state_dict(model), "bin")
            old_layouts.write_json(folder / "tokenizer_config.json", OLD_MBART50_TOKENIZER_CONFIG)
            tokenizer = MBart50Tokenizer.from_pretrained(base)
            sources, generate = (
                SENTENCES,
                dict(src_lang="ko_KR", forced_bos_token_id=tokenizer.lang_code_to_id["en_XX"]),
            )
        else:
            files = ["config.json", "generation_config.json", "spiece.model", "tokenizer.json", "tokenizer_config.json"]
            old_layouts.start(folder, kind, files, about)
            old_layouts.write_weights(folder, old_layouts.state_dict(model, dtype=torch.bfloat16), "safetensors", 2)
            sources, generate = [f"<2en> {s}" for s in SENTENCES], {}
        tokenizer_class = MBart50Tokenizer if kind == "mbart50" else T5Tokenizer
        old_layouts.references(model_class, tokenizer_class, folder, sources, MAX_NEW_TOKENS, **generate)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--layouts"]:
        build_layouts()
        raise SystemExit
    torch.set_num_threads(1)
    chosen = sys.argv[1:] or ["t5", "flan_t5", "mt5", "madlad", "mbart50"]  # e.g. `make_fixtures.py madlad`
    for seed, kind in enumerate(("t5", "flan_t5", "mt5", "madlad", "mbart50")):
        if kind in chosen:
            build_mbart(HERE / kind, seed) if kind == "mbart50" else build_t5(kind, HERE / kind, seed)
    print("written:", sorted(str(p.relative_to(HERE)) for p in HERE.rglob("*") if p.is_file()))
