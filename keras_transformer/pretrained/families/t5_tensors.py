"""Which tensor of a T5-family checkpoint (T5, flan-T5, mT5, MADLAD) is which weight: both directions read this table.

transformers' `T5ForConditionalGeneration` names each block's sublayers by
position: `encoder.block.N.layer.0` is the self-attention (its `q`, `k`, `v`,
`o` and `layer_norm`), `layer.1` the feed-forward in the encoder and the
cross-attention (`EncDecAttention`) in the decoder, whose feed-forward is
`layer.2`. The feed-forward is `DenseReluDense.wi` and `.wo`, or, gated,
`.wi_0` (activated), `.wi_1` (linear) and `.wo`. The first block of each
stack holds the relative position bias (`relative_attention_bias`,
`(buckets, heads)`), which every block reads. No projection has a bias; the
norms are RMS norms, a `weight` each. A `Linear`'s weight is `(out, in)`,
so the kernels are transposed (`transposed`, the heads reshaped).

Example:

>>> from keras_transformer.config import ModelConfig
>>> config = ModelConfig(source_vocab_size=10, target_vocab_size=10, num_layers=1, d_model=8, num_heads=2, d_ff=16,
...                      share_embeddings=True, tie_output_embedding=True, position_layout="relative", key_dim=3)
>>> shapes = tensor_shapes(config)
>>> shapes["encoder.block.0.layer.0.SelfAttention.q.weight"], shapes["shared.weight"]
((6, 8), (10, 8))
"""

from keras_transformer.pretrained.families.weights import as_is, transposed

LAYER_PREFIXES = ("encoder.block.", "decoder.block.")
EMBEDDING = "shared.weight"
COPIES = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight")  # the shared embedding under other names
# A bias table of the decoder's first cross-attention that old checkpoints hold and transformers ignores.
UNUSED = "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight"
_ATTENTION = {"query": "q", "key": "k", "value": "v"}


def feed_forward_names(config):
    """The feed-forward's projections: `(ours, theirs)` pairs, gated or not."""
    if config.feed_forward == "gated":
        return (("inner_dense", "wi_0"), ("linear_dense", "wi_1"), ("output_dense", "wo"))
    return (("inner_dense", "wi"), ("output_dense", "wo"))


def tensor_shapes(config, tied=None):
    """`{name: shape}` of the tensors a T5 model of `config` is written as (`lm_head.weight` unless `tied`)."""
    tied = config.tie_output_embedding if tied is None else tied
    d, inner, vocab = config.d_model, config.num_heads * _key_dim(config), config.source_vocab_size
    shapes = {EMBEDDING: (vocab, d)}
    for side, count in (("encoder", config.num_layers), ("decoder", config.decoder_layers)):
        for index in range(count):
            prefix = f"{side}.block.{index}.layer"
            attentions = [("0.SelfAttention", 0)] + ([("1.EncDecAttention", 1)] if side == "decoder" else [])
            for name, position in attentions:
                for part in ("q", "k", "v"):
                    shapes[f"{prefix}.{name}.{part}.weight"] = (inner, d)
                shapes[f"{prefix}.{name}.o.weight"] = (d, inner)
                shapes[f"{prefix}.{position}.layer_norm.weight"] = (d,)
            ffn = 2 if side == "decoder" else 1
            for _, theirs in feed_forward_names(config):
                shapes[f"{prefix}.{ffn}.DenseReluDense.{theirs}.weight"] = (
                    (d, config.d_ff)
                    if theirs == "wo"
                    else (
                        config.d_ff,
                        d,
                    )
                )
            shapes[f"{prefix}.{ffn}.layer_norm.weight"] = (d,)
        buckets = (config.relative_attention_num_buckets, config.num_heads)
        shapes[f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"] = buckets
        shapes[f"{side}.final_layer_norm.weight"] = (d,)
    if not tied:
        shapes["lm_head.weight"] = (vocab, d)
    return shapes


def optional_shapes(config):
    """`{name: shape}` of the tensors a checkpoint may hold beside those: copies of the embedding, an unused table."""
    d, vocab = config.d_model, config.source_vocab_size
    optional = {name: (vocab, d) for name in COPIES}
    optional[UNUSED] = (config.relative_attention_num_buckets, config.num_heads)
    if config.tie_output_embedding:
        optional["lm_head.weight"] = (vocab, d)  # a tied copy (a `.bin` holds both), checked to be equal on import
    return optional


def weight_sources(model):
    """`(model weight, tensor name, transform)` of every weight of a T5-family `model`: import and export read it."""
    sources = [(model.encoder_embedding.embeddings, EMBEDDING, as_is)]
    if model.output_layer is not None:
        sources.append((model.output_layer.kernel, "lm_head.weight", transposed))
    for side, bias, norm, layers in (
        ("encoder", model.encoder_position_bias, model.encoder_norm, model.encoder_layers),
        ("decoder", model.decoder_position_bias, model.decoder_norm, model.decoder_layers),
    ):
        sources.append((bias.embeddings, f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight", as_is))
        sources.append((norm.scale, f"{side}.final_layer_norm.weight", as_is))
        for index, layer in enumerate(layers):
            sources += layer_sources(layer, f"{side}.block.{index}.layer", model.config)
    return sources


def layer_sources(layer, prefix, config):
    """The weights of one block: its attentions, feed-forward and norms."""
    blocks = [("self_attention", "0.SelfAttention", "self_attention_norm", "0")]
    if getattr(layer, "cross_attention", None) is not None:
        blocks.append(("cross_attention", "1.EncDecAttention", "cross_attention_norm", "1"))
    sources = []
    for ours, theirs, our_norm, position in blocks:
        attention = getattr(layer, ours)
        for part, name in _ATTENTION.items():
            sources.append((getattr(attention, f"{part}_dense").kernel, f"{prefix}.{theirs}.{name}.weight", transposed))
        sources.append((attention.output_dense.kernel, f"{prefix}.{theirs}.o.weight", transposed))
        sources.append((getattr(layer, our_norm).scale, f"{prefix}.{position}.layer_norm.weight", as_is))
    ffn = str(len(blocks))
    for ours, theirs in feed_forward_names(config):
        sources.append((getattr(layer.ffn, ours).kernel, f"{prefix}.{ffn}.DenseReluDense.{theirs}.weight", transposed))
    sources.append((layer.ffn_norm.scale, f"{prefix}.{ffn}.layer_norm.weight", as_is))
    return sources


def outer_names(tensors):
    """The names among `tensors` that are not a block's: what a checkpoint's layout says beyond its config."""
    return sorted(name for name in tensors if not name.startswith(LAYER_PREFIXES))


def _key_dim(config):
    return config.d_model // config.num_heads if config.key_dim is None else config.key_dim
