"""`build_model`: the model of a `ModelConfig`, whichever of the three architectures it names."""

from keras_transformer.models.builder import build_transformer
from keras_transformer.models.decoder_only import build_decoder_only
from keras_transformer.models.encoder_only import build_encoder_only

BUILDERS = {
    "encoder_decoder": build_transformer,
    "decoder_only": build_decoder_only,
    "encoder_only": build_encoder_only,
}


def build_model(config):
    """The model `config.architecture` names, built from `config` (the paper's, GPT's or BERT's).

    Example:

    >>> from keras_transformer.config import ModelConfig
    >>> config = ModelConfig(source_vocab_size=50, target_vocab_size=50, num_layers=1, d_model=16, num_heads=2,
    ...                      d_ff=32, max_length=8, architecture="decoder_only", activation="gelu_tanh")
    >>> type(build_model(config)).__name__
    'DecoderOnlyModel'
    """
    return BUILDERS[config.architecture](config=config)
