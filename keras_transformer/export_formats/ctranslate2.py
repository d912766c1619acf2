"""The CTranslate2 format: a CTranslate2 model directory, which takes and returns SentencePiece pieces."""

import json
import pathlib

from keras_transformer.export_formats.format import ExportFormat
from keras_transformer.export_formats.options import QUANTIZATION
from keras_transformer.files import destinations

SEARCH = "CTranslate2 chooses the search when it translates (translate_batch(beam_size=..., length_penalty=...))"
LANGUAGES = (
    "a CTranslate2 model takes the languages with each sentence: the source `[src_lang] pieces </s>`, the target "
    "language as translate_batch(target_prefix=[[tgt_lang]])"
)


def write(run, output, overwrite=False, quantization=None):
    from keras_transformer.ctranslate2.conversion import PROVENANCE, convert_run

    convert_run(run, output, quantization=quantization, overwrite=overwrite)
    record = json.loads((pathlib.Path(output) / PROVENANCE).read_text(encoding="utf-8"))
    languages = {
        "first": " For this multilingual model, frame each source as `[src_lang] pieces </s>` and pass "
        "target_prefix=[[tgt_lang]].",
        "last": " For this multilingual model, frame each source as `pieces </s> [src_lang]` and pass "
        "target_prefix=[[tgt_lang]].",
    }.get(record.get("source_language"), "")
    return (
        f"Exported {run} to {output} (CTranslate2, {quantization or 'float32'}). Load it with "
        f"`ctranslate2.Translator(path)` and pass SentencePiece pieces.{languages}"
    )


FORMAT = ExportFormat(
    name="ctranslate2",
    description="a CTranslate2 model directory (pip install ctranslate2), which takes and returns SentencePiece pieces",
    options=(QUANTIZATION,),
    write=write,
    destination=destinations.DESTINATIONS[destinations.CTRANSLATE2],  # model.bin, keras_transformer.json
    why_not={
        "beam_size": SEARCH,
        "alpha": SEARCH,
        "max_length": SEARCH,
        "jit_compile": "it is not XLA-compiled",
        "source_lang": LANGUAGES,
        "target_lang": LANGUAGES,
    },
)
