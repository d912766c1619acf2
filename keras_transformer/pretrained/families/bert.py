"""BERT checkpoints in this package's terms: config, weights, tokenizer, generation settings.

The module of one family of checkpoints, `model_type: "bert"`, in the four
parts every family has (`keras_transformer.pretrained.families`). BERT is
the Transformer's encoder alone (`build_encoder_only`): token, learned
position and segment embeddings summed and normalized, post-norm blocks,
the exact GELU, and the head the weights file holds: the masked-LM head of
a `BertForMaskedLM` or `BertForPreTraining` (`cls.predictions`: a
transform, then the tied embedding with its bias; the next-sentence head
`cls.seq_relationship` is not imported), the classifier of a
`BertForSequenceClassification` (`bert.pooler`, `classifier`; its
`id2label` kept in the run), or none: a `BertModel`, whose hidden states
are what sentence embeddings pool (its `pooler` is not imported). Tensor
names hold the `bert.` prefix or not, as task-model and base-model files
store them (`LAYOUT`: they are read under a task model's names); the
buffers older transformers saved (`position_ids`, `token_type_ids`) are
passed over, as transformers passes them over, and the tied copies
(`cls.predictions.decoder.*`) must equal their originals.
Its tokenizer is WordPiece over `vocab.txt`, lower-cased where
`tokenizer_config.json` says so; `[CLS]` starts a text and `[SEP]` ends it.

Every field is read with its kind and range, and the sizes are held against
the weights file's tensors before anything is built (`shapes`).
"""

import math

from keras_transformer.config import DecodingConfig, ModelConfig
from keras_transformer.kinds import MAX_LENGTH
from keras_transformer.pretrained import buffers, sentence_embedding, shapes
from keras_transformer.pretrained.families.weights import as_is, assign, dense_sources, norm_sources
from keras_transformer.pretrained.fields import Fields
from keras_transformer.pretrained.tensor_names import Layout
from keras_transformer.runs import Tokenizers

MODEL_TYPE = "bert"
FAMILY = "BERT"
ADD_SOURCE_END = False  # the tokenizer adds [SEP] itself
ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}
_RATES = (("hidden_dropout_prob", "dropout"), ("attention_probs_dropout_prob", "attention_dropout"))
PREFIX = "bert."
# A task model's names (a `BertModel`'s read with the prefix); the buffers transformers skips on load.
LAYOUT = Layout(prefix=PREFIX, heads=("cls.", "classifier."), skipped=("position_ids", "token_type_ids"))
# The tied copies older files store, each of the weight it must equal.
TIED_COPIES = {
    "cls.predictions.decoder.weight": f"{PREFIX}embeddings.word_embeddings.weight",
    "cls.predictions.decoder.bias": "cls.predictions.bias",
}


def _head(tensors):
    """The head the weights file holds: `"classifier"`, `"masked_lm"` or `"none"` (a `BertModel`)."""
    if "classifier.weight" in tensors:
        return "classifier"
    if any(name.startswith("cls.predictions.") for name in tensors):
        return "masked_lm"
    return "none"


def model_config(hf_config, tensors, where="config.json", weights="the weights file"):
    """The `ModelConfig` of a BERT `config.json` (a dict) whose weights file holds `tensors`.

    The head is the file's: a classifier where it holds `classifier.weight`,
    the masked-LM head where it holds `cls.predictions`, else none. `[CLS]`
    and `[SEP]` are the tokenizer's
    (`config_with_tokenizers`); until then they stand at the ids after the
    padding id.
    """
    fields = Fields(hf_config, where, FAMILY)
    prefix = PREFIX
    embedding = f"{prefix}embeddings.word_embeddings.weight"
    if embedding not in tensors or len(tensors[embedding].shape) != 2:
        raise ValueError(f"{weights} has no token embedding matrix (`{embedding}`), which BERT holds")
    rows, width = tensors[embedding].shape
    d_model = fields.int("hidden_size", low=1, high=2**20)
    shapes.check_field(where, "hidden_size", d_model, width, f"columns in `{embedding}`", weights)
    vocab = fields.int("vocab_size", low=3)
    shapes.check_field(where, "vocab_size", vocab, rows, f"rows in `{embedding}`", weights)
    layers = fields.int("num_hidden_layers", low=1)
    found = shapes.layer_count(tensors, f"{prefix}encoder.layer")
    shapes.check_field(where, "num_hidden_layers", layers, found, "layers", weights)
    if fields.choice("position_embedding_type", ["absolute"], "absolute") != "absolute" or fields.bool(
        "is_decoder", False
    ):
        raise ValueError(f"{where}: keras-transformer imports BERT encoders with absolute positions")
    if not fields.bool("tie_word_embeddings", True):
        raise ValueError(f"{where}: `tie_word_embeddings` must be true; keras-transformer ties BERT's output")
    head = _head(tensors)
    classes = tensors["classifier.weight"].shape[0] if head == "classifier" else None
    pad = fields.single_id("pad_token_id", 0, vocab_size=vocab)
    return ModelConfig(
        source_vocab_size=vocab,
        target_vocab_size=vocab,
        architecture="encoder_only",
        num_layers=layers,
        d_model=d_model,
        num_heads=fields.int("num_attention_heads", low=1, high=d_model),
        d_ff=fields.int("intermediate_size", low=1),
        **{ours: _rate(fields, theirs) for theirs, ours in _RATES},
        max_length=fields.int("max_position_embeddings", low=2, high=MAX_LENGTH),
        segment_vocab_size=fields.int("type_vocab_size", 2, low=0, high=2**16),
        embedding_norm=True,
        activation=ACTIVATIONS[fields.choice("hidden_act", sorted(ACTIVATIONS), "gelu")],
        layer_norm_epsilon=fields.number("layer_norm_eps", 1e-12, low=1e-30),
        position_layout="learned",
        scale_embeddings=False,
        tie_output_embedding=True,
        encoder_head=head,
        num_classes=classes,
        pad_id=pad,
        start_id=(pad + 1) % vocab,
        end_id=(pad + 2) % vocab,
    ).check()


def _rate(fields, name):
    rate = fields.number(name, 0.1, low=0)
    if rate >= 1:
        raise ValueError(f"{fields.where}: `{name}` must be a number in [0, 1). Received: {name}={rate!r}")
    return rate


def check_tensors(config, tensors, weights):
    """Every tensor a BERT of `config` needs is in `tensors`, of its shape, and nothing else is."""
    shapes.check_shapes(*tensor_shapes(config), tensors, weights, FAMILY)


def tensor_shapes(config):
    """`(required, optional)`: `{name: shape}` of the tensors a BERT of `config` holds, under a task model's names."""
    d, ffn, vocab, prefix = config.d_model, config.d_ff, config.source_vocab_size, PREFIX
    embeddings = f"{prefix}embeddings"
    required = {
        f"{embeddings}.word_embeddings.weight": (vocab, d),
        f"{embeddings}.position_embeddings.weight": (config.max_length, d),
        f"{embeddings}.LayerNorm.weight": (d,),
        f"{embeddings}.LayerNorm.bias": (d,),
    }
    if config.segment_vocab_size:
        required[f"{embeddings}.token_type_embeddings.weight"] = (config.segment_vocab_size, d)
    pooler = {f"{prefix}pooler.dense.weight": (d, d), f"{prefix}pooler.dense.bias": (d,)}
    optional = dict(pooler)
    if config.encoder_head == "classifier":
        required.update(pooler)
        required.update({"classifier.weight": (config.num_classes, d), "classifier.bias": (config.num_classes,)})
    elif config.encoder_head == "none":
        optional.update({"cls.seq_relationship.weight": (2, d), "cls.seq_relationship.bias": (2,)})
    else:
        transform = "cls.predictions.transform"
        required.update({f"{transform}.dense.weight": (d, d), f"{transform}.dense.bias": (d,)})
        required.update({f"{transform}.LayerNorm.weight": (d,), f"{transform}.LayerNorm.bias": (d,)})
        required["cls.predictions.bias"] = (vocab,)
        optional.update({"cls.predictions.decoder.weight": (vocab, d), "cls.predictions.decoder.bias": (vocab,)})
        optional.update(
            {"cls.seq_relationship.weight": (2, d), "cls.seq_relationship.bias": (2,)}
        )  # BertForPreTraining's next-sentence head: not imported
    for index in range(config.num_layers):
        layer = f"{prefix}encoder.layer.{index}"
        for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            required.update({f"{layer}.{name}.weight": (d, d), f"{layer}.{name}.bias": (d,)})
        required.update({f"{layer}.intermediate.dense.weight": (ffn, d), f"{layer}.intermediate.dense.bias": (ffn,)})
        required.update({f"{layer}.output.dense.weight": (d, ffn), f"{layer}.output.dense.bias": (d,)})
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            required[f"{layer}.{norm}.weight"] = required[f"{layer}.{norm}.bias"] = (d,)
    return required, optional


def tokenizers(checkpoint, config):
    """The checkpoint's WordPiece tokenizer (`tokenizer.json`, else `vocab.txt`), one for both sides.

    It keeps the checkpoint's tokenizer files as they were read
    (`TOKENIZER_FILES`, `HuggingFaceTokenizer.files`), which an export
    writes back byte for byte.

    From `vocab.txt` alone (the older repositories), `tokenizer_config.json`
    says what transformers' `BertTokenizer` reads there: `do_lower_case`
    (default true), `strip_accents`, `tokenize_chinese_chars` and the
    special tokens' names. Its `clean_up_tokenization_spaces` (default
    false, as transformers 5 reads it) applies to decoded text either way.
    """
    from keras_transformer.tokenizers.huggingface import BYTES_PER_ENTRY, HuggingFaceTokenizer

    size = config.source_vocab_size
    settings = Fields(checkpoint.json("tokenizer_config.json", required=False), "tokenizer_config.json", FAMILY)
    names = {key: _token_name(settings, key, default) for key, default in SPECIAL_TOKENS.items()}
    if checkpoint.has("tokenizer.json"):
        tokenizer = HuggingFaceTokenizer.from_tokenizer_file(checkpoint.path("tokenizer.json"), size, **_no_ids())
    else:
        strip = settings.raw("strip_accents", None)
        if strip is not None and not isinstance(strip, bool):
            raise ValueError(f"tokenizer_config.json: `strip_accents` must be true, false or null. Received: {strip!r}")
        tokenizer = HuggingFaceTokenizer.from_wordpiece_file(
            checkpoint.path("vocab.txt"),
            size,
            lowercase=settings.bool("do_lower_case", True),
            strip_accents=strip,
            chinese_chars=settings.bool("tokenize_chinese_chars", True),
            special_tokens=names,
            **_no_ids(),
        )
    vocab = tokenizer.vocab
    missing = [names[key] for key in ("cls_token", "sep_token", "mask_token") if names[key] not in vocab]
    if missing:
        raise ValueError(f"{checkpoint.folder}: the tokenizer has no {missing[0]}, which BERT's holds")
    tokenizer.pad_id, tokenizer.start_id, tokenizer.end_id = (
        config.pad_id,
        vocab[names["cls_token"]],
        vocab[names["sep_token"]],
    )
    tokenizer.mask_id = vocab[names["mask_token"]]
    tokenizer.cleanup = settings.bool("clean_up_tokenization_spaces", False)
    tokenizer.files = _kept_files(checkpoint, 2**16 + size * BYTES_PER_ENTRY)
    return Tokenizers(tokenizer, tokenizer)


def _kept_files(checkpoint, max_bytes):
    """`{name: bytes}` of the `TOKENIZER_FILES` the checkpoint holds, each at most `max_bytes` (untrusted input)."""
    kept = {}
    for name in TOKENIZER_FILES:
        if checkpoint.has(name):
            path = checkpoint.path(name)
            if path.stat().st_size > max_bytes:
                raise ValueError(f"{path} is {path.stat().st_size:,} bytes, more than a tokenizer of its size needs")
            kept[name] = path.read_bytes()
    return kept


# The tokenizer files a BERT repository holds beside tokenizer_config.json, which a run keeps byte for byte.
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "special_tokens_map.json", "added_tokens.json")


# transformers' `BertTokenizer`'s special tokens, as `tokenizer_config.json` names them.
SPECIAL_TOKENS = {
    "pad_token": "[PAD]",
    "unk_token": "[UNK]",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "mask_token": "[MASK]",
}


def _token_name(settings, key, default):
    """A special token's text: a string, or `{"content": ...}` as transformers writes an `AddedToken`."""
    value = settings.raw(key, default)
    if isinstance(value, dict):
        value = value.get("content")
    if not isinstance(value, str) or not value:
        raise ValueError(f"{settings.where}: `{key}` must be a token's text. Received: {value!r}"[:300])
    return value


def _no_ids():
    return dict(pad_id=None, start_id=None, end_id=None)


def config_with_tokenizers(config, tokenizers):
    """`config` with the tokenizer's `[CLS]` and `[SEP]` as its start and end ids."""
    return config.replace(start_id=tokenizers.source.start_id, end_id=tokenizers.source.end_id).check()


def decoding_config(generation, config, where="generation_config.json"):
    """BERT generates nothing: the package's defaults, recorded as every run's are."""
    return DecodingConfig()


# Fine-tuning a BERT (`train --init-from`: a text classifier, `training.text_classification`), as BERT's
# authors fine-tune it: a peak rate of 5e-5 after a short warmup, annealed to 0 over the last of 3 epochs,
# no label smoothing, batches of about 32 texts of 32 tokens.
FINE_TUNING = dict(
    warmup_steps=100, peak_rate=5e-5, cooldown_fraction=0.34, label_smoothing=0.0, epochs=3, token_budget=1024
)


def fine_tuning_preset(preset):
    """The preset an imported BERT is fine-tuned with (`FINE_TUNING`): `preset` with BERT's recipe."""
    settings = dict(FINE_TUNING)
    peak, warmup = settings.pop("peak_rate"), settings["warmup_steps"]
    scale = peak * math.sqrt(preset.model.d_model * warmup)  # the schedule's rate at the end of the warmup
    return preset.replace(learning_rate_scale=scale, **settings)


def build_model(config):
    """The model a BERT of `config` is imported into."""
    from keras_transformer.models import build_encoder_only

    return build_encoder_only(config=config)


def assign_weights(model, checkpoint):
    """Sets `model`'s weights from a BERT checkpoint, one tensor at a time (checked by `check_tensors`)."""
    assign(model, checkpoint, weight_sources(model))


def weight_sources(model):
    """`(model weight, tensor name, transform)` of every weight of a BERT `model`: the table both directions read."""
    config, prefix = model.config, PREFIX
    embedding = model.encoder_embedding
    sources = [
        (embedding.embeddings, f"{prefix}embeddings.word_embeddings.weight", as_is),
        (embedding.position_encoding.embeddings, f"{prefix}embeddings.position_embeddings.weight", as_is),
    ]
    if config.segment_vocab_size:
        sources.append((model.segment_embedding.embeddings, f"{prefix}embeddings.token_type_embeddings.weight", as_is))
    sources += norm_sources(model.embedding_norm, f"{prefix}embeddings.LayerNorm")
    for index, layer in enumerate(model.encoder_layers):
        name = f"{prefix}encoder.layer.{index}"
        attention = layer.self_attention
        for dense, part in (
            (attention.query_dense, "query"),
            (attention.key_dense, "key"),
            (attention.value_dense, "value"),
        ):
            sources += dense_sources(dense, f"{name}.attention.self.{part}")
        sources += dense_sources(attention.output_dense, f"{name}.attention.output.dense")
        sources += norm_sources(layer.self_attention_norm, f"{name}.attention.output.LayerNorm")
        sources += dense_sources(layer.ffn.inner_dense, f"{name}.intermediate.dense")
        sources += dense_sources(layer.ffn.output_dense, f"{name}.output.dense")
        sources += norm_sources(layer.ffn_norm, f"{name}.output.LayerNorm")
    head = model.head
    if config.encoder_head == "classifier":
        sources += dense_sources(head.pooler, f"{prefix}pooler.dense")
        sources += dense_sources(head.classifier, "classifier")
    elif config.encoder_head == "masked_lm":
        sources += dense_sources(head.dense, "cls.predictions.transform.dense")
        sources += norm_sources(head.norm, "cls.predictions.transform.LayerNorm")
        sources.append((embedding.logits_bias, "cls.predictions.bias", as_is))
    return sources


def check_buffers(config, checkpoint):
    """The output projection older files store beside what it is tied to equals it (transformers ties the two)."""
    buffers.check_copies(checkpoint, TIED_COPIES)


def run_record(checkpoint, hf_config, config):
    """What a run records of a BERT beyond its weights: a classifier's labels, the sentence embedding's settings.

    `labels` are `id2label`'s, by id (transformers' `LABEL_0`, ... where
    config.json names none), and `problem_type` says how `classify` turns
    logits into scores. `sentence_embedding` is how `embed` pools the hidden
    states (`pretrained.sentence_embedding`).
    """
    record = {"sentence_embedding": sentence_embedding.settings(checkpoint, config)}
    if config.encoder_head == "classifier":
        fields = Fields(hf_config, "config.json", FAMILY)
        record["labels"] = _labels(fields, config.num_classes)
        record["problem_type"] = fields.choice("problem_type", PROBLEM_TYPES, None)
    return record


PROBLEM_TYPES = ("single_label_classification", "multi_label_classification", "regression")


def _labels(fields, classes):
    """`id2label` as a list by id: every id from 0 to `classes - 1` once, each a string."""
    id2label = fields.raw("id2label", None)
    if id2label is None:
        return [f"LABEL_{index}" for index in range(classes)]
    expected = {str(index) for index in range(classes)}
    if not isinstance(id2label, dict) or set(id2label) != expected:
        raise ValueError(
            f"{fields.where}: `id2label` must name each of the classifier's {classes} classes by its id "
            f'("0" to "{classes - 1}"). Received: {id2label!r}'[:300]
        )
    labels = [id2label[str(index)] for index in range(classes)]
    if not all(isinstance(label, str) for label in labels):
        raise ValueError(f"{fields.where}: every label of `id2label` must be a string. Received: {labels!r}"[:300])
    return labels
