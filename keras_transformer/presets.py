"""Named training configurations for `keras-transformer train --preset NAME`.

Each preset names its corpus, the model's size, the vocabulary, the batches
and the optimisation, in one readable place: a `ModelConfig` and the data,
training and decoding parts (`keras_transformer.config`). Every setting has
one name across the parts, so `Preset.replace(...)` derives a variant by
those names (e.g. `PRESETS["multi30k-en-de"].replace(d_model=512)`). A preset
also trains on a user's own files (`--train-source/--train-target` or
`--train-tsv`: its model and recipe, their corpus), and `--init-from RUN`
fine-tunes RUN with RUN's recorded preset unless a preset of the same model
shape is named.

| preset           | corpus          | layers | d_model | heads | d_ff | vocab (shared) | tokens/batch |
|------------------|-----------------|--------|---------|-------|------|----------------|--------------|
| `tiny`           | chatbot-ko, 2k  | 1      | 32      | 2     | 64   | 1000           | 1024         |
| `chatbot-ko`     | chatbot-ko      | 2      | 256     | 8     | 512  | 8000           | 2048         |
| `multi30k-en-de` | Multi30k en→de  | 4      | 128     | 4     | 256  | 12000, sampled | 3072         |
| `multi30k-de-en` | Multi30k de→en  | 4      | 128     | 4     | 256  | 8000           | 3072         |
| `spa-en`         | Tatoeba es→en   | 2      | 256     | 4     | 1024 | 8000           | 6144         |
| `gpt-ko`         | chatbot-ko, LM  | 4      | 128     | 4     | 512  | 8000           | 2048         |
| `bert-ko`        | chatbot-ko, MLM | 2      | 128     | 4     | 512  | 8000 + [MASK]  | 2048         |

The chatbot preset is the Korean Transformer chatbot tutorial's model
(2 layers, d_model 256, 8 heads, d_ff 512, dropout 0.1).

The Multi30k presets are a recipe for a small corpus on a small machine, where
the number of updates, not the model, limits quality: a narrow, deep model
(4+4 layers of width 128), fine length buckets (every 4 tokens up to 24),
batches of ~3,072 tokens, a warmup of 1,200 steps, dropout 0.2, label
smoothing 0.1, a shared vocabulary with tied embeddings, the average of the
last 8 epochs' weights, and beam search with a GNMT length penalty.
`max_minutes` caps the run at 86 minutes from the start of `train` (tokenizer
and compilation included). En→de uses 12,000 pieces and trains on a
segmentation sampled anew every epoch (subword regularization, α 0.3);
de→en keeps 8,000 pieces and no sampling. Why each setting, what it scored
and the variants that lost: docs/multi30k.md.
"""

import dataclasses

from keras_transformer.config import DataConfig, DecodingConfig, ModelConfig, TrainingConfig
from keras_transformer.config_fields import LEGACY_NAMES, check_names

# The model of a preset unless it says otherwise: the Korean chatbot tutorial's, with one shared,
# tied vocabulary (the vocabulary's size comes from the tokenizer a run trains).
PRESET_MODEL = ModelConfig(
    num_layers=2, d_model=256, num_heads=8, d_ff=512, max_length=64, share_embeddings=True, tie_output_embedding=True
)
PARTS = ("model", "data", "training", "decoding")


@dataclasses.dataclass(frozen=True)
class Preset:
    """A training configuration: a name, the model, and the data, training and decoding parts.

    `Preset.of(name, corpus, **settings)` and `replace(**settings)` take every
    part's settings by name (`d_model`, `vocab_size`, `epochs`, `alpha`, ...);
    `max_length` is the model's. `to_dict` writes them flat, as a run's
    config.json records them, and `from_dict` reads that back (earlier
    versions' names too).

    Example:

    >>> preset = Preset.of("mine", "chatbot-ko", d_model=128, epochs=5)
    >>> preset.model.d_model, preset.training.epochs, preset.data.corpus
    (128, 5, 'chatbot-ko')
    >>> preset.replace(alpha=1.0).decoding.alpha
    1.0
    """

    name: str
    model: ModelConfig = PRESET_MODEL
    data: DataConfig = DataConfig()
    training: TrainingConfig = TrainingConfig()
    decoding: DecodingConfig = DecodingConfig()

    @classmethod
    def of(cls, name, corpus, **settings):
        """A preset of `name` on `corpus`, with `settings` over the defaults of each part."""
        return cls(name, data=DataConfig(corpus=corpus)).replace(**settings)

    def replace(self, **settings):
        """A copy with settings changed, each routed to the part that has it (`name` too)."""
        routed = {part: {} for part in PARTS}
        for setting, value in settings.items():
            part = next((part for part in PARTS if setting in _field_names(getattr(self, part))), None)
            if part is None and setting != "name":
                check_names(type(self), {setting: value}, "preset")  # raises, listing the fields
            if part is not None:
                routed[part][setting] = value
        changes = {part: getattr(self, part).replace(**routed[part]) for part in PARTS if routed[part]}
        if "name" in settings:
            changes["name"] = settings["name"]
        return dataclasses.replace(self, **changes)

    def model_config(self, vocab_size):
        """The `ModelConfig` of a run whose tokenizer has `vocab_size` pieces (one shared vocabulary)."""
        return self.model.with_vocabulary(vocab_size)

    def to_dict(self):
        """Every setting, flat, by its one name (the vocabulary sizes, a run's own, left out)."""
        flat = {"name": self.name}
        for part in PARTS:
            flat.update(getattr(self, part).to_dict())
        for per_run in ("source_vocab_size", "target_vocab_size"):
            flat.pop(per_run)
        return flat

    @classmethod
    def from_dict(cls, data, where="preset"):
        """The preset `to_dict` wrote, or an earlier version's flat preset; unknown names are refused."""
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            raise ValueError(f"{where} must be a JSON object with a `name`. Received: {data!r}"[:300])
        settings = {name: tuple(v) if isinstance(v, list) else v for name, v in data.items() if name != "name"}
        settings = {LEGACY_NAMES.get(name, name): value for name, value in settings.items()}
        try:
            return cls(data["name"]).replace(**settings)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None


def _field_names(part):
    return {field.name for field in dataclasses.fields(part)}


MULTI30K_EN_DE = Preset.of(
    "multi30k-en-de",
    "multi30k-en-de",
    num_layers=4,
    d_model=128,
    num_heads=4,
    d_ff=256,
    dropout=0.2,
    token_budget=3072,
    bucket_boundaries=(12, 16, 20, 24, 32, 48, 64),
    vocab_size=12000,
    subword_sampling=0.3,
    warmup_steps=1200,
    learning_rate_scale=0.8,
    epochs=100,
    max_minutes=86.0,
    average_last=8,
    beam_size=5,
)

PRESETS = {
    preset.name: preset
    for preset in [
        Preset.of(
            "tiny",
            "chatbot-ko",
            num_layers=1,
            d_model=32,
            num_heads=2,
            d_ff=64,
            vocab_size=1000,
            character_coverage=0.98,
            max_length=32,
            token_budget=1024,
            bucket_boundaries=(16, 32),
            warmup_steps=100,
            epochs=2,
            max_examples=2000,
        ),
        Preset.of(
            "chatbot-ko",
            "chatbot-ko",
            warmup_steps=400,
            epochs=30,
            max_length=48,
            token_budget=2048,
            bucket_boundaries=(16, 32, 48),
        ),
        MULTI30K_EN_DE,
        MULTI30K_EN_DE.replace(name="multi30k-de-en", corpus="multi30k-de-en", vocab_size=8000, subword_sampling=0.0),
        # GPT from the decoder's layers: a causal language model of the chatbot corpus's questions and
        # answers, each pair one text (`training.causal_lm`), with GPT-2's choices (`build_decoder_only`).
        Preset.of(
            "gpt-ko",
            "chatbot-ko",
            architecture="decoder_only",
            num_layers=4,
            d_model=128,
            num_heads=4,
            d_ff=512,
            activation="gelu_tanh",
            norm_first=True,
            position_layout="learned",
            scale_embeddings=False,
            layer_norm_epsilon=1e-5,
            max_length=64,
            vocab_size=8000,
            token_budget=2048,
            bucket_boundaries=(16, 32, 48, 64),
            warmup_steps=400,
            label_smoothing=0.0,
            epochs=20,
            beam_size=1,
        ),
        # BERT from the encoder's layers: masked-LM pretraining on the chatbot corpus's pairs, then a classifier
        # fine-tuned to its label column (`training.masked_lm`), with BERT's choices (`build_encoder_only`).
        Preset.of(
            "bert-ko",
            "chatbot-ko",
            architecture="encoder_only",
            num_layers=2,
            d_model=128,
            num_heads=4,
            d_ff=512,
            activation="gelu",
            norm_first=False,
            position_layout="learned",
            scale_embeddings=False,
            segment_vocab_size=2,
            embedding_norm=True,
            layer_norm_epsilon=1e-12,
            attention_dropout=0.1,
            max_length=64,
            vocab_size=8000,
            token_budget=2048,
            bucket_boundaries=(16, 32, 48, 64),
            warmup_steps=400,
            label_smoothing=0.0,
            epochs=10,
        ),
        Preset.of(
            "spa-en",
            "spa-en",
            num_layers=2,
            num_heads=4,
            d_ff=1024,
            token_budget=6144,
            warmup_steps=4000,
            epochs=15,
        ),
    ]
}


def get_preset(name):
    """The preset called `name`, or a `ValueError` listing the names."""
    if name not in PRESETS:
        raise ValueError(f"`preset` must be one of {sorted(PRESETS)}. Received: preset={name!r}")
    return PRESETS[name]
