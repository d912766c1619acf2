"""What every translator shares, whichever engine decodes it: the interface, its input checks, the cut-off warning.

`interface.TranslatorInterface` is the contract of the four translators
(the engines': the XLA `Translator`, the SavedModel's `LoadedTranslator`,
the `CTranslate2Translator` and the LiteRT export's host `Translator`), and
`inputs` checks what they are given, in Python, before any engine runs
(the sentence rule itself is `keras_transformer.input_rules`);
`token_ids` reads sentences as ids for the engines, `translation`
translates and scores many lines with any of them in length-sorted batches,
`exported` reads what a SavedModel export recorded of its controls, and
`stream_text` what a stepped decode reads besides its steps (the XLA
streams and the server's in-flight rows).
This wing sits below engines/, serving/ and litert/ and imports decoding,
config, errors and input_rules only.
"""

from keras_transformer.translators.interface import TranslatorInterface, decoding_defaults, warn_cut_off

__all__ = ["TranslatorInterface", "decoding_defaults", "warn_cut_off"]
