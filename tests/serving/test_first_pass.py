"""A translator's first pass: how many functions it traces and how many XLA programs it compiles.

One fresh process opens the tests' tiny run with an empty XLA cache folder
and translates with greedy search, then with beam search, as the first
`translate` of each does (sentences of one source bucket): each search
compiles one program, and the graph functions TensorFlow registers stay
within the count of docs/performance.md, so that a change that traces the
decoder once more per loop, per search or per call shows here.
"""

import json
import os
import subprocess
import sys

from trained_runs import tiny_run_dir

# The graph functions a first greedy then beam call adds to TensorFlow's context (the translator's two
# functions, each search, its loop and branches, the step): 16, and 24 when each search ran in three cache
# phases (one loop each) before short decodes ran as one loop (2026-11-29, TensorFlow 2.21).
MAX_FUNCTIONS = 16

FIRST_PASS = """
import json, sys
from keras_transformer import compile_cache
compile_cache.enable(sys.argv[2])
session = compile_cache.session_folder()
import tensorflow as tf
from tensorflow.python.eager import context
from keras_transformer import export

translator = export.load(sys.argv[1], beam_size=4)
sentences = json.loads(sys.argv[3])
before = set(context.context().list_function_names())
counts = {}
for name, translate in (("greedy", translator.greedy), ("beam", translator)):
    programs = len(list(session.glob("*.pb")))
    first = translate(sentences).numpy().tolist()
    compiled = len(list(session.glob("*.pb"))) - programs
    assert translate(sentences).numpy().tolist() == first
    counts[name] = compiled
counts["functions"] = len(set(context.context().list_function_names()) - before)
searches = translator._searches
counts["traces"] = [f.experimental_get_tracing_count() for f in (searches._greedy, searches._nbest)]
print(json.dumps(counts))
"""


def test_a_first_pass_compiles_one_program_a_search_and_traces_a_bounded_graph(tmp_path):
    run, pairs = tiny_run_dir()
    sentences = [source for source, _ in pairs[:3]]  # short: one source bucket, one batch bucket
    environ = dict(os.environ)
    flags = [f for f in environ.get("TF_XLA_FLAGS", "").split() if "persistent_cache" not in f]
    environ["TF_XLA_FLAGS"] = " ".join(flags)  # the test run's own cache (conftest) left out: this one is empty
    command = [sys.executable, "-c", FIRST_PASS, str(run), str(tmp_path / "xla"), json.dumps(sentences)]
    done = subprocess.run(command, env=environ, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert counts["greedy"] == 1 and counts["beam"] == 1, counts
    assert counts["traces"] == [1, 1], counts  # each search traced once, whatever it was called with
    assert counts["functions"] <= MAX_FUNCTIONS, counts
