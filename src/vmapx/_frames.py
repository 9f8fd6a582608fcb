"""Where in the Python stack a traced value was asked to leave its trace.

Two lines matter to a reader of a fallback warning: the *library line* that needed a
plain array (the innermost frame outside vmapx and NumPy's core, for example
`numpy/polynomial/polyutils.py` or `scipy/_lib/_util.py`), and the *user's line* (the
innermost frame outside vmapx and every installed package or the standard library),
which is how the user's code reached that library.
"""

from __future__ import annotations

import dis
import importlib.util
import os
import sys
import sysconfig
from typing import TYPE_CHECKING, cast

from ._core import _is_library_file

if TYPE_CHECKING:
    from types import FrameType


def package_dir(name: str) -> str:
    """The directory of an installed package, with a trailing separator."""
    spec = importlib.util.find_spec(name)
    return os.path.dirname(os.path.abspath(cast(str, spec.origin))) + os.sep if spec else os.sep * 3


_NUMPY = package_dir("numpy")
# NumPy's core: its dispatch wrappers and converters (never the line a user wants)
_NUMPY_CORE = tuple(_NUMPY + sub + os.sep for sub in ("_core", "core", "lib"))
_VMAPX = package_dir("vmapx")


def _installed_dirs() -> tuple[str, ...]:
    names = ("purelib", "platlib", "stdlib", "platstdlib")
    paths = {sysconfig.get_paths().get(name) for name in names}
    return tuple(os.path.abspath(p) + os.sep for p in paths if p)


_INSTALLED = _installed_dirs()


def _kind(filename: str) -> tuple[bool, bool]:
    """`(machinery, users)` of a frame's file, remembered per file (`location` walks the
    whole stack at each fallback)."""
    kind = _KINDS.get(filename)
    if kind is None:
        kind = (_is_machinery(filename), _is_users(filename))
        if len(_KINDS) < 4096:
            _KINDS[filename] = kind
    return kind


_KINDS: dict[str, tuple[bool, bool]] = {}


def _is_machinery(filename: str) -> bool:
    return (
        filename.startswith((_VMAPX, *_NUMPY_CORE))
        or filename.startswith("<__array_function__")
        or filename.startswith("<frozen")
    )


def _is_users(filename: str) -> bool:
    return not _is_library_file(filename) and not filename.startswith(_INSTALLED)


def location(skip: int = 1) -> str:
    """`file:line` of the library line that needed a plain value and, when that is not
    the user's own code, `(called from file:line)` with the user's line.

    **Arguments**
    - `skip`: frames to skip above the caller of `location`.

    **Returns** a string such as `"lib.py:594 (called from script.py:12)"`.
    """
    frame: FrameType | None = sys._getframe(skip + 1)
    library = None
    while frame is not None:
        filename = frame.f_code.co_filename
        machinery, users = _kind(filename)
        if library is None and not machinery:
            if users:
                return f"{filename}:{frame.f_lineno}"
            library = f"{filename}:{frame.f_lineno}"
        elif library is not None and users:
            return f"{library} (called from {filename}:{frame.f_lineno})"
        frame = frame.f_back
    return library or "<unknown>"


# `a[i]` (Python 3.11-3.13; 3.14 reads it by BINARY_OP, not told apart). Not `a[i] = v`:
# there the traced value is more often `v` (a batched value written into a plain array)
_SUBSCRIPTS = frozenset(dis.opmap[n] for n in ("BINARY_SUBSCR",) if n in dis.opmap)


def indexes_plain_array(frame: FrameType) -> bool:
    """Whether `frame`, where a traced value was asked for a plain array (`__array__`),
    is indexing with it: `a[i]` or NumPy's `np.take(a, i)` (its Python
    wrapper calls `a.take(i)`). A traced `a` would have dispatched: `a` is a plain array."""
    code = frame.f_code
    if code.co_name in ("_wrapfunc", "_wrapit") and code.co_filename.startswith(_NUMPY_CORE):
        return frame.f_locals.get("method") in ("take", "put")
    i = frame.f_lasti
    if 0 <= i < len(code.co_code) and code.co_code[i] in _SUBSCRIPTS:
        return True
    # `a.take(i)`: a method of the line being called (a guess: one more batched run at
    # most, see `vmapx._unmapped`; this runs only where a run must stop anyway)
    line = frame.f_lineno
    return any(
        ins.opname in ("LOAD_METHOD", "LOAD_ATTR") and ins.argval == "take"
        and ins.positions is not None and ins.positions.lineno == line and ins.offset < i
        for ins in dis.get_instructions(code)
    )  # fmt: skip
