"""Ensembles: members trained in turn, an interrupted ensemble resumed, the ensemble translating and exported."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import runs
from keras_transformer.commands.cli import main
from keras_transformer.training import train

from test_training import SMALL


# Trains three members in turn (about 3 minutes on 2 cores): one of the long checks. Ensemble decoding is
# tested in the default run (tests/decoding, tests/serving).
@pytest.mark.slow
def test_an_ensemble_trains_its_members_in_turn_resumes_and_translates(tmp_path, monkeypatch, capsys):
    from keras_transformer import export
    from keras_transformer.training import model_run

    output = tmp_path / "ensemble"
    options = dict(output=output, epochs=1, verbose=0, ensemble=2, max_minutes=30.0, **SMALL)
    train_run = model_run.train_model

    def interrupted_in_the_second_member(preset, member_output, *args, **kwargs):
        if member_output.name == "member-1":
            raise KeyboardInterrupt
        return train_run(preset, member_output, *args, **kwargs)

    monkeypatch.setattr(model_run, "train_model", interrupted_in_the_second_member)
    with pytest.raises(KeyboardInterrupt):
        train("tiny", **options)
    assert runs.read_config(output / "member-0")["finished"]
    with pytest.raises(ValueError, match="member-1 has no model.keras yet"):
        export.load(output)
    assert main(["train", "--preset", "tiny", "--epochs", "1", "--output", str(output)]) == 2
    assert "interrupted run" in capsys.readouterr().err

    monkeypatch.setattr(model_run, "train_model", train_run)
    first_member = (output / "member-0" / runs.MODEL).stat().st_mtime_ns
    summary = train("tiny", resume=True, **options)
    assert (output / "member-0" / runs.MODEL).stat().st_mtime_ns == first_member  # not trained again
    config = runs.read_config(output)
    assert config["finished"] and config["members"] == ["member-0", "member-1"]
    assert summary["completed_epochs"] == [1, 1] and len(summary["best_val_loss"]) == 2
    members = [runs.read_config(output / member) for member in config["members"]]
    assert [member["seed"] for member in members] == [0, 1]
    assert [member["preset"]["max_minutes"] for member in members] == [15.0, 15.0]  # half the budget each
    tokenizer = "tokenizers/source/tokenizer.model"
    assert (output / "member-1" / tokenizer).read_bytes() == (output / tokenizer).read_bytes()

    translator = export.load(output, beam_size=2, max_length=8)
    assert isinstance(translator.model, list) and len(translator.model) == 2
    sentences = tf.constant(["오늘 너무 힘들었어", ""])
    live = translator(sentences).numpy()
    assert live[0] and live[1] == b""
    reloaded = export.load(translator.save(tmp_path / "export"))
    np.testing.assert_array_equal(reloaded(sentences).numpy(), live)
    assert (
        main(["plot", "attention", "--model", str(output), "--sentence", "안녕", "--output", str(tmp_path / "a.png")])
        == 2
    )
    assert "pass one member's run directory" in capsys.readouterr().err
    with pytest.raises(ValueError, match="`ensemble` must be a positive int"):
        train("tiny", output=tmp_path / "none", ensemble=0)
