"""Decoding throughput: sentences/s of greedy and beam search, cached vs uncached.

Translates Multi30k test (or val) sentences in batches of 100, up to 64
generated tokens, with each decoder compiled by XLA (`compile_search`):
the cached decoders (one decoder step per token over the key/value cache)
and the uncached baselines (the whole model re-run on the whole target
buffer at every step). Sources are sorted by length and all padded to
the longest one, rounded up to a multiple of 16 (one shape, one XLA
program per decoder). One run: the first batch of each decoder (XLA compile
included) is reported apart, the rest give the steady rate. Prints the
machine and the configuration first. Not run by CI.

The model is a run directory's (`--model`) or, by default, an *untrained*
11.7M-parameter model shaped like the multi30k-en-de preset with separate
source/target embeddings and output layer (3+3 layers, d_model 256, 4
heads, d_ff 1024, vocab 8000). `--full-length` (the default for the
untrained model) makes every decoder run all `--max-length` steps (END is
never honoured), so all competitors do the same work, the worst case.

keras-hub (when installed): the same shape built from its layers
(`TokenAndPositionEmbedding`, `TransformerEncoder`, `TransformerDecoder`
with its self- and cross-attention caches seeded the way its BART model
does, a `Dense` head), decoded by `keras_hub.samplers.GreedySampler` on the
same padded batches, as a `tf.function` with XLA and without (on this CPU
its cached loop ran 3.6x slower under XLA than as a plain graph).

Example:

    python benchmarks/decode_throughput.py --sentences 1000 --uncached-sentences 200
    python benchmarks/decode_throughput.py --model runs/multi30k-en-de   # a trained model, early stop
"""

import argparse
import os
import pathlib
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402
from machine import machine_line  # noqa: E402

from keras_transformer import (
    build_transformer,
    decoding,
    runs,  # noqa: E402
)
from keras_transformer.datasets.corpora import resolve_dir  # noqa: E402
from keras_transformer.tokenizers import SubwordTokenizer  # noqa: E402

SPLITS = {"test": "test_2016_flickr.en", "val": "val.en"}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data-dir", help="a multi30k_task1 folder or its parent (default: $KERAS_TRANSFORMER_DATA_DIR, else download)"
    )
    parser.add_argument("--split", default="test", choices=sorted(SPLITS))
    parser.add_argument("--model", help="a training run directory (default: an untrained 11.7M model)")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument(
        "--uncached-sentences", type=int, default=1000, help="sentences for the (slow) uncached baselines; 0 skips them"
    )
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--max-length", type=int, default=64, help="tokens generated at most")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.6)
    parser.add_argument(
        "--full-length",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="never stop at END (default: on for the untrained model)",
    )
    parser.add_argument("--no-keras-hub", action="store_true", help="skip the keras-hub decoder")
    parser.add_argument(
        "--keras-hub-modes", default="graph,xla", help="keras-hub's loop as a plain tf.function graph and/or with XLA"
    )
    args = parser.parse_args()
    if args.full_length is None:
        args.full_length = args.model is None
    return args


def model_and_tokenizer(args, sentences):
    if args.model:
        model = keras.saving.load_model(pathlib.Path(args.model) / runs.MODEL, compile=False)
        tokenizer = SubwordTokenizer.load(pathlib.Path(args.model) / runs.SOURCE_TOKENIZER)
        return model, tokenizer, f"trained run {args.model}"
    keras.utils.set_random_seed(0)  # before any tokenizer exists (tensorflow/text#570)
    train = (resolve_dir("multi30k-en-de", args.data_dir) / "train.en").read_text(encoding="utf-8").splitlines()
    tokenizer = SubwordTokenizer.train(train, vocab_size=8000)
    model = build_transformer(
        8000, 8000, num_layers=3, d_model=256, num_heads=4, d_ff=1024, max_length=max(64, args.max_length)
    )
    return model, tokenizer, "untrained, separate embeddings and output layer"


def batches(tokenizer, sentences, batch_size, max_source_length=64):
    """Length-sorted batches of ids, all of one shape (one XLA program per decoder).

    Every batch is padded to the longest source (rounded up to 16, at most
    `max_source_length`) and to `batch_size` rows (extra rows are empty and
    decode to nothing).
    """
    ids = tokenizer.tokenize(tf.constant(sentences))[:, :max_source_length]
    width = min(-(-int(tf.reduce_max(ids.row_lengths())) // 16) * 16, max_source_length)
    order = np.argsort(ids.row_lengths().numpy(), kind="stable")
    for start in range(0, len(order), batch_size):
        batch = tf.gather(ids, order[start : start + batch_size]).to_tensor(0, shape=[None, width])
        yield batch, tf.pad(batch, [[0, batch_size - batch.shape[0]], [0, 0]])


def measure(decode, source_batches):
    """(compile seconds, total seconds, sentences, generated tokens) over all batches.

    The first batch is decoded once beforehand to compile (every batch has
    its shape), then every batch is timed.
    """
    source_batches = list(source_batches)
    start = time.perf_counter()
    decode(source_batches[0][1]).numpy()
    compile_seconds = time.perf_counter() - start
    total, sentences, tokens = 0.0, 0, 0
    for real, source in source_batches:
        start = time.perf_counter()
        output = decode(source).numpy()[: real.shape[0]]
        total += time.perf_counter() - start
        tokens += int(np.count_nonzero(output))
        sentences += output.shape[0]
    return compile_seconds, total, sentences, tokens


def best_ids(model, search, max_length, cached=True):
    """`decode(source_ids) -> ids`: the best hypothesis of `search`, compiled (`decoding.compile_search`)."""
    decode = decoding.compile_search(model, search, max_length=max_length, cached=cached)
    return lambda source_ids: decode(source_ids).best().ids


def keras_hub_greedy(
    max_length,
    full_length,
    vocab_size=8000,
    d_model=256,
    num_heads=4,
    d_ff=1024,
    num_layers=3,
    start_id=decoding.START_ID,
    end_id=decoding.END_ID,
):
    """(decode(source_ids) -> ids, parameter count) for keras-hub's layers and `GreedySampler`."""
    import keras_hub

    # No `set_random_seed` here: it would drop the tokenizer's resource (tensorflow/text#570).
    common = dict(intermediate_dim=d_ff, num_heads=num_heads, dropout=0.1, layer_norm_epsilon=1e-6)
    positions = max(64, max_length + 1)
    source_embedding = keras_hub.layers.TokenAndPositionEmbedding(vocab_size, positions, d_model)
    target_embedding = keras_hub.layers.TokenAndPositionEmbedding(vocab_size, positions, d_model)
    encoders = [keras_hub.layers.TransformerEncoder(**common) for _ in range(num_layers)]
    decoders = [keras_hub.layers.TransformerDecoder(**common) for _ in range(num_layers)]
    head = keras.layers.Dense(vocab_size)
    key_dim = d_model // num_heads
    sampler = keras_hub.samplers.GreedySampler()

    def encode(source_ids):
        mask = ops.not_equal(source_ids, 0)
        x = source_embedding(source_ids)
        for layer in encoders:
            x = layer(x, padding_mask=mask)
        return x, mask

    def decode(source_ids):
        memory, mask = encode(source_ids)
        batch, source_length = ops.shape(source_ids)[0], ops.shape(source_ids)[1]
        prompt = ops.concatenate(
            [ops.full((batch, 1), start_id, "int32"), ops.zeros((batch, max_length), "int32")], axis=1
        )
        # Seed both caches with one pass over the prompt (as keras-hub's BART does).
        x = target_embedding(prompt)
        self_caches, cross_caches = [], []
        for layer in decoders:
            x, self_cache, cross_cache = layer(
                x,
                memory,
                encoder_padding_mask=mask,
                self_attention_cache=ops.zeros((batch, 2, max_length + 1, num_heads, key_dim)),
                self_attention_cache_update_index=0,
                cross_attention_cache=ops.zeros((batch, 2, source_length, num_heads, key_dim)),
                cross_attention_cache_update_index=0,
            )
            self_caches.append(self_cache)
            cross_caches.append(cross_cache)

        def next_token_logits(prompt, cache, index):
            self_caches, cross_caches = cache
            x = target_embedding(prompt[:, index - 1 : index], start_index=index - 1)
            updated = []
            for layer, self_cache, cross_cache in zip(decoders, self_caches, cross_caches):
                x, self_cache, _ = layer(
                    x,
                    memory,
                    encoder_padding_mask=mask,
                    self_attention_cache=self_cache,
                    self_attention_cache_update_index=index - 1,
                    cross_attention_cache=cross_cache,
                    cross_attention_cache_update_index=None,
                )
                updated.append(self_cache)
            return head(x)[:, 0], None, (tuple(updated), cross_caches)

        mask_prompt = ops.concatenate([ops.ones((batch, 1), "bool"), ops.zeros((batch, max_length), "bool")], axis=1)
        ids = sampler(
            next_token_logits,
            prompt,
            cache=(tuple(self_caches), tuple(cross_caches)),
            index=1,
            mask=mask_prompt,
            stop_token_ids=None if full_length else (end_id,),
        )
        return ids[:, 1:]

    source = ops.zeros((2, 16), "int32")
    memory, mask = encode(source)  # builds every layer once
    y = target_embedding(source)
    for layer in decoders:
        y = layer(y, memory, encoder_padding_mask=mask)
    head(y)
    layers = [source_embedding, target_embedding, head] + encoders + decoders
    return decode, sum(layer.count_params() for layer in layers)


def main():
    args = parse_args()
    path = resolve_dir("multi30k-en-de", args.data_dir) / SPLITS[args.split]
    sentences = path.read_text(encoding="utf-8").splitlines()[: args.sentences]
    model, tokenizer, kind = model_and_tokenizer(args, sentences)
    print(f"machine: {machine_line()}")
    print(f"model: {model.count_params() / 1e6:.1f}M parameters, {kind}")
    stop = "never stops at END (all steps)" if args.full_length else "stops when every row has ended"
    print(
        f"data: {len(sentences)} sentences of {path.name}, batches of {args.batch_size}, "
        f"max {args.max_length} generated tokens, {stop}, beam {args.beam} alpha {args.alpha}, XLA"
    )
    never = {"end_id": -1} if args.full_length else {}
    greedy = decoding.GreedySearch(**never)
    beam = decoding.BeamSearch(args.beam, alpha=args.alpha, **never)
    configs = [
        ("ours", "greedy", "cached", lambda: best_ids(model, greedy, args.max_length)),
        ("ours", f"beam-{args.beam}", "cached", lambda: best_ids(model, beam, args.max_length)),
        ("ours", "greedy", "uncached", lambda: best_ids(model, greedy, args.max_length, cached=False)),
        ("ours", f"beam-{args.beam}", "uncached", lambda: best_ids(model, beam, args.max_length, cached=False)),
    ]
    if not args.no_keras_hub:
        try:
            import keras_hub  # noqa: F401
        except ImportError:
            print("Skipping keras-hub: `keras_hub` is not installed.")
        else:
            decode, count = keras_hub_greedy(args.max_length, args.full_length)
            print(f"keras-hub model: {count / 1e6:.1f}M parameters, untrained, GreedySampler")
            for mode in reversed(args.keras_hub_modes.split(",")):
                compiled = tf.function(decode, jit_compile=mode == "xla", reduce_retracing=True)
                configs.insert(1, (f"keras-hub ({mode})", "greedy", "cached", lambda f=compiled: f))
    print(
        f"{'decoder':<17} {'search':<8} {'cache':<9} {'sentences':>9} {'compile s':>10} {'total s':>8} "
        f"{'sent/s':>8} {'tokens/s':>9}"
    )
    for who, name, cache, make in configs:
        count = len(sentences) if cache == "cached" else min(args.uncached_sentences, len(sentences))
        if count == 0:
            continue
        compile_seconds, total, done, tokens = measure(make(), batches(tokenizer, sentences[:count], args.batch_size))
        print(
            f"{who:<17} {name:<8} {cache:<9} {done:>9} {compile_seconds:>10.1f} {total:>8.2f} "
            f"{done / total:>8.1f} {tokens / total:>9.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
