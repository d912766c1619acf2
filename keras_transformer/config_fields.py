"""The table every configuration part is: fields with a default and a kind, checked when a part is made.

`setting(default, kind)` declares a field; `Fields` gives a frozen
dataclass of them `replace`, `to_dict`, `from_dict` (reading the names
earlier versions wrote: `LEGACY_NAMES`) and the checks by kind.
`keras_transformer.config` holds the parts themselves.

Example:

>>> import dataclasses
>>> from keras_transformer import kinds
>>> @dataclasses.dataclass(frozen=True)
... class Part(Fields):
...     width: int = setting(8, kinds.POSITIVE_INT)
>>> Part.from_dict({"width": 4}).replace(width=2).to_dict()
{'width': 2}
>>> Part(width=0)
Traceback (most recent call last):
...
ValueError: `width` must be a positive int. Received: width=0
"""

import dataclasses

# Names earlier versions wrote in config.json and `.keras` files, and today's name for each.
LEGACY_NAMES = {"input_vocab_size": "source_vocab_size", "length_penalty": "alpha"}


def setting(default, kind):
    """A field of the table: its default, and its `kinds.Kind` (what it must be; None is taken where it is the
    default)."""
    return dataclasses.field(default=default, metadata={"kind": kind})


def _names(cls):
    return tuple(field.name for field in dataclasses.fields(cls))


class Fields:
    """What the configuration parts share: `replace`, `to_dict` and `from_dict` by field name.

    Each field is checked by its kind when a part is made (`check_fields`),
    by the constructor, `replace` and `from_dict` alike, as a layer checks its
    arguments: `ModelConfig(key_block_size=0)` is a `ValueError` naming the
    field. What holds between fields (`num_heads` dividing `d_model`, the ids
    within the vocabulary) is `check`'s, once the part is whole.
    """

    def __post_init__(self):
        self.check_fields()

    def replace(self, **changes):
        """A copy with some fields changed; an unknown name is a `ValueError` that lists the known ones."""
        check_names(type(self), changes)
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        """The fields as JSON values (tuples as lists)."""
        return {name: list(value) if isinstance(value, tuple) else value for name, value in vars(self).items()}

    @classmethod
    def from_dict(cls, data, where="config"):
        """The part written by `to_dict` (or by an earlier version: `LEGACY_NAMES`); unknown names are refused.

        `where` names the source in the error (e.g. a file and its section).
        """
        if not isinstance(data, dict):
            raise ValueError(f"{where} must be a JSON object. Received: {data!r}"[:300])
        legacy = {**LEGACY_NAMES, **getattr(cls, "_LEGACY_NAMES", {})}
        data = {legacy.get(name, name): value for name, value in data.items()}
        check_names(cls, data, where)
        try:
            return cls(**{name: tuple(v) if isinstance(v, list) else v for name, v in data.items()})
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None

    @classmethod
    def field(cls, name):
        """The `dataclasses.Field` of `name` (or of an earlier version's name for it), or None."""
        name = {**LEGACY_NAMES, **getattr(cls, "_LEGACY_NAMES", {})}.get(name, name)
        return next((field for field in dataclasses.fields(cls) if field.name == name), None)

    @classmethod
    def takes(cls, name, value):
        """Whether field `name` takes `value`: its kind's check, or None where None is its default."""
        field = cls.field(name)
        return (value is None and field.default is None) or field.metadata["kind"].accepts(value)

    def check_fields(self):
        """Each field checked by its kind (None passes where it is the default); returns the config itself."""
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not (value is None and field.default is None):
                field.metadata["kind"].check(field.name, value)
        return self


def check_names(cls, names, where=None):
    unknown = sorted(set(names) - set(_names(cls)))
    if unknown:
        where = f"{where}: " if where else ""
        raise ValueError(
            f"{where}{cls.__name__} has no field {unknown[0]!r}. Its fields: {', '.join(_names(cls))}. "
            f"Received: {unknown[0]}={names[unknown[0]]!r}"[:400]
        )
