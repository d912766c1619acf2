"""The PyTorch side of `nllb_real_size.py`: run by an interpreter with torch, transformers and ctranslate2.

CI installs none of them; this file is never imported by the package or the tests.
Subcommands (each prints one JSON line last, which `nllb_real_size.py` reads):

- `build FOLDER --text FILE...`: a random checkpoint of nllb-200-distilled-600M's
  shape, as a Hugging Face repository is laid out: `M2M100ForConditionalGeneration`
  (d_model 1024, 12+12 layers, 16 heads, ffn 4096, 256,206 embedding rows,
  1024 positions, √d_model scale, `<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3,
  decoding from `</s>`), `save_pretrained` in safetensors with the real
  checkpoint's config.json and generation_config.json; and an NLLB tokenizer of
  the real size: a SentencePiece BPE model trained on the `--text` files,
  its vocabulary grown to 256,000 pieces with made-up ones (each the
  concatenation of two earlier pieces, so that every piece has its merge, as
  in a trained BPE vocabulary), converted by transformers' `NllbTokenizer`
  with the 202 language codes into `tokenizer.json` and
  `tokenizer_config.json` (256,204 ids, as the real one).
  `--end-scale` multiplies `</s>`'s embedding row (tied: its output row too),
  so that random weights end their outputs at lengths that differ.
- `ct2 FOLDER OUTPUT`: CTranslate2's own `TransformersConverter`, float32.
- `serve-transformers FOLDER` and `serve-ct2 FOLDER CT2`: a worker that loads
  transformers' model (or CTranslate2's `Translator`) once, then answers one
  JSON request a line on stdin (`{"search": "greedy"|"beam", ...}`) with one
  JSON line on stdout prefixed `@@ `: the seconds, the generated ids and the
  strings. `nllb_real_size.py` drives these workers and its own side by side.
"""

import argparse
import json
import os
import pathlib
import random
import resource
import sys
import tempfile
import time

PIECES = 256_000  # SentencePiece pieces of NLLB-200's model, <unk> <s> </s> included
VOCAB_SIZE = 256_206  # nllb-200-distilled-600M's embedding rows (its tokenizer gives 256,204 ids)


def peak_rss_mb():
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def emit(result):
    """One answer on stdout, prefixed so that the reader skips anything else a library prints."""
    print("@@ " + json.dumps(result), flush=True)


# ---------------------------------------------------------------- the checkpoint


def train_spm(text_files, folder, vocab_size, lines):
    import sentencepiece as spm

    texts = []
    for path in text_files:
        texts += [line.strip() for line in pathlib.Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    random.Random(0).shuffle(texts)
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(texts[:lines]) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(folder / "spm"),
        vocab_size=vocab_size,
        model_type="bpe",
        character_coverage=0.9995,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        num_threads=2,
        minloglevel=2,
    )
    return folder / "spm.model"


def grown(spm_model, pieces, seed=0):
    """The SentencePiece model with made-up pieces appended up to `pieces`, serialized.

    Each new piece joins two pieces already there (the right one not
    starting a word), so each is one merge away from two others, as in a
    trained BPE vocabulary; scores fall below every trained piece's, so
    SentencePiece merges them last.
    """
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    proto = model_pb2.ModelProto()
    proto.ParseFromString(pathlib.Path(spm_model).read_bytes())
    normal = model_pb2.ModelProto.SentencePiece.NORMAL
    words = [p.piece for p in proto.pieces if p.type == normal]
    seen = {p.piece for p in proto.pieces}
    starts = [w for w in words if w.startswith("▁")]
    inner = [w for w in words if not w.startswith("▁")]
    score = min(p.score for p in proto.pieces) - 1.0
    rng = random.Random(seed)
    while len(proto.pieces) < pieces:
        left = rng.choice(starts if rng.random() < 0.6 else inner)
        piece = left + rng.choice(inner)
        if piece in seen or len(piece) > 16:
            continue
        seen.add(piece)
        entry = proto.pieces.add()
        entry.piece, entry.score, entry.type = piece, score, normal
        score -= 1.0
        (starts if piece.startswith("▁") else inner).append(piece)
    return proto.SerializeToString()


def build_tokenizer(args, work):
    from transformers import NllbTokenizer
    from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES

    spm_model = train_spm(args.text, work, args.trained_pieces, args.spm_lines)
    folder = work / "nllb-spm"
    folder.mkdir()
    (folder / "sentencepiece.bpe.model").write_bytes(grown(spm_model, PIECES))
    start = time.perf_counter()
    tokenizer = NllbTokenizer.from_pretrained(
        folder,
        src_lang=args.source_lang,
        tgt_lang=args.target_lang,
        additional_special_tokens=list(FAIRSEQ_LANGUAGE_CODES),
        model_max_length=1024,
    )
    print(f"tokenizer: {len(tokenizer):,} ids, converted in {time.perf_counter() - start:.0f} s", flush=True)
    return tokenizer


def build(args):
    import torch
    import transformers
    from transformers import M2M100Config, M2M100ForConditionalGeneration

    torch.set_num_threads(args.threads)
    folder = pathlib.Path(args.folder)
    work = pathlib.Path(tempfile.mkdtemp())
    tokenizer = build_tokenizer(args, work)
    config = M2M100Config(  # nllb-200-distilled-600M's config.json, field by field
        vocab_size=VOCAB_SIZE,
        d_model=1024,
        encoder_layers=12,
        decoder_layers=12,
        encoder_attention_heads=16,
        decoder_attention_heads=16,
        encoder_ffn_dim=4096,
        decoder_ffn_dim=4096,
        max_position_embeddings=1024,
        activation_function="relu",
        activation_dropout=0.0,
        attention_dropout=0.1,
        dropout=0.1,
        encoder_layerdrop=0,
        decoder_layerdrop=0,
        init_std=0.02,
        scale_embedding=True,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
        tokenizer_class="NllbTokenizer",
    )
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    model = M2M100ForConditionalGeneration(config).eval()
    with torch.no_grad():  # tied: the input and output row of </s> both
        model.model.shared.weight[config.eos_token_id] *= args.end_scale
    model.generation_config = transformers.GenerationConfig(
        bos_token_id=0, decoder_start_token_id=2, eos_token_id=2, max_length=200, pad_token_id=1
    )
    parameters = sum(p.numel() for p in model.parameters())
    print(f"model: {parameters:,} parameters, built in {time.perf_counter() - start:.0f} s", flush=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    lengths = probe(model, tokenizer, args)
    print(json.dumps(dict(parameters=parameters, tokenizer_ids=len(tokenizer), greedy_lengths=lengths,
                          transformers=transformers.__version__, torch=torch.__version__)))  # fmt: skip


def probe(model, tokenizer, args):
    """Greedy output lengths of a few sentences: random weights should not all run to the limit."""
    import torch

    sentences = read_lines(args.probe, 8) if args.probe else ["A dog runs in the park.", "Two men talk."]
    tokenizer.src_lang = args.source_lang
    encoded = tokenizer(sentences, padding=True, return_tensors="pt")
    forced = tokenizer.convert_tokens_to_ids(args.target_lang)
    with torch.inference_mode():
        out = model.generate(**encoded, num_beams=1, do_sample=False, max_new_tokens=64, forced_bos_token_id=forced)
    return [generated_length(row, model.config) for row in out.tolist()]


def generated_length(row, config):
    """Tokens generated after the decoder's start: the language token and END included, no padding."""
    row = row[1:]
    return row.index(config.eos_token_id) + 1 if config.eos_token_id in row else len(row)


def read_lines(path, count=None):
    lines = pathlib.Path(path).read_text(encoding="utf-8").splitlines()
    return lines[:count] if count else lines


def ct2(args):
    import ctranslate2

    start = time.perf_counter()
    converter = ctranslate2.converters.TransformersConverter(args.folder)
    converter.convert(args.output, quantization=None, force=True)
    print(json.dumps(dict(output=args.output, ctranslate2=ctranslate2.__version__,
                          seconds=round(time.perf_counter() - start, 1), peak_rss_mb=peak_rss_mb())))  # fmt: skip


# ---------------------------------------------------------------- workers


def batches_of(sentences, batch_size):
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    return order, [[sentences[i] for i in order[s : s + batch_size]] for s in range(0, len(order), batch_size)]


def unsort(order, outputs):
    result = [None] * len(order)
    for position, index in enumerate(order):
        result[index] = outputs[position]
    return result


def serve(decode, load_seconds, extra):
    """Answers requests on stdin until EOF: `{"search", "beam", "max_new_tokens", "sentences", "batch_size"}`."""
    emit(dict(ready=True, load_seconds=load_seconds, peak_rss_mb=peak_rss_mb(), **extra))
    for line in sys.stdin:
        request = json.loads(line)
        order, batches = batches_of(request["sentences"], request["batch_size"])
        start = time.perf_counter()
        ids, strings = decode(batches, request["beam"], request["max_new_tokens"])
        seconds = time.perf_counter() - start
        emit(dict(seconds=seconds, ids=unsort(order, ids), strings=unsort(order, strings), peak_rss_mb=peak_rss_mb()))


def serve_transformers(args):
    import torch
    import transformers
    from transformers import AutoTokenizer, M2M100ForConditionalGeneration

    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(args.folder, src_lang=args.source_lang)
    model = M2M100ForConditionalGeneration.from_pretrained(args.folder).eval()
    forced = tokenizer.convert_tokens_to_ids(args.target_lang)
    load_seconds = time.perf_counter() - start
    config = model.config

    def decode(batches, beam, max_new_tokens):
        ids, strings = [], []
        with torch.inference_mode():
            for batch in batches:
                encoded = tokenizer(batch, padding=True, return_tensors="pt")
                out = model.generate(
                    **encoded,
                    num_beams=beam,
                    do_sample=False,
                    max_new_tokens=max_new_tokens,
                    forced_bos_token_id=forced,
                    length_penalty=1.0,
                )
                for row in out.tolist():
                    ids.append(row[1 : 1 + generated_length(row, config)])
                strings += tokenizer.batch_decode(out, skip_special_tokens=True)
        return ids, strings

    extra = dict(threads=torch.get_num_threads(), torch=torch.__version__, transformers=transformers.__version__)
    serve(decode, load_seconds, extra)


def serve_ct2(args):
    import ctranslate2
    from transformers import AutoTokenizer

    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(args.folder, src_lang=args.source_lang)
    translator = ctranslate2.Translator(
        args.ct2, device="cpu", compute_type="float32", inter_threads=1, intra_threads=args.threads
    )
    load_seconds = time.perf_counter() - start
    end_id = tokenizer.convert_tokens_to_ids("</s>")

    def decode(batches, beam, max_new_tokens):
        ids, strings = [], []
        for batch in batches:
            tokens = [tokenizer.convert_ids_to_tokens(tokenizer(s)["input_ids"]) for s in batch]
            results = translator.translate_batch(
                tokens,
                target_prefix=[[args.target_lang]] * len(batch),
                beam_size=beam,
                max_decoding_length=max_new_tokens,  # counts the prefix, as max_new_tokens counts the forced BOS
                length_penalty=1.0,
                max_batch_size=len(batch),
                return_end_token=True,
            )
            for result in results:
                row = tokenizer.convert_tokens_to_ids(result.hypotheses[0])
                ids.append(row)
                strings.append(tokenizer.decode([i for i in row if i != end_id], skip_special_tokens=True))
        return ids, strings

    serve(decode, load_seconds, dict(ctranslate2=ctranslate2.__version__, threads=args.threads))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    b = commands.add_parser("build")
    b.add_argument("folder")
    b.add_argument("--text", nargs="+", required=True, help="text files to train the SentencePiece model on")
    b.add_argument("--probe", help="a file of sentences to check greedy lengths on (the first 8)")
    b.add_argument("--trained-pieces", type=int, default=16000, help="pieces SentencePiece learns before growing")
    b.add_argument("--spm-lines", type=int, default=200_000)
    b.add_argument("--end-scale", type=float, default=1.0)
    b.add_argument("--seed", type=int, default=0)
    c = commands.add_parser("ct2")
    c.add_argument("folder")
    c.add_argument("output")
    t = commands.add_parser("serve-transformers")
    t.add_argument("folder")
    s = commands.add_parser("serve-ct2")
    s.add_argument("folder")
    s.add_argument("ct2")
    for p in (b, t, s):
        p.add_argument("--source-lang", default="eng_Latn")
        p.add_argument("--target-lang", default="fra_Latn")
        p.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    handlers = {"build": build, "ct2": ct2, "serve-transformers": serve_transformers, "serve-ct2": serve_ct2}
    handlers[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
