"""OPUS-MT (Marian) checkpoints in this package's terms: config, weights, tokenizers, generation settings.

The mapping of one family of checkpoints, `model_type: "marian"`; another
family (M2M100, NLLB: pre-norm, a final LayerNorm per stack, fairseq's
position table, forced language tokens) is one more module like this one,
registered in `importer.FAMILIES`.

A Marian model is the paper's Transformer: post-norm layers, sinusoidal
positions (as `[sin | cos]` halves), embeddings scaled by √d_model and tied
to the output, whose logits get a bias of their own (`final_logits_bias`).
It pads with its last id and starts decoding from that padding id; its
outputs end with `</s>`, id 0, and its sources too.
"""

import numpy as np

from keras_transformer.config import DecodingConfig, ModelConfig
from keras_transformer.tokenizers.marian import MarianTokenizer

MODEL_TYPE = "marian"
ACTIVATIONS = {"swish": "silu", "silu": "silu", "relu": "relu", "gelu": "gelu", "tanh": "tanh"}
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's default, which Marian's layers use
# Checkpoint weights that hold nothing the model needs: the fixed position tables, and copies of a shared matrix.
_REDUNDANT = ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight")


def model_config(hf_config, where="config.json"):
    """The `ModelConfig` of a Marian `config.json` (a dict); what this package cannot build is a `ValueError`."""
    get = _getter(hf_config, where)
    for encoder_key, decoder_key in (
        ("encoder_attention_heads", "decoder_attention_heads"),
        ("encoder_ffn_dim", "decoder_ffn_dim"),
    ):
        if get(encoder_key) != get(decoder_key):
            raise ValueError(
                f"{where}: {encoder_key}={get(encoder_key)} and {decoder_key}={get(decoder_key)} differ; "
                "keras-transformer's encoder and decoder layers share one size"
            )
    activation = get("activation_function", "swish")
    if activation not in ACTIVATIONS:
        raise ValueError(f"{where}: activation_function={activation!r} is not one of {sorted(ACTIVATIONS)}")
    source_vocab = get("vocab_size")
    target_vocab = hf_config.get("decoder_vocab_size") or source_vocab
    share = bool(get("share_encoder_decoder_embeddings", True))
    if share and source_vocab != target_vocab:
        raise ValueError(
            f"{where}: shared embeddings with vocab_size={source_vocab}, decoder_vocab_size={target_vocab}"
        )
    tie = bool(get("tie_word_embeddings", True))
    encoder_layers, decoder_layers = get("encoder_layers"), get("decoder_layers")
    return ModelConfig(
        source_vocab_size=source_vocab,
        target_vocab_size=target_vocab,
        num_layers=encoder_layers,
        num_decoder_layers=None if decoder_layers == encoder_layers else decoder_layers,
        d_model=get("d_model"),
        num_heads=get("encoder_attention_heads"),
        d_ff=get("encoder_ffn_dim"),
        dropout=get("dropout", 0.1),
        attention_dropout=get("attention_dropout", 0.0),
        activation_dropout=get("activation_dropout", 0.0),
        max_length=get("max_position_embeddings"),
        share_embeddings=share,
        tie_output_embedding=tie,
        activation=ACTIVATIONS[activation],
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        position_layout="concatenated",
        scale_embeddings=bool(get("scale_embedding", False)),
        output_bias=tie,
        pad_id=get("pad_token_id"),
        start_id=get("decoder_start_token_id"),
        end_id=_single(get("eos_token_id"), "eos_token_id", where),
    ).check()


def decoding_config(generation, config):
    """The checkpoint's generation settings (`generation_config.json`, a dict) as a `DecodingConfig`.

    transformers' beam search: scores normalized by `length ** length_penalty`,
    searched until no live beam can still win (`early_stopping=False`, its
    default) or until `num_beams` hypotheses ended (`True`), END forced at the
    last step (`forced_eos_token_id`), the `bad_words_ids` of one token never
    generated, and log-probabilities over the whole vocabulary.
    `max_length` counts the decoder's start token there: here it counts the
    output tokens, END included, so it is one less.
    """
    banned = []
    for ids in generation.get("bad_words_ids") or []:
        if not (isinstance(ids, list) and len(ids) == 1 and isinstance(ids[0], int)):
            raise ValueError(
                f"generation_config.json: bad_words_ids {ids!r} is a sequence of tokens; keras-transformer "
                "bans single tokens only"
            )
        banned.append(ids[0])
    early_stopping = generation.get("early_stopping", False)
    if early_stopping not in (True, False):
        raise ValueError(f"generation_config.json: early_stopping={early_stopping!r} is not supported (True or False)")
    forced_end = generation.get("forced_eos_token_id")
    max_length = generation.get("max_length") or config.max_length
    return DecodingConfig(
        beam_size=int(generation.get("num_beams") or 1),
        alpha=float(generation.get("length_penalty", 1.0)),
        max_length=max(1, min(int(max_length) - 1, config.max_length)),
        normalization="length",
        stopping="beams_ended" if early_stopping else "cannot_improve",
        force_end=forced_end is not None and _single(forced_end, "forced_eos_token_id", "") == config.end_id,
        banned_ids=tuple(banned),
        softmax_over="vocabulary",
    )


def tokenizers(checkpoint, config):
    """`(source, target)` `MarianTokenizer`s of the checkpoint, and the file names each was read from.

    A vocabulary that does not give every embedding row one piece (its ids
    exactly 0 to size - 1) is a `ValueError` naming it.
    """
    tokenizer_config = checkpoint.json("tokenizer_config.json", required=False)
    separate = bool(tokenizer_config.get("separate_vocabs")) or (checkpoint.folder / "target_vocab.json").is_file()
    target_vocab = "target_vocab.json" if separate else "vocab.json"
    sides = (
        ("source.spm", "vocab.json", config.source_vocab_size),
        ("target.spm", target_vocab, config.target_vocab_size),
    )
    made = []
    for spm_name, vocab_name, size in sides:
        tokenizer = MarianTokenizer.from_files(checkpoint.path(spm_name), checkpoint.path(vocab_name))
        ids = sorted(tokenizer.vocab.values())
        if ids != list(range(size)):
            raise ValueError(
                f"{checkpoint.folder / vocab_name} does not cover the model's {size} embedding rows: its "
                f"{len(ids)} ids run from {ids[0]} to {ids[-1]}"
                + (" with gaps or repeats" if len(set(ids)) != len(ids) or ids[-1] - ids[0] + 1 != len(ids) else "")
            )
        made.append((tokenizer, spm_name, vocab_name))
    return made


def assign_weights(model, weights):
    """Sets `model`'s weights from a Marian checkpoint's `weights` ({PyTorch name: array}).

    Every weight of the model is set exactly once; a weight the checkpoint
    lacks, or a weight of the checkpoint that this mapping does not know, is a
    `ValueError` naming it.
    """
    config = model.config
    used, values = set(), {}

    def take(name):
        if name not in weights:
            raise ValueError(f"the checkpoint has no weight {name!r}, which a Marian model of this config holds")
        used.add(name)
        return weights[name]

    _embeddings(model, config, weights, take, values)
    for prefix, layers in (("model.encoder", model.encoder_layers), ("model.decoder", model.decoder_layers)):
        for index, layer in enumerate(layers):
            _layer(layer, f"{prefix}.layers.{index}", take, values, config)
    unknown = sorted(set(weights) - used - set(_REDUNDANT) - _copies_of_shared(weights, config))
    if unknown:
        raise ValueError(f"the checkpoint holds weights this Marian mapping does not know: {unknown[:5]}")
    missing = [w.path for w in model.weights if w.path not in values]
    if missing:
        raise ValueError(f"no checkpoint weight was found for {missing[:5]}")
    for weight in model.weights:
        weight.assign(values[weight.path].reshape(weight.shape).astype(np.float32))


def _embeddings(model, config, weights, take, values):
    if config.share_embeddings:
        shared = "model.shared.weight" if "model.shared.weight" in weights else "model.encoder.embed_tokens.weight"
        values[model.encoder_embedding.embeddings.path] = take(shared)
    else:
        values[model.encoder_embedding.embeddings.path] = take("model.encoder.embed_tokens.weight")
        decoder = "model.decoder.embed_tokens.weight" if "model.decoder.embed_tokens.weight" in weights else None
        values[model.decoder_embedding.embeddings.path] = take(decoder or "lm_head.weight")
    bias = take("final_logits_bias").reshape(-1) if "final_logits_bias" in weights else None
    if config.tie_output_embedding:
        values[model.decoder_embedding.logits_bias.path] = (
            bias if bias is not None else np.zeros(config.target_vocab_size)
        )
    else:
        output = model.output_layer
        values[output.kernel.path] = take("lm_head.weight").T
        values[output.bias.path] = bias if bias is not None else np.zeros(config.target_vocab_size)


def _copies_of_shared(weights, config):
    """Names under which a checkpoint may repeat a tied matrix (transformers saves each tie once, older files not)."""
    copies = {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "model.shared.weight"}
    if config.tie_output_embedding:
        copies.add("lm_head.weight")
    return copies & set(weights)


_ATTENTION = {"query": "q_proj", "key": "k_proj", "value": "v_proj"}


def _layer(layer, prefix, take, values, config):
    heads, key_dim = config.num_heads, config.d_model // config.num_heads
    blocks = [("self_attention", "self_attn", "self_attention_norm", "self_attn_layer_norm")]
    if hasattr(layer, "cross_attention"):
        blocks.append(("cross_attention", "encoder_attn", "cross_attention_norm", "encoder_attn_layer_norm"))
    for ours, theirs, our_norm, their_norm in blocks:
        attention = getattr(layer, ours)
        for part, name in _ATTENTION.items():
            dense = getattr(attention, f"{part}_dense")
            values[dense.kernel.path] = take(f"{prefix}.{theirs}.{name}.weight").T.reshape(-1, heads, key_dim)
            values[dense.bias.path] = take(f"{prefix}.{theirs}.{name}.bias").reshape(heads, key_dim)
        output = attention.output_dense
        values[output.kernel.path] = take(f"{prefix}.{theirs}.out_proj.weight").T.reshape(heads, key_dim, -1)
        values[output.bias.path] = take(f"{prefix}.{theirs}.out_proj.bias")
        _norm(getattr(layer, our_norm), f"{prefix}.{their_norm}", take, values)
    ffn = layer.ffn
    for ours, theirs in (("inner_dense", "fc1"), ("output_dense", "fc2")):
        dense = getattr(ffn, ours)
        values[dense.kernel.path] = take(f"{prefix}.{theirs}.weight").T
        values[dense.bias.path] = take(f"{prefix}.{theirs}.bias")
    _norm(layer.ffn_norm, f"{prefix}.final_layer_norm", take, values)


def _norm(norm, prefix, take, values):
    values[norm.gamma.path] = take(f"{prefix}.weight")
    values[norm.beta.path] = take(f"{prefix}.bias")


def _getter(hf_config, where):
    def get(key, default=None):
        value = hf_config.get(key, default)
        if value is None:
            raise ValueError(f"{where} has no `{key}`, which a Marian config holds")
        return value

    return get


def _single(value, name, where):
    if isinstance(value, list):
        if len(value) != 1:
            raise ValueError(f"{where}: {name}={value!r}: keras-transformer supports one id")
        value = value[0]
    return value
