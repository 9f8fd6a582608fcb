"""Automatic chunking: a batch whose intermediates are large may run in chunks.

A batched NumPy expression materialises every intermediate for the whole batch. Two
costs follow that chunks of the batch avoid:

- **Cache.** Intermediates of tens of megabytes stream through main memory at every
  NumPy call; the same calls on chunks of ~2 MiB run from the cache.
  `((ys - x) ** 2).sum(-1)` over 2 048 examples of (512, 3) makes 24 MiB
  intermediates: in chunks it runs about 2x faster, and its peak memory drops from
  32 MiB to the 8 MiB result.
- **Page faults.** glibc gives large freed blocks back to the system (it trims the top
  of its heap), so in many processes each call's multi-megabyte temporaries are new
  pages that the kernel must fault in and zero: `(img - img.mean()) / (img.std() +
  1e-6)` over 100 images of (64, 64, 3) (9.4 MiB temporaries, NumPy's own inside
  `std` included) measured 7-8.5 ms and ~700-1 200 faults per call whole, 3.9 ms and
  none in chunks, whose small blocks the allocator keeps. In a process whose allocator
  happens to keep its memory, the same call has no faults and chunks are 8% slower
  (the results are copied out of them): so the faults are measured, not guessed.

A `vmap` with `chunk_size="auto"` (the default) learns per signature (batch size,
mapped shapes and dtypes) from its calls. The batch trace records the largest batched
value it made and the bytes of all of them. After a whole-batch call,

- whose largest value was at least `LARGE_BYTES` and `RESULT_RATIO` times its largest
  result, calls run in chunks of about `CHUNK_BYTES` of intermediates each after
  `WARM_WHOLES` more whole-batch calls, whose best the chunks must beat (the first
  calls run with cold caches and fresh pages: w21's bag-of-words classifier took 9.2
  and 7.5 ms whole, then 2.3 warm; chunks that took 2.9 were kept against the cold
  ones);
- whose values other than results came to at least `MIN_BYTES` (and to as much as the
  results: copying results out of chunks is not free), the next `FAULT_CHECKS` calls
  count the page faults they take (`resource.getrusage`, where Python has it); if each
  faulted in at least `FAULT_SHARE` of those bytes, later calls run in chunks. A fault
  counts `PAGE` bytes, and the share is divided by `PAGES_PER_FAULT`: where NumPy asks
  the kernel for transparent huge pages (for arrays of 4 MiB or more, NumPy's default on
  Linux) and the kernel grants them, one fault maps a huge page (2 MiB on x86-64, 512
  pages): 768 MiB of temporaries faulted in measured 7.5 MiB of faults counted by
  pages, and the checks never found the faults they look for.

Chunked calls (after the first, which often pays for memory the whole-batch calls
gave back) whose best of `TRIALS` is slower than the best whole-batch call by `SLOWER`
switch chunking off for that signature (one call on a busy machine says little).

With several threads (`vmapx._parallel`, `workers > 1`) a whole-batch call of at least
`PARALLEL_SECONDS` (of the calling thread's CPU time) runs split among them from the
next call on: in `workers` chunks, up to `PIECES` per worker for calls of several
`PIECE_SECONDS`, and chunks of at most `PIECE_RESULT_BYTES` of results (those of the
chunks in flight, at most `workers`, are what the call holds beyond its output; not
where the chunks compute them in the output, see below),
cache-sized where the cache rule says smaller. Not where the call is bound by writing
its results to memory (its values are mostly results, made at less than
`WRITE_BOUND_SECONDS_PER_BYTE` of CPU each) and its chunks cannot compute them in the
outputs: chunks would hold their results, then copy them. Where they can (the outputs
are arrays along axis 0 whose shapes and dtypes the last call showed:
`vmapx._chunk_outputs`), each thread writes its own part of the results, and a call
whose values are mostly results is split among the threads after `WARM_WHOLES` more
whole calls (judged against the best of them), at once in the threads' chunks (no
cache-sized chunks on one thread first: they do not make writing results faster), and
kept only where all threads together take no more CPU time than the whole call in all
the process's threads (`WRITES_WORK`: threads writing memory at once contend for it).
A split straight from the whole batch starts after `WARM_WHOLES` whole-batch calls
after the first (the first calls run with cold caches and fault in fresh pages, so
they would flatter the split; cache-sized chunks on one thread are decided after the
second, and their own timed calls are then what threads must beat), and is judged by
the best of `TRIALS` calls after the first `UNJUDGED_SPLITS`: not faster by
`1 - PARALLEL_GAIN` than the best whole-batch call (on a busy machine, threads wait for
cores), or, where the batch has enough examples for cache-sized chunks, than as many
calls in such chunks on one thread (timed first; the threads' chunks are as small:
large ones page-fault in each thread), the calls follow the rules of one thread from
then on (those cache-sized chunks on one thread, where they were timed and kept).
Threads kept are watched: `STILL_SLOWER` split calls in a row slower by `SLOWER` than
the best of the calls they replaced send the signature back to one thread, and threads
are tried again after `RETRY_CALLS` calls (then twice as many each time they still do
not pay).

**The clocks.** A split must beat the call it replaces by both clocks. By wall time,
the best of its calls against the best of those it replaces: wall time is what a user
waits for, and it alone sees what CPU time does not (chunks waiting for the GIL in a
call of much Python: w2's MLP split took 1.0 ms of CPU on idle cores, 1.6 ms of wall
time, against 1.45 ms whole; a second core that other work holds). By CPU time
(`_parallel.CpuTime`): a whole-batch or one-thread call by the calling thread's, a call
split among threads by its time on idle cores (the calling thread's CPU time plus that
of its chunks divided by the threads that ran them), which counts what the split costs
(copies, threads stalled on the same memory, page faults in each thread) with less of
the machine's other work in it. And threads are kept only where all of them together
take at most `PARALLEL_WORK` times the CPU time of the call they replace: where the
cores are busy (and where the scheduler shares CPU per session rather than per thread,
so that a second thread gets no more of it) the extra work is what the split costs in
wall time. (Judged by CPU time alone, threads were kept that made w2, w6-norm and w9
1.3-2.8 times slower than one thread in a benchmark's rounds.)

Results are the same either way (chunks are
independent examples) up to rounding: NumPy may order a sum differently for another
number of examples (the moved layout of `ufuncs._with_short_last_axis_moved` applies to
large enough arrays only, and a sum over its long axis then runs pairwise).
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:
    import resource
except ImportError:  # (Windows: no fault counts; only the cache rule applies)
    resource = None  # type: ignore[assignment]

LARGE_BYTES = 16 << 20
RESULT_RATIO = 2
MIN_BYTES = 8 << 20
FAULT_CHECKS = 2
FAULT_SHARE = 1 / 8
CHUNK_BYTES = 2 << 20
SLOWER = 1.1  # a chunked call this much slower than the whole batch: chunking off
# parallel chunks (`vmapx._parallel`): a whole-batch call of at least PARALLEL_SECONDS
# runs in `workers` chunks, more (up to PIECES per worker, each of about PIECE_SECONDS)
# for longer calls: fewer in flight at once bounds the memory of their results
PARALLEL_SECONDS = 1e-3
PIECE_SECONDS = 4e-3
PIECES = 4
PIECE_RESULT_BYTES = 8 << 20  # and results of at most this much per chunk (memory)
TRIALS = 3  # chunked calls are judged by the best of this many, as whole ones (noise only adds)
PARALLEL_GAIN = 0.9  # and kept only if that is at most this share of the whole call's time
PARALLEL_WORK = 1.25  # and all threads' CPU time at most this many times the whole call's
# a call whose batched values are mostly its results, made at less CPU time per byte
# than this, is bound by writing them to memory: threads do not help (np.sqrt of 9.4 MB:
# 0.15 ns/B, 1.4 ms on one thread or two), and chunks would add their results' memory
WRITE_BOUND_SECONDS_PER_BYTE = 0.4e-9
# a call split among threads straight from the whole batch is split after this many
# whole calls after the first, whose best the split must beat: the first calls run with
# cold caches and fault in fresh pages (w2's MLP: 4.3 and 2.7 ms, then 1.3 warm, which
# flattered threads that took 1.7; np.sqrt of 9.4 MB: 2.3 against 1.5 warm)
WARM_WHOLES = 3
# threads kept are watched: this many split calls in a row slower by SLOWER than the
# best of the calls they replaced (wall time) send the signature back to one thread, to
# try threads again after RETRY_CALLS calls (then twice as many, up to RETRY_MAX): the
# machine changed (other work on the cores; BLAS's own threads still spinning after
# another BLAS call took the second core for ~0.1 s, and a split w9 then took 47 ms
# against 35 on one thread)
STILL_SLOWER = 3
# the first split calls are not judged: new pool threads fault in their own heaps (glibc
# gives each thread an arena), and BLAS threads of the whole calls still spin (w9: 50
# and 37 ms, then 26)
UNJUDGED_SPLITS = 2
RETRY_CALLS = 16
RETRY_MAX = 1024
# and keeps threads only where they add no work at all to the whole call's in all the
# process's threads (BLAS's own included): threads that contend for memory bandwidth take
# longer each (np.sqrt of 9.4 MB, tensordot(a, a, 0) of 50 MB: 1.2 and 1.1 times the
# CPU time), where w9's per-example gradients on two threads took 0.7 times the CPU time
# of the whole call, BLAS on two threads
WRITES_WORK = 1.0
PAGE = resource.getpagesize() if resource is not None else 4096


def _pages_per_fault() -> int:
    """Pages that one fault maps in NumPy's large arrays: a transparent huge page's
    where the kernel gives them to NumPy's arrays (`always`, or `madvise` where NumPy
    asks for them), else 1."""
    try:
        core = np._core if hasattr(np, "_core") else np.core  # (NumPy 2, NumPy 1)
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            enabled = f.read()
        with open("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size") as f:
            huge = int(f.read())
        asked = bool(core.multiarray._get_madvise_hugepage())
    except (OSError, ValueError, AttributeError):
        return 1
    if "[always]" in enabled or ("[madvise]" in enabled and asked):
        return max(1, huge // PAGE)
    return 1


PAGES_PER_FAULT = _pages_per_fault()
_MAX_SIGNATURES = 64


class _Seen:
    """One signature: examples per chunk (None: the whole batch), the best whole-batch
    time, the chunked calls so far, and the page-fault checks still to run with what
    they look for (`fault_bytes`: bytes a call must fault in to count; 0: none left)."""

    __slots__ = ("chunk", "candidate", "whole_seconds", "chunked_calls", "checks", "fault_bytes",
                 "parallel", "trials", "work", "cpu", "write_bound_cpu", "single", "threads_later",
                 "baseline", "outputs", "wholes", "process", "whole_wall", "walls",
                 "baseline_wall", "split", "slow_calls", "retry_in", "retry_every",
                 "pending")  # fmt: skip

    def __init__(
        self, chunk: int | None, candidate: int | None, whole_seconds: float, parallel: bool = False
    ) -> None:
        self.chunk = chunk
        self.candidate = candidate  # the chunk to use if the fault checks say so
        self.whole_seconds = whole_seconds
        self.chunked_calls = 0
        self.checks = 0
        self.fault_bytes = 0
        self.parallel = parallel  # (split among threads: judged by the best of some calls)
        self.trials: list[float] = []  # (the judged chunked calls' seconds)
        self.work: list[float] = []  # (and their CPU time in all threads)
        self.cpu = 0.0  # (the least CPU time of the whole-batch calls so far)
        self.write_bound_cpu = 0.0  # (less CPU time than this: bound by writing results)
        self.single: tuple[Any, ...] = (
            None,
            None,
            0,
        )  # (chunk, candidate, fault bytes) on one thread
        self.threads_later = 0  # (chunks on threads to try once those on one are timed)
        self.baseline = 0.0  # (the time chunks on threads must beat; 0: the whole call's)
        self.outputs: Any = None  # (`_chunk_outputs.spec_of` the last call's outputs)
        self.wholes = 0  # (whole-batch calls after the first, before a split)
        self.process = 0.0  # (the least CPU time of the whole-batch calls, all threads)
        self.whole_wall = whole_seconds  # (the least wall time of the whole-batch calls)
        self.walls: list[float] = []  # (the judged chunked calls' wall times)
        self.baseline_wall = 0.0  # (the wall time threads must beat; 0: the whole call's)
        self.split = 0  # (examples per chunk on threads, once tried)
        self.slow_calls = 0  # (split calls in a row slower than the baseline, once kept)
        self.retry_in = 0  # (calls on one thread before threads are tried again; 0: never)
        self.retry_every = 0  # (and the next such wait, once threads were dropped)
        self.pending: int | None = None  # (cache-sized chunks, after `WARM_WHOLES` whole calls)


class AutoChunk:
    """What one vmapped function learned about its calls, per signature."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen: dict[Any, _Seen] = {}

    def chunk_for(self, key: Any) -> int | None:
        """Examples per chunk for the next call with this signature (None: whole)."""
        entry = self.seen.get(key)
        if entry is None:
            return None
        if entry.retry_in:
            entry.retry_in -= 1
            if not entry.retry_in:  # (threads were dropped: try them again)
                entry.parallel, entry.chunk, entry.fault_bytes = True, entry.split, 0
                entry.chunked_calls, entry.slow_calls = 0, 0
                entry.trials, entry.work, entry.walls = [], [], []
        return entry.chunk

    def threaded(self, key: Any) -> bool:
        """Whether the chunks of the next call with this signature may run on threads."""
        entry = self.seen.get(key)
        return entry is not None and entry.parallel

    def outputs(self, key: Any) -> Any:
        """What the last call with this signature returned (`_chunk_outputs.spec_of`)."""
        entry = self.seen.get(key)
        return None if entry is None else entry.outputs

    def remember_outputs(self, key: Any, spec: Any, process_seconds: float | None = None) -> None:
        """What a call with this signature returned (`_chunk_outputs.spec_of`; None:
        outputs the chunks cannot compute in place). Where they can, a call bound by
        writing its results may run on threads: each writes its own part of them.
        `process_seconds`: a whole-batch call's CPU time in all the process's threads
        (BLAS's own included), which threads for such a call must not exceed."""
        entry = self.seen.get(key)
        if entry is not None:
            entry.outputs = spec
            if process_seconds is not None:
                entry.process = min(entry.process or process_seconds, process_seconds)

    def counts_faults(self, key: Any) -> bool:
        """Whether the next (whole-batch) call with this signature is a fault check."""
        entry = self.seen.get(key)
        return entry is not None and entry.fault_bytes > 0

    def observe_whole(
        self, key: Any, size: int, trace: Any, results: list[Any], seconds: float,
        faulted: int | None = None, workers: int = 1, cpu_seconds: float | None = None,
        wall_seconds: float | None = None,
    ) -> None:  # fmt: skip
        """A whole-batch call that made the values its `trace` counted (`largest`,
        `made`: bytes) and `results`, in `seconds`; `faulted`: the bytes of the pages
        it faulted in, where it was a fault check; `workers`: the threads later calls
        may use; `cpu_seconds`: the calling thread's CPU time in the call (default:
        `seconds`), which decides whether to split it among threads (a busy machine
        stretches `seconds`, not the work); `wall_seconds`: its wall time (default:
        `seconds`), which a split must beat."""
        entry = self.seen.get(key)
        arrays = [r.nbytes for r in results if type(r) is np.ndarray]
        result_bytes, largest_result = sum(arrays), max(arrays, default=0)
        cpu = seconds if cpu_seconds is None else cpu_seconds
        wall = seconds if wall_seconds is None else wall_seconds
        if entry is not None:
            entry.whole_seconds = min(entry.whole_seconds, seconds)
            entry.whole_wall = min(entry.whole_wall, wall)
            if entry.pending is not None:
                entry.wholes += 1
                if entry.wholes >= WARM_WHOLES:
                    entry.chunk, entry.pending = entry.pending, None
            if entry.parallel and entry.chunk is None and not entry.chunked_calls:
                self._second_call(entry, size, min(entry.cpu, cpu), workers, result_bytes)
            if faulted is not None and entry.fault_bytes > 0:
                self._fault_check(entry, faulted)
            return
        chunk = max(1, size * CHUNK_BYTES // max(trace.largest, 1))
        if 2 * chunk > size:
            chunk = 0  # (too few examples to split)
        if len(self.seen) >= _MAX_SIGNATURES:
            self.seen.clear()
        cache_bound = trace.largest >= LARGE_BYTES and (
            trace.largest >= RESULT_RATIO * largest_result
        )
        others = trace.made - result_bytes
        faults = not cache_bound and resource is not None and others >= max(MIN_BYTES, result_bytes)
        single = (
            chunk if cache_bound and chunk else None,
            chunk or None,
            max(1, int(FAULT_SHARE * others / PAGES_PER_FAULT)) if faults and chunk else 0,
        )
        if parallel_chunk(size, cpu, workers, result_bytes):
            # (decided at the next call: the first is often slow, with cold caches)
            self.seen[key] = entry = _Seen(None, None, seconds, parallel=True)
            entry.cpu, entry.single, entry.whole_wall = cpu, single, wall
            if 2 * result_bytes >= trace.made:  # (values mostly results: maybe write-bound)
                entry.write_bound_cpu = WRITE_BOUND_SECONDS_PER_BYTE * trace.made
            return
        self.seen[key] = entry = _Seen(None, single[1], seconds)
        entry.fault_bytes, entry.pending = single[2], single[0]

    def _second_call(
        self, entry: _Seen, size: int, cpu: float, workers: int, result_bytes: int
    ) -> None:
        """Split among threads from now on, or keep whole: decided on the least CPU time
        of the whole calls so far (the first's caches and pages are cold); a split
        straight from the whole batch waits for `WARM_WHOLES` of them, whose best it must
        beat."""
        entry.cpu = cpu
        in_place = entry.write_bound_cpu > 0 and entry.outputs is not None
        split = parallel_chunk(size, cpu, workers, 0 if in_place else result_bytes)
        small = entry.single[1]  # (cache-sized chunks, where the batch has enough examples)
        if not split or (cpu < entry.write_bound_cpu and not in_place):
            self._one_thread(entry, warm_first=True)
        elif small and not in_place:
            # (timed on one thread first: threads must beat them, in chunks as small;
            # not where each thread writes its part of the results in place: cache-sized
            # chunks do not make writing them faster)
            self._one_thread(entry, warm_first=True)
            entry.pending, entry.wholes, entry.threads_later = small, 1, min(small, split)
        else:
            entry.wholes += 1
            if entry.wholes >= WARM_WHOLES:
                entry.chunk = entry.candidate = entry.split = split

    def _one_thread(self, entry: _Seen, warm_first: bool = False) -> None:
        """From now on the rules of one thread (cache-sized chunks, fault checks);
        `warm_first`: the cache-sized chunks after `WARM_WHOLES` whole calls (the
        whole calls so far were the first ones, with cold caches and fresh pages)."""
        entry.parallel = False
        entry.chunk, entry.candidate, entry.fault_bytes = entry.single
        if warm_first and entry.chunk is not None:
            entry.chunk, entry.pending, entry.wholes = None, entry.chunk, 1
        entry.chunked_calls = entry.checks = entry.slow_calls = 0
        entry.trials, entry.work, entry.walls = [], [], []

    def _fault_check(self, entry: _Seen, faulted: int) -> None:
        entry.checks += 1
        if faulted < entry.fault_bytes:
            entry.fault_bytes = 0  # a call without the faults: the allocator keeps memory
        elif entry.checks >= FAULT_CHECKS:
            entry.fault_bytes = 0
            entry.chunk = entry.candidate

    def observe_chunked(
        self, key: Any, seconds: float, work: float | None = None, wall: float | None = None
    ) -> None:
        """A chunked call that took `seconds` (on idle cores, see the module), `work`
        seconds of CPU in all its threads and `wall` seconds of wall time (defaults:
        `seconds`)."""
        entry = self.seen.get(key)
        if entry is None:
            return
        wall = seconds if wall is None else wall
        entry.chunked_calls += 1
        if len(entry.trials) >= TRIALS:
            if entry.parallel:
                self._watch(entry, wall)
            return
        if entry.chunked_calls <= (UNJUDGED_SPLITS if entry.parallel else 1):
            return  # (the first may pay for memory the whole-batch calls gave back)
        entry.trials.append(seconds)
        entry.work.append(seconds if work is None else work)
        entry.walls.append(wall)
        if len(entry.trials) != TRIALS:
            return
        typical, typical_work = min(entry.trials), min(entry.work)
        if not entry.parallel:
            if typical > SLOWER * entry.whole_seconds:
                entry.chunk = None
            elif entry.threads_later:  # (now on threads)
                entry.single = (entry.chunk, entry.chunk, 0)  # (if threads do not pay)
                entry.parallel, entry.baseline = True, typical
                entry.baseline_wall = min(entry.walls)
                entry.chunk = entry.split = entry.threads_later
                entry.threads_later, entry.chunked_calls = 0, 0
                entry.trials, entry.work, entry.walls = [], [], []
            return
        baseline = entry.baseline or entry.whole_seconds
        work = PARALLEL_WORK * baseline
        if entry.write_bound_cpu and entry.outputs is not None:  # (threads writing results)
            work = WRITES_WORK * max(baseline, entry.process)
        slower = min(entry.walls) > PARALLEL_GAIN * (entry.baseline_wall or entry.whole_wall)
        if slower or typical > PARALLEL_GAIN * baseline or typical_work > work:
            self._drop_threads(entry)

    def _watch(self, entry: _Seen, wall: float) -> None:
        """A split call after the threads were kept: `STILL_SLOWER` in a row slower than
        the call they replaced drop them."""
        slower = wall > SLOWER * (entry.baseline_wall or entry.whole_wall)
        entry.slow_calls = entry.slow_calls + 1 if slower else 0
        if entry.slow_calls >= STILL_SLOWER:
            self._drop_threads(entry, paid=True)

    def _drop_threads(self, entry: _Seen, paid: bool = False) -> None:
        """One thread from now on; where threads paid once (`paid`: they just did),
        tried again later, waiting twice as long each time."""
        self._one_thread(entry)
        if paid or entry.retry_every:
            entry.retry_every = min(max(2 * entry.retry_every, RETRY_CALLS), RETRY_MAX)
            entry.retry_in = entry.retry_every


def parallel_chunk(size: int, seconds: float, workers: int, result_bytes: int = 0) -> int:
    """Examples per chunk for `workers` threads after a whole call of `seconds` whose
    results had `result_bytes` (0: no parallel chunks)."""
    if workers < 2 or seconds < PARALLEL_SECONDS or size < 2:
        return 0
    pieces = workers * min(PIECES, max(1, int(seconds / PIECE_SECONDS)))
    pieces = max(pieces, -(-result_bytes // PIECE_RESULT_BYTES))
    return -(-size // min(pieces, size))


def signature(size: int, leaves: list[Any], axes: list[Any]) -> tuple[Any, ...]:
    """What a call's chunking decision depends on: batch size, mapped shapes and dtypes."""
    return (
        size,
        *(
            (np.shape(x), getattr(x, "dtype", None))
            for x, ax in zip(leaves, axes, strict=True)
            if ax is not None
        ),
    )


def faults() -> int:
    """Bytes of the pages this process has faulted in so far (minor faults)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt * PAGE
