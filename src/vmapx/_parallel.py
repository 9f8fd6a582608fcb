"""Chunks of one batch on several threads at once.

The examples of a batch are independent, and NumPy releases the GIL inside its
kernels, so the chunks of a chunked `vmap` call (`chunk_size=`, or those `"auto"`
chose) can run on a pool of threads. Each thread runs its own batch trace (vmapx's
trace stack is thread-local) on its chunk, and computes its results into its slice of
the whole batch's output arrays, or copies them there itself (`vmapx._chunk_outputs`);
the chunks are then joined in their order, by whichever worker finds the next one ready
(`_InOrder`: checks, and the copies of chunks that ran before the outputs were
allocated). A chunk's temporaries live only until then, so the peak memory stays that
of the chunks in flight (at most `workers` of them, and those done waiting for an
earlier one) plus the output.

**When chunks run in parallel.** `workers` (the `vmap` argument, else
`vmapx.config.workers`, else the cores this process may run on) is more than 1, the
call has more than one chunk, and the call is not inside another transform or jit
recording (tracers of an outer trace belong to the calling thread's stack) nor inside
a worker thread itself (no pool inside the pool), and the `vmap` draws no random numbers
(`randomness="error"`, the default: `"different"` reproduces the loop's stream only when
the chunks draw one after the other, whether the generator is an argument or reached
through `vmapx.random.batch_aware`). Otherwise the chunks run one after the other.

**What runs concurrently.** `f` itself: with `workers > 1` the calls of `f` (one per
chunk) overlap in time in different threads. Pure NumPy code is safe; `f` with side
effects (appending to a shared list, writing a global, printing) sees them interleave:
give it `workers=1`.

**BLAS threads.** Matrix products inside each chunk would start the BLAS library's own
threads on top of the pool's (measured on 2 cores, w9 per-example gradients: 34 ms with
BLAS's 2 threads per chunk, 22 ms with 1). With `threadpoolctl` installed (the extra
`vmapx[parallel]`), BLAS gets `max(1, its threads // workers)` threads while a parallel
call runs (a process-wide setting: other threads' BLAS calls see it too for that time);
without it BLAS keeps its own setting.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from . import _core, _progress
from ._config import config

if TYPE_CHECKING:  # (imported when a pool is first needed: `import vmapx` stays quick)
    from concurrent.futures import Future, ThreadPoolExecutor

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_local = threading.local()  # `inside`: this thread runs a chunk for the pool
_blas: dict[str, Any] = {"users": 0, "limiter": None, "controller": None}


@functools.cache
def threadpoolctl() -> Any:
    """The `threadpoolctl` module, or None where it is not installed (optional: BLAS
    then keeps its own threads)."""
    try:
        import threadpoolctl
    except ImportError:
        return None
    return threadpoolctl


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system tells)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (macOS, Windows)
        return os.cpu_count() or 1


def resolve_workers(workers: int | None) -> int:
    """The threads a call uses: `workers`, else `vmapx.config.workers`, else all cores."""
    if workers is None:
        workers = config.workers
    return available_cores() if workers is None else workers


def on_pool_thread() -> bool:
    """Whether this thread runs a chunk for the pool (where BLAS has one thread: rules
    that would trade more arithmetic for BLAS's threads should not)."""
    return bool(getattr(_local, "inside", False))


def can_run_parallel(workers: int, chunks: int) -> bool:
    """Whether chunks may go to the pool from this thread now (see the module)."""
    return workers > 1 and chunks > 1 and not _core._state.stack and not on_pool_thread()


def run_chunks(
    run: Callable[[int, int], Any],
    join: Callable[[Any, int, int], None],
    size: int,
    chunk: int,
    workers: int,
    progress: bool = False,
) -> CpuTime:
    """`join(run(start, stop), start, stop)` for the chunks of `chunk` examples of a batch
    of `size`, in order: on the pool where `can_run_parallel`, else one after the other;
    `progress`: a bar over the chunks (`vmapx._progress`). Returns the call's CPU time."""
    bounds = [(start, min(start + chunk, size)) for start in range(0, size, chunk)]
    with _progress.bar(len(bounds), progress) as advance:
        own = time.thread_time()
        if can_run_parallel(workers, len(bounds)):
            chunks, waits = map_in_order(run, join, bounds, workers, advance)
            own = time.thread_time() - own
            lanes = min(workers, len(bounds))
            return CpuTime(own + (chunks + waits) / lanes, own + chunks)
        for start, stop in bounds:
            join(run(start, stop), start, stop)
            advance(1)
        own = time.thread_time() - own
        return CpuTime(own, own)


class CpuTime(NamedTuple):
    """The CPU time of a call in chunks, by which `vmapx._autochunk` judges threads:
    `idle`, the seconds it would take on idle cores (the calling thread's CPU time plus
    that of the chunks divided by the threads that ran them), plus the hand-offs (the
    time the chunks waited for a pool thread to start them, divided alike: on busy cores
    a woken thread waits for a core, which CPU time does not show and which short calls
    do not repay), and `total`, the CPU time of all its threads. Wall time says more
    about the machine's other work (on shared cores, and where the scheduler shares CPU
    per session rather than per thread, a second thread may get no more CPU at all),
    while CPU time still counts what threads cost each other: two stalled on memory
    each take longer. `vmapx._autochunk` judges a split by both: CPU time misses the
    waits for the GIL and for a core."""

    idle: float
    total: float


def map_in_order(
    run: Callable[[int, int], Any],
    join: Callable[[Any, int, int], None],
    bounds: list[tuple[int, int]],
    workers: int,
    done: Callable[[int], None] | None = None,
) -> tuple[float, float]:
    """`join(run(start, stop), start, stop)` for every chunk, the runs on up to `workers`
    threads, the joins one at a time in the order of `bounds` (`_InOrder`); `done(1)`
    after each chunk, from the calling thread. The first error (in chunk order) is
    raised, after every chunk started has finished. Returns the CPU seconds the chunks'
    runs and joins took, in all threads, and the seconds the chunks waited, once handed
    to the pool, for a thread to start them."""
    pool = _get_pool(workers)
    joins = _InOrder(join)
    pending: deque[Future[Any]] = deque()
    chunks = iter(enumerate(bounds))
    spent: list[float] = []  # (list.append is atomic)
    waits: list[float] = []
    # NumPy's error handling is per thread: the chunks run under the caller's
    # (`np.errstate(over="raise")` raises in the loop, so it must in every chunk)
    errors, handler = np.geterr(), np.geterrcall()

    def task(k: int, start: int, stop: int, handed: float) -> None:
        waits.append(time.perf_counter() - handed)
        cpu = time.thread_time()
        _local.inside = True
        try:
            with np.errstate(call=handler, **errors):  # type: ignore[arg-type]  # (None: none set)
                out = run(start, stop)
        finally:
            _local.inside = False
        try:
            joins.put(k, out, start, stop)
        finally:
            spent.append(time.thread_time() - cpu)

    def submit() -> None:
        item = next(chunks, None)
        if item is not None:
            k, (start, stop) = item
            pending.append(pool.submit(task, k, start, stop, time.perf_counter()))

    with _blas_limited(workers):
        try:
            for _ in range(workers):
                submit()
            while pending:
                pending[0].result()
                pending.popleft()
                if done is not None:
                    done(1)
                submit()
        finally:
            for future in pending:  # (an error: the rest are not needed)
                future.cancel()
            for future in pending:
                if not future.cancelled():
                    future.exception()  # (wait: no thread writes after we return)
    return sum(spent), sum(waits)


class _InOrder:
    """Chunk results joined in chunk order by whichever worker finds the next one ready:
    a worker leaves its result and joins what is ready from the next index on, unless
    another is joining (which then takes it too). No worker waits for another, and the
    joins never run at once. A task's future completes after its joins, so once every
    future has, every result left has been joined."""

    def __init__(self, join: Callable[[Any, int, int], None]) -> None:
        self.join = join
        self.lock = threading.Lock()
        self.ready: dict[int, tuple[Any, ...]] = {}
        self.next = 0
        self.joining = False

    def put(self, k: int, out: Any, start: int, stop: int) -> None:
        with self.lock:
            self.ready[k] = (out, start, stop)
        while True:
            with self.lock:
                if self.joining or self.next not in self.ready:
                    return
                item = self.ready.pop(self.next)
                self.joining = True
            try:
                self.join(*item)
            finally:
                with self.lock:
                    self.next += 1
                    self.joining = False


def _get_pool(workers: int) -> ThreadPoolExecutor:
    """The shared pool, with at least `workers` threads: a larger one replaces it when
    asked (the old one is not shut down: calls in flight still submit to it; its idle
    threads end with the interpreter)."""
    from concurrent.futures import ThreadPoolExecutor

    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size < workers:
            _pool_size = max(workers, available_cores())
            _pool = ThreadPoolExecutor(_pool_size, thread_name_prefix="vmapx")
        return _pool


@contextmanager
def _blas_limited(workers: int) -> Iterator[None]:
    """BLAS threads divided among the workers while any parallel call runs."""
    module = threadpoolctl()
    if module is None:
        yield
        return
    with _lock:
        if _blas["users"] == 0:
            if _blas["controller"] is None:
                _blas["controller"] = module.ThreadpoolController()
            controller = _blas["controller"]
            blas = [info["num_threads"] for info in controller.info() if info["user_api"] == "blas"]
            per_worker = max(1, max(blas, default=1) // workers)
            _blas["limiter"] = controller.limit(limits=per_worker, user_api="blas")
        _blas["users"] += 1
    try:
        yield
    finally:
        with _lock:
            _blas["users"] -= 1
            if _blas["users"] == 0:
                _blas["limiter"].restore_original_limits()
                _blas["limiter"] = None
