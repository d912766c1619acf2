"""`export_run`: a run directory as a SavedModel, strings in and strings out (`keras-transformer export`).

A translation run is saved as its XLA `Translator` with serving signatures
(`translator_graph.SIGNATURES`), which the savedmodel engine opens again; a
decoder-only run (GPT) as its `Generator`'s (`generator_export`); an
encoder-only run (BERT) with its `Encoder`'s signatures
(`encoder_export`). `opener.write_saved_model` is the way to it.

Example:

>>> export_run("saved_models/chatbot-ko", "saved_models/chatbot-ko-export", beam_size=4)  # doctest: +SKIP
"""

from keras_transformer import runs
from keras_transformer.engines.xla.opening import open_run_translator
from keras_transformer.engines.xla.translator_graph import check_export_destination
from keras_transformer.files import destinations


def export_run(model, output, *, overwrite=False, **options):
    """Exports the training run `model` (a run directory) as a SavedModel at `output`.

    Every check runs before the model loads: `model` must be a run directory,
    and `output` must be new, an empty folder, or an export of this package
    (replaced only when `overwrite` is true) that neither holds nor lies inside
    `model`. `options` go to `open_run_translator` (`beam_size`, `alpha`, `max_length`,
    `jit_compile`).

    Returns:
        The `Translator` that was saved.

    Example:

    >>> export_run("saved_models/chatbot-ko", "saved_models/chatbot-ko-export", beam_size=4)  # doctest: +SKIP
    """
    if not runs.is_run_dir(model):
        kind = "a SavedModel already" if runs.is_saved_model(model) else "not a training run"
        raise ValueError(
            f"{model} is {kind}: `model` must be a run directory (config.json + model.keras + tokenizers/)"
        )
    from keras_transformer.engines.xla.encoder import is_encoder_run
    from keras_transformer.engines.xla.generator import is_generator_run

    if is_encoder_run(model):  # BERT: its signatures classify, fill_mask, embed
        from keras_transformer.engines.xla.encoder_export import export_encoder

        runs.warn_if_unfinished(model)
        return export_encoder(model, output, overwrite=overwrite, **options)

    if is_generator_run(model):  # a decoder-only run (GPT): its serving_default continues prompts
        from keras_transformer.engines.xla.generator_export import export_generator

        runs.warn_if_unfinished(model)
        return export_generator(model, output, overwrite=overwrite, **options)
    destinations.check_separate(model, output, what="the export")
    check_export_destination(output, overwrite)
    runs.warn_if_unfinished(model)
    translator = open_run_translator(model, **options)
    translator.save(output, overwrite=overwrite)
    return translator
