"""The SavedModel's serving signatures: names, dtypes, shapes, and answers that agree with the Python methods."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import decoding
from keras_transformer.export import SIGNATURES, load

from trained_runs import tiny_run_dir  # the shared tiny run directory (built once per session)

BEAM = 4
TRANSLATION_OUTPUTS = {"translations": tf.string, "scores": tf.float32, "finished": tf.bool}
EXPECTED = {
    "serving_default": ({"sentences": tf.string}, TRANSLATION_OUTPUTS, 1),
    "greedy": ({"sentences": tf.string}, TRANSLATION_OUTPUTS, 1),
    "sample": (
        {"sentences": tf.string, "temperature": tf.float32, "top_k": tf.int32, "top_p": tf.float32, "seed": tf.int64},
        TRANSLATION_OUTPUTS,
        1,
    ),
    "nbest": ({"sentences": tf.string}, TRANSLATION_OUTPUTS, 2),
    "score": ({"sources": tf.string, "targets": tf.string}, {"log_probs": tf.float32, "target_lengths": tf.int32}, 1),
}
CONTROLS = {
    "sentences": tf.string,
    "source_lang": tf.string,
    "target_lang": tf.string,
    "target_prefix": tf.string,
    "banned_ids": tf.int32,
}
EXPECTED.update(
    with_controls=(CONTROLS, TRANSLATION_OUTPUTS, 1),
    greedy_with_controls=(CONTROLS, TRANSLATION_OUTPUTS, 1),
)
PER_SENTENCE = ("sentences", "sources", "targets", "source_lang", "target_lang", "target_prefix")
RANK_ONE = (*PER_SENTENCE, "banned_ids")  # the ids of the call's banned words


@pytest.fixture(scope="module")
def run():
    return tiny_run_dir()


@pytest.fixture(scope="module")
def translator(run):
    return load(run[0])


@pytest.fixture(scope="module")
def exported(translator, tmp_path_factory):
    return pathlib.Path(translator.save(tmp_path_factory.mktemp("signatures") / "model"))


@pytest.fixture(scope="module")
def signatures(exported):
    return tf.saved_model.load(str(exported)).signatures


@pytest.fixture(scope="module")
def sources(run):
    return [source for source, _ in run[1][:5]] + ["", "Zebras and their unlikely friends."]


def _strings(tensor):
    return [s.decode("utf-8") for s in np.asarray(tensor).ravel()]


def test_every_signature_has_its_named_inputs_and_outputs(exported):
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString((exported / "saved_model.pb").read_bytes())
    defs = saved_model.meta_graphs[0].signature_def
    assert set(EXPECTED) <= set(defs) and set(SIGNATURES) == set(EXPECTED)
    for name, (inputs, outputs, rank) in EXPECTED.items():
        signature = defs[name]
        assert signature.method_name == "tensorflow/serving/predict"
        assert {k: v.dtype for k, v in signature.inputs.items()} == {k: v.as_datatype_enum for k, v in inputs.items()}
        assert {k: v.dtype for k, v in signature.outputs.items()} == {k: v.as_datatype_enum for k, v in outputs.items()}
        for key, tensor in signature.inputs.items():
            expected_rank = 1 if key in RANK_ONE else 0
            assert len(tensor.tensor_shape.dim) == expected_rank, (name, key)
        for key, tensor in signature.outputs.items():
            dims = [d.size for d in tensor.tensor_shape.dim]
            assert dims == ([-1] if rank == 1 else [-1, BEAM]), (name, key, dims)


def test_tf_serving_reads_the_signatures_as_model_metadata(exported):
    """What TF Serving's GetModelMetadata answers is built from these SignatureDefs."""
    from google.protobuf import json_format
    from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2
    from tensorflow_serving.apis import get_model_metadata_pb2, predict_pb2

    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString((exported / "saved_model.pb").read_bytes())
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    for name, signature in saved_model.meta_graphs[0].signature_def.items():
        signature_map.signature_def[name].CopyFrom(signature)
    response = get_model_metadata_pb2.GetModelMetadataResponse()
    response.metadata["signature_def"].Pack(signature_map)
    as_json = json_format.MessageToDict(response)
    read_back = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(read_back)
    assert read_back.signature_def["serving_default"].inputs["sentences"].dtype == tf.string.as_datatype_enum
    assert "score" in json.dumps(as_json)
    request = predict_pb2.PredictRequest()
    request.model_spec.signature_name = "serving_default"
    request.inputs["sentences"].CopyFrom(tf.make_tensor_proto(["A dog runs."]))
    assert set(request.inputs) == set(read_back.signature_def["serving_default"].inputs)
    assert isinstance(read_back.signature_def["serving_default"], meta_graph_pb2.SignatureDef)


def test_serving_default_and_greedy_equal_the_python_methods(translator, signatures, sources):
    batch = tf.constant(sources)
    beam = signatures["serving_default"](sentences=batch)
    greedy = signatures["greedy"](sentences=batch)
    assert _strings(beam["translations"]) == _strings(translator(batch))
    assert _strings(greedy["translations"]) == _strings(translator.greedy(batch))
    status = translator.call_with_status(batch)
    np.testing.assert_allclose(beam["scores"].numpy(), status["scores"].numpy(), rtol=1e-5, atol=1e-5)
    assert beam["scores"].dtype == tf.float32 and np.all(beam["scores"].numpy() <= 0)


def test_nbest_row_zero_is_the_best_and_scores_come_sorted(translator, signatures, sources):
    nbest = signatures["nbest"](sentences=tf.constant(sources))
    assert nbest["translations"].shape == (len(sources), BEAM)
    best = signatures["serving_default"](sentences=tf.constant(sources))
    assert _strings(nbest["translations"][:, 0]) == _strings(best["translations"])
    np.testing.assert_allclose(nbest["scores"][:, 0], best["scores"], rtol=1e-5, atol=1e-5)
    scores, finished = nbest["scores"].numpy(), nbest["finished"].numpy()
    for row_scores, row_finished in zip(scores, finished):
        ended = row_scores[row_finished]
        assert np.all(np.diff(ended) <= 1e-6), row_scores  # best first among ended ones
        assert np.all(row_finished[: len(ended)])  # ended hypotheses come first
    python = translator.nbest(sources)
    assert _strings(python["translations"]) == _strings(nbest["translations"])


def test_score_of_the_greedy_output_equals_the_log_probability_greedy_summed(run, translator, signatures, sources):
    sources = sources[:5]
    greedy = signatures["greedy"](sentences=tf.constant(sources))
    scored = signatures["score"](sources=tf.constant(sources), targets=greedy["translations"])
    # The log-probability the cached greedy search accumulated, on the same source ids.
    tokenizer = translator.source_tokenizer
    source_ids = tokenizer.tokenize(tf.constant(sources)).to_tensor(0)
    ids, summed, _ = decoding.greedy_decode(
        translator.model, source_ids, max_length=32, return_finished=True, return_scores=True
    )
    np.testing.assert_allclose(scored["log_probs"].numpy(), summed.numpy(), atol=1e-4)
    lengths = np.count_nonzero(ids.numpy(), axis=1)
    np.testing.assert_array_equal(scored["target_lengths"].numpy(), lengths)
    normalised = summed.numpy() / decoding.rules.length_penalty(np.float32(lengths), 0.6)
    np.testing.assert_allclose(greedy["scores"].numpy(), normalised, atol=1e-4)


def test_score_ranks_the_reference_above_a_wrong_target(run, translator):
    source, target = run[1][0]
    wrong = run[1][1][1]
    scored = translator.score([source, source], [target, wrong])
    log_probs = scored["log_probs"].numpy()
    assert log_probs[0] > log_probs[1]
    with pytest.raises(ValueError, match="as many sentences"):
        translator.score([source], [target, wrong])
    with pytest.raises(ValueError, match="`targets` must be a 1-D string tensor"):
        translator.score([source], target)


def test_a_target_longer_than_max_length_is_scored_on_its_first_tokens(run, translator):
    long = " ".join(target for _, target in run[1])
    scored = translator.score([run[1][0][0]], [long])
    assert scored["target_lengths"].numpy().tolist() == [32]
    assert np.isfinite(scored["log_probs"].numpy()).all()


def test_sample_signature_at_temperature_zero_is_greedy(signatures, sources):
    batch = tf.constant(sources)
    sampled = signatures["sample"](
        sentences=batch,
        temperature=tf.constant(0.0),
        top_k=tf.constant(0),
        top_p=tf.constant(1.0),
        seed=tf.constant(1, tf.int64),
    )
    greedy = signatures["greedy"](sentences=batch)
    assert _strings(sampled["translations"]) == _strings(greedy["translations"])
    np.testing.assert_allclose(sampled["scores"], greedy["scores"], atol=1e-5)


def test_empty_batches_keep_their_shapes(signatures):
    none = tf.zeros([0], tf.string)
    assert signatures["nbest"](sentences=none)["translations"].shape == (0, BEAM)
    assert signatures["score"](sources=none, targets=none)["log_probs"].shape == (0,)


@pytest.mark.slow  # saved_model_cli in a subprocess: half a minute
def test_saved_model_cli_shows_and_runs_the_default_signature(run, translator, exported):
    """TensorFlow's own tool lists the signatures; ours (the same, with the text ops) runs them."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    tensorflows = [sys.executable, "-c", "from tensorflow.python.tools.saved_model_cli import main; main()"]
    shown = subprocess.run(
        [*tensorflows, "show", "--dir", str(exported), "--all"], capture_output=True, text=True, env=env
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    for name in EXPECTED:
        assert f"signature_def['{name}']" in shown.stdout
    cli = [sys.executable, "-m", "keras_transformer.serving.saved_model_cli"]
    source = run[1][0][0]
    ran = subprocess.run(
        [
            *cli,
            "run",
            "--dir",
            str(exported),
            "--tag_set",
            "serve",
            "--signature_def",
            "serving_default",
            "--input_exprs",
            f"sentences={[source]!r}",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    expected = _strings(translator([source]))[0]
    assert repr(expected.encode("utf-8")) in ran.stdout, ran.stdout[-2000:]


def test_an_export_from_before_nbest_and_score_says_to_export_again():
    from keras_transformer.engines.savedmodel.translator import LoadedTranslator

    older = LoadedTranslator(tf.Module())  # a module without the `nbest` and `score` functions
    with pytest.raises(ValueError, match="exported before `nbest` existed: export it again"):
        older.nbest(["A dog runs."])
    with pytest.raises(ValueError, match="exported before `score` existed"):
        older.score(["A dog runs."], ["Ein Hund läuft."])
