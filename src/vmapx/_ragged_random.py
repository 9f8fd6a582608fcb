"""Random draws that `vmapx.map` cannot see as arguments: NumPy's legacy global functions
(`np.random.normal`) and generators the function reads from a closure or a global.

`map` runs the examples grouped by shape, not in the loop's order, so no draw of theirs
can give the loop's numbers: a batched run draws once for a whole group (every example
the same numbers), and examples run one by one draw in the groups' order. `map` notes
the state of those generators before it runs anything; where a group's run moved one,
every state goes back to what it was and the call raises `RandomnessError`, which says
to draw the numbers before the map. (Generators passed as arguments are refused by the
groups' `vmap` itself.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _legacy_random
from .errors import RandomnessError


class RandomWatch:
    """The states of the legacy global generator and of the generators `f` reads from
    closures and globals (not among `passed`), as they were when the map began."""

    def __init__(self, f: Callable[..., Any], passed: list[Any]) -> None:
        self.legacy = _legacy_random.snapshot()
        hidden = _legacy_random.hidden_generators(f, passed)
        self.hidden = _legacy_random.snapshot_hidden(hidden)

    def check(self) -> None:
        """Raise `RandomnessError`, with every state put back, where one has moved."""
        legacy = _legacy_random.moved(self.legacy)
        if not legacy and not (self.hidden and _legacy_random.hidden_moved(self.hidden)):
            return
        _legacy_random.restore(self.legacy)
        _legacy_random.restore_hidden(self.hidden)
        source = (
            "NumPy's legacy global random functions (`np.random.normal`, ...)"
            if legacy
            else "a random generator that the function reads from a closure or a global"
        )
        raise RandomnessError(
            f"vmapx.map: {source} drew while the examples ran. The examples run grouped "
            "by shape, not in the loop's order, so no draw can give the loop's numbers (a "
            "batched group would give all its examples the same ones). Draw the random "
            "numbers before the map, in the loop's order (`noise = [rng.normal(size=x.shape) "
            "for x in xs]`), and pass them as a mapped argument"
        )


def passed_values(shared: list[Any], kwargs: dict[Any, Any]) -> list[Any]:
    """The values the call passes to every example (generators among them are arguments,
    which the groups' `vmap` refuses to draw from itself)."""
    return [v for v in shared if v is not None] + list(kwargs.values())
