"""Packaging for keras-transformer."""

import pathlib
import re

from setuptools import find_namespace_packages, setup

HERE = pathlib.Path(__file__).parent
VERSION = re.search(
    r'__version__ = "([^"]+)"',
    (HERE / "keras_transformer" / "__init__.py").read_text(encoding="utf-8"),
).group(1)

# `keras-transformer serve`: a TF Serving-compatible REST server (its metadata uses TF Serving's protos).
SERVE = ["fastapi>=0.110", "uvicorn>=0.29", "tensorflow-serving-api>=2.16,<2.22"]
# `keras-transformer export --format ctranslate2`.
CTRANSLATE2 = ["ctranslate2>=4.3"]
# The litert engine (`keras_transformer.engines.litert`): the LiteRT interpreter (x86-64, aarch64, macOS arm64).
LITERT = ["ai-edge-litert>=2.3"]
# `keras-transformer import`: hf:// checkpoints, and model.safetensors files.
# GPT-2 and BERT tokenizers: read and run by Hugging Face `tokenizers` (what transformers' fast tokenizers run).
PRETRAINED = ["huggingface_hub>=0.26", "safetensors>=0.4", "tokenizers>=0.15"]

setup(
    name="keras-transformer",
    version=VERSION,
    description=(
        "The Transformer of 'Attention Is All You Need' as drop-in Keras 3 layers, "
        "with cached beam search, XLA training and string-in/string-out SavedModels."
    ),
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_namespace_packages(include=["keras_transformer", "keras_transformer.*"]),  # data folders too
    py_modules=["keras_transformer_cli"],  # the console script, which hides TensorFlow's start-up log
    include_package_data=True,
    package_data={"keras_transformer": ["data/*/*", "datasets/checksums.tsv"]},
    install_requires=[
        "tensorflow>=2.16,<2.22",
        "tensorflow-text>=2.16,<2.22",
        "tensorflow-datasets>=4.9",
        "importlib_resources",  # used by tensorflow-datasets' builders, undeclared there
        "requests",  # the corpora's downloads (datasets/downloads.py), with a timeout of their own
        "keras>=3.3",
        "sentencepiece>=0.2",
        "tensorboard>=2.16",
        "matplotlib>=3.7",
        "sacrebleu>=2.3",
    ],
    extras_require={
        "test": [
            "pytest>=7",
            "pytest-xdist>=3.7",  # the README's test command runs on two workers (-n 2)
            "hypothesis>=6",
            "nbclient>=0.7",
            "nbformat>=5",
            "ipykernel>=6",
            "keras-hub>=0.18",  # the parity tests compare with its TransformerEncoder/Decoder
            "jax[cpu]>=0.4.30",  # tests/test_backend_jax.py runs the layers on Keras's JAX backend
            "ruff==0.17.6",  # .ci/run checks lint and formatting (ruff.toml); pinned: formats differ by version
            "httpx>=0.27",  # the REST server's tests are its clients
            "selenium>=4.20",  # the serving page's test drives Debian's chromium
            *SERVE,
            *CTRANSLATE2,
            *PRETRAINED,
            *LITERT,
        ],
        "serve": SERVE,
        "ctranslate2": CTRANSLATE2,
        "pretrained": PRETRAINED,
        "litert": LITERT,
        # benchmarks/: the peers and routes they compare (PyTorch too: `pip install torch`, see README.md).
        "bench": ["keras-hub>=0.18", "psutil>=5", "sacremoses>=0.1", "jax[cpu]>=0.4.30", *CTRANSLATE2],
        "jax": ["jax[cpu]>=0.4.30"],
    },
    entry_points={"console_scripts": ["keras-transformer=keras_transformer_cli:main"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
