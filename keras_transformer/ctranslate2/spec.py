"""A run's model as CTranslate2's `TransformerSpec`: its layers' weights in CTranslate2's layout.

`transformer_spec(model, source_pieces, target_pieces)` is what
`ctranslate2.convert_run` saves (its module docstring says how it decodes
as our model does). Beside the paper's layers it holds T5's (RMS norms, the
relative position bias of each stack's first layer, shared by the others,
the gated feed-forward, no biases, attention scores not scaled, heads of
their own width, the tied output scaled by `d_model ** -0.5`), as
CTranslate2's own T5 converter sets them, and mBART's (learned positions
from row `position_offset` on, a LayerNorm after each stack's embeddings),
as its mBART converter does.

Example:

>>> spec = transformer_spec(model, pieces, pieces)  # doctest: +SKIP
>>> spec.validate(); spec.save("/tmp/ct2")  # doctest: +SKIP
"""

import numpy as np

_ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "gelu_tanh": "GELUTanh", "silu": "SWISH", "swish": "SWISH"}


def transformer_spec(model, source_pieces, target_pieces, add_source_end=False):
    """A `ctranslate2.specs.TransformerSpec` holding `model`'s weights (not yet validated or saved).

    Args:
        model: a `TransformerModel` from `build_transformer` (one model, plain
            float weights: not quantized, no LoRA).
        source_pieces, target_pieces: the vocabularies, one piece per id
            (`read_pieces`); their sizes must be the model's.
        add_source_end: whether sources end with END (the run's `add_source_end`).

    Raises:
        ValueError: naming what CTranslate2 cannot represent (an ensemble, an
            activation it lacks, layers of different widths or head counts, a
            quantized or LoRA layer, a vocabulary of the wrong size).

    Example:

    >>> spec = transformer_spec(model, pieces, pieces)
    >>> spec.validate(); spec.save("/tmp/ct2")
    """
    from ctranslate2.specs import common_spec
    from ctranslate2.specs import transformer_spec as ct2

    from keras_transformer.models import as_transformer

    model = as_transformer(model)
    _check_vocabulary("source_pieces", source_pieces, model.source_vocab_size)
    _check_vocabulary("target_pieces", target_pieces, model.target_vocab_size)
    encoder_layers, decoder_layers = model.encoder_layers, model.decoder_layers
    first = encoder_layers[0]
    _check_uniform(encoder_layers + decoder_layers, first)
    config = model.config
    relative = config.position_layout == "relative"
    options = dict(
        pre_norm=bool(first.norm_first),
        activation=getattr(common_spec.Activation, _activation(first)),
        layernorm_embedding=bool(config.embedding_norm),
        relative_attention_bias=relative,
        ffn_glu=config.feed_forward == "gated",
        rms_norm=config.norm == "rms",
        head_dim=config.key_dim,
    )
    encoder = ct2.TransformerEncoderSpec(len(encoder_layers), first.num_heads, **options)
    decoder = ct2.TransformerDecoderSpec(len(decoder_layers), first.num_heads, **options)
    encoder.scale_embeddings = decoder.scale_embeddings = bool(config.scale_embeddings)
    if config.scale_output:  # T5's tied output
        decoder.scale_outputs = np.float32(config.d_model**-0.5)

    embedding = model.encoder_embedding
    encoder.embeddings[0].weight = _numpy(embedding.embeddings)
    decoder.embeddings.weight = _numpy(model.decoder_embedding.embeddings)
    if not relative:
        encoder.position_encodings.encodings = _positions(embedding)
        decoder.position_encodings.encodings = _positions(model.decoder_embedding, side=1)
    if config.embedding_norm:  # mBART's layernorm_embedding, one per side
        _set_norm(encoder.layernorm_embedding, embedding.norms[0])
        _set_norm(decoder.layernorm_embedding, model.decoder_embedding.norms[-1])
    biases = (model.encoder_position_bias, model.decoder_position_bias)
    for stack, layers, bias in ((encoder, encoder_layers, biases[0]), (decoder, decoder_layers, biases[1])):
        for layer, spec in zip(layers, stack.layer):
            _set_self_attention(spec.self_attention, layer.self_attention, layer.self_attention_norm)
            if layer in decoder_layers:
                _set_cross_attention(spec.attention, layer.cross_attention, layer.cross_attention_norm)
            _set_ffn(spec.ffn, layer)
        if bias is not None:  # T5's: one table, every layer's (CTranslate2 stores it once)
            table, distance = _numpy(bias.embeddings), np.int32(bias.max_distance)
            for spec in stack.layer:
                spec.self_attention.relative_attention_bias = table
                spec.self_attention.relative_attention_max_distance = distance
    if first.norm_first:
        _set_norm(encoder.layer_norm, model.encoder_norm)
        _set_norm(decoder.layer_norm, model.decoder_norm)
    _set_output(decoder.projection, model)

    spec = ct2.TransformerSpec(encoder, decoder)
    spec.config.layer_norm_epsilon = float(first.layer_norm_epsilon)
    _set_special_tokens(spec, model.config, target_pieces)
    spec.config.add_source_eos = bool(add_source_end)
    spec.register_source_vocabulary(list(source_pieces))
    spec.register_target_vocabulary(list(target_pieces))
    return spec


def _set_special_tokens(spec, config, target_pieces):
    """UNK, START (the decoder's first token) and END as the target tokenizer's pieces (both kinds have `<unk>`)."""
    spec.config.unk_token = "<unk>"
    spec.config.bos_token = spec.config.decoder_start_token = target_pieces[config.start_id]
    spec.config.eos_token = target_pieces[config.end_id]


def _check_vocabulary(name, pieces, size):
    if len(pieces) != size:
        raise ValueError(f"`{name}` must have the model's vocab size {size}. Received: {len(pieces)} pieces")
    if len(set(pieces)) != len(pieces):
        raise ValueError(f"`{name}` must hold each piece once (CTranslate2 maps pieces to ids)")


def _check_uniform(layers, first):
    """CTranslate2 has one head count, activation, norm order and epsilon per model."""
    for layer in layers:
        for attribute in ("num_heads", "d_model", "norm_first", "layer_norm_epsilon"):
            if getattr(layer, attribute) != getattr(first, attribute):
                raise ValueError(
                    f"CTranslate2 needs one `{attribute}` for all layers. Received: "
                    f"{attribute}={getattr(first, attribute)} in {first.name}, "
                    f"{getattr(layer, attribute)} in {layer.name}"
                )
        if _activation(layer) != _activation(first):
            raise ValueError(
                f"CTranslate2 needs one `activation` for all layers. Received: a different one in {layer.name}"
            )


def _activation(layer):
    import keras

    name = keras.activations.serialize(layer.activation)
    name = name if isinstance(name, str) else name.get("config", name.get("class_name"))
    name = name.rsplit(">", 1)[-1] if isinstance(name, str) else name  # a registered one: "keras_transformer>gelu_tanh"
    if name not in _ACTIVATIONS:
        raise ValueError(
            f"CTranslate2 has no `activation`={name!r} (of {layer.name}); it supports {sorted(_ACTIVATIONS)}"
        )
    return _ACTIVATIONS[name]


# -- weights ------------------------------------------------------------------


def _numpy(variable):
    import keras

    return np.ascontiguousarray(keras.ops.convert_to_numpy(variable), dtype=np.float32)


def _positions(embedding, side=0):
    """The position table `(max_length, d_model)` of one side of `embedding`: its sinusoids, or its learned rows
    from position 0's on (mBART's table keeps two rows before)."""
    positions = embedding.position_encodings[side if embedding.separate_positions else 0]
    if hasattr(positions, "pos_encoding"):
        return np.ascontiguousarray(positions.pos_encoding[0], dtype=np.float32)
    return np.ascontiguousarray(_numpy(positions.embeddings)[positions.offset :], dtype=np.float32)


def _plain(dense):
    from keras_transformer.layers.projections import is_plain_dense

    if not is_plain_dense(dense):
        raise ValueError(f"CTranslate2 export needs plain float layers: {dense.name} is quantized or has LoRA")
    return dense


def _projection(dense, width):
    """A q/k/v `EinsumDense` (d_model, heads, key_dim) as CTranslate2's (heads*key_dim, d_model) + bias."""
    dense = _plain(dense)
    weight = _numpy(dense.kernel).reshape(-1, width).T
    bias = _numpy(dense.bias).reshape(width) if dense.bias is not None else None
    return weight, bias


def _set_linear(spec, weight, bias):
    spec.weight = np.ascontiguousarray(weight, dtype=np.float32)
    if bias is not None:
        spec.bias = np.ascontiguousarray(bias, dtype=np.float32)


def _set_fused(spec, parts):
    weights, biases = zip(*parts)
    _set_linear(spec, np.concatenate(weights), None if biases[0] is None else np.concatenate(biases))


def _set_output_projection(spec, attention):
    dense = _plain(attention.output_dense)
    weight = _numpy(dense.kernel).reshape(-1, attention.d_model).T  # (d_model, heads*key_dim)
    _set_linear(spec, weight, _numpy(dense.bias) if dense.bias is not None else None)


def _set_self_attention(spec, attention, norm):
    if not attention.scale_attention:
        spec.queries_scale = np.float32(1.0)  # T5's scores are not divided by √key_dim
    width = attention.num_heads * attention.key_dim
    _set_fused(
        spec.linear[0],
        [_projection(d, width) for d in (attention.query_dense, attention.key_dense, attention.value_dense)],
    )
    _set_output_projection(spec.linear[1], attention)
    _set_norm(spec.layer_norm, norm)


def _set_cross_attention(spec, attention, norm):
    if not attention.scale_attention:
        spec.queries_scale = np.float32(1.0)
    width = attention.num_heads * attention.key_dim
    _set_linear(spec.linear[0], *_projection(attention.query_dense, width))
    _set_fused(spec.linear[1], [_projection(d, width) for d in (attention.key_dense, attention.value_dense)])
    _set_output_projection(spec.linear[2], attention)
    _set_norm(spec.layer_norm, norm)


def _set_ffn(spec, layer):
    inner, outer = _plain(layer.ffn.inner_dense), _plain(layer.ffn.output_dense)
    _set_linear(spec.linear_0, _numpy(inner.kernel).T, _numpy(inner.bias) if inner.use_bias else None)
    if layer.ffn.gated:  # the linear half of T5's gated feed-forward
        gate = _plain(layer.ffn.linear_dense)
        _set_linear(spec.linear_0_noact, _numpy(gate.kernel).T, _numpy(gate.bias) if gate.use_bias else None)
    _set_linear(spec.linear_1, _numpy(outer.kernel).T, _numpy(outer.bias) if outer.use_bias else None)
    _set_norm(spec.layer_norm, layer.ffn_norm)


def _set_norm(spec, norm):
    import keras

    if isinstance(norm, keras.layers.RMSNormalization):  # T5's: a scale, no offset
        spec.gamma = _numpy(norm.scale)
        return
    if not (norm.center and norm.scale) or getattr(norm, "rms_scaling", False):
        raise ValueError(f"CTranslate2 export needs LayerNorms with scale and offset: {norm.name} has not both")
    spec.gamma = _numpy(norm.gamma)
    spec.beta = _numpy(norm.beta)


def _set_output(spec, model):
    if model.output_layer is None:  # tied to the target embedding
        spec.weight = _numpy(model.decoder_embedding.embeddings)
        if model.decoder_embedding.output_bias:
            spec.bias = _numpy(model.decoder_embedding.logits_bias)
        return
    dense = _plain(model.output_layer)
    _set_linear(spec, _numpy(dense.kernel).T, _numpy(dense.bias) if dense.use_bias else None)
