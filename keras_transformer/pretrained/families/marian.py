"""OPUS-MT (Marian) checkpoints in this package's terms: config, weights, tokenizers, generation settings.

The module of one family of checkpoints, `model_type: "marian"`, in the four
parts every family has (`keras_transformer.pretrained.families`): the model
config, the weights, the tokenizers, the generation settings.

A Marian model is the paper's Transformer: post-norm layers, sinusoidal
positions (as `[sin | cos]` halves), embeddings scaled by √d_model and tied
to the output, whose logits get a bias of their own (`final_logits_bias`).
It pads with its last id and starts decoding from that padding id; its
outputs end with `</s>`, id 0, and its sources too.

Every field is read with its kind and range, and the sizes are held against
the weights file's tensors before anything is built (`shapes`).
"""

import numpy as np

from keras_transformer.config import DecodingConfig, ModelConfig
from keras_transformer.kinds import MAX_BEAM_SIZE, MAX_LENGTH
from keras_transformer.pretrained import shapes
from keras_transformer.pretrained.fields import Fields
from keras_transformer.runs import Tokenizers
from keras_transformer.tokenizers.marian import MarianTokenizer

MODEL_TYPE = "marian"
FAMILY = "Marian"
ADD_SOURCE_END = True  # Marian's sources end with </s>
ACTIVATIONS = {"swish": "silu", "silu": "silu", "relu": "relu", "gelu": "gelu", "tanh": "tanh"}
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's default, which Marian's layers use
_RATES = ("dropout", "attention_dropout", "activation_dropout")


def model_config(hf_config, tensors, where="config.json", weights="the weights file"):
    """The `ModelConfig` of a Marian `config.json` (a dict) whose weights file holds `tensors` (`TensorInfo`s).

    A field of the wrong kind, or one the tensors contradict, is a
    `ValueError` naming `where` and the field; what this package cannot
    build (encoder and decoder of other sizes) too.
    """
    fields = Fields(hf_config, where, FAMILY)
    embedding = _embedding_name(tensors, fields)
    if embedding is None:
        raise ValueError(f"{weights} has no token embedding (`model.shared.weight`), which a Marian model holds")
    rows, width = _matrix(tensors[embedding], embedding, weights)
    d_model = fields.int("d_model", low=1, high=2**20)
    shapes.check_field(where, "d_model", d_model, width, f"columns in `{embedding}`", weights)
    source_vocab = fields.int("vocab_size", low=1)
    shapes.check_field(where, "vocab_size", source_vocab, rows, f"rows in `{embedding}`", weights)
    target_vocab = fields.int("decoder_vocab_size", source_vocab, low=1)
    share = fields.bool("share_encoder_decoder_embeddings", True)
    if share and source_vocab != target_vocab:
        raise ValueError(
            f"{where}: shared embeddings with vocab_size={source_vocab}, decoder_vocab_size={target_vocab}"
        )
    sizes = {}
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
    tie = fields.bool("tie_word_embeddings", True)
    encoder_layers, decoder_layers = sizes["encoder"][0], sizes["decoder"][0]
    return ModelConfig(
        source_vocab_size=source_vocab,
        target_vocab_size=target_vocab,
        num_layers=encoder_layers,
        num_decoder_layers=None if decoder_layers == encoder_layers else decoder_layers,
        d_model=d_model,
        num_heads=sizes["encoder"][1],
        d_ff=sizes["encoder"][2],
        **{name: _rate(fields, name, default) for name, default in zip(_RATES, (0.1, 0.0, 0.0))},
        max_length=fields.int("max_position_embeddings", low=2, high=MAX_LENGTH),
        share_embeddings=share,
        tie_output_embedding=tie,
        activation=ACTIVATIONS[fields.choice("activation_function", sorted(ACTIVATIONS), "swish")],
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        position_layout="concatenated",
        scale_embeddings=fields.bool("scale_embedding", False),
        output_bias=tie,
        pad_id=fields.single_id("pad_token_id", vocab_size=source_vocab),
        start_id=fields.single_id("decoder_start_token_id", vocab_size=target_vocab),
        end_id=fields.single_id("eos_token_id", vocab_size=target_vocab),
    ).check()


def check_tensors(config, tensors, weights):
    """Every tensor a Marian model of `config` needs is in `tensors`, of its shape, and nothing else is."""
    required, optional = _tensor_shapes(config, tensors)
    shapes.check_shapes(required, optional, tensors, weights, FAMILY)


def decoding_config(generation, config, where="generation_config.json"):
    """The checkpoint's generation settings (`generation_config.json`, a dict) as a `DecodingConfig`.

    transformers' beam search: scores normalized by `length ** length_penalty`,
    searched until no live beam can still win (`early_stopping=False`, its
    default) or until `num_beams` hypotheses ended (`True`), END forced at the
    last step (`forced_eos_token_id`), the `bad_words_ids` of one token never
    generated, and log-probabilities over the whole vocabulary.
    `max_length` counts the decoder's start token there: here it counts the
    output tokens, END included, so it is one less. Every setting is checked
    (`DecodingConfig.check`): a `ValueError` names `where` and the field.
    """
    fields = Fields(generation, where, FAMILY)
    banned, bad_words = [], fields.raw("bad_words_ids", [])
    if not isinstance(bad_words, list):
        raise ValueError(f"{where}: `bad_words_ids` must be a list of lists of ids. Received: {bad_words!r}"[:300])
    for ids in bad_words:
        if not (isinstance(ids, list) and len(ids) == 1):
            raise ValueError(
                f"{where}: bad_words_ids {ids!r}"[:200] + " is a sequence of tokens; keras-transformer bans "
                "single tokens only"
            )
        banned.append(
            Fields({"bad_words_ids": ids}, where).single_id("bad_words_ids", vocab_size=config.target_vocab_size)
        )
    early_stopping = fields.raw("early_stopping", False)
    if early_stopping not in (True, False) or not isinstance(early_stopping, bool):
        raise ValueError(f"{where}: early_stopping={early_stopping!r} is not supported (true or false)"[:300])
    _check_special_ids(fields, config)
    forced_end = fields.single_id("forced_eos_token_id", None, vocab_size=config.target_vocab_size)
    max_length = fields.int("max_length", config.max_length + 1, low=2)
    return DecodingConfig(
        beam_size=fields.int("num_beams", 1, low=1, high=MAX_BEAM_SIZE),
        alpha=fields.number("length_penalty", 1.0),
        max_new_tokens=min(max_length - 1, config.max_length),
        normalization="length",
        stopping="beams_ended" if early_stopping else "cannot_improve",
        force_end=forced_end == config.end_id,
        banned_ids=tuple(banned),
        softmax_over="vocabulary",
    ).check(vocab_size=config.target_vocab_size, model_max_length=config.max_length, where=where)


def _check_special_ids(fields, config):
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


def tokenizers(checkpoint, config):
    """The checkpoint's source and target `MarianTokenizer`s (`runs.Tokenizers`), each keeping its files' names.

    A vocabulary that does not give every embedding row one piece (its ids
    exactly 0 to size - 1) is a `ValueError` naming it; so is one too large
    for the embedding to hold, before it is parsed.
    """
    tokenizer_config = checkpoint.json("tokenizer_config.json", required=False)
    separate = tokenizer_config.get("separate_vocabs") is True or checkpoint.has("target_vocab.json")
    target_vocab = "target_vocab.json" if separate else "vocab.json"
    sides = (
        ("source.spm", "vocab.json", config.source_vocab_size),
        ("target.spm", target_vocab, config.target_vocab_size),
    )
    made = []
    for spm_name, vocab_name, size in sides:
        tokenizer = MarianTokenizer.from_files(
            checkpoint.path(spm_name), checkpoint.path(vocab_name), max_vocab_size=size
        )
        ids = sorted(tokenizer.vocab.values())
        if ids != list(range(size)):
            raise ValueError(
                f"{checkpoint.folder / vocab_name} does not cover the model's {size} embedding rows: its "
                f"{len(ids)} ids run from {ids[0]} to {ids[-1]}"
                + (" with gaps or repeats" if len(set(ids)) != len(ids) or ids[-1] - ids[0] + 1 != len(ids) else "")
            )
        made.append(tokenizer)
    return Tokenizers(*made)


def assign_weights(model, checkpoint):
    """Sets `model`'s weights from a Marian checkpoint, one tensor at a time (checked by `check_tensors`).

    Every weight of the model is set exactly once; one that no tensor sets is
    a `ValueError` naming it.
    """
    config, assigned = model.config, set()
    for weight, name, transform in _weight_sources(model, config, checkpoint.tensors()):
        value = np.zeros(weight.shape, np.float32) if name is None else transform(checkpoint.tensor(name))
        weight.assign(value.reshape(weight.shape))
        assigned.add(weight.path)
    missing = [w.path for w in model.weights if w.path not in assigned]
    if missing:
        raise ValueError(f"no checkpoint weight was found for {missing[:5]}")


def _embedding_name(tensors, fields):
    share = fields.bool("share_encoder_decoder_embeddings", True)
    names = (
        ("model.shared.weight", "model.encoder.embed_tokens.weight")
        if share
        else ("model.encoder.embed_tokens.weight",)
    )
    return next((name for name in names if name in tensors), None)


def _matrix(info, name, weights):
    if len(info.shape) != 2:
        raise ValueError(f"{weights}: tensor `{name}` has shape {tuple(info.shape)}; a matrix was expected")
    return info.shape


def _rate(fields, name, default):
    rate = fields.number(name, default, low=0)
    if rate >= 1:
        raise ValueError(f"{fields.where}: `{name}` must be a number in [0, 1). Received: {name}={rate!r}")
    return rate


def _embedding_names(config, tensors):
    """The tensors of the source embedding and of the target embedding (None where the two are shared)."""
    if config.share_embeddings:
        shared = "model.shared.weight" if "model.shared.weight" in tensors else "model.encoder.embed_tokens.weight"
        return shared, None
    decoder = "model.decoder.embed_tokens.weight"
    return "model.encoder.embed_tokens.weight", decoder if decoder in tensors else "lm_head.weight"


def _tensor_shapes(config, tensors):
    """`(required, optional)`: the tensors' names and shapes of a Marian model of `config`."""
    d, source, target = config.d_model, config.source_vocab_size, config.target_vocab_size
    encoder_embedding, decoder_embedding = _embedding_names(config, tensors)
    required = {encoder_embedding: (source, d)}
    if decoder_embedding:
        required[decoder_embedding] = (target, d)
    if not config.tie_output_embedding:
        required["lm_head.weight"] = (target, d)
    optional = {
        "final_logits_bias": (1, target),
        "model.shared.weight": (source, d),
        "model.encoder.embed_tokens.weight": (source, d),
        "model.decoder.embed_tokens.weight": (target, d),
        "lm_head.weight": (target, d),
        "model.encoder.embed_positions.weight": (config.max_length, d),
        "model.decoder.embed_positions.weight": (config.max_length, d),
    }
    for side, count in (("encoder", config.num_layers), ("decoder", config.decoder_layers)):
        for index in range(count):
            required.update(_layer_shapes(f"model.{side}.layers.{index}", config, cross=side == "decoder"))
    return required, optional


def _layer_shapes(prefix, config, cross):
    d, ffn = config.d_model, config.d_ff
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


def _transposed(value):
    return value.T


def _as_is(value):
    return value


def _weight_sources(model, config, tensors):
    """`(model weight, tensor name or None for zeros, transform)` for every weight of `model`."""
    encoder_embedding, decoder_embedding = _embedding_names(config, tensors)
    sources = [(model.encoder_embedding.embeddings, encoder_embedding, _as_is)]
    if decoder_embedding:
        sources.append((model.decoder_embedding.embeddings, decoder_embedding, _as_is))
    bias = "final_logits_bias" if "final_logits_bias" in tensors else None
    if config.tie_output_embedding:
        sources.append((model.decoder_embedding.logits_bias, bias, _as_is))
    else:
        sources.append((model.output_layer.kernel, "lm_head.weight", _transposed))
        sources.append((model.output_layer.bias, bias, _as_is))
    for prefix, layers in (("model.encoder", model.encoder_layers), ("model.decoder", model.decoder_layers)):
        for index, layer in enumerate(layers):
            sources += _layer_sources(layer, f"{prefix}.layers.{index}", config)
    return sources


_ATTENTION = {"query": "q_proj", "key": "k_proj", "value": "v_proj"}


def _layer_sources(layer, prefix, config):
    blocks = [("self_attention", "self_attn", "self_attention_norm", "self_attn_layer_norm")]
    if getattr(layer, "cross_attention", None) is not None:
        blocks.append(("cross_attention", "encoder_attn", "cross_attention_norm", "encoder_attn_layer_norm"))
    sources = []
    for ours, theirs, our_norm, their_norm in blocks:
        attention = getattr(layer, ours)
        for part, name in _ATTENTION.items():
            dense = getattr(attention, f"{part}_dense")
            sources.append((dense.kernel, f"{prefix}.{theirs}.{name}.weight", _transposed))
            sources.append((dense.bias, f"{prefix}.{theirs}.{name}.bias", _as_is))
        sources.append((attention.output_dense.kernel, f"{prefix}.{theirs}.out_proj.weight", _transposed))
        sources.append((attention.output_dense.bias, f"{prefix}.{theirs}.out_proj.bias", _as_is))
        sources += _norm_sources(getattr(layer, our_norm), f"{prefix}.{their_norm}")
    for ours, theirs in (("inner_dense", "fc1"), ("output_dense", "fc2")):
        dense = getattr(layer.ffn, ours)
        sources.append((dense.kernel, f"{prefix}.{theirs}.weight", _transposed))
        sources.append((dense.bias, f"{prefix}.{theirs}.bias", _as_is))
    sources += _norm_sources(layer.ffn_norm, f"{prefix}.final_layer_norm")
    return sources


def _norm_sources(norm, prefix):
    return [(norm.gamma, f"{prefix}.weight", _as_is), (norm.beta, f"{prefix}.bias", _as_is)]
