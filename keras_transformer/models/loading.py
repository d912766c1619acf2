"""`load_model`: a `.keras` file as a model, or one line naming the file and what is wrong with it.

Keras says "File not found" of a `.keras` file that exists but was cut off;
this says what it is: a `.keras` file is a zip archive, and one that is not
a whole zip is truncated or damaged.

Example:

>>> model = load_model("saved_models/chatbot-ko/model.keras")  # doctest: +SKIP
"""

import pathlib
import zipfile

from keras_transformer.errors import first_line


def load_model(path):
    """The model in the `.keras` file `path` (not compiled); a one-line `ValueError` naming it when it cannot be."""
    import keras

    path = pathlib.Path(path)
    if not path.is_file():
        raise ValueError(f"{path} is missing: a run holds its model there")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is not a whole .keras file (a zip archive): it is truncated or damaged")
    try:
        return keras.saving.load_model(path, compile=False)
    except Exception as error:  # noqa: BLE001  (zip, JSON, HDF5, Keras: all mean "corrupt or incompatible")
        raise ValueError(f"{path}: could not load the model (corrupt or incompatible?): {first_line(error)}") from None
