"""The PyTorch side of `real_size.py`: run by an interpreter with torch and transformers (`--torch-python`).

CI installs neither; this file is never imported by the package or the tests.
Subcommands (each prints one JSON line last, and `real_size.py` reads it):

- `build FOLDER`: an OPUS-MT-base-shaped `MarianMTModel` (d_model 512, 6+6
  layers, 8 heads, ffn 2048, a shared vocabulary of 58,101 pieces: two small
  SentencePiece models trained on multi30k's English and German, padded with
  unused pieces), trained briefly on multi30k pairs so that its outputs end at
  lengths that differ (random weights repeat one token), written by
  `save_pretrained` with its tokenizer, as a Hugging Face repository is laid out;
  `--resume` trains a built one further (the figures of 2026-11-28: a first
  build, then 32 steps on 128 pairs; the commands are in docs/performance.md);
- `generate FOLDER SOURCES`: transformers' `generate`, greedy or beam, timed,
  with the peak RSS of this process;
- `ct2 FOLDER OUTPUT`: CTranslate2's own `TransformersConverter` (float32);
- `train FOLDER`: a plain PyTorch training loop (AdamW, float32) of the model,
  timed per step.
"""

import argparse
import json
import pathlib
import random
import resource
import sys
import tempfile
import time


def peak_rss_mb():
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def read_lines(path, count=None):
    lines = pathlib.Path(path).read_text(encoding="utf-8").splitlines()
    return lines[:count] if count else lines


def train_spm(texts, prefix, vocab_size):
    import sentencepiece as spm

    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as handle:
        handle.write("\n".join(texts) + "\n")
    spm.SentencePieceTrainer.train(
        input=handle.name,
        model_prefix=str(prefix),
        vocab_size=vocab_size,
        character_coverage=1.0,
        model_type="unigram",
        bos_id=-1,
        eos_id=-1,
        unk_id=0,
        num_threads=2,
        minloglevel=2,
    )
    return prefix.with_suffix(".model")


def marian_vocab(models, size):
    """vocab.json as MarianTokenizer reads it: </s> 0, <unk> 1, the pieces, unused pieces up to `size`, <pad> last."""
    import sentencepiece as spm

    vocab = {"</s>": 0, "<unk>": 1}
    for model in models:
        processor = spm.SentencePieceProcessor(model_file=str(model))
        for index in range(processor.get_piece_size()):
            piece = processor.id_to_piece(index)
            if piece not in vocab and piece not in ("<unk>", "<s>", "</s>"):
                vocab[piece] = len(vocab)
    while len(vocab) < size - 1:
        vocab[f"<unused{len(vocab)}>"] = len(vocab)
    vocab["<pad>"] = len(vocab)
    return vocab


def build(args):
    import torch
    import transformers
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    data = pathlib.Path(args.data)
    english, german = read_lines(data / "train.en"), read_lines(data / "train.de")
    if args.resume:  # train a built model further (a first build cut short by --minutes)
        tokenizer = MarianTokenizer.from_pretrained(args.resume)
        model = MarianMTModel.from_pretrained(args.resume)
        config = model.config
    else:
        work = pathlib.Path(tempfile.mkdtemp())
        source_spm = train_spm(english, work / "source", args.pieces)
        target_spm = train_spm(german, work / "target", args.pieces)
        vocab = marian_vocab([source_spm, target_spm], args.vocab_size)
        (work / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False, indent=1), encoding="utf-8")
        tokenizer = MarianTokenizer(
            source_spm=str(source_spm), target_spm=str(target_spm), vocab=str(work / "vocab.json"),
            source_lang="en", target_lang="de",
        )  # fmt: skip
        size = len(vocab)
        config = MarianConfig(
            vocab_size=size,
            decoder_vocab_size=size,
            d_model=512,
            encoder_layers=6,
            decoder_layers=6,
            encoder_attention_heads=8,
            decoder_attention_heads=8,
            encoder_ffn_dim=2048,
            decoder_ffn_dim=2048,
            max_position_embeddings=512,
            activation_function="swish",
            scale_embedding=True,
            pad_token_id=size - 1,
            decoder_start_token_id=size - 1,
            eos_token_id=0,
            forced_eos_token_id=0,
            share_encoder_decoder_embeddings=True,
            tie_word_embeddings=True,
            dropout=0.1,
        )
        model = MarianMTModel(config)
    print(f"parameters: {sum(p.numel() for p in model.parameters()):,}", flush=True)
    pairs = list(zip(english, german))
    random.Random(args.seed).shuffle(pairs)
    pairs = pairs[: args.pairs]
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / args.warmup))
    model.train()
    start = time.perf_counter()
    step = 0
    while step < args.steps and time.perf_counter() - start < args.minutes * 60:
        rows = random.Random(step).sample(pairs, args.batch)
        batch = tokenizer([s for s, _ in rows], text_target=[t for _, t in rows], padding=True, return_tensors="pt")
        batch["labels"][batch["labels"] == tokenizer.pad_token_id] = -100
        optimizer.zero_grad()
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % 10 == 0:
            print(f"step {step}: loss {float(loss):.3f} ({time.perf_counter() - start:.0f} s)", flush=True)
        step += 1
    model.eval()
    model.generation_config = transformers.GenerationConfig(
        bad_words_ids=[[config.pad_token_id]],
        bos_token_id=0,
        decoder_start_token_id=config.decoder_start_token_id,
        eos_token_id=0,
        forced_eos_token_id=0,
        max_length=args.max_length + 1,  # transformers counts the start token
        num_beams=4,
        pad_token_id=config.pad_token_id,
    )
    folder = pathlib.Path(args.folder)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    test = read_lines(data / "test_2016_flickr.en", 16)
    encoded = tokenizer(test, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**encoded, num_beams=1, do_sample=False)
    lengths = [int((row[1:] != config.pad_token_id).sum()) for row in out]
    for sentence in tokenizer.batch_decode(out[:4], skip_special_tokens=True):
        print(" ", sentence)
    print(json.dumps(dict(parameters=sum(p.numel() for p in model.parameters()), steps=step, loss=float(loss),
                          seconds=round(time.perf_counter() - start, 1), greedy_lengths=lengths)))  # fmt: skip


def generate(args):
    import torch
    from transformers import MarianMTModel, MarianTokenizer

    torch.set_num_threads(args.threads)
    tokenizer = MarianTokenizer.from_pretrained(args.folder)
    model = MarianMTModel.from_pretrained(args.folder).eval()
    sources = read_lines(args.sources, args.sentences)
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    batches = [[sources[i] for i in order[s : s + args.batch_size]] for s in range(0, len(order), args.batch_size)]
    options = dict(num_beams=args.beam, do_sample=False, max_length=args.max_length + 1)

    def run():
        outputs = []
        with torch.inference_mode():
            for batch in batches:
                encoded = tokenizer(batch, padding=True, return_tensors="pt")
                ids = model.generate(**encoded, **options)
                outputs.extend(tokenizer.batch_decode(ids, skip_special_tokens=True))
                for row in ids.tolist():
                    row = row[1:]
                    lengths.append(row.index(0) + 1 if 0 in row else len(row))
        return outputs

    lengths = []
    with torch.inference_mode():  # warm-up
        model.generate(**tokenizer(batches[0][:2], padding=True, return_tensors="pt"), **options)
    run_outputs = None
    runs = []
    for _ in range(args.repeats):
        lengths.clear()
        start = time.perf_counter()
        run_outputs = run()
        runs.append(time.perf_counter() - start)
    outputs = [None] * len(sources)
    for position, index in enumerate(order):
        outputs[index] = run_outputs[position]
    print(json.dumps(dict(runs=runs, outputs=outputs, mean_length=sum(lengths) / len(lengths),
                          peak_rss_mb=peak_rss_mb(), threads=torch.get_num_threads())))  # fmt: skip


def ct2(args):
    import ctranslate2

    converter = ctranslate2.converters.TransformersConverter(args.folder)
    converter.convert(args.output, quantization=None, force=True)
    print(json.dumps(dict(output=args.output, ctranslate2=ctranslate2.__version__)))


def train(args):
    """Steps per second of a plain PyTorch loop: AdamW, float32, label smoothing 0.1, the batches ours trained on."""
    import torch
    from transformers import MarianMTModel

    torch.set_num_threads(args.threads)
    model = MarianMTModel.from_pretrained(args.folder)
    model.train()  # dropout 0.1, as ours
    batches = json.loads(pathlib.Path(args.batches).read_text())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    loss_function = torch.nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=0.1)
    pad = model.config.pad_token_id
    times, losses = [], []
    for index in range(args.warmup + args.steps):
        batch = batches[index % len(batches)]
        source = torch.tensor(batch["source"])
        target_in = torch.tensor(batch["target_in"])
        labels = torch.tensor(batch["labels"])  # -100 where padded
        start = time.perf_counter()
        optimizer.zero_grad()
        logits = model(input_ids=source, attention_mask=(source != pad).long(), decoder_input_ids=target_in).logits
        loss = loss_function(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
        times.append(time.perf_counter() - start)
    print(json.dumps(dict(step_seconds=times[args.warmup :], losses=losses, peak_rss_mb=peak_rss_mb(),
                          threads=torch.get_num_threads(), torch=torch.__version__)))  # fmt: skip


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    b = commands.add_parser("build")
    b.add_argument("folder")
    b.add_argument("--data", required=True, help="multi30k task 1 folder (train.en, train.de, test_2016_flickr.en)")
    b.add_argument("--vocab-size", type=int, default=58101)
    b.add_argument("--pieces", type=int, default=8000)
    b.add_argument("--pairs", type=int, default=2000)
    b.add_argument("--batch", type=int, default=32)
    b.add_argument("--steps", type=int, default=150)
    b.add_argument("--minutes", type=float, default=15)
    b.add_argument("--learning-rate", type=float, default=5e-4)
    b.add_argument("--warmup", type=int, default=20)
    b.add_argument("--max-length", type=int, default=64)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("--resume", help="a folder built before: train its model further, write FOLDER")
    g = commands.add_parser("generate")
    g.add_argument("folder")
    g.add_argument("sources")
    g.add_argument("--sentences", type=int, default=500)
    g.add_argument("--batch-size", type=int, default=32)
    g.add_argument("--beam", type=int, default=1)
    g.add_argument("--max-length", type=int, default=64)
    g.add_argument("--repeats", type=int, default=1)
    g.add_argument("--threads", type=int, default=2)
    c = commands.add_parser("ct2")
    c.add_argument("folder")
    c.add_argument("output")
    t = commands.add_parser("train")
    t.add_argument("folder")
    t.add_argument("batches")
    t.add_argument("--steps", type=int, default=10)
    t.add_argument("--warmup", type=int, default=2)
    t.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    {"build": build, "generate": generate, "ct2": ct2, "train": train}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
