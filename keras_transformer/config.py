"""One configuration, from preset to SavedModel: the model's options, each named once.

`ModelConfig` names every option of `build_transformer`; the model keeps it
(`model.config`) and a `.keras` file stores it. A `Preset`
(`keras_transformer.presets`) is a `ModelConfig` plus its data, training and
decoding parts, and a run's `config.json` records them
(`keras_transformer.runs.RunConfig`). Every setting has one name
in all of them, on the command line too (`--alpha` is `alpha`). Names used by
earlier versions' files (`input_vocab_size`, `length_penalty`) are read as
today's (`config_fields.LEGACY_NAMES`).

The special token ids of this package's own vocabularies are defined here,
once: `PAD_ID` (also padding in every mask), `UNK_ID`, `START_ID`, `END_ID`.

Example:

>>> config = ModelConfig(source_vocab_size=8000, target_vocab_size=8000, num_layers=2, d_model=256)
>>> config.replace(d_model=128).d_model
128
>>> ModelConfig.from_dict({"input_vocab_size": 100, "target_vocab_size": 100}).source_vocab_size
100
>>> ModelConfig(key_block_size=0)  # each field is checked when the config is made
Traceback (most recent call last):
...
ValueError: `key_block_size` must be a positive int. Received: key_block_size=0
>>> ModelConfig(source_vocab_size=100, target_vocab_size=100, d_model=510).check()  # and across fields by check
Traceback (most recent call last):
...
ValueError: `d_model` must be divisible by `num_heads`. Received: d_model=510, num_heads=8
"""

import dataclasses

from keras_transformer import kinds
from keras_transformer.config_fields import Fields, setting
from keras_transformer.kinds import MAX_BEAM_SIZE, MAX_LENGTH, check_ids, check_int_in_range  # noqa: F401

PAD_ID = 0
UNK_ID = 1
START_ID = 2
END_ID = 3

NORMALIZATIONS = ("gnmt", "length")
STOPPING_RULES = ("beams_ended", "cannot_improve")
CUT_OFF_RULES = ("after_ended", "by_score")
SOFTMAX_OVER = ("allowed", "vocabulary")
POSITION_LAYOUTS = ("interleaved", "concatenated", "fairseq", "learned", "relative")
NORMS = ("layer", "rms")  # LayerNorm, T5's RMS normalization
FEED_FORWARDS = ("plain", "gated")  # the paper's, T5 v1.1's gated one
# The three models of the same layers: the paper's, GPT's (`build_decoder_only`), BERT's (`build_encoder_only`).
ARCHITECTURES = ("encoder_decoder", "decoder_only", "encoder_only")
ENCODER_HEADS = ("masked_lm", "classifier", "none")


@dataclasses.dataclass(frozen=True)
class ModelConfig(Fields):
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
        key_block_size: None (the default): attention weights computed at
            once; an int: attention over blocks of that many keys (the online
            softmax), training memory linear in the length instead of
            quadratic, the same outputs up to rounding; needs
            `attention_dropout=0`. Decoding with a cache is unchanged.
        max_length: longest source or target sequence.
        share_embeddings: one embedding matrix for source and target (needs one
            shared vocabulary, so the two sizes must be equal).
        tie_output_embedding: use the target embedding matrix as the output
            projection (paper section 3.4).
        norm_first: pre-norm layers (and a final LayerNorm per stack).
        activation: the feed-forward activation (a Keras activation name).
        layer_norm_epsilon: every LayerNorm's epsilon.
        position_layout: the sinusoidal table's columns, `"interleaved"` (the
            paper's), `"concatenated"` (all sines, then all cosines: Marian's)
            or `"fairseq"` (M2M100's and NLLB's, numbered from `pad_id + 1`);
            `"learned"`, a trained table (GPT's, BERT's, mBART's); or
            `"relative"`, T5's relative position bias on the self-attention
            scores (`RelativePositionBias`), no position in the embeddings.
        scale_embeddings: multiply the token embeddings by √d_model.
        output_bias: a trained bias on the tied output logits (Marian's
            `final_logits_bias`).
        pad_id: the padding id (masked, never generated).
        target_pad_id: the target vocabulary's padding id, where it is not
            `pad_id` (two vocabularies of their own); None: `pad_id`.
        start_id: the id the decoder starts from (Marian: its padding id;
            M2M100 and NLLB: `end_id`, fairseq's `</s>`).
        end_id: the id that ends an output.
        architecture: `"encoder_decoder"` (`build_transformer`), `"decoder_only"`
            (GPT: `build_decoder_only`, the target side alone) or
            `"encoder_only"` (BERT: `build_encoder_only`, the source side alone).
        segment_vocab_size: segment (token type) ids an encoder-only model
            embeds (BERT's `type_vocab_size`); 0: none.
        embedding_norm: a LayerNorm on the embeddings' sum (BERT's).
        encoder_head: an encoder-only model's output, `"masked_lm"` (logits
            over the vocabulary at every position), `"classifier"` (logits
            over `num_classes` from the pooled first token) or `"none"` (the
            hidden states: a `BertModel`'s, for sentence embeddings).
        num_classes: the classifier head's classes.
        position_offset: the learned table's rows before position 0's
            (mBART's 2).
        relative_attention_num_buckets, relative_attention_max_distance:
            T5's relative position buckets (32 and 128), with
            `position_layout="relative"`.
        key_dim: each attention head's width; None: `d_model // num_heads`
            (T5's `d_kv`, which may differ).
        norm: `"layer"` (LayerNorm) or `"rms"` (T5's RMS normalization), in
            the layers and the final norms.
        feed_forward: `"plain"` (the paper's) or `"gated"` (T5 v1.1's,
            mT5's and MADLAD's `activation(W₁x) ⊙ Vx`).
        use_bias: biases on the attention and feed-forward projections (T5's
            have none).
        scale_attention: divide the attention scores by `√key_dim` (T5 does
            not).
        scale_output: multiply the decoder's output by `d_model ** -0.5`
            before the tied output projection (T5's).

    With `architecture="encoder_decoder"`, `embedding_norm` is a LayerNorm
    after each stack's embeddings (mBART's `layernorm_embedding`); shared
    embeddings then keep a norm, and learned positions, of each side's own.
    """

    source_vocab_size: int = setting(None, kinds.POSITIVE_INT)
    target_vocab_size: int = setting(None, kinds.POSITIVE_INT)
    num_layers: int = setting(6, kinds.POSITIVE_INT)
    num_decoder_layers: int = setting(None, kinds.POSITIVE_INT)
    d_model: int = setting(512, kinds.POSITIVE_INT)
    num_heads: int = setting(8, kinds.POSITIVE_INT)
    d_ff: int = setting(2048, kinds.POSITIVE_INT)
    dropout: float = setting(0.1, kinds.RATE)
    attention_dropout: float = setting(0.0, kinds.RATE)
    activation_dropout: float = setting(0.0, kinds.RATE)
    key_block_size: int = setting(None, kinds.POSITIVE_INT)
    max_length: int = setting(256, kinds.LENGTH)
    share_embeddings: bool = setting(False, kinds.BOOL)
    tie_output_embedding: bool = setting(False, kinds.BOOL)
    norm_first: bool = setting(False, kinds.BOOL)
    activation: str = setting("relu", kinds.TEXT)
    layer_norm_epsilon: float = setting(1e-6, kinds.POSITIVE_NUMBER)
    position_layout: str = setting("interleaved", kinds.choice(POSITION_LAYOUTS))
    scale_embeddings: bool = setting(True, kinds.BOOL)
    output_bias: bool = setting(False, kinds.BOOL)
    pad_id: int = setting(PAD_ID, kinds.int_range(0, 2**31 - 1))
    target_pad_id: int = setting(None, kinds.int_range(0, 2**31 - 1))
    start_id: int = setting(START_ID, kinds.int_range(0, 2**31 - 1))
    end_id: int = setting(END_ID, kinds.int_range(0, 2**31 - 1))
    architecture: str = setting("encoder_decoder", kinds.choice(ARCHITECTURES))
    segment_vocab_size: int = setting(0, kinds.NON_NEGATIVE_INT)
    embedding_norm: bool = setting(False, kinds.BOOL)
    encoder_head: str = setting("masked_lm", kinds.choice(ENCODER_HEADS))
    num_classes: int = setting(None, kinds.POSITIVE_INT)
    position_offset: int = setting(0, kinds.NON_NEGATIVE_INT)
    relative_attention_num_buckets: int = setting(32, kinds.POSITIVE_INT)
    relative_attention_max_distance: int = setting(128, kinds.POSITIVE_INT)
    key_dim: int = setting(None, kinds.POSITIVE_INT)
    norm: str = setting("layer", kinds.choice(NORMS))
    feed_forward: str = setting("plain", kinds.choice(FEED_FORWARDS))
    use_bias: bool = setting(True, kinds.BOOL)
    scale_attention: bool = setting(True, kinds.BOOL)
    scale_output: bool = setting(False, kinds.BOOL)

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

    @property
    def decoder_attends_padding(self):
        """Whether decoder padding is attended like any token (fairseq-layout models, as transformers' M2M100)."""
        return self.position_layout == "fairseq"

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
        for name in ("source_vocab_size", "target_vocab_size"):  # None until a tokenizer gives them: not here
            kinds.POSITIVE_INT.check(name, getattr(self, name))
        self.check_fields()
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
        if self.architecture == "encoder_only" and self.start_id == self.pad_id:
            raise ValueError(f"An encoder-only model's `start_id` ([CLS]) must not be its padding id {self.pad_id}")
        # GPT-2 has one id for padding, start and end: a decoder-only model may too.
        if self.architecture != "decoder_only" and self.end_id == self.target_pad:
            raise ValueError(
                f"`end_id` must differ from the target's padding id. Received: end_id={self.end_id}, "
                f"target padding id={self.target_pad}"
            )
        if self.output_bias and not self.tie_output_embedding:
            raise ValueError(
                "`output_bias=True` is the tied output projection's bias (an untied one has its own): "
                "pass `tie_output_embedding=True`, or leave `output_bias` out"
            )
        if self.key_block_size is not None and self.attention_dropout:
            raise ValueError(
                "`key_block_size` needs `attention_dropout=0` (dropout on the attention weights is not computed in "
                f"blocks). Received: key_block_size={self.key_block_size}, attention_dropout={self.attention_dropout}"
            )
        if self.scale_output and not self.tie_output_embedding:
            raise ValueError("`scale_output=True` scales the tied output projection: pass `tie_output_embedding=True`")
        if self.position_layout == "relative":
            self._check_buckets()
        if self.key_dim is None and self.d_model % self.num_heads:
            raise ValueError(
                f"`d_model` must be divisible by `num_heads`. Received: d_model={self.d_model}, "
                f"num_heads={self.num_heads}"
            )
        if self.architecture == "encoder_only" and self.encoder_head == "classifier" and self.num_classes is None:
            raise ValueError("`encoder_head='classifier'` needs `num_classes`, the classes it tells apart")
        return self

    def _check_buckets(self):
        """The relative buckets leave each direction an exact bucket, and the largest distance lies beyond them."""
        exact = self.relative_attention_num_buckets // 4  # of each direction, in the encoder
        if exact < 1 or self.relative_attention_max_distance <= exact:
            raise ValueError(
                "`relative_attention_num_buckets` must be at least 4 and `relative_attention_max_distance` larger than "
                f"a quarter of it. Received: relative_attention_num_buckets={self.relative_attention_num_buckets}, "
                f"relative_attention_max_distance={self.relative_attention_max_distance}"
            )


@dataclasses.dataclass(frozen=True)
class DecodingConfig(Fields):
    """How a model decodes by default: `beam_size` (1 = greedy), the length penalty's `alpha`, `max_length`.

    `alpha` is the exponent of the length penalty that beam scores are
    divided by (what transformers and CTranslate2 call `length_penalty`);
    `max_new_tokens` (None: the model's `max_length`) counts the output
    tokens, END included, as transformers' `max_new_tokens` does.
    This package's own runs decode with the defaults; an imported checkpoint
    records its own (`keras_transformer.pretrained`):

    - `normalization`: `"gnmt"`, `((5 + length) / 6) ** alpha` (GNMT's), or
      `"length"`, `length ** alpha` (transformers');
    - `stopping`: a source is done once `"beams_ended"` (`beam_size`
      hypotheses ended: fairseq's rule, transformers' `early_stopping=True`)
      or once it `"cannot_improve"` (no live beam can still beat the ended
      ones: transformers' default);
    - `cut_off`: where hypotheses cut off by the length limit rank:
      `"after_ended"`, after every ended one (fairseq's), or `"by_score"`,
      among them by score (transformers');
    - `force_end`: END is the only token allowed at the last step;
    - `banned_ids`: ids never generated, beside the start id (and the
      padding id, with `softmax_over="allowed"`);
    - `softmax_over`: `"allowed"`, log-probabilities over the tokens that may
      be generated (this package's), or `"vocabulary"`, over every token, the
      banned ones then removed (transformers').
    """

    beam_size: int = setting(4, kinds.BEAM_SIZE)
    alpha: float = setting(0.6, kinds.NON_NEGATIVE_NUMBER)
    max_new_tokens: int = setting(None, kinds.LENGTH)
    normalization: str = setting("gnmt", kinds.choice(NORMALIZATIONS))
    stopping: str = setting("beams_ended", kinds.choice(STOPPING_RULES))
    cut_off: str = setting("after_ended", kinds.choice(CUT_OFF_RULES))
    force_end: bool = setting(False, kinds.BOOL)
    banned_ids: tuple = setting((), kinds.IDS)
    softmax_over: str = setting("allowed", kinds.choice(SOFTMAX_OVER))
    tuned_on: str = setting(None, kinds.TEXT)  # the split `alpha` was chosen on (`benchmarks/multi30k.py`)

    _LEGACY_NAMES = {"max_length": "max_new_tokens"}  # before, one name with the model's positions

    @classmethod
    def from_dict(cls, data, where="decoding"):
        """The settings `to_dict` wrote, checked (`check`): a `ValueError` names `where` and the field."""
        return super().from_dict(data, where).check(where=where)

    def check(self, vocab_size=None, model_max_length=None, where=None):
        """`ValueError` naming the field (after `where`, e.g. a file) for a setting of the wrong kind or range.

        Each field by its kind; besides, `max_new_tokens` at most
        `model_max_length` and `banned_ids` in [0, `vocab_size`) where they
        are given. Returns the config itself.

        Example:

        >>> DecodingConfig(max_new_tokens=300).check(model_max_length=256, where="generation_config.json")
        Traceback (most recent call last):
        ...
        ValueError: generation_config.json: `max_new_tokens` must be an int in [1, 256]. Received: max_new_tokens=300
        """
        try:
            self.check_fields()
            if self.max_new_tokens is not None and model_max_length is not None:
                check_int_in_range("max_new_tokens", self.max_new_tokens, 1, model_max_length)
            check_ids("banned_ids", self.banned_ids, vocab_size)
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
            cut_off=self.cut_off,
            force_end=self.force_end,
            banned_ids=tuple(self.banned_ids) or None,  # None: the searches' own (padding and start)
            softmax_over=self.softmax_over,
        )


@dataclasses.dataclass(frozen=True)
class DataConfig(Fields):
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

    corpus: str = setting("chatbot-ko", kinds.TEXT)
    vocab_size: int = setting(8000, kinds.POSITIVE_INT)
    character_coverage: float = setting(0.9995, kinds.UNIT)
    subword_sampling: float = setting(0.0, kinds.UNIT)
    token_budget: int = setting(4096, kinds.POSITIVE_INT)
    bucket_boundaries: tuple = setting((16, 32, 48, 64), kinds.POSITIVE_INTS)
    max_examples: int = setting(0, kinds.NON_NEGATIVE_INT)
    dev_examples: int = setting(0, kinds.NON_NEGATIVE_INT)


@dataclasses.dataclass(frozen=True)
class TrainingConfig(Fields):
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

    warmup_steps: int = setting(4000, kinds.POSITIVE_INT)
    learning_rate_scale: float = setting(1.0, kinds.POSITIVE_NUMBER)
    cooldown_fraction: float = setting(0.0, kinds.RATE)
    label_smoothing: float = setting(0.1, kinds.RATE)
    epochs: int = setting(20, kinds.POSITIVE_INT)
    max_minutes: float = setting(0.0, kinds.NON_NEGATIVE_NUMBER)
    average_last: int = setting(1, kinds.POSITIVE_INT)
    ensemble: int = setting(1, kinds.POSITIVE_INT)
