"""`Fields`: a checkpoint's JSON object read field by field, each of its kind, every error naming the file.

`config.json` and `generation_config.json` are untrusted input: a boolean
written as the string `"false"` is not true, a number of beams written as
`"abc"` is not a crash, and a size is a JSON integer in its range. JSON's
`null` counts as absent.

Example:

>>> fields = Fields({"d_model": 512, "scale_embedding": "false"}, "config.json")
>>> fields.int("d_model", high=65536)
512
>>> fields.bool("scale_embedding", False)
Traceback (most recent call last):
...
ValueError: config.json: `scale_embedding` must be true or false. Received: scale_embedding='false'
"""

import math

from keras_transformer import kinds as checks

_REQUIRED = object()


class Fields:
    """The fields of one JSON object (`data`), read from file `where`, for a family named `family`."""

    def __init__(self, data, where, family="this"):
        self.data, self.where, self.family = data, where, family

    def has(self, key):
        """Whether the object holds `key` with a value other than null."""
        return self.data.get(key) is not None

    def raw(self, key, default=_REQUIRED):
        """The value of `key` as it is; a missing key without a `default` is a `ValueError` naming it."""
        value = self.data.get(key)
        if value is not None:
            return value
        if default is _REQUIRED:
            raise ValueError(f"{self.where} has no `{key}`, which a {self.family} config holds")
        return default

    def int(self, key, default=_REQUIRED, low=0, high=2**31 - 1):
        """An integer in `[low, high]`."""
        return self._checked(key, default, lambda v: checks.check_int_in_range(key, v, low, high))

    def number(self, key, default=_REQUIRED, low=-math.inf):
        """A finite number >= `low`, as a float."""
        return self._checked(key, default, lambda v: checks.check_finite_number(key, v, low))

    def bool(self, key, default=_REQUIRED):
        """A JSON boolean (true or false, never a string or a number)."""
        return self._checked(key, default, lambda v: checks.check_bool(key, v))

    def choice(self, key, choices, default=_REQUIRED):
        """A string among `choices`."""
        return self._checked(key, default, lambda v: checks.check_choice(key, v, tuple(choices)))

    def single_id(self, key, default=_REQUIRED, vocab_size=None):
        """A token id, or a list holding one (transformers writes `eos_token_id` either way)."""

        def check(value):
            if isinstance(value, list):
                if len(value) != 1:
                    raise ValueError(f"`{key}` must be one id; keras-transformer supports one. Received: {value!r}")
                value = value[0]
            return checks.check_int_in_range(key, value, 0, (vocab_size or 2**31) - 1)

        return self._checked(key, default, check)

    def _checked(self, key, default, check):
        if not self.has(key):
            return self.raw(key, default)  # the default, or the error naming the missing key
        try:
            return check(self.data[key])
        except ValueError as error:
            raise ValueError(f"{self.where}: {error}") from None
