"""A sequence-classification head: the pooled first token, then logits over the classes."""

import keras

from keras_transformer.kinds import check_positive_int, check_rate
from keras_transformer.layers.hash_dropout import HashDropout
from keras_transformer.layers.shapes import check_sequence


@keras.saving.register_keras_serializable(package="keras_transformer")
class SequenceClassificationHead(keras.layers.Layer):
    """`W_c · dropout(tanh(W_p h₀ + b_p)) + b_c`: class logits from the first token's state.

    The first position (BERT's `[CLS]`) is pooled by a dense layer with a
    tanh (`pooler`, BERT's `bert.pooler.dense`), then projected to the
    classes (`classifier`), as transformers' `BertForSequenceClassification` does.

    Args:
        d_model: the width of the hidden states.
        num_classes: the classes told apart.
        dropout: dropout on the pooled vector.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        hidden: `(batch, length, d_model)`.
        training: whether dropout is active.

    Example:

    >>> head = SequenceClassificationHead(16, num_classes=3)
    >>> tuple(head(keras.ops.ones((2, 5, 16))).shape)
    (2, 3)
    """

    def __init__(self, d_model, num_classes, dropout=0.1, **kwargs):
        d_model = check_positive_int("d_model", d_model)
        num_classes = check_positive_int("num_classes", num_classes)
        check_rate("dropout", dropout)
        super().__init__(**kwargs)
        self.d_model, self.num_classes, self.dropout = d_model, num_classes, dropout
        common = {"dtype": self.dtype_policy}
        self.pooler = keras.layers.Dense(d_model, activation="tanh", name="pooler", **common)
        self.dropout_layer = HashDropout(dropout, name="pooled_dropout", **common)
        self.classifier = keras.layers.Dense(num_classes, name="classifier", **common)

    def build(self, input_shape):
        check_sequence(input_shape, "hidden", self.d_model)
        self.pooler.build((input_shape[0], self.d_model))
        self.classifier.build((input_shape[0], self.d_model))
        self.built = True

    def pooled(self, hidden):
        """The pooled first token, `(batch, d_model)`."""
        return self.pooler(hidden[:, 0])

    def call(self, hidden, training=None):
        check_sequence(hidden, "hidden", self.d_model)
        return self.classifier(self.dropout_layer(self.pooled(hidden), training=training))

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.num_classes)

    def get_config(self):
        config = super().get_config()
        config.update({"d_model": self.d_model, "num_classes": self.num_classes, "dropout": self.dropout})
        return config
