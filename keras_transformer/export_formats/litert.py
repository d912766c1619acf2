"""The LiteRT format: a `.tflite` with the tokenizer and the cached decoder step, the search on the host."""

from keras_transformer.export_formats import options
from keras_transformer.export_formats.format import ExportFormat
from keras_transformer.files import destinations


def write(run, output, overwrite=False, **options):
    from keras_transformer.litert import export_run

    info = export_run(run, output, overwrite=overwrite, **options)
    text = [name for name in ("tokenize", "detokenize") if name in info["signatures"]]
    where = f"{' and '.join(text)} in the .tflite" if text else "tokenizer outside the model (SentencePiece)"
    return (
        f"Exported {run} to {output} (LiteRT, {info['quantization']}, {where}). "
        "Translate with `keras_transformer.export.load(path)` (pip install 'keras-transformer[litert]')."
    )


FORMAT = ExportFormat(
    name="litert",
    description="a .tflite with encode, decode_step and tokenize signatures for on-device translation",
    options=(
        options.QUANTIZATION,
        options.BEAM_SIZE,
        options.ALPHA,
        options.MAX_LENGTH,
        options.SOURCE_LANG,
        options.TARGET_LANG,
    ),
    write=write,
    destination=destinations.DESTINATIONS[destinations.LITERT],  # model.tflite, litert.json
    why_not={"jit_compile": "a LiteRT export is not XLA-compiled"},
)
