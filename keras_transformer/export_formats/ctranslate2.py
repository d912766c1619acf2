"""The CTranslate2 format: a CTranslate2 model directory, which takes and returns SentencePiece pieces."""

from keras_transformer.export_formats.format import ExportFormat

SEARCH = "CTranslate2 chooses the search when it translates (translate_batch(beam_size=..., length_penalty=...))"


def write(run, output, overwrite=False, quantization=None):
    from keras_transformer.serving.ctranslate2 import convert_run

    convert_run(run, output, quantization=quantization, overwrite=overwrite)
    return (
        f"Exported {run} to {output} (CTranslate2, {quantization or 'float32'}). Load it with "
        "`ctranslate2.Translator(path)` and pass SentencePiece pieces."
    )


FORMAT = ExportFormat(
    name="ctranslate2",
    description="a CTranslate2 model directory (pip install ctranslate2), which takes and returns SentencePiece pieces",
    options=("quantization",),
    write=write,
    why_not={"beam_size": SEARCH, "alpha": SEARCH, "max_length": SEARCH, "jit_compile": "it is not XLA-compiled"},
)
