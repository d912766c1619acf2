"""TensorFlow's `saved_model_cli`, with TensorFlow Text's ops registered first.

An export's graph tokenizes with TensorFlow Text's SentencePiece ops. The
plain `saved_model_cli` lists the signatures of any export (`show`), but its
`run` fails with "Op type not registered 'SentencepieceOp'", because nothing
imports `tensorflow_text` in that process. This is the same tool, with the
same arguments, after that import:

    python -m keras_transformer.serving.saved_model_cli show --dir EXPORT --all
    python -m keras_transformer.serving.saved_model_cli run --dir EXPORT --tag_set serve \\
        --signature_def serving_default --input_exprs 'sentences=["A dog runs."]'

Any other program that loads an export needs the same `import tensorflow_text`
(TF Serving's model server links those ops in).
"""

import sys

import tensorflow_text  # noqa: F401  (registers the SentencePiece ops before the graph loads)
from tensorflow.python.tools import saved_model_cli


def main():
    """Runs `saved_model_cli` with `sys.argv`; returns its exit status."""
    return saved_model_cli.main()


if __name__ == "__main__":
    sys.exit(main())
