"""Noticing NumPy's legacy global random functions (`np.random.normal`, ...) in `vmap`.

vmapx cannot batch them: called once for the whole batch, they would give every example
the same numbers. `vmap` takes a snapshot of the global generator's state before a
batched run; where the run moved it, the state goes back and the examples run as the
loop (which draws the loop's numbers). `np.random.get_state()` copies the whole state
(about 60 us); the snapshot reads its memory instead: the MT19937 words and position,
and the cached Gaussian of the legacy `RandomState`, whose place in the object is found
once, by setting known values on a private `RandomState` (about 1 us per call in all).
"""

from __future__ import annotations

import ctypes
import functools
import struct
import sys
import types
from typing import Any, cast

import numpy as np

_MT_BYTES = 624 * 4 + 4  # mt19937_state: uint32 key[624]; int pos


def _find_gauss_cache() -> int | None:
    """The offset of `{int has_gauss; double gauss}` in a `RandomState`, or None."""
    rs = np.random.RandomState(0)
    head = cast("tuple[Any, ...]", rs.get_state())[:3]  # (NumPy's stubs: a dict)
    size = sys.getsizeof(rs)
    found = set()
    for value in (0.123456789, -987.654321):
        rs.set_state((*head, 1, value))
        found.add(ctypes.string_at(id(rs), size).find(struct.pack("d", value)))
    (offset,) = found if len(found) == 1 else (-1,)
    if offset < 8:
        return None
    for flag in (0, 1):
        rs.set_state((*head, flag, 0.5))
        if ctypes.string_at(id(rs) + offset - 8, 4) != struct.pack("i", flag):
            return None
    return offset - 8


_GAUSS = _find_gauss_cache()
_mtrand = np.random.mtrand
# the global RandomState and views of its state's memory (MT19937 words and position,
# the cached Gaussian)
_cache: list[Any] = [None, None, None]


def _views(rand: np.random.RandomState) -> list[Any]:
    if _cache[0] is not rand:
        mt = (ctypes.c_char * _MT_BYTES).from_address(rand._bit_generator.ctypes.state_address)
        gauss = (ctypes.c_char * (16 if _GAUSS is not None else 0)).from_address(
            id(rand) + (_GAUSS or 0)
        )
        _cache[:] = [rand, memoryview(mt), memoryview(gauss)]
    return _cache


def snapshot() -> tuple[Any, ...]:
    """The global legacy generator's state, as raw bytes (cheap)."""
    rand = _mtrand._rand
    _, mt, gauss = _cache if _cache[0] is rand else _views(rand)
    return rand, mt.tobytes(), gauss.tobytes()


def moved(saved: tuple[Any, ...]) -> bool:
    """Whether the global legacy generator left the state `saved` by `snapshot`."""
    rand, mt, gauss = _cache
    return (
        rand is not saved[0] or _mtrand._rand is not rand or mt.tobytes() != saved[1]
        or gauss.tobytes() != saved[2]
    )  # fmt: skip


def restore(saved: tuple[Any, ...]) -> None:
    """Put the global legacy generator back in the state `saved` by `snapshot`."""
    _, mt, aug = saved
    key = np.frombuffer(mt[: 624 * 4], np.uint32).copy()
    pos = struct.unpack("i", mt[624 * 4 :])[0]
    if _GAUSS is None:
        has_gauss, gauss = cast("tuple[Any, ...]", np.random.get_state())[3:]
    else:
        has_gauss, gauss = struct.unpack("i", aug[:4])[0], struct.unpack("d", aug[8:])[0]
    np.random.set_state(("MT19937", key, pos, has_gauss, gauss))


# -- generators the function reaches without taking them as arguments ------------------
#
# A `Generator` (or `RandomState`) that `f` reads from a closure cell or a global is
# invisible to vmap, like the legacy global functions: called once for the batch, it would
# give every example the same numbers. Where `f` (or a plain function it reaches that way)
# holds one, vmap notes its state before the batched run; where the run moved it, the state
# goes back and the examples run as the loop. Found: closure cells, the globals its code
# reads, partial arguments, a bound method's object's attributes (`self.rng`), and, two
# levels into what these hold, dicts, lists, tuples and plain objects' attributes
# (`state["rng"]`, `self.model.rng`), up to `_MAX_ITEMS` entries each.

_GENERATOR_TYPES = (np.random.Generator, np.random.RandomState)
_SEARCH_DEPTH = 3  # f, the plain functions it reads, and theirs


_names_by_code: dict[int, tuple[Any, ...]] = {}  # id(code) -> (code, its global names)


def _global_names(code: types.CodeType) -> tuple[str, ...]:
    """The global names a code object and the code nested in it (lambdas, comprehensions)
    read (cached: a code object's hash is computed afresh on each use, a dict by id is not)."""
    entry = _names_by_code.get(id(code))
    if entry is not None and entry[0] is code:
        return cast("tuple[str, ...]", entry[1])
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.extend(_global_names(const))
    if len(_names_by_code) > 4096:
        _names_by_code.clear()
    _names_by_code[id(code)] = (code, tuple(dict.fromkeys(names)))
    return cast("tuple[str, ...]", _names_by_code[id(code)][1])


_GENERATOR_KINDS = frozenset(_GENERATOR_TYPES)
# the kinds of objects searched further: a type check in a set is what keeps the search at
# about a microsecond per call (no isinstance, no attribute misses)
_FOLLOWED_KINDS = frozenset((types.FunctionType, functools.partial, types.MethodType))


_CONTAINER_KINDS = frozenset((dict, list, tuple))
_MAX_ITEMS = 64  # a larger container or object is not searched (the search stays cheap)
_HOLDER_DEPTH = 2  # `state["rng"]`, `self.model.rng`, `config.streams[0]`


def _held_generators(value: Any, depth: int = _HOLDER_DEPTH) -> list[Any]:
    """The generators `value` is, or holds in its containers' entries and plain objects'
    attributes, `depth` levels down."""
    kind = type(value)
    if kind in _GENERATOR_KINDS:
        return [value]
    if depth == 0 or kind in _FOLLOWED_KINDS:
        return []
    if kind in _CONTAINER_KINDS:
        items = value.values() if kind is dict else value
    else:
        items = _plain_attributes(value)
    if len(items) > _MAX_ITEMS:
        return []
    return [
        g for item in items if type(item) not in _HOLDS_NONE  # (nothing found in them)
        for g in _held_generators(item, depth - 1)
    ]  # fmt: skip


def _plain_attributes(value: Any) -> Any:
    """The attribute values of an instance of a user's class (none for anything else:
    modules, classes, arrays, builtins)."""
    if isinstance(value, types.ModuleType | type) or type(value).__module__ == "builtins":
        return ()
    attributes = getattr(value, "__dict__", None)
    return attributes.values() if type(attributes) is dict else ()


def _referenced(f: Any) -> list[Any]:
    """The objects a plain function, partial or bound method holds (closure cells, partial
    arguments, the globals it reads). Other objects (ufuncs, builtins, modules, classes)
    are not searched: they cannot hold the user's generator where vmapx could see it."""
    kind = type(f)
    if kind is functools.partial:
        return [f.func, *_with_held([*f.args, *f.keywords.values()])]
    if kind is types.MethodType:  # and the generators its object holds
        return [f.__func__, *_held_generators(f.__self__, _HOLDER_DEPTH + 1)]
    found = []
    wrapped = f.__dict__.get("__wrapped__")  # functools.wraps (vmapx's own wrappers too)
    if wrapped is not None:
        found.append(wrapped)
    for cell in f.__closure__ or ():
        try:
            found.append(cell.cell_contents)
        except ValueError:  # an empty cell
            pass
    scope = f.__globals__
    if not _is_own_module(scope):  # (vmapx's own globals hold no generator of the user's)
        found += [scope[name] for name in _global_names(f.__code__) if name in scope]
    return _with_held(found)


def _is_own_module(scope: dict[Any, Any]) -> bool:
    """Whether `scope` is the namespace of one of vmapx's modules (not a copy of it)."""
    name = scope.get("__name__")
    if type(name) is not str or not (name == "vmapx" or name.startswith("vmapx.")):
        return False
    module = sys.modules.get(name)
    return module is not None and module.__dict__ is scope


def _with_held(values: list[Any]) -> list[Any]:
    """`values`' functions, partials and methods (searched further), and the generators
    they are or hold."""
    out = []
    for v in values:
        kind = type(v)
        if kind in _FOLLOWED_KINDS or kind in _GENERATOR_KINDS:
            out.append(v)
        elif kind not in _HOLDS_NONE:  # (the usual globals: modules, classes, numbers)
            out.extend(_held_generators(v))
    return out


# kinds `_held_generators` finds nothing in (no entries, no instance attributes searched):
# skipped without the calls that find that out
_HOLDS_NONE = frozenset((types.ModuleType, type, types.BuiltinFunctionType, int, float,
                         complex, bool, str, bytes, type(None), np.ndarray))  # fmt: skip


def hidden_generators(f: Any, passed: list[Any]) -> list[Any]:
    """The generators `f` reaches through closures, globals and partials, that are not
    among `passed` (the call's arguments, which vmap draws from itself)."""
    found: dict[int, Any] = {}
    seen: set[int] = set()
    level = [f]
    for depth in range(_SEARCH_DEPTH + 1):
        following = []
        for obj in level:
            kind = type(obj)
            if kind in _GENERATOR_KINDS:
                found[id(obj)] = obj
            elif depth < _SEARCH_DEPTH and kind in _FOLLOWED_KINDS and id(obj) not in seen:
                seen.add(id(obj))
                following.extend(_referenced(obj))
        level = following
        if not level:
            break
    if found:
        for x in passed:
            found.pop(id(x), None)
    return list(found.values())


def _state_of(g: Any) -> Any:
    return g.bit_generator.state if isinstance(g, np.random.Generator) else g.get_state()


def snapshot_hidden(generators: list[Any]) -> list[Any]:
    """The states of `generators` (from `hidden_generators`)."""
    return [(g, _state_of(g)) for g in generators]


def hidden_moved(saved: list[Any]) -> bool:
    """Whether any generator of `saved` (by `snapshot_hidden`) left its state."""
    return any(not _same_state(_state_of(g), state) for g, state in saved)


def _same_state(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same_state(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return bool(a == b)


def restore_hidden(saved: list[Any]) -> None:
    """Put every generator of `saved` back in its state."""
    for g, state in saved:
        if isinstance(g, np.random.Generator):
            g.bit_generator.state = state
        else:
            g.set_state(state)
