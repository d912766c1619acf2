"""One configuration, from preset to SavedModel: the model's options, each named once.

`ModelConfig` names every option of `build_transformer`; the model keeps it
(`model.config`) and a `.keras` file stores it. A `Preset`
(`keras_transformer.presets`) is a `ModelConfig` plus its data, training and
decoding parts, and a run's `config.json` records them
(`keras_transformer.runs.RunConfig`). Every setting has one name
in all of them, on the command line too (`--alpha` is `alpha`). Names used by
earlier versions' files (`input_vocab_size`, `length_penalty`) are read as
today's (`LEGACY_NAMES`).

The special token ids of this package's own vocabularies are defined here,
once: `PAD_ID` (also padding in every mask), `UNK_ID`, `START_ID`, `END_ID`.

Example:

>>> config = ModelConfig(source_vocab_size=8000, target_vocab_size=8000, num_layers=2, d_model=256)
>>> config.replace(d_model=128).d_model
128
>>> ModelConfig.from_dict({"input_vocab_size": 100, "target_vocab_size": 100}).source_vocab_size
100
>>> ModelConfig(source_vocab_size=100, target_vocab_size=100, d_model=510).check()
Traceback (most recent call last):
...
ValueError: `d_model` must be divisible by `num_heads`. Received: d_model=510, num_heads=8
"""

import dataclasses
import math
import numbers

from keras_transformer.layers.arguments import check_positive_int, check_positive_number, check_rate

PAD_ID = 0
UNK_ID = 1
START_ID = 2
END_ID = 3

# The largest `max_length` (positions) a model may have: above every checkpoint family this package imports
# (512-1024), and small enough that the position table and a decoding cache of it fit in memory.
MAX_LENGTH = 65536
# The largest beam: far above what beam search gains from (4-12), small enough that its cache fits in memory.
MAX_BEAM_SIZE = 128
NORMALIZATIONS = ("gnmt", "length")
STOPPING_RULES = ("beams_ended", "cannot_improve")
SOFTMAX_OVER = ("allowed", "vocabulary")
_BOOLEAN_FIELDS = ("share_embeddings", "tie_output_embedding", "norm_first", "scale_embeddings", "output_bias")

# Names earlier versions wrote in config.json and `.keras` files, and today's name for each.
LEGACY_NAMES = {"input_vocab_size": "source_vocab_size", "length_penalty": "alpha"}


def _fields(cls):
    return tuple(field.name for field in dataclasses.fields(cls))


class _Config:
    """What the configuration parts share: `replace`, `to_dict` and `from_dict` by field name."""

    def replace(self, **changes):
        """A copy with some fields changed; an unknown name is a `ValueError` that lists the known ones."""
        _check_names(type(self), changes)
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        """The fields as JSON values (tuples as lists)."""
        return {name: list(value) if isinstance(value, tuple) else value for name, value in vars(self).items()}

    @classmethod
    def from_dict(cls, data, where="config"):
        """The part written by `to_dict` (or by an earlier version: `LEGACY_NAMES`); unknown names are refused.

        `where` names the source in the error (e.g. a file and its section).
        """
        if not isinstance(data, dict):
            raise ValueError(f"{where} must be a JSON object. Received: {data!r}"[:300])
        data = {LEGACY_NAMES.get(name, name): value for name, value in data.items()}
        _check_names(cls, data, where)
        return cls(**{name: tuple(v) if isinstance(v, list) else v for name, v in data.items()})


def _check_names(cls, names, where=None):
    unknown = sorted(set(names) - set(_fields(cls)))
    if unknown:
        where = f"{where}: " if where else ""
        raise ValueError(
            f"{where}{cls.__name__} has no field {unknown[0]!r}. Its fields: {', '.join(_fields(cls))}. "
            f"Received: {unknown[0]}={names[unknown[0]]!r}"[:400]
        )


@dataclasses.dataclass(frozen=True)
class ModelConfig(_Config):
    """Every option of `build_transformer`, each under its one name.

    Args:
        source_vocab_size: source vocabulary size (None until a tokenizer gives it).
        target_vocab_size: target vocabulary size (None until a tokenizer gives it).
        num_layers: encoder layers (and decoder layers unless `num_decoder_layers`).
        num_decoder_layers: decoder depth, if different from `num_layers`.
        d_model: model width (512 in the paper's base model).
        num_heads: attention heads; must divide `d_model`.
        d_ff: feed-forward inner width.
        dropout: dropout on embeddings and sublayer outputs.
        attention_dropout: dropout on the attention weights.
        activation_dropout: dropout after the feed-forward activation.
        max_length: longest source or target sequence.
        share_embeddings: one embedding matrix for source and target (needs one
            shared vocabulary, so the two sizes must be equal).
        tie_output_embedding: use the target embedding matrix as the output
            projection (paper section 3.4).
        norm_first: pre-norm layers (and a final LayerNorm per stack).
        activation: the feed-forward activation (a Keras activation name).
        layer_norm_epsilon: every LayerNorm's epsilon.
        position_layout: the sinusoidal table's columns, `"interleaved"` (the
            paper's) or `"concatenated"` (all sines, then all cosines: Marian's).
        scale_embeddings: multiply the token embeddings by √d_model.
        output_bias: a trained bias on the tied output logits (Marian's
            `final_logits_bias`).
        pad_id: the padding id (masked, never generated).
        target_pad_id: the target vocabulary's padding id, where it is not
            `pad_id` (two vocabularies of their own); None: `pad_id`.
        start_id: the id the decoder starts from (Marian: its padding id).
        end_id: the id that ends an output.
    """

    source_vocab_size: int = None
    target_vocab_size: int = None
    num_layers: int = 6
    num_decoder_layers: int = None
    d_model: int = 512
    num_heads: int = 8
    d_ff: int = 2048
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    max_length: int = 256
    share_embeddings: bool = False
    tie_output_embedding: bool = False
    norm_first: bool = False
    activation: str = "relu"
    layer_norm_epsilon: float = 1e-6
    position_layout: str = "interleaved"
    scale_embeddings: bool = True
    output_bias: bool = False
    pad_id: int = PAD_ID
    target_pad_id: int = None
    start_id: int = START_ID
    end_id: int = END_ID

    @property
    def decoder_layers(self):
        """The decoder's depth: `num_decoder_layers`, else `num_layers`."""
        return self.num_layers if self.num_decoder_layers is None else self.num_decoder_layers

    def special_ids(self):
        """`decoding.search_for`'s ids of this model: `start_id`, `end_id` and the target's `pad_id`."""
        return dict(start_id=self.start_id, end_id=self.end_id, pad_id=self.target_pad)

    @property
    def target_pad(self):
        """The target vocabulary's padding id: `target_pad_id`, else `pad_id`."""
        return self.pad_id if self.target_pad_id is None else self.target_pad_id

    def with_vocabulary(self, source_vocab_size, target_vocab_size=None):
        """A copy with the vocabulary sizes a tokenizer gives (one shared size when `target_vocab_size` is None)."""
        return self.replace(
            source_vocab_size=source_vocab_size,
            target_vocab_size=source_vocab_size if target_vocab_size is None else target_vocab_size,
        )

    def check(self):
        """`ValueError` naming the field, for a size that is not a positive int, a rate outside [0, 1), ...

        Returns the config itself.
        """
        for name in ("source_vocab_size", "target_vocab_size", "num_layers", "d_model", "num_heads", "d_ff"):
            check_positive_int(name, getattr(self, name))
        check_int_in_range("max_length", self.max_length, 1, MAX_LENGTH)
        for name in _BOOLEAN_FIELDS:
            check_bool(name, getattr(self, name))
        if not isinstance(self.activation, str):
            raise ValueError(f"`activation` must be a Keras activation name. Received: activation={self.activation!r}")
        if self.num_decoder_layers is not None:
            check_positive_int("num_decoder_layers", self.num_decoder_layers)
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            check_rate(name, getattr(self, name))
        check_positive_number("layer_norm_epsilon", self.layer_norm_epsilon)
        if self.share_embeddings and self.source_vocab_size != self.target_vocab_size:
            raise ValueError(
                "`share_embeddings=True` needs one shared vocabulary. Received: "
                f"source_vocab_size={self.source_vocab_size}, target_vocab_size={self.target_vocab_size}"
            )
        sizes = dict(pad_id=self.source_vocab_size, target_pad_id=self.target_vocab_size)
        for name in ("pad_id", "target_pad_id", "start_id", "end_id"):
            vocab = sizes.get(name, self.target_vocab_size)
            value = self.target_pad if name == "target_pad_id" else getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < vocab:
                raise ValueError(f"`{name}` must be an id in [0, {vocab}). Received: {name}={value!r}")
        if self.end_id in (self.target_pad, self.start_id):
            raise ValueError(
                f"`end_id` must differ from the target's padding id and `start_id`. Received: end_id={self.end_id}, "
                f"target padding id={self.target_pad}, start_id={self.start_id}"
            )
        if self.output_bias and not self.tie_output_embedding:
            raise ValueError(
                "`output_bias=True` is the tied output projection's bias (an untied one has its own): "
                "pass `tie_output_embedding=True`, or leave `output_bias` out"
            )
        if self.position_layout not in ("interleaved", "concatenated"):
            raise ValueError(
                "`position_layout` must be 'interleaved' or 'concatenated'. "
                f"Received: position_layout={self.position_layout!r}"
            )
        if self.d_model % self.num_heads:
            raise ValueError(
                f"`d_model` must be divisible by `num_heads`. Received: d_model={self.d_model}, "
                f"num_heads={self.num_heads}"
            )
        return self


@dataclasses.dataclass(frozen=True)
class DecodingConfig(_Config):
    """How a model decodes by default: `beam_size` (1 = greedy), the length penalty's `alpha`, `max_length`.

    `alpha` is the exponent of the length penalty that beam scores are
    divided by (what transformers and CTranslate2 call `length_penalty`);
    `max_length` (None: the model's) counts the output tokens, END included.
    This package's own runs decode with the defaults; an imported checkpoint
    records its own (`keras_transformer.pretrained`):

    - `normalization`: `"gnmt"`, `((5 + length) / 6) ** alpha` (GNMT's), or
      `"length"`, `length ** alpha` (transformers');
    - `stopping`: a source is done once `"beams_ended"` (`beam_size`
      hypotheses ended: fairseq's rule, transformers' `early_stopping=True`)
      or once it `"cannot_improve"` (no live beam can still beat the ended
      ones: transformers' default);
    - `force_end`: END is the only token allowed at the last step;
    - `banned_ids`: ids never generated, beside the start id (and the
      padding id, with `softmax_over="allowed"`);
    - `softmax_over`: `"allowed"`, log-probabilities over the tokens that may
      be generated (this package's), or `"vocabulary"`, over every token, the
      banned ones then removed (transformers').
    """

    beam_size: int = 4
    alpha: float = 0.6
    max_length: int = None
    normalization: str = "gnmt"
    stopping: str = "beams_ended"
    force_end: bool = False
    banned_ids: tuple = ()
    softmax_over: str = "allowed"
    tuned_on: str = None  # the split `alpha` was chosen on, where it was (`benchmarks/multi30k.py`)

    @classmethod
    def from_dict(cls, data, where="decoding"):
        """The settings `to_dict` wrote, checked (`check`): a `ValueError` names `where` and the field."""
        return super().from_dict(data, where).check(where=where)

    def check(self, vocab_size=None, model_max_length=None, where=None):
        """`ValueError` naming the field (after `where`, e.g. a file) for a setting of the wrong kind or range.

        `beam_size` is an int in [1, MAX_BEAM_SIZE]; `alpha` a finite number
        >= 0; `max_length` None or an int in [1, `model_max_length`, else
        MAX_LENGTH]; `banned_ids` ids in [0, `vocab_size`) where it is given;
        the choices one of theirs. Returns the config itself.

        Example:

        >>> DecodingConfig(beam_size=10**9).check(where="generation_config.json")
        Traceback (most recent call last):
        ...
        ValueError: generation_config.json: `beam_size` must be an int in [1, 128]. Received: beam_size=1000000000
        """
        try:
            check_int_in_range("beam_size", self.beam_size, 1, MAX_BEAM_SIZE)
            check_finite_number("alpha", self.alpha, low=0)
            if self.max_length is not None:
                check_int_in_range("max_length", self.max_length, 1, model_max_length or MAX_LENGTH)
            for name, choices in (
                ("normalization", NORMALIZATIONS),
                ("stopping", STOPPING_RULES),
                ("softmax_over", SOFTMAX_OVER),
            ):
                check_choice(name, getattr(self, name), choices)
            check_bool("force_end", self.force_end)
            check_ids("banned_ids", self.banned_ids, vocab_size)
            if self.tuned_on is not None and not isinstance(self.tuned_on, str):
                raise ValueError(f"`tuned_on` must be a split's name. Received: tuned_on={self.tuned_on!r}")
        except ValueError as error:
            raise ValueError(f"{where}: {error}" if where else str(error)) from None
        return self

    def search_options(self):
        """The keyword arguments of `decoding.search_for` that these settings name, besides the beam and alpha.

        Example:

        >>> DecodingConfig(normalization="length", banned_ids=(9,)).search_options()["banned_ids"]
        (9,)
        """
        return dict(
            normalization=self.normalization,
            stopping=self.stopping,
            force_end=self.force_end,
            banned_ids=tuple(self.banned_ids) or None,  # None: the searches' own (padding and start)
            softmax_over=self.softmax_over,
        )


@dataclasses.dataclass(frozen=True)
class DataConfig(_Config):
    """The corpus, its vocabulary and its batches.

    Args:
        corpus: a name of `keras_transformer.datasets.CORPORA`, or the user's files.
        vocab_size: the shared SentencePiece vocabulary's size.
        character_coverage: SentencePiece's share of characters to cover.
        subword_sampling: train on segmentations sampled with this alpha (0 = off).
        token_budget: tokens per batch, padding included.
        bucket_boundaries: the lengths batches are padded to.
        max_examples: train on this many pairs at most (0 = the whole split).
        dev_examples: hold out this many training pairs as a "dev" split.
    """

    corpus: str = "chatbot-ko"
    vocab_size: int = 8000
    character_coverage: float = 0.9995
    subword_sampling: float = 0.0
    token_budget: int = 4096
    bucket_boundaries: tuple = (16, 32, 48, 64)
    max_examples: int = 0
    dev_examples: int = 0


@dataclasses.dataclass(frozen=True)
class TrainingConfig(_Config):
    """The optimisation: the paper's warmup schedule, label smoothing, the length of the run.

    Args:
        warmup_steps: steps of the schedule's linear warmup.
        learning_rate_scale: a factor on the schedule's rate.
        cooldown_fraction: anneal the rate linearly to 0 over this last share of the run.
        label_smoothing: the loss's label smoothing.
        epochs: epochs at most.
        max_minutes: stop after this many minutes (0 = no limit).
        average_last: average the weights of the last N epochs.
        ensemble: train this many models one after the other; decode them together.
    """

    warmup_steps: int = 4000
    learning_rate_scale: float = 1.0
    cooldown_fraction: float = 0.0
    label_smoothing: float = 0.1
    epochs: int = 20
    max_minutes: float = 0.0
    average_last: int = 1
    ensemble: int = 1


def check_int_in_range(name, value, low, high):
    """`value` as an int if it is an integer in `[low, high]` (not a bool), else a `ValueError` naming `name`.

    Example:

    >>> check_int_in_range("beam_size", "4", 1, 128)
    Traceback (most recent call last):
    ...
    ValueError: `beam_size` must be an int in [1, 128]. Received: beam_size='4'
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= value <= high:
        raise ValueError(f"`{name}` must be an int in [{low}, {high}]. Received: {name}={_short(value)}")
    return int(value)


def check_finite_number(name, value, low=-math.inf):
    """`value` as a float if it is a finite number >= `low` (not a bool or a string), else a `ValueError`."""
    try:
        valid = not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)
    except OverflowError:  # an int past the float range
        valid = False
    if not valid or value < low:
        bound = f" >= {low:g}" if low > -math.inf else ""
        raise ValueError(f"`{name}` must be a finite number{bound}. Received: {name}={_short(value)}")
    return float(value)


def check_bool(name, value):
    """`value` if it is True or False (a JSON boolean: not "false", not 0), else a `ValueError` naming `name`."""
    if not isinstance(value, bool):
        raise ValueError(f"`{name}` must be true or false. Received: {name}={_short(value)}")
    return value


def check_choice(name, value, choices):
    """`value` if it is one of `choices`, else a `ValueError` naming `name` and the choices."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"`{name}` must be one of {choices}. Received: {name}={_short(value)}")
    return value


def check_ids(name, ids, vocab_size=None):
    """`ids` if it is a sequence of token ids (ints in [0, `vocab_size`) where given), else a `ValueError`."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, (list, tuple)):
        raise ValueError(f"`{name}` must be a list of token ids. Received: {name}={_short(ids)}")
    high = vocab_size if vocab_size is not None else 2**31
    for index in ids:
        if isinstance(index, bool) or not isinstance(index, numbers.Integral) or not 0 <= index < high:
            raise ValueError(f"`{name}` must hold ids in [0, {high}). Received: {_short(index)} in {name}")
    return ids


def _short(value, limit=80):
    """`repr(value)`, cut to `limit` characters; a huge int described by its digits, never printed whole."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**limit:
        return f"an int of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
