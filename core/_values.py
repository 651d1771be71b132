"""Value classes: dataclasses that share one ``__eq__``, ``__hash__`` and ``__repr__`` code.

Why: on Python 3.11 ``@dataclass`` compiles each method it generates with an ``exec`` of its
own, 0.6-1.1 ms a class, and a small receive creates ~90-110 of hilltop's classes at import.
:func:`value` lets ``dataclasses`` generate only ``__init__`` and the frozen
``__setattr__``/``__delattr__`` and gives the class closures over three functions compiled
once, reading the field names it takes from :func:`dataclasses.fields` when the class is
made: creating a class costs a third less, ~23 ms of CPU in a small transfer's process
(bench/README.md, "Sixth session"); comparing costs ~100 ns more a call, and no bulk path
compares these classes. The semantics are the generated methods': equal only to an
instance of the very same class whose compared fields are equal as tuples
(``NotImplemented`` otherwise), hashed as the tuple of its hashed fields when frozen,
unhashable when mutable, shown as ``Name(a=1, b='x')``; ``compare=``, ``hash=`` and
``repr=`` of :func:`dataclasses.field` count, and a method the class body defines itself is
kept, as ``@dataclass`` keeps it.

Why a decorator marked with :func:`typing.dataclass_transform` and not a base class under
``@dataclass(frozen=True, eq=False, repr=False)``: mypy 2.4 checks both fully (an assignment
to a frozen field, ``dataclasses.replace``'s arguments, ``fields()``, ``case Name(x)``
patterns were all checked in a trial file, with ``frozen_default=True`` honoured), so the
decorator wins on reading: one line, no ``eq=False`` that reads as "compared by identity",
no base class mixed into each class's bases. Options that would change what ``__eq__``
means (``order``, ``unsafe_hash``, ``eq=False``) are not offered: use ``@dataclass``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from operator import attrgetter
from reprlib import recursive_repr
from typing import Any, TypeVar, dataclass_transform, overload

__all__ = ["value"]

_T = TypeVar("_T")


@overload
def value(cls: type[_T], /) -> type[_T]: ...


@overload
def value(*, frozen: bool = True, slots: bool = False) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def value(cls: type[_T] | None = None, /, *, frozen: bool = True,
          slots: bool = False) -> type[_T] | Callable[[type[_T]], type[_T]]:
    """``@dataclass(frozen=True)`` (or ``frozen=False``, ``slots=True``) with shared methods."""

    def make(cls: type[_T]) -> type[_T]:
        made = dataclasses.dataclass(frozen=frozen, eq=False, repr=False, slots=slots)(cls)
        _give_methods(made, frozen)
        return made

    return make if cls is None else make(cls)


def _give_methods(cls: type, frozen: bool) -> None:
    fields = dataclasses.fields(cls)
    own = cls.__dict__
    class_hash = own.get("__hash__", dataclasses.MISSING)
    explicit_hash = not (class_hash is dataclasses.MISSING
                         or (class_hash is None and "__eq__" in own))
    if "__eq__" not in own:
        _set(cls, "__eq__", _eq(_as_tuple([f.name for f in fields if f.compare])))
    if not explicit_hash:  # @dataclass's table for eq=True, unsafe_hash=False
        hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
        _set(cls, "__hash__", _hash(_as_tuple(hashed)) if frozen else None)
    if "__repr__" not in own:
        _set(cls, "__repr__", _repr(tuple(f.name for f in fields if f.repr)))


def _set(cls: type, name: str, method: Any) -> None:
    if method is not None:
        method.__qualname__ = f"{cls.__qualname__}.{name}"
    setattr(cls, name, method)


def _as_tuple(names: list[str]) -> Callable[[object], tuple[Any, ...]]:
    """The fields ``names`` of an instance as a tuple, as the generated ``(self.a, ...)``."""
    if len(names) >= 2:
        return attrgetter(*names)  # builds the tuple in C
    if names:
        name = names[0]
        return lambda instance: (getattr(instance, name),)
    return lambda instance: ()


def _eq(key: Callable[[object], tuple[Any, ...]]) -> Callable[[object, object], Any]:
    def __eq__(self: object, other: object) -> Any:
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented

    return __eq__


def _hash(key: Callable[[object], tuple[Any, ...]]) -> Callable[[object], int]:
    def __hash__(self: object) -> int:
        return hash(key(self))

    return __hash__


def _repr(names: tuple[str, ...]) -> Callable[[object], str]:
    @recursive_repr()  # "..." for an instance inside itself, as the generated one
    def __repr__(self: object) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({shown})"

    return __repr__
