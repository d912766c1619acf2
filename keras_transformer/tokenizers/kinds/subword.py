"""The kind `"sentencepiece"`: this package's `SubwordTokenizer`, a SentencePiece model whose ids are its own.

Its LiteRT form is `SentencePieceText` (the `.tflite` may hold it too:
`litert.fast_text` probes whether tensorflow-text's fast tokenizer gives
its ids); its CTranslate2 vocabulary is the SentencePiece model's pieces,
`<pad>`, `<unk>`, `<s>` and `</s>` at 0-3.
"""

from keras_transformer.config import END_ID, PAD_ID, START_ID, UNK_ID
from keras_transformer.tokenizers.kinds.vocabularies import Vocabulary
from keras_transformer.tokenizers.subword import NUM_RESERVED_IDS, SubwordTokenizer

FORMAT = SubwordTokenizer.FORMAT
load = SubwordTokenizer.load


def host_text(directory, config):
    """`SentencePieceText` of the model file `config` names."""
    return SentencePieceText((directory / config["model_file"]).read_bytes())


def ctranslate2_vocabulary(directory, config, vocab_size=None):
    """The SentencePiece model's pieces; a model that does not reserve ids 0-3 as this package does is refused."""
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_proto=(directory / config["model_file"]).read_bytes())
    reserved = (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id())
    if reserved != (PAD_ID, UNK_ID, START_ID, END_ID):
        raise ValueError(f"the tokenizer must reserve pad/unk/bos/eos = 0/1/2/3. Received {reserved}")
    return Vocabulary([processor.id_to_piece(i) for i in range(processor.vocab_size())])


class SentencePieceText:
    """This package's `SubwordTokenizer` in plain Python SentencePiece: the LiteRT export's host tokenizer.

    Args:
        model_proto: the SentencePiece model (`tokenizer.model`'s bytes).
    """

    keeps_spaces = False  # the translator strips texts first (SentencePiece would anyway)
    not_in_model = None  # the `.tflite` may hold it, where `litert.fast_text`'s probes find it exact

    def __init__(self, model_proto):
        import sentencepiece as spm

        self.model_proto = bytes(model_proto)
        self._processor = spm.SentencePieceProcessor(model_proto=self.model_proto)
        self.vocab_size = self._processor.vocab_size()
        self.unk_id = self._processor.unk_id()
        self.special_tokens = tuple(self._processor.id_to_piece(i) for i in range(NUM_RESERVED_IDS))
        self.byte_ids = frozenset(i for i in range(self.vocab_size) if self._processor.is_byte(i))
        self.blank_ids = frozenset(i for i in range(self.vocab_size) if self._processor.id_to_piece(i) == "\u2581")

    def pieces(self):
        """The pieces that text is made of (not the control, unknown or byte pieces), in id order."""
        processor = self._processor
        return [
            processor.id_to_piece(i)
            for i in range(self.vocab_size)
            if not (processor.is_control(i) or processor.is_unknown(i) or processor.is_byte(i))
        ]

    def pieces_by_id(self):
        """Every piece by id (a list of str): what banned words are read against."""
        return [self._processor.id_to_piece(i) for i in range(self.vocab_size)]

    def tokenize(self, texts):
        """Lists of ids, one per text (no START or END)."""
        return [list(ids) for ids in self._processor.encode(list(texts))] if texts else []

    def detokenize(self, rows):
        """UTF-8 bytes, one per row of ids; the reserved ids 0-3 are dropped.

        Byte pieces that do not form UTF-8 become U+FFFD (SentencePiece's
        Python decoder gives text), where tensorflow-text keeps the raw bytes.
        """
        rows = [[int(i) for i in row if i >= NUM_RESERVED_IDS] for row in rows]
        return [self._processor.decode(row).encode("utf-8") for row in rows]
