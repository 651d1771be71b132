"""hilltop._values.value: the same equality, hash and repr as ``@dataclass`` generates.

Each value class is checked against a plain dataclass of the same fields, on values
hypothesis draws (equal and unequal pairs, NaN, nested containers).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hilltop._values import EARLY_CALLS, value


@value
class Point:
    """A frozen value of two compared fields and one that is not compared."""

    x: Any
    y: Any
    note: Any = field(default=None, compare=False)


@dataclass(frozen=True)
class PlainPoint:
    """Point as ``@dataclass`` makes it: the reference."""

    x: Any
    y: Any
    note: Any = field(default=None, compare=False)


@value
class Tagged:
    """One field left out of the hash and one out of the repr."""

    name: str
    weight: Any = field(default=0, hash=False)
    secret: Any = field(default=b"", repr=False)


@dataclass(frozen=True)
class PlainTagged:
    """Tagged as ``@dataclass`` makes it."""

    name: str
    weight: Any = field(default=0, hash=False)
    secret: Any = field(default=b"", repr=False)


@value
class Empty:
    """No fields at all."""


@dataclass(frozen=True)
class PlainEmpty:
    """Empty as ``@dataclass`` makes it."""


@value
class Single:
    """One field: the generated methods still make a 1-tuple of it."""

    x: Any


@dataclass(frozen=True)
class PlainSingle:
    """Single as ``@dataclass`` makes it."""

    x: Any


@value(frozen=False)
class Box:
    """A mutable value class."""

    content: Any


@value(slots=True)
class Slotted:
    """A frozen value class with slots."""

    a: int
    b: str


@value
class Point2(Point):
    """A subclass with the same fields: never equal to a Point."""


atoms = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=4),
                  st.floats(allow_nan=True), st.binary(max_size=4))
hashables = st.recursive(atoms, lambda inner: st.tuples(inner, inner) | st.frozensets(inner),
                         max_leaves=6)


def _same_behaviour(ours: list[Any], plain: list[Any]) -> None:
    """Every pair of ``ours`` compares, hashes and shows as the same pair of ``plain``."""
    for i, (a, pa) in enumerate(zip(ours, plain, strict=True)):
        assert hash(a) == hash(pa)
        assert repr(a).replace(type(a).__qualname__, "X", 1) == \
            repr(pa).replace(type(pa).__qualname__, "X", 1)
        for b, pb in zip(ours[i:], plain[i:], strict=True):
            assert (a == b) is (pa == pb) and (b == a) is (pb == pa)
            assert (a != b) is (pa != pb)


@given(st.lists(st.tuples(hashables, hashables, atoms), min_size=1, max_size=4))
def test_points_behave_as_the_plain_dataclass(args: list[tuple[Any, Any, Any]]) -> None:
    _same_behaviour([Point(*a) for a in args], [PlainPoint(*a) for a in args])
    _same_behaviour([Point(x, y) for x, y, _ in args] * 2,
                    [PlainPoint(x, y) for x, y, _ in args] * 2)


@given(st.lists(st.tuples(st.text(max_size=3), hashables, st.binary(max_size=3)), min_size=1,
                max_size=4))
def test_hash_and_repr_options_behave_as_the_plain_dataclass(
        args: list[tuple[str, Any, bytes]]) -> None:
    _same_behaviour([Tagged(*a) for a in args], [PlainTagged(*a) for a in args])


@given(hashables)
def test_one_field_and_no_fields_behave_as_the_plain_dataclass(x: Any) -> None:
    _same_behaviour([Single(x), Single(x)], [PlainSingle(x), PlainSingle(x)])
    _same_behaviour([Empty(), Empty()], [PlainEmpty(), PlainEmpty()])


def test_the_repr_is_the_dataclass_one() -> None:
    assert repr(Point(1, "x")) == "Point(x=1, y='x', note=None)"
    assert repr(Tagged("a", 2, b"s")) == "Tagged(name='a', weight=2)"
    assert repr(Empty()) == "Empty()"
    assert repr(Slotted(1, "b")) == "Slotted(a=1, b='b')"


def test_a_field_with_compare_false_is_neither_compared_nor_hashed() -> None:
    assert Point(1, 2, note="a") == Point(1, 2, note="b")
    assert hash(Point(1, 2, note="a")) == hash(Point(1, 2, note="b"))
    assert Point(1, 2) != Point(1, 3)


def test_a_field_with_hash_false_is_compared_but_not_hashed() -> None:
    assert Tagged("a", 1) != Tagged("a", 2)
    assert hash(Tagged("a", 1)) == hash(Tagged("a", 2)) == hash(("a", b""))


def test_nan_compares_by_identity_inside_the_tuple_as_generated() -> None:
    nan = math.nan
    assert Single(nan) == Single(nan) and PlainSingle(nan) == PlainSingle(nan)
    assert Single(nan) != Single(float("nan"))


def test_other_classes_are_never_equal() -> None:
    assert Point(1, 2) != Point2(1, 2) and Point2(1, 2) != Point(1, 2)
    assert Point(1, 2) != PlainPoint(1, 2)
    assert Point(1, 2).__eq__((1, 2)) is NotImplemented
    assert Point(1, 2) != (1, 2)
    assert Point2(1, 2) == Point2(1, 2)


def test_a_mutable_value_is_compared_but_unhashable() -> None:
    assert Box.__hash__ is None
    assert Box([1]) == Box([1]) and Box([1]) != Box([2])
    with pytest.raises(TypeError, match="unhashable"):
        hash(Box(1))
    box = Box(1)
    box.content = 2
    assert box == Box(2)


def test_a_frozen_value_refuses_assignment_and_is_hashable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Point(1, 2).x = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Slotted(1, "b").a = 2  # type: ignore[misc]
    assert {Slotted(1, "b"), Slotted(1, "b")} == {Slotted(1, "b")}
    assert not hasattr(Slotted(1, "b"), "__dict__")


def test_a_value_inside_itself_is_shown_as_dots() -> None:
    box = Box([])
    box.content.append(box)
    assert repr(box) == "Box(content=[...])"


def test_match_patterns_and_dataclass_functions_still_work() -> None:
    assert Point.__match_args__ == ("x", "y", "note")
    match Point(1, 2):
        case Point(1, y):
            assert y == 2
        case _:
            pytest.fail("Point(1, y) did not match")
    assert [f.name for f in dataclasses.fields(Point)] == ["x", "y", "note"]
    assert dataclasses.replace(Point(1, 2), y=3) == Point(1, 3)
    assert dataclasses.asdict(Point(1, 2)) == {"x": 1, "y": 2, "note": None}
    assert dataclasses.is_dataclass(Point) and Point.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert pickle.loads(pickle.dumps(Slotted(1, "b"))) == Slotted(1, "b")
    assert pickle.loads(pickle.dumps(Point(1, 2, "n"))) == Point(1, 2, "n")


def test_methods_the_class_defines_itself_are_kept() -> None:
    @value
    class Own:
        """Compares everything as equal, as its author asked."""

        x: int

        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return 7

        def __repr__(self) -> str:
            return "own"

    assert Own(1) == Own(2) and hash(Own(1)) == 7 and repr(Own(1)) == "own"


def test_every_hilltop_value_class_has_dataclass_parity_methods() -> None:
    """The classes hilltop declares with ``@value`` carry the shared methods, not object's."""
    from hilltop.rendezvous import messages
    from hilltop.transfer import offers

    for cls in (messages.Welcome, offers.FileOffer):
        assert cls.__eq__ is not object.__eq__ and cls.__hash__ is not None
        assert cls.__eq__.__qualname__ == f"{cls.__qualname__}.__eq__"


@value
class Defaults:
    """Every kind of field ``__init__`` handles: plain, a default, a factory."""

    name: str
    count: int = 0
    items: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class PlainDefaults:
    """Defaults as ``@dataclass`` makes it."""

    name: str
    count: int = 0
    items: list[Any] = field(default_factory=list)


@value
class Checked:
    """A ``__post_init__`` that checks and derives, as hilltop's offers do."""

    size: int

    def __post_init__(self) -> None:
        if self.size < 0:
            raise ValueError("negative size")
        object.__setattr__(self, "derived", self.size * 2)


def _call(cls: type, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """What calling ``cls`` gives: its fields, or the error with the class name taken out."""
    try:
        made = cls(*args, **kwargs)
    except TypeError as error:
        return "error", str(error).replace(cls.__qualname__, "X")
    return "made", dataclasses.astuple(made)


@given(st.lists(st.one_of(st.integers(), st.text(max_size=2)), max_size=4),
       st.dictionaries(st.sampled_from(["name", "count", "items", "other"]), st.integers(),
                       max_size=3))
def test_init_takes_what_the_dataclass_init_takes(args: list[Any],
                                                  kwargs: dict[str, Any]) -> None:
    assert _call(Defaults, *args, **kwargs) == _call(PlainDefaults, *args, **kwargs)


def _fresh_defaults() -> type:
    """A new class shaped like Defaults, so its stand-in ``__init__`` builds the instance."""

    @value
    class Fresh:
        """Defaults, not yet instantiated."""

        name: str
        count: int = 0
        items: list[Any] = field(default_factory=list)

    return Fresh


def test_init_signature_is_the_dataclass_one_before_and_after_compiling() -> None:
    fresh = _fresh_defaults()
    assert "args" in fresh.__init__.__code__.co_varnames  # the stand-in, not compiled yet
    before = str(inspect.signature(fresh))
    for _ in range(EARLY_CALLS):
        fresh("a")
    assert "args" in fresh.__init__.__code__.co_varnames  # the first few: still not compiled
    fresh("a")
    assert "args" not in fresh.__init__.__code__.co_varnames  # compiled after them
    assert before == str(inspect.signature(fresh)) == str(inspect.signature(PlainDefaults))
    assert fresh.__init__.__qualname__ == "_fresh_defaults.<locals>.Fresh.__init__"


@given(st.lists(st.one_of(st.integers(), st.text(max_size=2)), max_size=4),
       st.dictionaries(st.sampled_from(["name", "count", "items", "other"]), st.integers(),
                       max_size=3))
def test_the_stand_in_init_takes_what_the_dataclass_init_takes(
        args: list[Any], kwargs: dict[str, Any]) -> None:
    fresh = _fresh_defaults()
    assert _call(fresh, *args, **kwargs) == _call(PlainDefaults, *args, **kwargs)
    if _call(PlainDefaults, *args, **kwargs)[0] == "made":
        assert "args" in fresh.__init__.__code__.co_varnames  # the stand-in built it


def test_the_stand_in_init_runs_post_init_and_factories() -> None:
    @value
    class FreshChecked:
        """Checked, not yet instantiated."""

        size: int
        seen: list[Any] = field(default_factory=list)

        def __post_init__(self) -> None:
            if self.size < 0:
                raise ValueError("negative size")
            self.seen.append(self.size)

    first, second = FreshChecked(1), FreshChecked(size=2)
    assert first.seen == [1] and second.seen == [2]
    with pytest.raises(ValueError, match="negative size"):
        FreshChecked(-1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.size = 3  # type: ignore[misc]


def test_defaults_and_factories_are_fresh_per_instance() -> None:
    a, b = Defaults("a"), Defaults("b")
    assert a.items == [] and a.items is not b.items and a.count == 0
    assert Defaults("a", 2, [1]) == Defaults(name="a", count=2, items=[1])
    assert dataclasses.replace(Defaults("a", items=[1]), count=3) == Defaults("a", 3, [1])


def test_post_init_runs_and_its_errors_reach_the_caller() -> None:
    assert Checked(2).derived == 4  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="negative size"):
        Checked(-1)
    assert Checked(1) == Checked(1)


def test_frozen_values_refuse_deletion_and_new_attributes() -> None:
    point = Point(1, 2)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'x'"):
        del point.x  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'z'"):
        point.z = 1  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Point2(1, 2).x = 3  # type: ignore[misc]


def test_copies_of_slotted_frozen_values_are_equal() -> None:
    import copy

    assert copy.copy(Slotted(1, "b")) == Slotted(1, "b")
    assert copy.deepcopy(Slotted(1, "b")) == Slotted(1, "b")
    assert copy.deepcopy(Defaults("a", items=[[1]])) == Defaults("a", items=[[1]])


def test_what_dataclass_refuses_is_refused_when_the_class_is_made() -> None:
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        @value
        class Misordered:
            """A required field after a defaulted one."""

            a: int = 0
            b: int  # type: ignore[misc]

    with pytest.raises(TypeError, match="cannot inherit non-frozen dataclass from a frozen"):
        @value(frozen=False)
        class Thawed(Point):
            """A mutable subclass of a frozen value."""

    with pytest.raises(TypeError, match="Cannot overwrite attribute __setattr__"):
        @value
        class OwnSetattr:
            """Defines what a frozen class must generate."""

            a: int

            def __setattr__(self, name: str, item: Any) -> None:
                pass

    with pytest.raises(TypeError, match="use @dataclass"):
        @value
        class NotInInit:
            """A field ``__init__`` would not take."""

            a: int = field(default=0, init=False)
