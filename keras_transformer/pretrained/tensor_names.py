"""Which stored tensor is which weight: the base model's prefix, legacy names, and the buffers transformers skips.

A family's checkpoints name one weight in more than one way, and hold
tensors that are no weight at all. transformers' loader reads them all
alike, and so does an import, by a `Layout` that each family declares in a
line:

- **The base model's prefix.** A model with a head stores its base model's
  tensors under a prefix (`model.` for Marian and M2M100, `bert.`,
  `transformer.`); the base model alone (`MarianModel`, `BertModel`) stores
  them without it. A family names its tensors as the model with a head
  does; a stored name without the prefix is read as if it had it, unless it
  is one of the head's own (`heads`: `lm_head.`, `final_logits_bias`,
  `cls.`, ...), as transformers adds or strips `base_model_prefix`.
- **Legacy names**: `LayerNorm.gamma` and `LayerNorm.beta` are
  `LayerNorm.weight` and `LayerNorm.bias`, for every family (transformers'
  own legacy renaming).
- **Buffers that carry nothing**: `position_ids` (an `arange`), GPT-2's
  causal masks (`attn.bias`, `attn.masked_bias`), which older transformers
  saved with the weights and today's skips on load (`skipped`, matched as
  name endings at a dot). They are accepted whatever their dtype or shape
  and never read.

Buffers that do carry something stay among the tensors, where the family
checks their values (`buffers.check_copies`, `buffers.check_tables`): a
stored position table, a tied copy of an embedding, a `final_logits_bias`.
Any other tensor is still the family's to refuse, by its stored name.

Example:

>>> layout = Layout(prefix="model.", heads=("lm_head.", "final_logits_bias"), skipped=("position_ids",))
>>> view = layout.view({"encoder.layers.0.fc1.bias": 1, "lm_head.weight": 2, "embeddings.position_ids": 3})
>>> dict(view), view.stored["model.encoder.layers.0.fc1.bias"], view.skipped
({'model.encoder.layers.0.fc1.bias': 1, 'lm_head.weight': 2}, 'encoder.layers.0.fc1.bias', ['embeddings.position_ids'])
"""

import dataclasses

# transformers renames these in every checkpoint it loads (conversion_mapping's "legacy" renamings).
LEGACY_NAMES = ((".LayerNorm.gamma", ".LayerNorm.weight"), (".LayerNorm.beta", ".LayerNorm.bias"))


class Tensors(dict):
    """`{name: TensorInfo}` under a family's names; `stored`: each one's name in the file; `skipped`: the buffers."""

    def __init__(self, items=(), stored=None, skipped=()):
        super().__init__(items)
        self.stored = dict(stored or {})
        self.skipped = sorted(skipped)

    def stored_name(self, name):
        """The name tensor `name` has in the file."""
        return self.stored.get(name, name)


@dataclasses.dataclass(frozen=True)
class Layout:
    """How a family's checkpoints name their tensors.

    Args:
        prefix: the base model's prefix, with its dot (`"model."`), or "".
        heads: names, or starts of names, of tensors outside the base model
            (`"lm_head."`, `"final_logits_bias"`): never given the prefix.
        skipped: endings of the buffers transformers skips on load
            (`"position_ids"`, `"attn.bias"`): accepted, never read.
    """

    prefix: str = ""
    heads: tuple = ()
    skipped: tuple = ()

    def name(self, stored):
        """The family's name of a tensor stored as `stored` (None for a skipped buffer)."""
        if any(stored == ending or stored.endswith("." + ending) for ending in self.skipped):
            return None
        name = stored
        for old, new in LEGACY_NAMES:
            if name.endswith(old):
                name = name[: -len(old)] + new
        if self.prefix and not name.startswith(self.prefix) and not name.startswith(self.heads):
            name = self.prefix + name
        return name

    def view(self, infos, where="the weights file"):
        """`Tensors` of `infos` (`{stored name: info}`) under the family's names; one name twice is a `ValueError`."""
        view, skipped = Tensors(), []
        for stored, info in infos.items():
            name = self.name(stored)
            if name is None:
                skipped.append(stored)
                continue
            if name in view:
                raise ValueError(f"{where} holds both `{view.stored[name]}` and `{stored}`, one tensor `{name}` twice")
            view[name] = info
            view.stored[name] = stored
        view.skipped = sorted(skipped)
        return view


PLAIN = Layout()  # names read as they are stored: a family that declares no layout
