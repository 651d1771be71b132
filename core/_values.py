"""Value classes: dataclasses whose methods cost nothing until they are used.

Why: on Python 3.11 ``@dataclass(frozen=True)`` compiles three methods per class, each with an
``exec`` of its own (``__init__``, ``__setattr__``, ``__delattr__``), and a small receive
creates ~75 of hilltop's classes at import, most of which it never instantiates. So
:func:`value` asks ``dataclasses`` only for what needs no compiling (the fields,
``__match_args__``, slots) and supplies the rest itself:

- ``__eq__``, ``__hash__`` and ``__repr__`` are closures over three functions compiled once,
  reading the field names the class has (the sixth session: ~23 ms of CPU per process);
- a frozen class's ``__setattr__``/``__delattr__`` are closures too;
- ``__init__`` is a stand-in that builds the first few instances itself and then compiles
  the real one, the same straight-line code ``@dataclass`` would have made, in its place; a
  class never instantiated never compiles one (:data:`EARLY_CALLS`).

Making the 73 value classes a text receive imports took 32-49 ms of CPU this way
before and takes 7-10 ms now (bench/README.md, "Seventh session").

The semantics are the generated methods': equal only to an instance of the very same class
whose compared fields are equal as tuples (``NotImplemented`` otherwise), hashed as the tuple
of its hashed fields when frozen, unhashable when mutable, shown as ``Name(a=1, b='x')``;
``compare=``, ``hash=``, ``repr=``, ``default=`` and ``default_factory=`` of
:func:`dataclasses.field` count, ``__post_init__`` runs, a method the class body defines itself
is kept, and :func:`dataclasses.fields`, :func:`dataclasses.replace`, ``match`` patterns,
:func:`inspect.signature` and pickling work as on a dataclass. ``tests/core/test_values.py``
checks each against ``@dataclass``.

Why a decorator marked with :func:`typing.dataclass_transform` and not a base class under
``@dataclass(frozen=True, eq=False, repr=False)``: mypy 2.4 checks both fully (an assignment
to a frozen field, ``dataclasses.replace``'s arguments, ``fields()``, ``case Name(x)``
patterns were all checked in a trial file, with ``frozen_default=True`` honoured), so the
decorator wins on reading: one line, no ``eq=False`` that reads as "compared by identity",
no base class mixed into each class's bases. Options that would change what ``__eq__``
means (``order``, ``unsafe_hash``, ``eq=False``) are not offered, nor ``init=False``,
``kw_only`` or ``InitVar`` fields, which no value class needs: use ``@dataclass``.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from operator import attrgetter
from reprlib import recursive_repr
from typing import Any, TypeVar, dataclass_transform, overload

__all__ = ["value"]

_T = TypeVar("_T")
_MISSING: Any = dataclasses.MISSING
_FROZEN_METHODS = ("__setattr__", "__delattr__")


@overload
def value(cls: type[_T], /) -> type[_T]: ...


@overload
def value(*, frozen: bool = True, slots: bool = False) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def value(cls: type[_T] | None = None, /, *, frozen: bool = True,
          slots: bool = False) -> type[_T] | Callable[[type[_T]], type[_T]]:
    """``@dataclass(frozen=True)`` (or ``frozen=False``, ``slots=True``) with shared methods."""

    def make(cls: type[_T]) -> type[_T]:
        if frozen:
            for name in _FROZEN_METHODS:
                if name in cls.__dict__:  # as @dataclass(frozen=True) refuses it
                    raise TypeError(f"Cannot overwrite attribute {name} in class "
                                    f"{cls.__name__}")
        # A frozen subclass of a frozen dataclass must say frozen=True to dataclasses, which
        # then compiles the two frozen methods itself; a base class compiles nothing.
        bases = [b.__dataclass_params__ for b in cls.__mro__[1:]  # type: ignore[attr-defined]
                 if "__dataclass_params__" in b.__dict__]
        frozen_base = any(params.frozen for params in bases)
        if frozen and bases and not frozen_base:
            raise TypeError("cannot inherit frozen dataclass from a non-frozen one")
        made = dataclasses.dataclass(init=False, eq=False, repr=False, slots=slots,
                                     frozen=frozen and frozen_base)(cls)
        fields = dataclasses.fields(made)  # type: ignore[arg-type]
        _check_fields(made, fields)
        made.__dataclass_params__.init = True  # type: ignore[attr-defined]
        made.__dataclass_params__.frozen = frozen  # type: ignore[attr-defined]
        if frozen and not frozen_base:
            _give_frozen_methods(made, slots, tuple(f.name for f in fields))
        if "__init__" not in made.__dict__:
            _set(made, "__init__", _first_init(made, frozen, fields))
        _give_methods(made, fields, frozen)
        return made

    return make if cls is None else make(cls)


def _check_fields(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> None:
    """Refuse, when the class is made, what ``@dataclass`` would refuse or what :func:`value`
    does not generate."""
    pseudo = [f for f in cls.__dataclass_fields__.values() if f not in fields]  # type: ignore[attr-defined]
    if any("InitVar" in str(f.type) for f in pseudo):  # the rest are ClassVars
        raise TypeError(f"{cls.__name__}: @value takes no InitVar fields; use @dataclass")
    defaulted = None
    for f in fields:
        if not f.init or f.kw_only is True:
            raise TypeError(f"{cls.__name__}.{f.name}: @value fields are all positional "
                            "__init__ arguments; use @dataclass")
        if _has_default(f):
            defaulted = f.name
        elif defaulted is not None:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")


def _has_default(f: dataclasses.Field[Any]) -> bool:
    """Whether ``__init__`` may leave the field out (a default or a factory)."""
    return f.default is not _MISSING or f.default_factory is not _MISSING


EARLY_CALLS = 4
"""How many instances the stand-in ``__init__`` builds itself before it compiles the real one.

Why: of the 73 value classes a text receive makes, it instantiates 34, most of them once or
twice, and compiling an ``__init__`` costs ~0.13 ms (34 of them: 4.0-4.9 ms a process); the
stand-in binds the arguments in ~2-4 us a call instead, and a class built more often gets the
compiled one, which builds an instance in ~0.5 us."""


def _first_init(cls: type, frozen: bool, fields: tuple[dataclasses.Field[Any], ...]
                ) -> Callable[..., None]:
    """A stand-in ``__init__``: it builds the first :data:`EARLY_CALLS` instances itself,
    then compiles the real one, puts it on ``cls`` and runs it. Arguments it cannot bind
    (too many, unknown, repeated, missing) go to the compiled one, which raises Python's
    own error for them."""
    signature = _signature(fields)
    names = tuple(f.name for f in fields)
    defaults = {f.name: f for f in fields if _has_default(f)}
    set_field: Callable[[Any, str, Any], None] = object.__setattr__ if frozen else setattr
    post_init = hasattr(cls, "__post_init__")
    calls = 0

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal calls
        calls += 1
        if calls <= EARLY_CALLS:
            bound = _bind(names, defaults, args, kwargs)
            if bound is not None:
                for name, item in zip(names, bound, strict=True):
                    set_field(self, name, item)
                if post_init:
                    self.__post_init__()
                return
        init = _compile_init(cls, frozen, fields)
        init.__signature__ = signature  # type: ignore[attr-defined]
        if cls.__dict__.get("__init__") is __init__:
            _set(cls, "__init__", init)
        init(self, *args, **kwargs)

    __init__.__signature__ = signature  # type: ignore[attr-defined]
    return __init__


def _bind(names: tuple[str, ...], defaults: dict[str, dataclasses.Field[Any]],
          args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any] | None:
    """Each field's value from the arguments, its default or its factory, in field order;
    None for arguments the compiled ``__init__`` would refuse."""
    given = len(args)
    if given > len(names):
        return None
    rest = names[given:]
    if len(kwargs) != sum(name in kwargs for name in rest):  # unknown, or given twice
        return None
    if any(name not in kwargs and name not in defaults for name in rest):
        return None
    values = list(args)
    for name in rest:
        if name in kwargs:
            values.append(kwargs[name])
        else:
            f = defaults[name]
            factory: Any = f.default_factory
            values.append(f.default if factory is _MISSING else factory())
    return values


def _signature(fields: tuple[dataclasses.Field[Any], ...]) -> inspect.Signature:
    """The signature the compiled ``__init__`` will have (what :func:`inspect.signature`
    shows before the first instance)."""
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = [inspect.Parameter("self", positional)]
    for f in fields:
        default = f.default if f.default_factory is _MISSING else _FACTORY
        parameters.append(inspect.Parameter(
            f.name, positional, annotation=f.type,
            default=inspect.Parameter.empty if default is _MISSING else default))
    return inspect.Signature(parameters, return_annotation=None)


class _Factory:
    """The default of a field with a ``default_factory``: the factory runs in ``__init__``."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _compile_init(cls: type, frozen: bool, fields: tuple[dataclasses.Field[Any], ...]
                  ) -> Callable[..., None]:
    """``__init__`` as ``@dataclass`` writes it: a default per field, a factory called when
    its argument was left out, each field set (through ``object.__setattr__`` when frozen),
    then ``__post_init__``."""
    self_name = "__value_self__" if any(f.name == "self" for f in fields) else "self"
    scope: dict[str, Any] = {"__value_set__": object.__setattr__, "__value_factory__": _FACTORY}
    parameters, lines = [], []
    for f in fields:
        if f.default_factory is not _MISSING:
            scope[f"__value_make_{f.name}__"] = f.default_factory
            parameters.append(f"{f.name}=__value_factory__")
            lines.append(f"if {f.name} is __value_factory__: {f.name} = __value_make_{f.name}__()")
        elif f.default is not _MISSING:
            scope[f"__value_default_{f.name}__"] = f.default
            parameters.append(f"{f.name}=__value_default_{f.name}__")
        else:
            parameters.append(f.name)
        lines.append(f"__value_set__({self_name}, {f.name!r}, {f.name})" if frozen
                     else f"{self_name}.{f.name} = {f.name}")
    if hasattr(cls, "__post_init__"):
        lines.append(f"{self_name}.__post_init__()")
    source = (f"def __init__({', '.join([self_name, *parameters])}) -> None:\n    "
              + "\n    ".join(lines or ["pass"]))
    made: dict[str, Any] = {}
    exec(source, scope, made)  # noqa: S102 - our own source, as dataclasses does it
    init: Callable[..., None] = made["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"  # for its errors, as @dataclass's
    return init


def _give_frozen_methods(cls: type, slots: bool, ordered: tuple[str, ...]) -> None:
    names = frozenset(ordered)

    def __setattr__(self: object, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)  # type: ignore[arg-type]

    def __delattr__(self: object, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)  # type: ignore[arg-type]

    _set(cls, "__setattr__", __setattr__)
    _set(cls, "__delattr__", __delattr__)
    if slots:  # pickling sets slots through setattr, which a frozen class refuses
        if "__getstate__" not in cls.__dict__:
            _set(cls, "__getstate__", lambda self: [getattr(self, n) for n in ordered])
        if "__setstate__" not in cls.__dict__:
            def __setstate__(self: object, state: list[Any]) -> None:
                for name, item in zip(ordered, state, strict=True):
                    object.__setattr__(self, name, item)

            _set(cls, "__setstate__", __setstate__)


def _give_methods(cls: type, fields: tuple[dataclasses.Field[Any], ...], frozen: bool) -> None:
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
