"""The SavedModel format: strings in, strings out, with the signatures TF Serving calls (the xla engine's)."""

from keras_transformer.export_formats import options
from keras_transformer.export_formats.format import ExportFormat
from keras_transformer.files import destinations


def write(run, output, overwrite=False, **options):
    from keras_transformer.opener import write_saved_model

    translator = write_saved_model(run, output, overwrite=overwrite, **options)
    if hasattr(translator, "signature_names"):  # an encoder-only run's (BERT)
        names = ", ".join(translator.signature_names)
        load = "Load it with `import tensorflow_text` then `tf.saved_model.load`"
        return f"Exported {run} to {output} (signatures {names}, each of `texts`). {load}, or serve it."
    return (
        f"Exported {run} to {output} (beam {int(translator.beam_size.numpy())}). "
        "Load it with `import tensorflow_text` then `tf.saved_model.load`."
    )


FORMAT = ExportFormat(
    name="savedmodel",
    description="strings in, strings out, TensorFlow only, with TF Serving signatures",
    options=(
        options.BEAM_SIZE,
        options.ALPHA,
        options.MAX_LENGTH,
        options.JIT_COMPILE,
        options.SOURCE_LANG,
        options.TARGET_LANG,
    ),
    write=write,
    destination=destinations.DESTINATIONS[destinations.EXPORT],  # a Translator's graph and its manifest
    why_not={"quantization": "its weights are the run's, float32 as trained"},
)
