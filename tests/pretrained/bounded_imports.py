"""Runs `keras-transformer import` on each of several checkpoints in this process, under a bounded address space.

Usage: `python bounded_imports.py PLAN OUTPUT_FOLDER`, PLAN a JSON object
`{case: checkpoint folder}`. TensorFlow and the package are imported first;
then the address space is limited to 3 GB above what they take
(`resource.RLIMIT_AS`), so that an import which allocates from a config's
numbers fails at once with a `MemoryError` rather than exhausting the machine.
Prints one JSON line: `{case: {"status", "message", "seconds"}}`.
"""

import contextlib
import io
import json
import pathlib
import re
import resource
import sys
import time

from keras_transformer.commands import cli
from keras_transformer.pretrained import importer  # noqa: F401  (TensorFlow and the importer, before the bound)

HEADROOM = 3 * 2**30


def main(plan, output):
    status = pathlib.Path("/proc/self/status").read_text()
    size = int(re.search(r"VmSize:\s+(\d+) kB", status).group(1)) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (size + HEADROOM, size + HEADROOM))
    results = {}
    for case, folder in json.loads(plan).items():
        errors = io.StringIO()
        started = time.monotonic()
        with contextlib.redirect_stderr(errors):
            code = cli.main(["import", folder, "--output", str(pathlib.Path(output) / case)])
        results[case] = dict(status=code, message=errors.getvalue().strip(), seconds=time.monotonic() - started)
    print(json.dumps(results))


if __name__ == "__main__":
    main(*sys.argv[1:])
