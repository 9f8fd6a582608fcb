"""The loop's random numbers in vmap's order, for programs that draw more than once.

`vmap(f, randomness="different")` makes each draw call once for the whole batch, so a
function that draws twice gets every example's first draw, then every example's second
draw (see `vmapx.random`). `run_lockstep` runs the per-example calls of `f` in threads
that take turns at each draw in that order (draw k of example i is the generator's
(k * n + i)-th call), which gives the numbers vmap promises.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

TIMEOUT_S = 20.0


class _Turns:
    """Whose draw is next: round-major, example-minor; finished examples are skipped."""

    def __init__(self, gen: np.random.Generator, n: int) -> None:
        self.gen, self.n = gen, n
        self.cond = threading.Condition()
        self.turn = 0
        self.rounds = [0] * n
        self.done = [False] * n

    def _skip_finished(self) -> None:
        while not all(self.done) and self.done[self.turn % self.n]:
            self.turn += 1

    def draw(self, i: int, method: str, args: tuple, kwargs: dict) -> Any:
        with self.cond:
            mine = self.rounds[i] * self.n + i
            if not self.cond.wait_for(lambda: self.turn == mine, timeout=TIMEOUT_S):
                raise TimeoutError("lockstep: the examples did not take their turns")
            try:
                return getattr(self.gen, method)(*args, **kwargs)
            finally:
                self.rounds[i] += 1
                self.turn += 1
                self._skip_finished()
                self.cond.notify_all()

    def finish(self, i: int) -> None:
        with self.cond:
            self.done[i] = True
            self._skip_finished()
            self.cond.notify_all()


class _TurnGenerator:
    """Example `i`'s generator: every method call waits for its turn."""

    def __init__(self, turns: _Turns, i: int) -> None:
        self._turns, self._i = turns, i

    def __getattr__(self, name: str) -> Callable:
        def method(*args: Any, **kwargs: Any) -> Any:
            return self._turns.draw(self._i, name, args, kwargs)

        return method


def run_lockstep(calls: list[Callable], gen: np.random.Generator) -> list:
    """`[call(g_i) for i]`, where example i's draws take turns on `gen` in vmap's order.
    Raises the first example's exception, if any raised."""
    turns = _Turns(gen, len(calls))
    results: list = [None] * len(calls)
    errors: list = [None] * len(calls)

    def work(i: int) -> None:
        try:
            results[i] = calls[i](_TurnGenerator(turns, i))
        except BaseException as e:  # noqa: BLE001
            errors[i] = e
        finally:
            turns.finish(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        if e is not None:
            raise e
    return results
