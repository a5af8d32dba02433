"""Stencils: what a function makes of a few values, kept as the parts that stay the same and the
places the values go, so that it is made for other values by filling them in instead of running the
function again (netapp.upf.pfcp.templates: the fast path of session establishments).

A stencil is cut from what the function made of sentinel values (`punch`): values chosen to be
found where they went and nowhere else. It is kept only if it gives back, filled with them, what the
function made of every other set of values it is given (a second set of sentinels, and the real
ones): a part that depends on a value in a way the stencil cannot say (a value copied somewhere it
was not looked for, a branch taken on it) shows as a difference, and the caller then has no stencil
and runs the function. Values are given by index ("classes" of equal values, netapp.upf.pfcp
.templates); `Hole(index)` marks a value's place in a structure.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional, Sequence, Union

Document = Union[str, bytes]


@dataclasses.dataclass(frozen=True)
class Hole:
    """The place of value `index` in a structure (`Shape`)."""

    index: int


class Stencil:
    """A text or bytes document with holes, filled from values already encoded for it (text or
    bytes, by index: `fill`), or from the values themselves, each encoded as it is filled in (`filler`):
    its parts joined with them (a fraction of str.format's cost, which would parse the whole
    document on every call)."""

    def __init__(self, parts: Sequence[Document], holes: Sequence[int]):
        self.holes = tuple(holes)
        self._parts = tuple(parts)
        self.fill: Callable[[Sequence[Document]], Document] = self.filler({})

    def filler(self, encoders: Mapping[int, Callable[[Any], Document]]) -> Callable[[Sequence[Any]], Document]:
        """The function that fills the stencil from values by index, value `i` encoded by
        `encoders[i]` (one not there: given encoded already). Compiled once into one join of a
        tuple display, the parts and the holes' expressions written in (as `Shape` is): no loop, no
        list of encoded values made per fill."""
        constants: list[Any] = [self._parts[0][:0]]
        out = [constant(self._parts[0], constants)]
        for hole, part in zip(self.holes, self._parts[1:]):
            encoder = encoders.get(hole)
            out.append(f"{constant(encoder, constants)}(v[{hole}])" if encoder is not None else f"v[{hole}]")
            out.append(constant(part, constants))
        namespace: dict[str, Any] = {"k": constants}
        exec(f"def fill(v):\n    return k[0].join(({', '.join(out)},))", namespace)  # noqa: S102 - our own text
        return namespace["fill"]


def punch(documents: Sequence[Document], encodings: Sequence[Sequence[Document]]) -> Optional[Stencil]:
    """The stencil of `documents[0]` whose hole `i` is every place of `encodings[0][i]` in it; None
    unless filling it with `encodings[k]` gives `documents[k]` back for every k, or when two places
    overlap."""
    first, sentinels = documents[0], encodings[0]
    places: list[tuple[int, int, int]] = []  # (start, end, value index)
    for index, sentinel in enumerate(sentinels):
        if not sentinel:
            continue
        start = first.find(sentinel)  # type: ignore[arg-type]
        while start >= 0:
            places.append((start, start + len(sentinel), index))
            start = first.find(sentinel, start + len(sentinel))  # type: ignore[arg-type]
    places.sort()
    parts, holes, at = [], [], 0
    for start, end, index in places:
        if start < at:
            return None
        parts.append(first[at:start])
        holes.append(index)
        at = end
    parts.append(first[at:])
    stencil = Stencil(parts, holes)
    if any(stencil.fill(encoded) != document for document, encoded in zip(documents, encodings)):
        return None
    return stencil


class Shape:
    """A structure of tuples, lists, dicts, sets and plain values with holes (`Hole`), filled from
    the values themselves: the facts of a session (its TEIDs, its downlink UE addresses, ...). It
    is compiled once into an expression that builds the structure (as `dataclasses` does its
    methods), so that filling it costs what writing the structure out would."""

    def __init__(self, shape: Any):
        self._shape = shape
        constants: list[Any] = []
        self.fill = eval(f"lambda v: {_source(shape, constants)}", {"k": constants})  # noqa: S307 - our own text

    def expression(self, constants: list[Any]) -> str:
        """Python's text of the expression that builds the structure from the values `v`, its
        constants appended to `constants` as `k[j]` (for a caller compiling several into one)."""
        return _source(self._shape, constants)


def shape_of(made: Sequence[Any], values: Sequence[Sequence[Any]]) -> Optional[Shape]:
    """The shape of `made[0]`, where each value equal to `values[0][i]` is hole `i`; None unless
    filling it with `values[k]` gives `made[k]` for every k. Sets and dicts are walked in a sorted
    order of their members, so that the same structure of other values walks alike."""
    try:
        shape = _shape(made[0], {value: index for index, value in enumerate(values[0])})
    except _NoShape:
        return None
    stencil = Shape(shape)
    if any(stencil.fill(each) != structure for structure, each in zip(made, values)):
        return None
    return stencil


class _NoShape(Exception):
    """Something of the structure that `Shape` cannot hold."""


def _shape(value: Any, holes: dict[Any, int]) -> Any:
    if isinstance(value, (str, int, bytes)) and not isinstance(value, bool) and value in holes:
        return Hole(holes[value])
    if isinstance(value, (tuple, list)):
        return type(value)(_shape(item, holes) for item in value)
    if isinstance(value, (set, frozenset)):
        return (type(value), tuple(_shape(item, holes) for item in sorted(value)))
    if isinstance(value, dict):
        return (dict, tuple((_shape(key, holes), _shape(item, holes)) for key, item in value.items()))
    if value is None or isinstance(value, (bool, int, str, bytes, float)):
        return value
    raise _NoShape(type(value).__name__)


def _source(shape: Any, constants: list[Any]) -> str:
    """Python's text of an expression that builds the shape: `v[i]` for hole i, `k[j]` for the
    constant j."""
    if isinstance(shape, Hole):
        return f"v[{shape.index}]"
    if isinstance(shape, list):
        return "[" + "".join(f"{_source(item, constants)}, " for item in shape) + "]"
    if isinstance(shape, tuple) and shape and shape[0] is dict:
        return "{" + "".join(f"{_source(key, constants)}: {_source(item, constants)}, " for key, item in shape[1]) + "}"
    if isinstance(shape, tuple) and shape and shape[0] in (set, frozenset):
        return f"{shape[0].__name__}((" + "".join(f"{_source(item, constants)}, " for item in shape[1]) + "))"
    if isinstance(shape, tuple):
        return "(" + "".join(f"{_source(item, constants)}, " for item in shape) + ")"
    return constant(shape, constants)


def constant(value: Any, constants: list[Any]) -> str:
    """`k[j]`, the place of `value` among a compiled function's constants."""
    constants.append(value)
    return f"k[{len(constants) - 1}]"
