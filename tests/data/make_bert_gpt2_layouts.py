"""Rebuilds tests/data/layouts/: BERT and GPT-2 checkpoints laid out as older transformers wrote them.

Each folder is written by transformers (5.24) and then rewritten as the
uploads of 2019-2022 hold it, and transformers (or sentence-transformers)
then computes its reference outputs ON THAT FOLDER, loading it as a user
would (`from_pretrained`, `pipeline`, `SentenceTransformer`):

- `gpt2-model/`: the trained GPT-2 of tests/data/gpt2/ as a `GPT2Model` file
  (openai-community/gpt2's layout): no `transformer.` prefix, no `lm_head`,
  each layer's causal-mask buffers `attn.bias` (uint8) and
  `attn.masked_bias`; an old config.json (`n_ctx`, `task_specific_params`)
  and no generation_config.json; `vocab.json` and `merges.txt` alone.
- `gpt2-lmhead/`: the same weights as a `GPT2LMHeadModel` file of 2021:
  the prefix, the tied copy `lm_head.weight`, bool `attn.bias` buffers, and
  the generation settings inside config.json (`num_beams` 4, no
  generation_config.json). Its `float16` variant (`layouts.to_float16`) has
  references of its own.
- `bert-pretraining/`: a random `BertForPreTraining` (`cls.predictions`,
  `cls.seq_relationship`, the pooler) with the tied copies
  `cls.predictions.decoder.weight` and `.bias` and the int64 buffer
  `bert.embeddings.position_ids`; `vocab.txt` and a tokenizer_config.json
  with `do_lower_case` alone. fill-mask top-5 by `pipeline("fill-mask")`.
- `bert-classifier/`: a random `BertForSequenceClassification` of three
  labels (`id2label`: the chatbot corpus's everyday, parting, love) with the
  buffers `position_ids` and `token_type_ids`, a tokenizer.json beside
  `vocab.txt`; probabilities by `pipeline("text-classification",
  top_k=None)`, of texts and of pairs.
- `sbert/`: a sentence-transformers folder of 2021 (all-MiniLM-L6-v2's
  layout and values: a `BertModel` of 6 layers and 512 positions, names
  without a prefix, `modules.json` with Pooling (mean, its legacy keys) and
  Normalize (no folder, as on the Hub), `sentence_bert_config.json` with
  `max_seq_length` 256), `vocab.txt` alone. Embeddings by
  `SentenceTransformer.encode` for each variant of
  `tests/checkpoint_layouts.py` (CLS, max, every mode at once, no
  sentence-transformers files at all; float16).

The BERTs use bert-base-uncased's special ids ([PAD] 0, [UNK] 100, [CLS]
101, [SEP] 102, [MASK] 103: the WordPiece of tests/data/bert/ behind 99
`[unusedN]` rows) and 512 positions; only widths and depths are small.
`reference.json` and `reference_outputs.npz` in each folder hold the
outputs (several variants' where a folder has them).

Written with torch 2.13.0+cpu, transformers 5.24.0, sentence-transformers
6.2.0, safetensors 0.8.0, NumPy 2.4.6. The tests need none of torch,
transformers or sentence-transformers. To rebuild (CPU, a minute):

    python -m venv /tmp/lm-ref
    /tmp/lm-ref/bin/pip install torch transformers sentence-transformers tokenizers safetensors
    /tmp/lm-ref/bin/python tests/data/make_bert_gpt2_layouts.py
"""

import json
import pathlib
import shutil
import sys
import tempfile

import numpy as np
import sentence_transformers
import torch
import transformers
from safetensors.torch import save_file
from transformers import (
    BertConfig,
    BertForPreTraining,
    BertForSequenceClassification,
    BertModel,
    BertTokenizer,
    GPT2LMHeadModel,
    pipeline,
)

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import checkpoint_layouts as layouts  # noqa: E402  (the variants, shared with the tests)
from make_gpt2_bert_fixtures import MASKED, PROMPTS  # noqa: E402

OUT = layouts.LAYOUTS
POSITIONS = 512
LABELS = {0: "everyday", 1: "parting", 2: "love"}
FILL = [text for text in MASKED if "[MASK]" in text] + ["[MASK] 너무 [MASK]"]
CLASSIFY = ["오늘 너무 힘들었어", "고마워 정말", "헤어졌어", "", "The Quick brown fox, Émile said. 😀"]
PAIRS = [("오늘 너무 힘들었어", "많이 힘들었겠어요"), ("커피 마시고 싶다", "")]
EMBED = CLASSIFY + [
    "새해 복 많이 받으세요!",
    " ".join(["오늘 너무 힘들었어 주말에 뭐 하지?"] * 60),
]  # the last: > 256 tokens
OLD_BERT = {"gradient_checkpointing": False, "position_embedding_type": "absolute", "transformers_version": "4.8.2"}


def main():
    torch.set_num_threads(1)
    OUT.mkdir(exist_ok=True)
    vocab = bert_vocab()
    build_gpt2()
    build_bert_pretraining(vocab)
    build_bert_classifier(vocab)
    build_sbert(vocab)
    for folder in sorted(OUT.iterdir()):
        size = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
        print(f"{folder.name}: {size / 1024:.0f} KiB", flush=True)


# -- writing a folder as older transformers did --------------------------------------------------


def torch_save(tensors, name):
    """`bin/NAME.bin`: `tensors` pickled by `torch.save`, as transformers 4 wrote `pytorch_model.bin`."""
    (OUT / "bin").mkdir(exist_ok=True)
    torch.save(tensors, OUT / "bin" / f"{name}.bin")


def save_tensors(folder, tensors):
    """`model.safetensors` of `tensors` (each its own contiguous copy, as `save_pretrained` writes them)."""
    save_file(
        {name: value.detach().clone().contiguous() for name, value in tensors.items()},
        str(folder / "model.safetensors"),
        metadata={"format": "pt"},
    )


def write_json(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def old_config(model, architectures, drop=(), **extra):
    """config.json as transformers 4 wrote it: `torch_dtype`, its version, no keys transformers 5 added."""
    config = model.config.to_dict()
    for key in (
        "dtype",
        "transformers_version",
        "use_cache",
        "add_cross_attention",
        "bos_token_id",
        "eos_token_id",
        "classifier_dropout",
        "is_decoder",
        *drop,
    ):
        config.pop(key, None)
    config.update(architectures=architectures, torch_dtype="float32", **extra)
    return dict(sorted(config.items()))


def loaded(model_class, folder, **options):
    """`model_class.from_pretrained(folder)` in float32, checked to have found every weight it needs."""
    model, info = model_class.from_pretrained(folder, output_loading_info=True, dtype=torch.float32, **options)
    if info["missing_keys"] or info["mismatched_keys"]:
        raise SystemExit(f"{folder}: transformers does not load it whole: {info}")
    return model.eval()


# -- GPT-2 ---------------------------------------------------------------------------------------


def build_gpt2():
    source = GPT2LMHeadModel.from_pretrained(HERE / "gpt2", dtype=torch.float32).eval()
    state = {name: value for name, value in source.state_dict().items() if name != "lm_head.weight"}
    positions, layers = source.config.n_positions, source.config.n_layer
    causal = torch.tril(torch.ones((positions, positions), dtype=torch.uint8)).view(1, 1, positions, positions)
    old = {"n_ctx": positions, "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}}}
    common = dict(drop=("pad_token_id", "dtype"), bos_token_id=699, eos_token_id=699)

    folder = fresh("gpt2-model")
    tensors = {name.removeprefix("transformer."): value for name, value in state.items()}
    for index in range(layers):
        tensors[f"h.{index}.attn.bias"] = causal
        tensors[f"h.{index}.attn.masked_bias"] = torch.tensor(-1e4)
    save_tensors(folder, tensors)
    write_json(folder / "config.json", old_config(source, ["GPT2LMHeadModel"], **old, **common))
    gpt2_tokenizer_files(folder)
    gpt2_references(folder, {"float32": folder})

    folder = fresh("gpt2-lmhead")
    tensors = dict(state, **{"lm_head.weight": state["transformer.wte.weight"]})
    for index in range(layers):
        tensors[f"transformer.h.{index}.attn.bias"] = causal.bool()
        tensors[f"transformer.h.{index}.attn.masked_bias"] = torch.tensor(-1e4)
    save_tensors(folder, tensors)
    write_json(
        folder / "config.json",
        old_config(source, ["GPT2LMHeadModel"], **old, **common, num_beams=4, early_stopping=True, length_penalty=1.0),
    )
    gpt2_tokenizer_files(folder)
    torch_save(tensors, "gpt2-lmhead")  # lm_head.weight and wte one storage, as older transformers saved them
    work = pathlib.Path(tempfile.mkdtemp())
    half = layouts.to_float16(layouts.assemble(folder, {}, work / "half"))
    pickled = layouts.assemble(folder, layouts.BIN_VARIANTS["gpt2-lmhead"], work / "bin")
    gpt2_references(folder, {"float32": folder, "float16": half, "bin": pickled})


def gpt2_tokenizer_files(folder):
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(HERE / "gpt2" / name, folder / name)
    write_json(folder / "tokenizer_config.json", {"model_max_length": 64})


def gpt2_references(folder, variants):
    """Logits of four prompts and `generate`'s continuations with the folder's own settings, per variant."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    prompt_ids = [tokenizer(prompt)["input_ids"] for prompt in PROMPTS[:6]]
    reference, outputs = (
        {"transformers": transformers.__version__, "prompts": PROMPTS[:6], "prompt_ids": prompt_ids},
        {},
    )
    for name, path in variants.items():
        model = loaded(GPT2LMHeadModel, path)
        print(path.name, name, "generation settings:", model.generation_config.num_beams, flush=True)
        continuations = []
        with torch.no_grad():
            for index, ids in enumerate(prompt_ids):
                if index < 3:
                    outputs[f"{name}_logits_{index}"] = model(torch.tensor([ids])).logits.numpy()
                    if name == "bin":  # the same weights as float32's, pickled: the same logits, not stored twice
                        assert np.array_equal(outputs.pop(f"bin_logits_{index}"), outputs[f"float32_logits_{index}"])
                out = model.generate(torch.tensor([ids]), max_new_tokens=10, pad_token_id=tokenizer.eos_token_id)
                continuations.append(out[0, len(ids) :].tolist())
        reference[f"{name}_generated_ids"] = continuations
        reference[f"{name}_generated"] = [tokenizer.decode(row, skip_special_tokens=True) for row in continuations]
        reference[f"{name}_num_beams"] = model.generation_config.num_beams or 1  # None: transformers' default, 1
    write_references(folder, reference, outputs)


# -- BERT ----------------------------------------------------------------------------------------


def bert_vocab():
    """tests/data/bert/'s WordPiece with bert-base-uncased's special ids: 99 `[unusedN]` rows before [UNK]."""
    tokens = (HERE / "bert" / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens = ["[PAD]"] + [f"[unused{index}]" for index in range(99)] + tokens[1:5] + tokens[5:]
    assert tokens.index("[CLS]") == 101 and tokens.index("[MASK]") == 103
    path = pathlib.Path(tempfile.mkdtemp()) / "vocab.txt"
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return path


def bert_config(vocab, **changes):
    settings = dict(
        vocab_size=sum(1 for _ in open(vocab, encoding="utf-8")),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=POSITIONS,
        type_vocab_size=2,
        pad_token_id=0,
        initializer_range=0.2,  # wider than BERT's 0.02: outputs that are never near ties
    )
    return BertConfig(**{**settings, **changes})


def bert_tokenizer_files(folder, vocab, tokenizer_json=False):
    """vocab.txt and the old tokenizer_config.json (and special_tokens_map.json); tokenizer.json if asked."""
    shutil.copy(vocab, folder / "vocab.txt")
    write_json(folder / "tokenizer_config.json", {"do_lower_case": True, "model_max_length": POSITIONS})
    special = {
        "unk_token": "[UNK]",
        "sep_token": "[SEP]",
        "pad_token": "[PAD]",
        "cls_token": "[CLS]",
        "mask_token": "[MASK]",
    }
    write_json(folder / "special_tokens_map.json", special)
    if tokenizer_json:
        BertTokenizer(vocab=str(vocab), do_lower_case=True).backend_tokenizer.save(str(folder / "tokenizer.json"))


def position_buffers(prefix, token_types=False):
    buffers = {f"{prefix}embeddings.position_ids": torch.arange(POSITIONS).expand((1, -1))}
    if token_types:
        buffers[f"{prefix}embeddings.token_type_ids"] = torch.zeros((1, POSITIONS), dtype=torch.long)
    return buffers


def build_bert_pretraining(vocab):
    folder = fresh("bert-pretraining")
    torch.manual_seed(2)
    model = BertForPreTraining(bert_config(vocab)).eval()
    with torch.no_grad():
        model.cls.predictions.bias.normal_(0.0, 0.5)  # not zero, so that its import is tested
    tensors = dict(model.state_dict(), **position_buffers("bert."))
    tensors["cls.predictions.decoder.weight"] = model.bert.embeddings.word_embeddings.weight
    tensors["cls.predictions.decoder.bias"] = model.cls.predictions.bias
    save_tensors(folder, tensors)
    torch_save({name: value.detach() for name, value in tensors.items()}, "bert-pretraining")  # tied: one storage
    write_json(folder / "config.json", old_config(model, ["BertForPreTraining"], **OLD_BERT))
    bert_tokenizer_files(folder, vocab)
    pickled = layouts.assemble(
        folder, layouts.BIN_VARIANTS["bert-pretraining"], pathlib.Path(tempfile.mkdtemp()) / "bin"
    )
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    ids = [tokenizer(text)["input_ids"] for text in FILL]
    outputs = {}
    with torch.no_grad():
        for path in (folder, pickled):  # the same logits from model.safetensors and from pytorch_model.bin
            model = loaded(BertForPreTraining, path)
            for index, row in enumerate(ids[:3]):
                logits = model(torch.tensor([row])).prediction_logits.numpy()
                assert outputs.setdefault(f"logits_{index}", logits) is logits or np.array_equal(
                    outputs[f"logits_{index}"], logits
                )
    fill = pipeline("fill-mask", model=str(folder), tokenizer=str(folder), device="cpu")
    filled = [fill(text, top_k=5) for text in FILL]
    check_gaps([[c["score"] for c in (row if isinstance(row[0], dict) else row[0])] for row in filled])
    reference = {"transformers": transformers.__version__, "texts": FILL, "ids": ids, "fill_mask": filled}
    encoder = sentence_transformers.SentenceTransformer(str(folder), device="cpu")  # its BertModel, mean pooling
    outputs["embeddings"] = encoder.encode(EMBED[:5], convert_to_numpy=True)
    reference["embedded"] = EMBED[:5]
    write_references(folder, reference, outputs)


def build_bert_classifier(vocab):
    folder = fresh("bert-classifier")
    torch.manual_seed(3)
    config = bert_config(vocab, id2label=LABELS, label2id={label: index for index, label in LABELS.items()})
    model = BertForSequenceClassification(config).eval()
    save_tensors(folder, dict(model.state_dict(), **position_buffers("bert.", token_types=True)))
    write_json(
        folder / "config.json", old_config(model, ["BertForSequenceClassification"], drop=("problem_type",), **OLD_BERT)
    )
    bert_tokenizer_files(folder, vocab, tokenizer_json=True)
    model = loaded(BertForSequenceClassification, folder)
    legacy = layouts.legacy_norm_names(layouts.assemble(folder, {}, pathlib.Path(tempfile.mkdtemp()) / "gamma"))
    renamed = loaded(BertForSequenceClassification, legacy)  # LayerNorm.gamma and .beta, read as weight and bias
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    outputs = {}
    with torch.no_grad():
        for index, text in enumerate(CLASSIFY + PAIRS):
            encoded = tokenizer(*text) if isinstance(text, tuple) else tokenizer(text)
            inputs = {key: torch.tensor([value]) for key, value in encoded.items()}
            assert torch.equal(model(**inputs).logits, renamed(**inputs).logits)
            outputs[f"logits_{index}"] = model(**inputs).logits.numpy()
    classify = pipeline("text-classification", model=str(folder), tokenizer=str(folder), device="cpu")
    results = [classify(text, top_k=None) for text in CLASSIFY]
    results += [classify({"text": first, "text_pair": second}, top_k=None) for first, second in PAIRS]
    check_gaps([[row["score"] for row in result] for result in results])
    reference = {"transformers": transformers.__version__, "texts": CLASSIFY, "pairs": PAIRS, "classify": results}
    write_references(folder, reference, outputs)


def build_sbert(vocab):
    folder = fresh("sbert")
    torch.manual_seed(4)
    model = BertModel(bert_config(vocab, num_hidden_layers=6, intermediate_size=128)).eval()
    save_tensors(folder, dict(model.state_dict(), **position_buffers("")))
    write_json(
        folder / "config.json",
        old_config(model, ["BertModel"], _name_or_path="nreimers/MiniLM-L6-H384-uncased", **OLD_BERT),
    )
    bert_tokenizer_files(folder, vocab)
    write_json(folder / "modules.json", [layouts.TRANSFORMER, layouts.POOLING, layouts.NORMALIZE])
    write_json(folder / "1_Pooling" / "config.json", layouts.legacy_pooling(32, "mean"))
    write_json(folder / "sentence_bert_config.json", {"max_seq_length": 256, "do_lower_case": False})
    versions = {"sentence_transformers": "2.0.0", "transformers": "4.6.1", "pytorch": "1.8.1"}
    write_json(folder / "config_sentence_transformers.json", {"__version__": versions})
    reference, outputs = {"sentence_transformers": sentence_transformers.__version__, "texts": EMBED}, {}
    work = pathlib.Path(tempfile.mkdtemp())
    variants = {name: layouts.sbert_variant(name, work / name) for name in layouts.SBERT_VARIANTS}
    variants["float16"] = layouts.to_float16(layouts.sbert_variant("mean-normalize", work / "float16"))
    for name, path in variants.items():
        encoder = sentence_transformers.SentenceTransformer(
            str(path), device="cpu", model_kwargs={"dtype": torch.float32}
        )
        outputs[f"{name}_embeddings"] = encoder.encode(EMBED, convert_to_numpy=True, batch_size=4)
        reference[f"{name}_max_seq_length"] = encoder.max_seq_length
        print("sbert", name, encoder, flush=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    reference["ids"] = [tokenizer(text, truncation=True, max_length=256)["input_ids"] for text in EMBED]
    write_references(folder, reference, outputs)


# -- common --------------------------------------------------------------------------------------


def fresh(name):
    folder = OUT / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    print("building", folder, flush=True)
    return folder


def check_gaps(rankings):
    """Scores ranked by transformers that are no near ties (else another float order could swap them)."""
    gaps = [a - b for scores in rankings for a, b in zip(scores, scores[1:])]
    print(f"smallest gap between ranked scores: {min(gaps):.2e}", flush=True)
    if min(gaps) < 1e-5:
        raise SystemExit("two ranked scores are near ties: change the seed")


def write_references(folder, reference, outputs):
    (folder / "reference.json").write_text(json.dumps(reference, ensure_ascii=False, indent=1), encoding="utf-8")
    np.savez_compressed(folder / "reference_outputs.npz", **outputs)


if __name__ == "__main__":
    main()
