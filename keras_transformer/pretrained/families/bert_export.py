"""A run as a BERT checkpoint: the other direction of `families.bert`, in the same four parts.

What transformers' `BertForMaskedLM`, `BertForSequenceClassification` or
`BertModel` (the run's head: `ARCHITECTURES`) and its BERT tokenizers load:

- the model: `hf_config(described, base)` is config.json, with a
  classifier's `id2label` and `label2id` (the run's labels: a run
  fine-tuned on labels of its own has them, `described_model`);
  `check_model(config)` refuses, naming it, an option a BERT has no
  equivalent for;
- the weights: `checkpoint_tensors(model)`, named by the table both
  directions read (`bert.weight_sources`): `bert.`-prefixed under a head,
  as transformers saves them, unprefixed for a `BertModel`;
- the tokenizer: `tokenizer_files(tokenizers, config)`, the checkpoint's own
  files as the import read them (`vocab.txt`, `tokenizer.json`,
  `special_tokens_map.json`), byte for byte, and `tokenizer_config`;
- the generation settings: none, as a BERT repository has none
  (`generation_config` gives None and no file is written);
- a sentence-transformers model's own files (`run_files`: `modules.json`,
  the Pooling's `config.json`, `sentence_bert_config.json`), where the run
  was imported from such a folder, so that `SentenceTransformer(path)`
  embeds as the run does.

What the import does not keep is not written back: a `BertModel`'s
`pooler` and a `BertForPreTraining`'s next-sentence head
(`cls.seq_relationship`), which neither `embed` nor `fill_mask` reads
(transformers initializes them anew, and says so, where a class asks for
them), and the buffers older files stored (`position_ids`).

Example:

>>> from keras_transformer.config import ModelConfig
>>> check_model(ModelConfig(source_vocab_size=9, target_vocab_size=9, d_model=8, num_heads=2))
Traceback (most recent call last):
...
ValueError: the model is an encoder_decoder model: a BERT checkpoint holds an encoder-only one
"""

from typing import NamedTuple

import numpy as np

from keras_transformer.pretrained import sentence_embedding
from keras_transformer.pretrained.checkpoints import TensorInfo
from keras_transformer.pretrained.families import bert
from keras_transformer.pretrained.families.weights import transposed
from keras_transformer.pretrained.fields import Fields

MODEL_TYPE = bert.MODEL_TYPE
TOKENIZER_CONFIG = "tokenizer_config.json"
ARCHITECTURES = {"masked_lm": "BertForMaskedLM", "classifier": "BertForSequenceClassification", "none": "BertModel"}
# This package's activation names as BERT's `hidden_act` (the inverse of `bert.ACTIVATIONS`).
ACTIVATION_NAMES = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu"}
CONFIG_BASE = {"model_type": MODEL_TYPE, "position_embedding_type": "absolute", "initializer_range": 0.02}
_REQUIRED = {  # option: (the value a BERT has, what it means)
    "architecture": ("encoder_only", "an encoder-only one"),
    "norm_first": (False, "post-norm layers"),
    "embedding_norm": (True, "a LayerNorm on its embeddings"),
    "position_layout": ("learned", "learned positions"),
    "scale_embeddings": (False, "unscaled embeddings"),
    "tie_output_embedding": (True, "its masked-LM output tied to the embedding"),
}


class Described(NamedTuple):
    """What a BERT's config.json describes: the model, and a classifier's labels and `problem_type`."""

    model: object
    labels: tuple = ()
    problem_type: str = None


def described_model(model_config, run_config):
    """The `Described` model of a run: its `ModelConfig`, with the labels and problem type its config.json records."""
    pretrained = run_config.pretrained or {}
    if model_config.encoder_head != "classifier":
        return Described(model_config)
    labels = tuple(pretrained.get("labels") or (f"LABEL_{index}" for index in range(model_config.num_classes)))
    return Described(model_config, labels, pretrained.get("problem_type"))


def check_model(config):
    """A `ValueError` naming the first option of `config` (a `ModelConfig`) that a BERT cannot hold."""
    for option, (value, meaning) in _REQUIRED.items():
        given = getattr(config, option)
        if given != value:
            if option == "architecture":
                raise ValueError(f"the model is an {given} model: a BERT checkpoint holds {meaning}")
            raise ValueError(f"`{option}`={given!r} has no BERT equivalent: a BERT has {meaning}")
    if config.activation not in ACTIVATION_NAMES:
        raise ValueError(
            f"`activation`={config.activation!r} has no BERT equivalent: it has {sorted(ACTIVATION_NAMES)}"
        )


def hf_config(described, base=None):
    """config.json of a BERT `described` (`described_model`): `base`'s other fields, ours set."""
    config = described.model
    check_model(config)
    data = dict(CONFIG_BASE if base is None else base)
    data.update(
        architectures=[ARCHITECTURES[config.encoder_head]],
        model_type=MODEL_TYPE,
        vocab_size=config.source_vocab_size,
        hidden_size=config.d_model,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        intermediate_size=config.d_ff,
        hidden_act=_activation(config, base),
        hidden_dropout_prob=config.dropout,
        attention_probs_dropout_prob=config.attention_dropout,
        max_position_embeddings=config.max_length,
        type_vocab_size=config.segment_vocab_size,
        layer_norm_eps=config.layer_norm_epsilon,
        pad_token_id=config.pad_id,
        tie_word_embeddings=True,
    )
    if config.encoder_head == "classifier":
        data["id2label"] = {str(index): label for index, label in enumerate(described.labels)}
        data["label2id"] = {label: index for index, label in enumerate(described.labels)}
        data.pop("problem_type", None)
        if described.problem_type is not None:
            data["problem_type"] = described.problem_type
    return dict(sorted(data.items()))


def _activation(config, base):
    """BERT's `hidden_act` of the model's activation: `base`'s own name where it means the same."""
    named = (base or {}).get("hidden_act")
    if isinstance(named, str) and bert.ACTIVATIONS.get(named) == config.activation:
        return named
    return ACTIVATION_NAMES[config.activation]


def reads_as_model(original, described):
    """Whether config.json `original` (a dict) imports as `described`: then it is written back as it was.

    Its model, labels and problem type must be the run's, and the class it
    names (if any) the one the export holds (`ARCHITECTURES`).
    """
    config = described.model
    architectures = original.get("architectures")
    if architectures is not None and architectures != [ARCHITECTURES[config.encoder_head]]:
        return False  # a BertForPreTraining's: the export is a BertForMaskedLM (its next-sentence head not imported)
    try:
        read = bert.model_config(original, _header(config))
        fields = Fields(original, "config.json", bert.FAMILY)
        if config.encoder_head == "classifier":
            labels = tuple(bert._labels(fields, config.num_classes))
            problem_type = fields.choice("problem_type", bert.PROBLEM_TYPES, None)
            if (labels, problem_type) != (tuple(described.labels), described.problem_type):
                return False
    except ValueError:
        return False
    ids = dict(start_id=config.start_id, end_id=config.end_id, target_pad_id=config.target_pad_id)
    return read.replace(**ids) == config


def _header(config):
    """`{name: TensorInfo}` as a weights file of a BERT of `config` lists them (what `bert.model_config` reads)."""
    d, prefix = config.d_model, bert.PREFIX
    tensors = {f"{prefix}embeddings.word_embeddings.weight": (config.source_vocab_size, d)}
    tensors.update({f"{prefix}encoder.layer.{index}.output.dense.bias": (d,) for index in range(config.num_layers)})
    if config.encoder_head == "classifier":
        tensors["classifier.weight"] = (config.num_classes, d)
    elif config.encoder_head == "masked_lm":
        tensors["cls.predictions.bias"] = (config.source_vocab_size,)
    return {name: TensorInfo(shape, "F32") for name, shape in tensors.items()}


def generation_config(decoding, config, base=None, state=None):
    """None: a BERT generates nothing, and its repositories hold no generation_config.json."""
    return None


def reads_as_decoding(original, decoding, config, state=None):
    """False: a source's generation_config.json is not written back (a BERT has none)."""
    return False


def checkpoint_tensors(model, names=None):
    """`{name: float32 array}`: `model`'s weights as a BERT checkpoint's tensors (`names` is not used).

    Under a head the names are `bert.`-prefixed, as transformers saves a
    `BertForMaskedLM` or a `BertForSequenceClassification`; a model
    without one is a `BertModel`'s, unprefixed.
    """
    import keras

    config = model.config
    check_model(config)
    shapes = bert.tensor_shapes(config)[0]
    prefix = bert.PREFIX if config.encoder_head != "none" else ""
    tensors = {}
    for weight, name, transform in bert.weight_sources(model):
        value = np.asarray(keras.ops.convert_to_numpy(weight), np.float32)
        shape = shapes[name]
        value = value.reshape(shape[::-1]).T if transform is transposed else value.reshape(shape)
        tensors[prefix + name.removeprefix(bert.PREFIX) if name.startswith(bert.PREFIX) else name] = value
    return {name: np.ascontiguousarray(value, np.float32) for name, value in tensors.items()}


def run_files(run_config, model_config):
    """`{name: bytes}`: the sentence-transformers files of a run imported with them (`sentence_embedding.files`)."""
    pretrained = run_config.pretrained or {}
    settings = pretrained.get("sentence_embedding") or {}
    return sentence_embedding.files(settings, model_config.d_model, pretrained.get("json_files"))


def tokenizer_files(tokenizers, config, languages=None):
    """`({name: bytes}, state)`: the checkpoint's tokenizer files as imported, and what the other files follow.

    The files are those the import kept (`HuggingFaceTokenizer.files`), byte
    for byte, but tokenizer_config.json (`tokenizer_config`); a run imported
    before they were kept writes its tokenizer as `tokenizer.json`. `state`
    holds the head (the model card's pipeline) and the tokenizer's
    lower-casing (a new tokenizer_config.json's `do_lower_case`).
    """
    tokenizer = tokenizers.source
    kept = dict(getattr(tokenizer, "files", None) or {})
    kept.pop(TOKENIZER_CONFIG, None)
    if "vocab.txt" not in kept and "tokenizer.json" not in kept:
        kept["tokenizer.json"] = tokenizer.tokenizer_json.encode("utf-8")
    state = {"head": config.encoder_head, "lowercase": _lowercase(tokenizer), "mask": _token(tokenizer, "mask_id")}
    return kept, state


def _lowercase(tokenizer):
    """Whether the tokenizer lower-cases (its normalizer's `lowercase`, as `tokenizers` serializes it)."""
    import json

    normalizer = json.loads(tokenizer.tokenizer_json).get("normalizer") or {}
    return bool(normalizer.get("lowercase", False))


def _token(tokenizer, attribute):
    index = getattr(tokenizer, attribute, None)
    return None if index is None else tokenizer.token(index)


def tokenizer_config(config, state, base=None):
    """tokenizer_config.json for transformers' `BertTokenizer`: `base`'s other fields, its class and lengths set."""
    data = dict(base or {})
    data.setdefault("tokenizer_class", "BertTokenizer")
    data.setdefault("do_lower_case", state["lowercase"])
    data.setdefault("model_max_length", config.max_length)
    return dict(sorted(data.items()))


def reads_as_tokenizer_config(original, state):
    """True: the run's tokenizer is the checkpoint's, which its tokenizer_config.json describes."""
    return True


_USAGE = {
    "masked_lm": (
        "fill-mask",
        "A BERT masked language model (BertForMaskedLM)",
        "from transformers import pipeline",
        "",
        'fill = pipeline("fill-mask", model="PATH_OR_REPO")',
        'print(fill("Your sentence with a {mask} token."))',
    ),
    "classifier": (
        "text-classification",
        "A BERT text classifier (BertForSequenceClassification)",
        "from transformers import pipeline",
        "",
        'classify = pipeline("text-classification", model="PATH_OR_REPO", top_k=None)',
        'print(classify("Your sentence."))',
    ),
    "none": (
        "feature-extraction",
        "A BERT encoder (BertModel)",
        "from transformers import AutoModel, AutoTokenizer",
        "",
        'tokenizer = AutoTokenizer.from_pretrained("PATH_OR_REPO")',
        'model = AutoModel.from_pretrained("PATH_OR_REPO")',
        'states = model(**tokenizer(["Your sentence."], return_tensors="pt")).last_hidden_state',
    ),
}


def card(state):
    """What the model card says of a BERT checkpoint: its class, its pipeline, and how to run it."""
    pipeline, kind, *usage = _USAGE[state["head"]]
    mask = state.get("mask") or "[MASK]"
    return {
        "kind": kind,
        "tags": ("bert",),
        "pipeline_tag": pipeline,
        "generation": False,
        "usage": tuple(line.replace("{mask}", mask) for line in usage),
    }
