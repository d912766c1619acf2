"""The engines: what decodes a model folder, one module (or folder) each, and their registry.

`ENGINES` is the registry: `{key: engines.Engine}`, one line per engine
module, each declaring what it opens (the folder kinds of `files.folders`),
its options, its refusals and its precision facts (`engine.Engine`).
`keras_transformer.opener` reads it, and is the only module outside this
wing that imports one: every command, the server and
`keras_transformer.export.load` open folders through it.

- `xla`: a run directory's `Translator` and a decoder-only run's
  `Generator`, and the SavedModel they export;
- `savedmodel`: a SavedModel export's `LoadedTranslator` (`engine="xla"`);
- `ctranslate2`: a run directory converted to CTranslate2 and decoded by it;
- `litert`: a LiteRT export's host `Translator`.

A new engine is one module with an `ENGINE = Engine(...)` and one line
here (docs/architecture.md, "How to add an engine"). The first entry that
opens a folder kind is that kind's default.

Example:

>>> from keras_transformer import engines
>>> [(key, engine.name) for key, engine in engines.ENGINES.items()]
[('xla', 'xla'), ('savedmodel', 'xla'), ('ctranslate2', 'ctranslate2'), ('litert', 'litert')]
"""

from keras_transformer.engines import ctranslate2, litert, savedmodel, xla
from keras_transformer.engines.engine import Engine

ENGINES = {
    "xla": xla.ENGINE,
    "savedmodel": savedmodel.ENGINE,
    "ctranslate2": ctranslate2.ENGINE,
    "litert": litert.ENGINE,
}

__all__ = ["ENGINES", "Engine"]
