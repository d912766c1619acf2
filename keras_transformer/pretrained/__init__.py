"""Pretrained checkpoints imported into this package's layers: OPUS-MT (Marian) first.

`import_pretrained(source, output)` (and `keras-transformer import`) turns a
Hugging Face checkpoint, a local folder or `hf://ORG/NAME[@REVISION]`, into a
run directory that every command accepts: translate, evaluate, score, chat,
export (SavedModel and CTranslate2), serve, plot attention, and
`train --init-from` to fine-tune it. `export_checkpoint(run, output)` (and
`keras-transformer export --format transformers`) writes a run back as
such a checkpoint: an import, a fine-tuned import, or a run of this
package, as a Marian model. `sources` finds the checkpoint,
`checkpoints` reads its files, and one module a family of checkpoints
(`families`, chosen by `config.json`'s `model_type`: `families.marian`)
says what its config, weights, tokenizers and generation settings are in
this package's terms.
"""

from keras_transformer.pretrained.exporter import export_checkpoint
from keras_transformer.pretrained.families import FAMILIES
from keras_transformer.pretrained.importer import import_pretrained

__all__ = ["FAMILIES", "export_checkpoint", "import_pretrained"]
