"""Rebuilds tests/data/run_11d2bb5/: a training run directory written by the package at commit 11d2bb5.

The run is the `tiny` preset trained 1 epoch on 300 pairs of the bundled corpus,
as that version wrote it (its config.json has no record of its files). Beside
it, `run_11d2bb5_outputs.npz` holds what that version computed from it: the
model's logits on fixed ids, and the greedy and beam-4 translations of fixed
sentences. tests/test_saved_outputs.py checks that today's code loads the run
with the same outputs, resumes it and exports it.

Run it with that version of the package on the path:

    git worktree add /tmp/kt-11d2bb5 11d2bb5
    PYTHONPATH=/tmp/kt-11d2bb5 python tests/data/make_run_11d2bb5.py
"""

import pathlib
import shutil

import keras
import numpy as np

import keras_transformer
from keras_transformer.export import load
from keras_transformer.training import train

HERE = pathlib.Path(__file__).resolve().parent
RUN = HERE / "run_11d2bb5"
SENTENCES = ["오늘 너무 힘들었어", "안녕하세요", "", "배고파", "주말에 뭐 하지?", "고마워 정말", "ㅋㅋㅋ " * 12]
SOURCE = np.array([[5, 6, 7, 8, 0, 0], [9, 10, 11, 12, 13, 14]], dtype="int32")
TARGET = np.array([[2, 20, 21, 0], [2, 22, 23, 24]], dtype="int32")


def main():
    print("keras_transformer from", pathlib.Path(keras_transformer.__file__).parent)
    if RUN.exists():
        shutil.rmtree(RUN)
    train("tiny", output=RUN, epochs=1, max_examples=300, seed=0, verbose=0)
    model = keras.saving.load_model(RUN / "model.keras", compile=False)
    logits = keras.ops.convert_to_numpy(model({"encoder_inputs": SOURCE, "decoder_inputs": TARGET}))
    translator = load(RUN)
    greedy = [s.decode("utf-8") for s in translator.greedy(SENTENCES).numpy()]
    beam = [s.decode("utf-8") for s in translator(SENTENCES).numpy()]
    np.savez(
        HERE / "run_11d2bb5_outputs.npz",
        source=SOURCE,
        target=TARGET,
        logits=logits,
        sentences=np.array(SENTENCES),
        greedy=np.array(greedy),
        beam=np.array(beam),
    )
    print("greedy:", greedy)
    print("beam:", beam)


if __name__ == "__main__":
    main()
