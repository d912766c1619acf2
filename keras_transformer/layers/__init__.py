"""The layers of the Transformer, each a drop-in Keras layer."""

from keras_transformer.layers.activations import gelu_tanh
from keras_transformer.layers.attention import MultiHeadAttention, scaled_dot_product_attention
from keras_transformer.layers.classification_head import SequenceClassificationHead
from keras_transformer.layers.decoder import Decoder
from keras_transformer.layers.decoder_layer import DecoderLayer
from keras_transformer.layers.embedding import TokenAndPositionEmbedding
from keras_transformer.layers.encoder import Encoder
from keras_transformer.layers.encoder_layer import EncoderLayer
from keras_transformer.layers.feed_forward import PositionwiseFeedForward
from keras_transformer.layers.learned_positions import LearnedPositionEmbedding
from keras_transformer.layers.masked_lm_head import MaskedLMHead
from keras_transformer.layers.masks import causal_mask, merge_masks, padding_mask
from keras_transformer.layers.positional_encoding import PositionalEncoding, positional_encoding

__all__ = [
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "LearnedPositionEmbedding",
    "MaskedLMHead",
    "MultiHeadAttention",
    "PositionalEncoding",
    "PositionwiseFeedForward",
    "SequenceClassificationHead",
    "TokenAndPositionEmbedding",
    "causal_mask",
    "gelu_tanh",
    "merge_masks",
    "padding_mask",
    "positional_encoding",
    "scaled_dot_product_attention",
]
