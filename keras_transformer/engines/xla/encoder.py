"""`Encoder`: an encoder-only model (BERT) and its tokenizer, as a product: embed, classify, fill masks.

What a `Generator` is to a decoder-only run, an `Encoder` is to an
encoder-only one: `keras_transformer.export.load(RUN)` gives it for a run
imported from a BERT checkpoint, and the `embed`, `classify` and
`fill-mask` commands run it. Each method takes a list of texts and answers
as the library its checkpoint came from answers:

- `embed(texts)`: a float32 array `(texts, width)`, as sentence-transformers'
  `encode` computes it, with the pooling and normalization the run recorded
  from the checkpoint's sentence-transformers folder
  (`pretrained.sentence_embedding`; texts cut to its `max_seq_length`). A run
  imported without that folder embeds by the mean of its token states, as
  sentence-transformers embeds a plain checkpoint, and says so once (a
  `KerasTransformerWarning`).
- `classify(texts)`: for a classifier run (`BertForSequenceClassification`),
  each text's `[{"label", "score"}, ...]` for every label of the
  checkpoint's `id2label`, highest first, as transformers'
  `pipeline("text-classification", top_k=None)` gives them (softmax, or
  the sigmoid of a `multi_label_classification` or one-label model, or the
  raw logits of a `regression`). A text may be a pair `(text, text_pair)`,
  read as BERT reads two segments.
- `fill_mask(texts, top_k=5)`: for a masked-LM run, each text's `top_k`
  `{"score", "token", "token_str", "sequence"}` at its mask token, as
  `pipeline("fill-mask")` gives them (a list per mask where a text holds
  several).

The texts are tokenized in Python, sorted by length and run in batches
padded to their longest: one batch eagerly, more through the model traced
once (`tf.function`) for every batch size and width. Bad input is a
one-line `ValueError`: a text without the mask token given to `fill_mask`,
a text longer than the model's positions given to `classify` or
`fill_mask`, a method the run's head cannot answer.

Example:

>>> encoder = open_encoder("saved_models/all-MiniLM-L6-v2")  # doctest: +SKIP
>>> encoder.embed(["A dog runs.", "Un chien court."]).shape  # doctest: +SKIP
(2, 384)
"""

import warnings

import numpy as np
import tensorflow as tf

from keras_transformer import runs
from keras_transformer.engines.xla.pooling import pool
from keras_transformer.errors import ArgumentError, KerasTransformerWarning, literal
from keras_transformer.input_rules import check_sentence

DEFAULT_BATCH_SIZE = 32
MAX_OUTPUT_BYTES = 256 * 2**20  # masked-LM logits held at once (a batch of BERT-base's 30,522 per token)
PLAIN_CHECKPOINT = dict(pooling=["mean"], normalize=False, lowercase=False, source=None)
HEADS = {"masked_lm": "a masked-LM head", "classifier": "a classifier head", "none": "no head"}


class Encoder:
    """Embeds, classifies and fills masks with an encoder-only `model` and its `tokenizer` (see the module).

    Args:
        model: an `EncoderOnlyModel`.
        tokenizer: its tokenizer (`HuggingFaceTokenizer`: `encode`, `decode`).
        pretrained: what the run recorded of its checkpoint (`RunConfig.pretrained`):
            `sentence_embedding`, `labels`, `problem_type`.
        batch_size: texts per model call.
        name: how messages name the model (its run directory).
    """

    def __init__(self, model, tokenizer, pretrained=None, batch_size=DEFAULT_BATCH_SIZE, name="the model"):
        self.model, self.tokenizer, self.name = model, tokenizer, str(name)
        pretrained = pretrained or {}
        self.embedding = {**PLAIN_CHECKPOINT, "max_length": model.max_length}
        self.embedding.update(pretrained.get("sentence_embedding") or {})
        self.labels = list(pretrained.get("labels") or [])
        self.problem_type = pretrained.get("problem_type")
        self.batch_size = batch_size
        self._models, self._traced = {}, {}
        self._warned = False

    @property
    def head(self):
        """`"masked_lm"`, `"classifier"` or `"none"`: what the model's output is."""
        return self.model.config.encoder_head

    def embed(self, texts):
        """`(len(texts), width)` float32 sentence embeddings (see the module)."""
        texts = _texts(texts, pairs=False)
        settings = self.embedding
        if settings.get("source") is None and not self._warned:
            self._warned = True
            warnings.warn(
                f"{self.name} was imported without a sentence-transformers folder (modules.json): embedding by the "
                "mean of its token states",
                KerasTransformerWarning,
                stacklevel=2,
            )
        if settings.get("lowercase"):
            texts = [text.lower() for text in texts]
        ids = self.tokenizer.encode(texts, max_length=settings["max_length"])
        width = self.model.config.d_model * len(settings["pooling"])
        embeddings = np.zeros((len(ids), width), np.float32)
        for index, states in enumerate(self._run("hidden", ids)):
            embeddings[index] = pool(states[None], [len(states)], settings["pooling"], settings["normalize"])[0]
        return embeddings

    def classify(self, texts):
        """Each text's (or pair's) `[{"label": str, "score": float}, ...]`, every label, highest first."""
        self._require("classifier", "classify", "a classifier (BertForSequenceClassification)")
        texts = _texts(texts, pairs=True)
        ids, segments = self.tokenizer.encode(texts, segments=True)
        self._check_lengths(ids)
        classes = self.model.config.num_classes
        labels = self.labels or [f"LABEL_{index}" for index in range(classes)]
        logits = np.zeros((len(ids), classes), np.float32)
        for index, row in enumerate(self._run("logits", ids, segments)):
            logits[index] = row
        results = []
        for row in _scores(logits, self.problem_type):
            ranked = sorted(range(len(row)), key=lambda index: -row[index])  # stable: ties keep id order
            results.append([{"label": labels[index], "score": float(row[index])} for index in ranked])
        return results

    def fill_mask(self, texts, top_k=5):
        """Each text's `top_k` `{"score", "token", "token_str", "sequence"}` at its mask token (see the module)."""
        self._require("masked_lm", "fill_mask", "a masked-LM head (BertForMaskedLM, BertForPreTraining)")
        vocab = self.model.source_vocab_size
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= vocab:
            raise ArgumentError(f"{{top_k={literal(repr(top_k))}}} must be an int from 1 to the vocabulary's {vocab}")
        texts = _texts(texts, pairs=False)
        ids = self.tokenizer.encode(texts)
        mask = self.tokenizer.mask_id
        mask_token = self.tokenizer.token(mask)
        for index, row in enumerate(ids):
            if mask not in row:
                raise ValueError(f"texts[{index}] holds no {mask_token}: fill_mask fills the tokenizer's mask token")
        self._check_lengths(ids)
        return [self._fill(row, logits, top_k) for row, logits in zip(ids, self._run("logits", ids))]

    # -- the parts -------------------------------------------------------------------------------

    def _fill(self, ids, logits, top_k):
        """One text's candidates at each mask, as the fill-mask pipeline's `postprocess` gives them."""
        positions = [index for index, token in enumerate(ids) if token == self.tokenizer.mask_id]
        single = len(positions) == 1
        out = []
        for position in positions:
            row = logits[position].astype(np.float32)
            probabilities = np.exp(row - row.max())
            probabilities /= probabilities.sum()
            best = np.argsort(-probabilities, kind="stable")[:top_k]
            candidates = []
            for token in best.tolist():
                filled = [token if index == position else i for index, i in enumerate(ids)]
                filled = [i for i in filled if i != self.tokenizer.pad_id]
                candidates.append(
                    {
                        "score": float(probabilities[token]),
                        "token": token,
                        "token_str": self.tokenizer.decode([[token]], skip_special_tokens=False)[0],
                        "sequence": self.tokenizer.decode([filled], skip_special_tokens=single)[0],
                    }
                )
            out.append(candidates)
        return out[0] if single else out

    def _require(self, head, method, what):
        if self.head != head:
            raise ValueError(
                f"{self.name} has {HEADS.get(self.head, self.head)}: {method} needs a run imported from {what}"
            )

    def _check_lengths(self, rows):
        limit = self.model.max_length
        for index, row in enumerate(rows):
            if len(row) > limit:
                raise ValueError(f"texts[{index}] is {len(row)} tokens long; the model reads {limit} at most")

    def _run(self, output, ids, segments=None):
        """Each text's `output` (`"hidden"` or `"logits"`), in the order given; a per-token one cut to its tokens.

        The texts run longest first, in batches padded to their longest, of
        at most `batch_size` texts and, for the masked-LM
        logits (a vocabulary's floats at every token), at most
        `MAX_OUTPUT_BYTES` of output.
        """
        order = sorted(range(len(ids)), key=lambda index: -len(ids[index]))
        call = self._call(output, batches=-(-len(ids) // self.batch_size))
        per_token = self.model.source_vocab_size if output == "logits" and self.head == "masked_lm" else 0
        results, start = [None] * len(ids), 0
        while start < len(order):
            width = len(ids[order[start]])  # the batch's longest: the texts run longest first
            rows = max(1, min(self.batch_size, MAX_OUTPUT_BYTES // max(1, 4 * width * per_token)))
            chosen, start = order[start : start + rows], start + rows
            values = np.asarray(call(self._inputs([ids[index] for index in chosen], segments, chosen, width)))
            for row, index in enumerate(chosen):
                results[index] = values[row, : len(ids[index])] if values.ndim == 3 else values[row]
        return results

    def _inputs(self, rows, segments, chosen, width):
        """The model's inputs for `rows` of ids, right-padded to `width`."""
        tokens = np.full((len(rows), width), self.model.config.pad_id, np.int32)
        types = np.zeros((len(rows), width), np.int32)
        for row, (ids, index) in enumerate(zip(rows, chosen)):
            tokens[row, : len(ids)] = ids
            if segments is not None:
                types[row, : len(ids)] = segments[index]
        inputs = {"token_ids": tokens}
        if self.model.config.segment_vocab_size:
            inputs["segment_ids"] = types
        return inputs

    def _call(self, output, batches):
        """The model (or its hidden states' model) as a function of its inputs: traced once where it runs often.

        One batch runs eagerly (tracing would cost more than it saves);
        more run through one `tf.function` of any batch and width.
        """
        if output not in self._models:
            self._models[output] = self.model.hidden_states_model() if output == "hidden" else self.model
        model = self._models[output]
        if batches == 1 and output not in self._traced:
            return lambda inputs: model(inputs, training=False)
        if output not in self._traced:
            names = ["token_ids"] + (["segment_ids"] if self.model.config.segment_vocab_size else [])
            signature = {name: tf.TensorSpec((None, None), tf.int32, name=name) for name in names}
            self._traced[output] = tf.function(
                lambda inputs: model(inputs, training=False), input_signature=[signature]
            )
        return self._traced[output]


def _scores(logits, problem_type):
    """Class scores as the text-classification pipeline applies its function to logits."""
    if problem_type == "regression":
        return logits
    if problem_type == "multi_label_classification" or logits.shape[-1] == 1:
        return 1.0 / (1.0 + np.exp(-logits))
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    return shifted / shifted.sum(-1, keepdims=True)


def _texts(texts, pairs):
    """`texts` checked: a list of str (or, where `pairs`, of `(text, text_pair)`), each valid UTF-8 without NUL."""
    if isinstance(texts, (str, bytes)):
        raise ValueError("`texts` must be a list of strings. Received: one string")
    checked = []
    for index, text in enumerate(texts):
        if pairs and isinstance(text, (tuple, list)):
            if len(text) != 2:
                raise ValueError(f"texts[{index}] must be a text or a pair (text, text_pair). Received: {text!r}"[:300])
            first, second = (_text(part, f"texts[{index}][{side}]") for side, part in enumerate(text))
            checked.append((first, second) if second else first)  # an empty text_pair is none, as transformers reads it
        else:
            checked.append(_text(text, f"texts[{index}]"))
    return checked


def _text(text, where):
    if isinstance(text, bytes):
        check_sentence(text, where)
        text = text.decode("utf-8")
    if not isinstance(text, str):
        raise ValueError(f"{where} must be a string. Received: {type(text).__name__}")
    return check_sentence(text, where)


def is_encoder_run(path):
    """Whether `path` is a run directory of an encoder-only model (BERT): one that opens as an `Encoder`."""
    if not runs.is_run_dir(path):
        return False
    model = runs.RunConfig.read(path).model
    return model is not None and model.architecture == "encoder_only"


def open_encoder(path, batch_size=None):
    """The `Encoder` of the encoder-only run directory at `path`; a one-line `ValueError` for any other folder."""
    if not runs.is_run_dir(path):
        raise ValueError(f"{path} is not a run directory: embed, classify and fill-mask take the run of a BERT import")
    config = runs.RunConfig.read(path)
    architecture = config.model.architecture
    if architecture != "encoder_only":
        kind = {"decoder_only": "decoder-only (GPT)", "encoder_decoder": "translation"}.get(architecture, architecture)
        raise ValueError(f"{path} holds a {kind} model: embed, classify and fill-mask take encoder-only runs (BERT)")
    if config.pretrained is None:
        raise ValueError(
            f"{path} holds an encoder-only model trained by keras-transformer: embed, classify and fill-mask take "
            "runs imported from a BERT checkpoint (keras-transformer import)"
        )
    run = runs.open_run(path)
    return Encoder(run.model, run.tokenizers.source, config.pretrained, batch_size or DEFAULT_BATCH_SIZE, name=path)
