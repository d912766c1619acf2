"""What the BART-derived families share (Marian, M2M100, NLLB): their layers' tensor names, shapes and places.

Every layer of these checkpoints names its tensors alike
(`model.encoder.layers.N.self_attn.q_proj.weight`, `fc1`, `final_layer_norm`,
...), in PyTorch's layout (a `Linear`'s weight is `(out, in)`). A family
module says what differs around them (embeddings, final norms, biases).

Example:

>>> sorted(layer_shapes("model.encoder.layers.0", d_model=4, ffn=8, cross=False))[:2]
['model.encoder.layers.0.fc1.bias', 'model.encoder.layers.0.fc1.weight']
"""

from keras_transformer.config import DecodingConfig
from keras_transformer.decoding.rules import never_generated
from keras_transformer.errors import ArgumentError
from keras_transformer.kinds import MAX_BEAM_SIZE
from keras_transformer.pretrained import shapes
from keras_transformer.pretrained.families.generation import banned_ids, check_supported, early_stopping_of
from keras_transformer.pretrained.families.weights import as_is, assign, norm_sources, transposed
from keras_transformer.pretrained.fields import Fields

LAYER_PREFIXES = ("model.encoder.layers.", "model.decoder.layers.")  # the names of the layers' tensors
__all__ = ["as_is", "assign", "norm_sources", "transposed"]  # what the families take from here too


def matrix(info, name, weights):
    """The `(rows, columns)` of a 2-D tensor's `TensorInfo`; another rank is a `ValueError` naming it."""
    if len(info.shape) != 2:
        raise ValueError(f"{weights}: tensor `{name}` has shape {tuple(info.shape)}; a matrix was expected")
    return info.shape


def rate(fields, name, default):
    """A dropout rate field: a number in [0, 1)."""
    value = fields.number(name, default, low=0)
    if value >= 1:
        raise ValueError(f"{fields.where}: `{name}` must be a number in [0, 1). Received: {name}={value!r}")
    return value


def stack_sizes(fields, tensors, weights, d_model):
    """`ModelConfig` fields of the stacks (layers, heads, feed-forward width), each held against the tensors.

    `encoder_layers` and `decoder_layers` must be the numbers of layers the
    weights file holds, and the feed-forward widths its `fc1` biases' size;
    the encoder's and the decoder's heads and widths must be one.
    """
    where, sizes = fields.where, {}
    for side in ("encoder", "decoder"):
        layers = fields.int(f"{side}_layers", low=1)
        found = shapes.layer_count(tensors, f"model.{side}.layers")
        shapes.check_field(where, f"{side}_layers", layers, found, f"{side} layers", weights)
        ffn = fields.int(f"{side}_ffn_dim", low=1)
        fc1 = f"model.{side}.layers.0.fc1.bias"
        if fc1 in tensors and len(tensors[fc1].shape) == 1:
            shapes.check_field(where, f"{side}_ffn_dim", ffn, tensors[fc1].shape[0], f"values in `{fc1}`", weights)
        sizes[side] = (layers, fields.int(f"{side}_attention_heads", low=1, high=d_model), ffn)
    for name, position in (("encoder_attention_heads", 1), ("encoder_ffn_dim", 2)):
        if sizes["encoder"][position] != sizes["decoder"][position]:
            other = name.replace("encoder", "decoder")
            raise ValueError(
                f"{where}: {name}={sizes['encoder'][position]} and {other}={sizes['decoder'][position]} "
                "differ; keras-transformer's encoder and decoder layers share one size"
            )
    (encoder_layers, heads, ffn), decoder_layers = sizes["encoder"], sizes["decoder"][0]
    return dict(
        num_layers=encoder_layers,
        num_decoder_layers=None if decoder_layers == encoder_layers else decoder_layers,
        num_heads=heads,
        d_ff=ffn,
    )


def layer_shapes(prefix, d_model, ffn, cross):
    """`{name: shape}` of one encoder (or, with `cross`, decoder) layer's tensors."""
    d = d_model
    blocks = [("self_attn", "self_attn_layer_norm")] + ([("encoder_attn", "encoder_attn_layer_norm")] if cross else [])
    layer = {}
    for attention, norm in blocks:
        for projection in ("q_proj", "k_proj", "v_proj", "out_proj"):
            layer[f"{prefix}.{attention}.{projection}.weight"] = (d, d)
            layer[f"{prefix}.{attention}.{projection}.bias"] = (d,)
        layer[f"{prefix}.{norm}.weight"] = layer[f"{prefix}.{norm}.bias"] = (d,)
    layer.update({f"{prefix}.fc1.weight": (ffn, d), f"{prefix}.fc1.bias": (ffn,)})
    layer.update({f"{prefix}.fc2.weight": (d, ffn), f"{prefix}.fc2.bias": (d,)})
    layer[f"{prefix}.final_layer_norm.weight"] = layer[f"{prefix}.final_layer_norm.bias"] = (d,)
    return layer


def stack_shapes(config):
    """`{name: shape}` of every encoder and decoder layer of a model of `config`."""
    shapes = {}
    for side, count in (("encoder", config.num_layers), ("decoder", config.decoder_layers)):
        for index in range(count):
            prefix = f"model.{side}.layers.{index}"
            shapes.update(layer_shapes(prefix, config.d_model, config.d_ff, cross=side == "decoder"))
    return shapes


def outer_names(tensors):
    """The names among `tensors` that are not a layer's: what a checkpoint's layout says beyond its config."""
    return sorted(name for name in tensors if not name.startswith(LAYER_PREFIXES))


def stack_sources(model):
    """`(model weight, tensor name, transform)` of every encoder and decoder layer's weights."""
    sources = []
    for prefix, layers in (("model.encoder", model.encoder_layers), ("model.decoder", model.decoder_layers)):
        for index, layer in enumerate(layers):
            sources += layer_sources(layer, f"{prefix}.layers.{index}")
    return sources


ATTENTION = {"query": "q_proj", "key": "k_proj", "value": "v_proj"}


def layer_sources(layer, prefix):
    blocks = [("self_attention", "self_attn", "self_attention_norm", "self_attn_layer_norm")]
    if getattr(layer, "cross_attention", None) is not None:  # a GPT block has none
        blocks.append(("cross_attention", "encoder_attn", "cross_attention_norm", "encoder_attn_layer_norm"))
    sources = []
    for ours, theirs, our_norm, their_norm in blocks:
        attention = getattr(layer, ours)
        for part, name in ATTENTION.items():
            dense = getattr(attention, f"{part}_dense")
            sources.append((dense.kernel, f"{prefix}.{theirs}.{name}.weight", transposed))
            sources.append((dense.bias, f"{prefix}.{theirs}.{name}.bias", as_is))
        sources.append((attention.output_dense.kernel, f"{prefix}.{theirs}.out_proj.weight", transposed))
        sources.append((attention.output_dense.bias, f"{prefix}.{theirs}.out_proj.bias", as_is))
        sources += norm_sources(getattr(layer, our_norm), f"{prefix}.{their_norm}")
    for ours, theirs in (("inner_dense", "fc1"), ("output_dense", "fc2")):
        dense = getattr(layer.ffn, ours)
        sources.append((dense.kernel, f"{prefix}.{theirs}.weight", transposed))
        sources.append((dense.bias, f"{prefix}.{theirs}.bias", as_is))
    sources += norm_sources(layer.ffn_norm, f"{prefix}.final_layer_norm")
    return sources


def generation_settings(generation, config, where="generation_config.json", family="this"):
    """The checkpoint's generation settings (a dict: `generation.checkpoint_generation`) as a `DecodingConfig`.

    transformers' beam search: scores normalized by `length ** length_penalty`,
    searched until no live beam can still win (`early_stopping=False`, its
    default) or until `num_beams` hypotheses ended (`True`), END forced at the
    last step (`forced_eos_token_id`), the `bad_words_ids` of one token never
    generated, and log-probabilities over the whole vocabulary, or, with
    `renormalize_logits` (OPUS-MT's), over the tokens left after the bans
    (`softmax_over="allowed"`, whose bans are PAD and the start id: the
    `bad_words_ids` must hold both). Hypotheses cut off at the limit rank
    among the ended ones by score (`cut_off="by_score"`).
    `max_length` counts the decoder's start token there: here it counts the
    output tokens, END included, so it is one less. Every setting is checked
    (`DecodingConfig.check`): a `ValueError` names `where` and the field.
    """
    fields = Fields(generation, where, family)
    check_supported(fields)
    banned = banned_ids(fields, config.target_vocab_size)
    bad_words = fields.raw("bad_words_ids", [])
    early_stopping = early_stopping_of(fields)
    check_special_ids(fields, config)
    renormalize = fields.bool("renormalize_logits", False)
    if renormalize and not {config.start_id, config.target_pad} <= set(banned):
        raise ValueError(
            f"{where}: renormalize_logits with bad_words_ids {bad_words!r}"[:200] + " that do not ban the start id "
            f"({config.start_id}) and PAD ({config.target_pad}); keras-transformer renormalizes over the other ids"
        )
    forced_end = fields.single_id("forced_eos_token_id", None, vocab_size=config.target_vocab_size)
    max_length = fields.int("max_length", config.max_length + 1, low=2)
    return DecodingConfig(
        beam_size=fields.int("num_beams", 1, low=1, high=MAX_BEAM_SIZE),
        alpha=fields.number("length_penalty", 1.0),
        max_new_tokens=min(max_length - 1, config.max_length),
        normalization="length",
        stopping="beams_ended" if early_stopping else "cannot_improve",
        cut_off="by_score",
        force_end=forced_end == config.end_id,
        banned_ids=banned,
        softmax_over="allowed" if renormalize else "vocabulary",
    ).check(vocab_size=config.target_vocab_size, model_max_length=config.max_length, where=where)


def check_special_ids(fields, config):
    """The ids `generate` takes from generation_config.json: ids, and config.json's where both name one."""
    fields.single_id("bos_token_id", None, vocab_size=config.target_vocab_size)
    for key, ours in (("decoder_start_token_id", config.start_id), ("eos_token_id", config.end_id)):
        value = fields.single_id(key, None, vocab_size=config.target_vocab_size)
        if value is not None and value != ours:
            raise ValueError(
                f"{fields.where}: `{key}` is {value}, but config.json's is {ours}; keras-transformer decodes with one"
            )
    pad = fields.single_id("pad_token_id", None, vocab_size=config.source_vocab_size)
    if pad is not None and pad != config.pad_id:
        raise ValueError(f"{fields.where}: `pad_token_id` is {pad}, but config.json's is {config.pad_id}")


def check_expressible(config, family, required, layer_norm_epsilon, activation_names):
    """A `ValueError` naming the first option of `config` (a `ModelConfig`) that an M2M100 or mBART model cannot hold.

    `required` maps each option to `(the family's value, what it means)`;
    the LayerNorms' epsilon and the activations (`activation_names`' keys)
    are the family's own.
    """
    for option, (value, meaning) in required.items():
        if getattr(config, option) != value:
            raise ValueError(
                f"`{option}`={getattr(config, option)!r} has no {family} equivalent: an {family} model has {meaning}"
            )
    if config.layer_norm_epsilon != layer_norm_epsilon:
        raise ValueError(
            f"`layer_norm_epsilon`={config.layer_norm_epsilon!r} has no {family} equivalent: its LayerNorms use "
            f"{layer_norm_epsilon!r}"
        )
    if config.activation not in activation_names:
        raise ValueError(
            f"`activation`={config.activation!r} has no {family} equivalent: it has {sorted(activation_names)}"
        )


def config_fields(config, activation_names):
    """The config.json fields that Marian and M2M100 both read, from `config` (a `ModelConfig`).

    `activation_names` maps this package's activations to the family's
    `activation_function` names (its exporter checks the activation first).
    """
    return dict(
        vocab_size=config.source_vocab_size,
        d_model=config.d_model,
        encoder_layers=config.num_layers,
        decoder_layers=config.decoder_layers,
        encoder_attention_heads=config.num_heads,
        decoder_attention_heads=config.num_heads,
        encoder_ffn_dim=config.d_ff,
        decoder_ffn_dim=config.d_ff,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        activation_dropout=config.activation_dropout,
        max_position_embeddings=config.max_length,
        activation_function=activation_names[config.activation],
        scale_embedding=config.scale_embeddings,
        pad_token_id=config.pad_id,
        decoder_start_token_id=config.start_id,
        eos_token_id=config.end_id,
    )


def generation_json(decoding, config, base=None):
    """generation_config.json of `decoding` (a `DecodingConfig`) for a BART-derived model of `config`.

    The inverse of `generation_settings`: `base`'s other fields kept, the
    ones it reads set from the run. `bad_words_ids` are the ids the run's searches never generate
    (`decoding.rules.never_generated`). A setting transformers' `generate`
    has no equivalent for is a `ValueError` naming it: GNMT's length penalty
    with more than one beam.
    """
    if decoding.normalization == "gnmt" and decoding.beam_size > 1 and decoding.alpha != 0:
        raise ArgumentError(
            f"`normalization`='gnmt' (beam search over ((5 + length) / 6) ** {decoding.alpha:g}) has no "
            "transformers equivalent (it divides by length ** length_penalty): export with {beam_size=1} or {alpha=0}"
        )
    data = dict(base or {})
    for key in ("forced_eos_token_id", "length_penalty", "renormalize_logits", "early_stopping", "bad_words_ids"):
        data.pop(key, None)
    allowed = decoding.softmax_over == "allowed"
    banned = never_generated(
        config.start_id, config.end_id, config.target_pad, decoding.banned_ids, decoding.softmax_over
    )
    data.update(
        decoder_start_token_id=config.start_id,
        eos_token_id=config.end_id,
        pad_token_id=config.pad_id,
        max_length=(decoding.max_new_tokens or config.max_length) + 1,  # transformers counts the start token
        num_beams=decoding.beam_size,
    )
    if banned:
        data["bad_words_ids"] = [[int(i)] for i in banned]
    if decoding.normalization == "length" or decoding.alpha == 0:
        data["length_penalty"] = float(decoding.alpha)
    if decoding.stopping == "beams_ended":
        data["early_stopping"] = True
    if decoding.force_end:
        data["forced_eos_token_id"] = config.end_id
    if allowed:
        data["renormalize_logits"] = True
    return dict(sorted(data.items()))
