"""Hints of a type hilltop itself does not know, kept as the peer sent them, for a plugin.

Built-in hint types get a typed module each (``direct_tcp_v1`` ...). A third-party transport
brings its own wire type (say ``unix-socket-v1``) without changing hilltop: it names the type in
``TransportInfo.hint_types``, and :func:`hilltop.hints.parse_hints` then hands hints of that
type over as a :class:`RawHint` instead of dropping them. Checking the fields is the plugin's
job, because only the plugin knows what they mean. A plugin may also build RawHints for the
hints it contributes (:meth:`RawHint.make`), so it needs no hint class of its own.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import field
from types import MappingProxyType
from typing import Any

from hilltop._values import value
from hilltop.errors import MalformedHintError


@value
class RawHint:
    """One wire hint, untouched: ``data`` is the whole JSON object, ``"type"`` included."""

    type: str
    data: Mapping[str, Any] = field(hash=False)

    @classmethod
    def make(cls, type_: str, **fields: Any) -> RawHint:
        """Build a hint to contribute, e.g. ``RawHint.make("unix-socket-v1", path=p)``."""
        return from_wire({"type": type_, **fields})

    @property
    def priority(self) -> float:
        """The ``priority`` field when it is a number, else 0.0 (the race orders by it)."""
        value = self.data.get("priority")
        if isinstance(value, bool) or not isinstance(value, int | float):
            return 0.0
        return float(value)

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def to_wire(self) -> dict[str, Any]:
        return copy.deepcopy(dict(self.data))

    def __str__(self) -> str:
        rest = {k: v for k, v in self.data.items() if k not in ("type", "priority")}
        return json.dumps(rest, sort_keys=True, separators=(",", ":"), default=repr)


def from_wire(obj: Any) -> RawHint:
    """Keep a JSON object as a RawHint; it must be an object with a string ``type``."""
    if not isinstance(obj, dict):
        raise MalformedHintError(f"hint must be a JSON object, got {type(obj).__name__}")
    kind = obj.get("type")
    if not isinstance(kind, str) or not kind:
        raise MalformedHintError(f"hint needs a string type, got {kind!r}")
    return RawHint(kind, MappingProxyType(copy.deepcopy(obj)))


parse = from_wire  # the name every hint module uses
