"""What a loaded `Translator` SavedModel recorded of its controls: its languages and its special tokens.

Read by the server (`serving.signatures.ServedModel`) and by the savedmodel
engine (`LoadedTranslator`) alike, from what `tf.saved_model.load` returned.

Example:

>>> module = tf.saved_model.load("saved_models/nllb-export")  # doctest: +SKIP
>>> exported_languages(module).target_lang  # doctest: +SKIP
'fra_Latn'
"""

import tensorflow as tf

from keras_transformer.translators.controls import Languages, pieces_of, special_tokens
from keras_transformer.translators.token_ids import texts


def exported_languages(module):
    """The `controls.Languages` a loaded `Translator` export recorded (none for one exported before they existed)."""
    codes = getattr(module, "language_codes", None)
    if codes is None:
        return Languages()
    source, target = (value.decode("utf-8") or None for value in module.default_languages.numpy().tolist())
    flag = getattr(module, "target_in_source", None)  # MADLAD's; absent from exports made before it
    in_source = bool(flag.numpy()) if flag is not None else False
    return Languages(tuple(code.decode("utf-8") for code in codes.numpy().tolist()), source, target, in_source)


def exported_special_tokens(module):
    """The special tokens' texts a loaded `Translator` export recorded (`controls.prefix_error`).

    An export from before they were recorded gives the pieces of its
    special ids and language tokens; one from before banned words, none.
    """
    recorded = getattr(module, "prefix_special_tokens", None)
    if recorded is not None:
        return tuple(texts(recorded))
    pieces = getattr(module, "target_pieces", None)
    if pieces is None:
        return ()
    ids = module.unbanned_ids.numpy().tolist()
    codes = getattr(module, "language_codes", None)
    if codes is not None and codes.shape[0] and hasattr(module.target_tokenizer, "language_ids"):
        ids += module.target_tokenizer.language_ids(tf.convert_to_tensor(codes)).numpy().tolist()
    return special_tokens(pieces_of(texts(pieces), ids))
