"""`serve`'s warm-up: the decoding programs of the first requests, compiled before the server listens.

A SavedModel's XLA decoder compiles one program per shape of each decoding
signature: batches are padded to a power of two, sources to a multiple of
16 tokens (`token_ids.SOURCE_BUCKET`). A compile takes seconds, and every
shape is a grid: on a tiny NLLB-200 model of 1,024 positions, 64 source
buckets x 6 batch sizes x 2 signatures, which was still compiling after
5 minutes at 2.85 GB when the warm-up compiled them all. So the warm-up
compiles what the first requests need, one sentence of the shortest
bucket for each decoding signature (an idle server decodes a request at
once, alone); any other shape compiles when it is first asked for, once,
and the persistent compilation cache (`keras_transformer.compile_cache`)
keeps it for the next start. `every_shape=True` compiles the whole grid
before listening, as `serve --warmup-all` asks. Each call that ends is
reported to `progress`.

Example:

>>> model = ServedModel("saved_models/en-de-export")  # doctest: +SKIP
>>> warm_up(model, 32, progress=print)  # doctest: +SKIP
warmed up 1 of 3: serving_default, batch 1, sources up to 16 tokens, in 4.1 s
...
3
"""

import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

from keras_transformer.serving.signatures import CONTROLLED
from keras_transformer.translators.token_ids import SOURCE_BUCKET

WARMED_SIGNATURES = ("serving_default", "greedy", "nbest")  # XLA decoders: one program per shape
WORKERS = 4  # compiles side by side at most (each holds its own memory while it compiles)


def warm_up(model, max_batch_size, every_shape=False, workers=None, progress=None):
    """Runs `model`'s warm-up calls (`calls`), `workers` at a time; returns how many ran.

    `workers` defaults to one per CPU core, at most `WORKERS`: an XLA
    compile is mostly one thread's work. `progress(line)` is told of each
    call as it ends.
    """
    planned = calls(model, max_batch_size, every_shape)
    workers = workers or min(os.cpu_count() or 1, WORKERS)
    started = time.perf_counter()
    with ThreadPoolExecutor(workers, thread_name_prefix="warm-up") as pool:
        futures = {pool.submit(model.run, signature, inputs): label for signature, inputs, label in planned}
        for done, future in enumerate(as_completed(futures), 1):
            future.result()
            if progress is not None:
                seconds = time.perf_counter() - started
                progress(f"warmed up {done} of {len(planned)}: {futures[future]}, in {seconds:.1f} s")
    return len(planned)


def calls(model, max_batch_size, every_shape=False):
    """`(signature, inputs, label)` of each warm-up call of `model` (a `signatures.ServedModel`), first ones first.

    The first requests' shapes: one sentence of the shortest source bucket,
    for each decoding signature; with `every_shape`, each power-of-two batch
    up to `max_batch_size` (and that size) at each source bucket too.
    """
    sizes = batch_sizes(max_batch_size) if every_shape else [1]
    buckets = bucket_sentences(model) if every_shape else [(SOURCE_BUCKET, b"a")]
    planned = []
    for bucket, sentence in buckets:
        for size in sizes:
            for signature in warmed_signatures(model):
                label = f"{signature}, batch {size}, sources up to {bucket} tokens"
                planned.append((*warm_up_call(model, signature, [sentence] * size), label))
    return planned


def batch_sizes(max_batch_size):
    """The powers of two up to `max_batch_size`, and that size.

    Example:

    >>> batch_sizes(6)
    [1, 2, 4, 6]
    """
    sizes = [1 << n for n in range(max_batch_size.bit_length()) if 1 << n <= max_batch_size]
    return sizes + [max_batch_size] if sizes[-1] < max_batch_size else sizes


def warmed_signatures(model):
    """The decoding signatures that take sentences alone; those with controls where requests must name a target.

    A multilingual model served without a default target language
    answers only requests that name one: its signatures with controls are
    the ones to compile.
    """
    plain = [
        signature
        for signature in WARMED_SIGNATURES
        if signature in model.functions and list(model.input_specs[signature]) == ["sentences"]
    ]
    if model.languages.codes and model.languages.target_lang is None:
        return [CONTROLLED[name] for name in plain if CONTROLLED.get(name) in model.functions]
    return plain


def warm_up_call(model, signature, sentences):
    """`(signature, inputs)` of one warm-up call: `sentences`, and a target language where one must be named."""
    inputs = {"sentences": sentences}
    if signature in CONTROLLED.values():
        count = len(sentences)
        target = model.languages.codes[0].encode("utf-8") if model.languages.codes else b""
        inputs.update(source_lang=[b""] * count, target_lang=[target] * count, target_prefix=[b""] * count)
    return signature, inputs


def bucket_sentences(model):
    """`(bucket, sentence)`: one sentence per source-length bucket, shortest first (`every_shape`'s).

    Found with the model's `source_lengths` function where it has one (this
    package's exports), else only the shortest bucket.
    """
    import tensorflow as tf

    source_lengths = getattr(model.module, "source_lengths", None)
    limit = getattr(model.module, "max_source_length", None)
    if source_lengths is None or limit is None:
        return [(SOURCE_BUCKET, b"a")]
    limit = int(limit.numpy())
    candidates = [" ".join(["a"] * words) for words in range(1, 2 * limit + 2)]
    lengths = source_lengths(tf.constant(candidates)).numpy()
    chosen = {}
    for sentence, length in zip(candidates, lengths):
        chosen.setdefault(-(-min(int(length), limit) // SOURCE_BUCKET), sentence.encode())
    return [(min(key * SOURCE_BUCKET, limit), chosen[key]) for key in sorted(chosen)]
