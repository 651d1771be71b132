"""Typed transport settings: one frozen dataclass per transport, held in a container keyed by type.

Each transport defines what it reads (``DirectTCPSettings``, ``LanSettings``,
``WebRTCSettings``, ``TorTransitSettings``, or a third party's own type) and asks for it with
``session.settings.get(TheType)``. This replaced a dict of dicts that went from the CLI through
:class:`~hilltop.transit.options.TransitOptions` and the runner to every plugin untyped, and
that carried the raw transit key to each of them.

The module imports nothing but the standard library: the CLI builds settings for every command,
also for a text message, which must not load any transit code (``tests/core/test_config.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, TypeVar, cast

T = TypeVar("T")


def _is_frozen_dataclass(item: object) -> bool:
    return (dataclasses.is_dataclass(item) and not isinstance(item, type)
            and type(item).__dataclass_params__.frozen)  # type: ignore[attr-defined]


class TransportSettings:
    """An immutable set of settings objects, at most one of each type.

    Every item is a frozen dataclass instance: one container is shared by all plugins of a
    session, so none of them can change what another reads. "Changing" a setting makes a new
    container (:meth:`with_`, :meth:`updated`).
    """

    __slots__ = ("_items",)

    def __init__(self, *items: object) -> None:
        by_type: dict[type, object] = {}
        for item in items:
            if not _is_frozen_dataclass(item):
                raise TypeError(f"transport settings must be frozen dataclass instances, "
                                f"not {type(item).__name__}")
            if type(item) in by_type:
                raise ValueError(f"two {type(item).__name__} settings given")
            by_type[type(item)] = item
        self._items = by_type

    def get(self, kind: type[T]) -> T | None:
        """The settings of this exact type, or None if nobody set them."""
        return cast("T | None", self._items.get(kind))

    def with_(self, *items: object) -> TransportSettings:
        """A copy in which ``items`` replace any settings of the same type."""
        kept = [v for k, v in self._items.items() if k not in {type(i) for i in items}]
        return TransportSettings(*kept, *items)

    def updated(self, kind: type[T], **changes: Any) -> TransportSettings:
        """A copy whose ``kind`` settings have these fields changed (starting from ``kind()``
        when none were set)."""
        current = self.get(kind)
        base = current if current is not None else kind()
        return self.with_(dataclasses.replace(base, **changes))  # type: ignore[type-var]

    def __iter__(self) -> Iterator[object]:
        return iter(self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TransportSettings):
            return NotImplemented
        return self._items == other._items

    __hash__ = None  # type: ignore[assignment]  # items may hold lists

    def __repr__(self) -> str:
        return f"TransportSettings({', '.join(map(repr, self._items.values()))})"
