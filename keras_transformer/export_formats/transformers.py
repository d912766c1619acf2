"""The transformers format: a Hugging Face checkpoint folder that transformers, CTranslate2 and the Hub read."""

from keras_transformer.export_formats.format import ExportFormat


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
    options=("beam_size", "alpha", "max_length", "scores"),
    write=write,
    why_not={
        "quantization": "its weights are the run's, float32 as trained",
        "jit_compile": "a checkpoint is not compiled",
    },
)
