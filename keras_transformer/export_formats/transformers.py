"""The transformers format: a Hugging Face checkpoint folder that transformers, CTranslate2 and the Hub read."""

from keras_transformer.export_formats import options
from keras_transformer.export_formats.format import ExportFormat, Option
from keras_transformer.files import destinations

SCORES = Option(
    "scores",
    "--format transformers: the JSON of `evaluate --output`, whose BLEU and chrF the model card reports",
    flag="--scores",
    metavar="FILE",
)


def write(run, output, overwrite=False, **options):
    from keras_transformer.pretrained import export_checkpoint

    written = export_checkpoint(run, output, overwrite=overwrite, **options)
    kept = f"; {len(written['unchanged'])} byte-identical to the source checkpoint" if written["unchanged"] else ""
    return (
        f"Exported {run} to {output} (a Hugging Face {written['model_type']} checkpoint: "
        f"{len(written['files'])} files{kept}). Load it with transformers' `from_pretrained(path)`, or share it "
        "with huggingface_hub's `upload_folder`."
    )


FORMAT = ExportFormat(
    name="transformers",
    description="a Hugging Face checkpoint (config.json, model.safetensors, tokenizer files, model card) that "
    "transformers, CTranslate2's converter and the Hub read",
    options=(options.BEAM_SIZE, options.ALPHA, options.MAX_LENGTH, SCORES),
    write=write,
    destination=destinations.DESTINATIONS[destinations.TRANSFORMERS],  # model.safetensors, keras_transformer.json
    why_not={
        "quantization": "its weights are the run's, float32 as trained",
        "jit_compile": "a checkpoint is not compiled",
    },
)
