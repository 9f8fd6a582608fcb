"""Chunks of one batch on several threads (`vmap(..., workers=)`, `vmapx._parallel`)."""

from __future__ import annotations

import sys
import threading
import time
import warnings

import numpy as np
import pytest

import vmapx
from harness import assert_same, loop_reference, peak_bytes
from vmapx import _autochunk, _parallel, vmap

RNG = np.random.default_rng(5)
X = RNG.standard_normal((40, 3))


def _threads_of(f, meet: int | None = None):
    """`f`, and the names of the threads that ran its calls. With `meet`, calls in
    worker threads wait until `meet` of them run at once (a worker that took every
    chunk alone breaks the barrier: the chunks did not run in parallel)."""
    names: list = []
    together = threading.Barrier(meet) if meet else None

    def recorded(*args, **kwargs):
        names.append(threading.current_thread().name)
        if together is not None and threading.current_thread() is not threading.main_thread():
            together.wait(timeout=10)
        else:
            time.sleep(0.002)  # (long enough that the other worker takes the next chunk)
        return f(*args, **kwargs)

    return recorded, names


def _pytree_f(x, w):
    return {"sum": (x * w).sum(), "outer": np.outer(x, w), "pair": (np.sin(x), x.astype(int))}


_DICT_AXES = {"sum": 0, "outer": 2, "pair": (1, 0)}


@pytest.mark.parametrize("out_axes", [0, -1, _DICT_AXES])
def test_parallel_chunks_equal_the_loop(out_axes):
    w = RNG.standard_normal(3)
    f, names = _threads_of(_pytree_f)
    got = vmap(f, in_axes=(0, None), out_axes=out_axes, chunk_size=3, workers=2)(X, w)
    leaf_axes = (2, 1, 0, 0) if out_axes is _DICT_AXES else out_axes  # (optree's order)
    expected = loop_reference(_pytree_f, [X, w], (0, None), leaf_axes)
    assert_same(got, expected, rtol=0, atol=0)
    assert len(names) == 14
    assert {n.split("_")[0] for n in names} == {"vmapx"}  # the pool's threads
    # at most the two workers (one may take every chunk on a busy machine: that both run at
    # once is checked with a barrier in test_auto_splits_a_long_call_among_the_workers)
    assert 1 <= len(set(names)) <= 2


def test_in_axes_other_than_zero_and_keywords():
    xt = X.T.copy()
    f = lambda x, scale: np.cumsum(x) * scale  # noqa: E731
    got = vmap(f, in_axes=-1, chunk_size=7, workers=3)(xt, scale=2.0)
    assert_same(got, loop_reference(lambda x: f(x, 2.0), [xt], -1), rtol=0, atol=0)


def test_one_worker_runs_the_chunks_in_the_calling_thread(monkeypatch):
    f, names = _threads_of(np.sin)
    vmap(f, chunk_size=10, workers=1)(X)
    monkeypatch.setattr(vmapx.config, "workers", 1)
    vmap(f, chunk_size=10)(X)
    assert set(names) == {threading.current_thread().name}


def test_random_draws_stay_the_loops_stream():
    """randomness="different" continues one generator's stream chunk after chunk."""
    g = lambda x, rng: x + rng.normal(size=3)  # noqa: E731
    f, names = _threads_of(g)
    got = vmap(f, in_axes=(0, None), randomness="different", chunk_size=4, workers=2)(
        X, np.random.default_rng(3)
    )
    rng = np.random.default_rng(3)
    assert_same(got, np.stack([g(x, rng) for x in X]), rtol=0, atol=0)
    assert set(names) == {threading.current_thread().name}


def test_a_generator_reached_through_a_closure_keeps_the_stream():
    rng = np.random.default_rng(1)
    g = lambda x: x + vmapx.random.batch_aware(rng).standard_normal()  # noqa: E731
    f, names = _threads_of(g)
    got = vmap(f, randomness="different", chunk_size=4, workers=2)(X[:, 0])
    assert_same(got, X[:, 0] + np.random.default_rng(1).standard_normal(40), rtol=0, atol=0)
    assert set(names) == {threading.current_thread().name}


def test_legacy_global_random_in_parallel_chunks_draws_the_loops_numbers():
    """Chunks on threads that draw from NumPy's global generator run again one after
    the other (each chunk as the loop): the loop's numbers, in the loop's order."""

    def f(x):
        return x + np.random.normal() + np.random.rand(3)

    state = np.random.get_state()
    try:
        np.random.seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", vmapx.PerformanceWarning)
            got = vmap(f, chunk_size=4, workers=2)(X)
        np.random.seed(0)
        assert_same(got, np.stack([f(x) for x in X]), rtol=0, atol=0)
    finally:
        np.random.set_state(state)


def test_under_an_outer_transform_the_chunks_stay_in_this_thread():
    f, names = _threads_of(lambda v: np.sin(v) * 2.0)
    g = vmapx.grad(lambda x: vmap(f, chunk_size=4, workers=2)(x).sum())(X)
    assert_same(g, 2.0 * np.cos(X))
    assert set(names) == {threading.current_thread().name}


def test_vmaps_inside_the_chunks_and_jit():
    inner = lambda x: vmap(lambda v: v * x.sum(), chunk_size=1, workers=2)(x)  # noqa: E731
    jitted = vmapx.jit(vmap(vmapx.grad(lambda x: np.sum(np.sin(x) ** 2)), chunk_size=8))
    for _ in range(3):  # (records, then replays)
        assert_same(vmap(inner, chunk_size=5, workers=2)(X), loop_reference(inner, [X], 0))
        assert_same(jitted(X), 2 * np.sin(X) * np.cos(X))


def test_an_error_in_a_chunk_is_raised_and_leaves_no_state():
    def f(x):
        if np.isnan(x).any():  # (examples disagree: chunk 4 loops, example 10 raises)
            raise RuntimeError("example 10 fails")
        return x * 2

    x = X.copy()
    x[10] = np.nan
    with pytest.raises(RuntimeError, match="example 10 fails"):
        vmap(f, chunk_size=3, workers=2, fallback="silent")(x)
    assert_same(vmap(f, chunk_size=3, workers=2)(X), X * 2)
    assert not vmapx._core._state.stack


def test_chunks_on_threads_follow_the_callers_numpy_error_handling():
    """`np.errstate` is per thread: chunks on the pool run under the caller's, as the
    loop does (an overflow raises where the caller asked NumPy to raise)."""
    x = np.full((300, 5), 1e300)
    with np.errstate(over="raise"), pytest.raises(FloatingPointError, match="overflow"):
        vmap(lambda v: v * v, chunk_size=100, workers=2)(x)
    with np.errstate(over="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        out = vmap(lambda v: v * v, chunk_size=100, workers=2)(x)
    assert np.isinf(out).all()
    seen = []
    with np.errstate(call=lambda kind, flag: seen.append(kind), over="call"):
        vmap(lambda v: v * v, chunk_size=100, workers=2)(x)
    assert seen and set(seen) == {"overflow"}


def test_chunks_that_loop_take_the_loops_dtype():
    kinds = [np.int8, np.uint8, np.float16, np.float16]
    x = np.arange(4.0)[:, None] * np.ones((4, 2))
    f = lambda v: v.astype(kinds[int(v[0])])  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        got = vmap(f, chunk_size=1, workers=4)(x)
    assert_same(got, loop_reference(f, [x], 0), rtol=0, atol=0)


def test_auto_splits_a_long_call_among_the_workers(monkeypatch):
    monkeypatch.setattr(_autochunk, "PARALLEL_SECONDS", 0.0)  # (every call is long,
    monkeypatch.setattr(_autochunk, "WRITE_BOUND_SECONDS_PER_BYTE", 0.0)  # and computes)
    f, names = _threads_of(np.cos, meet=2)
    batched = vmap(f, workers=2)
    first = batched(X)
    wholes = 1 + _autochunk.WARM_WHOLES  # the first call runs whole and measures, and
    for _ in range(wholes - 1):  # as many more as give a warm time to beat
        assert_same(batched(X), first, rtol=0, atol=0)
    assert names == ["MainThread"] * wholes
    split = batched(X)
    assert len(names) == wholes + 2 and len(set(names[wholes:])) == 2  # then split in two
    assert_same(split, first, rtol=0, atol=0)
    assert_same(split, np.cos(X))


def test_calls_bound_by_writing_their_results_stay_whole():
    """Values that are mostly results, made at < 0.4 ns of CPU per byte: threads would
    not write memory faster (np.sqrt of 9.4 MB: 1.4 ms on one thread or two)."""
    made = type("Made", (), {"largest": 64 << 20, "made": 64 << 20})()
    results = [np.empty(8 << 20)]  # (64 MiB)
    for cpu, split in ((0.010, False), (0.040, True)):  # 0.15 and 0.6 ns per byte
        auto = _autochunk.AutoChunk()
        for _ in range(1 + _autochunk.WARM_WHOLES):
            auto.observe_whole(("k",), 100, made, results, cpu, workers=2, cpu_seconds=cpu)
        assert (auto.chunk_for(("k",)) is not None) is split


def test_threads_that_do_not_pay_leave_the_rules_of_one_thread():
    """Cache-bound intermediates (24 MiB): cache-sized chunks on one thread, then on
    threads, and where those are not 10% faster, on one thread again."""
    auto, key = _autochunk.AutoChunk(), ("k",)
    made = type("Made", (), {"largest": 24 << 20, "made": 64 << 20})()
    for _ in range(1 + _autochunk.WARM_WHOLES):  # (chunks after warm whole calls)
        auto.observe_whole(key, 2048, made, [np.empty(1 << 17)], 0.010, workers=2)
    cache = 2048 * _autochunk.CHUNK_BYTES // (24 << 20)
    assert auto.chunk_for(key) == cache and not auto.threaded(key)  # (one thread first)
    for seconds in (0.02, 0.0065, 0.007, 0.0068):  # (the first is not judged)
        auto.observe_chunked(key, seconds)
    assert auto.chunk_for(key) == cache and auto.threaded(key)  # (the best: 6.5 ms)
    for seconds in (0.002, 0.002, 0.006, 0.0061, 0.0062):  # (the best 6 ms > 0.9 x 6.5 ms)
        auto.observe_chunked(key, seconds)
    assert auto.chunk_for(key) == cache and not auto.threaded(key)


def _warm_wholes(auto, key, made, seconds, size=100):
    """The whole calls before a split: a first, cold one, then `WARM_WHOLES` more."""
    for k in range(1 + _autochunk.WARM_WHOLES):
        assert auto.chunk_for(key) is None
        cold = 1.5 if k == 0 else 1
        auto.observe_whole(key, size, made, [np.empty(100)], cold * seconds, workers=2)


def test_split_calls_slower_than_whole_ones_run_whole_again():
    auto = _autochunk.AutoChunk()
    made = type("Made", (), {"largest": 1 << 20, "made": 4 << 20})()
    _warm_wholes(auto, ("k",), made, 0.002)
    assert auto.chunk_for(("k",)) == 50
    for seconds in (0.005, 0.005, 0.0023, 0.0019):  # (the first two are not judged)
        auto.observe_chunked(("k",), seconds)
        assert auto.chunk_for(("k",)) == 50
    auto.observe_chunked(("k",), 0.0024)  # best of 3: 1.9 ms > 0.9 x 2 ms
    assert auto.chunk_for(("k",)) is None


def test_parallel_chunk_sizes():
    assert _autochunk.parallel_chunk(100, 0.5e-3, 2) == 0  # (too short to pay)
    assert _autochunk.parallel_chunk(100, 2e-3, 1) == 0  # (one worker)
    assert _autochunk.parallel_chunk(100, 2e-3, 2) == 50
    assert _autochunk.parallel_chunk(100, 1.0, 3) == 9  # (4 pieces per worker)
    assert _autochunk.parallel_chunk(100, 2e-3, 2, 80 << 20) == 10  # (8 MiB of results)
    assert _autochunk.parallel_chunk(1, 1.0, 2) == 0


def test_peak_memory_is_the_chunks_in_flight():
    xs, ys = RNG.standard_normal((2048, 3)), RNG.standard_normal((512, 3))
    f = lambda x, ys: np.sqrt(((ys - x) ** 2).sum(-1))  # noqa: E731 (24 MiB inside)
    whole = peak_bytes(lambda: vmap(f, in_axes=(0, None), chunk_size=None)(xs, ys))
    par = peak_bytes(lambda: vmap(f, in_axes=(0, None), chunk_size=128, workers=2)(xs, ys))
    assert par < 2 * 2048 * 512 * 8 < whole, (par, whole)  # (the result: 8 MiB)


@pytest.mark.skipif(_parallel.threadpoolctl() is None, reason="threadpoolctl is not installed")
def test_blas_threads_are_divided_among_the_workers():
    controller = _parallel.threadpoolctl().ThreadpoolController()
    before = [i["num_threads"] for i in controller.info() if i["user_api"] == "blas"]
    if not before:
        pytest.skip("no BLAS library found by threadpoolctl")
    seen: list = []

    def f(x):
        info = _parallel.threadpoolctl().threadpool_info()
        seen.append(max(i["num_threads"] for i in info if i["user_api"] == "blas"))
        return x @ x.T

    got = vmap(f, chunk_size=10, workers=2)(X[:, :, None])
    assert_same(got, np.stack([x[:, None] @ x[None] for x in X]))
    assert set(seen) == {max(1, max(before) // 2)}
    after = [i["num_threads"] for i in controller.info() if i["user_api"] == "blas"]
    assert after == before


def test_without_threadpoolctl(monkeypatch):
    monkeypatch.setattr(_parallel, "threadpoolctl", lambda: None)
    assert_same(vmap(np.sin, chunk_size=5, workers=2)(X), np.sin(X), rtol=0, atol=0)


def test_a_larger_pool_while_calls_are_in_flight():
    """A call asking for more workers than the pool has gets a larger pool; calls in
    flight on the old one finish there."""
    slow = vmap(lambda x: (time.sleep(0.002), x * 2)[1], chunk_size=2, workers=2)
    results: list = []
    thread = threading.Thread(target=lambda: results.append(slow(X)))
    thread.start()
    many = vmap(np.sin, chunk_size=2, workers=_parallel._pool_size + 3)(X)
    thread.join()
    assert_same(results[0], X * 2)
    assert_same(many, np.sin(X))


def test_calls_from_several_threads_at_once():
    batched = vmap(lambda x: np.tanh(x) * x.sum(), chunk_size=3, workers=2)
    inputs = [RNG.standard_normal((30, 4)) for _ in range(4)]
    results: dict = {}

    def call(i):
        results[i] = batched(inputs[i])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, x in enumerate(inputs):
        assert_same(results[i], np.tanh(x) * x.sum(axis=1, keepdims=True))


def test_progress_bar(capsys):
    pytest.importorskip("tqdm")
    assert_same(vmap(np.sin, chunk_size=10, progress=True)(X), np.sin(X), rtol=0, atol=0)
    assert "4/4" in capsys.readouterr().err


def test_progress_without_tqdm(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    with pytest.raises(ImportError, match="pip install tqdm"):
        vmap(np.sin, chunk_size=10, progress=True)(X)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "all"])
def test_bad_workers(bad):
    with pytest.raises(ValueError, match="`workers` must be a positive int or None"):
        vmap(np.sin, workers=bad)
    with pytest.raises(ValueError, match="vmapx.config: `workers`"):
        vmapx.config.workers = bad


def test_the_default_is_the_cores_this_process_may_use(monkeypatch):
    assert _parallel.resolve_workers(None) == _parallel.available_cores() >= 1
    monkeypatch.setattr(vmapx.config, "workers", 3)
    assert _parallel.resolve_workers(None) == 3
    assert _parallel.resolve_workers(2) == 2


def test_the_environment_variable():
    import os
    import subprocess

    def run(value):
        return subprocess.run(
            [sys.executable, "-c", "import vmapx; print(vmapx.config.workers)"],
            capture_output=True,
            text=True,
            env={**os.environ, "VMAPX_WORKERS": value},
        )

    assert run("3").stdout.strip() == "3"
    assert "VMAPX_WORKERS must be a positive int, got 'many'" in run("many").stderr


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


@pytest.mark.parametrize("workers", [1, 2])
def test_chunked_calls_are_timed_by_their_cpu_on_idle_cores(workers):
    """`run_chunks` returns the CPU time of the chunks divided by the threads that ran
    them: waiting (here sleeping, on a busy machine for a core) does not count."""
    joined: list = []

    def run(start: int, stop: int) -> int:
        time.sleep(0.02)  # (wall time, no CPU)
        _spin(0.002)
        return start

    cpu = _parallel.run_chunks(run, lambda out, a, b: joined.append(out), 8, 2, workers)
    assert joined == [0, 2, 4, 6]  # (in order)
    assert 0.008 <= cpu.total < 0.03, cpu  # (4 x 2 ms of CPU; 80 ms asleep)
    assert 0.008 / workers <= cpu.idle < 0.03, cpu


def test_chunks_waiting_for_a_thread_count_as_time():
    """The time a chunk waits, once handed to the pool, for a thread to start it is a
    cost of the split that CPU time does not show (on busy cores: a woken thread waiting
    for a core); here every thread of the pool is busy for 50 ms first."""
    pool = _parallel._get_pool(2)
    release = threading.Event()
    busy = [pool.submit(release.wait, 1) for _ in range(_parallel._pool_size)]
    timer = threading.Timer(0.05, release.set)
    timer.start()
    try:
        cpu, waits = _parallel.map_in_order(lambda a, b: a, lambda *_: None, [(0, 1), (1, 2)], 2)
    finally:
        release.set()
        timer.cancel()
        for future in busy:
            future.result()
    assert waits >= 2 * 0.04, waits  # (each of the two chunks waited for the busy threads)


def test_auto_chunking_judges_splits_by_cpu_and_wall_time(monkeypatch):
    """A split call is judged by its CPU time (`_parallel.CpuTime`: waiting does not
    count) and by its wall time (waiting does: for the GIL, for a core)."""
    monkeypatch.setattr(_autochunk, "PARALLEL_SECONDS", 0.0)
    monkeypatch.setattr(_autochunk, "WRITE_BOUND_SECONDS_PER_BYTE", 0.0)
    seen: list = []
    observe = _autochunk.AutoChunk.observe_chunked

    def observed(self, key, *cpu, wall):
        seen.append((cpu[0], wall))
        observe(self, key, *cpu, wall=wall)

    monkeypatch.setattr(_autochunk.AutoChunk, "observe_chunked", observed)

    def f(x):
        time.sleep(0.005)
        return np.cos(x)

    batched = vmap(f, workers=2)
    for _ in range(2 + _autochunk.WARM_WHOLES):
        assert_same(batched(X), np.cos(X), rtol=0, atol=0)
    assert len(seen) == 1, seen
    cpu, wall = seen[0]
    assert cpu < 0.005 <= wall, seen  # (each chunk slept 5 ms)


def test_threads_no_faster_in_wall_time_are_dropped():
    """A split that takes less CPU time on idle cores but no less wall time than the
    whole call (its chunks waited: for the GIL, for a core) goes back to one thread."""
    made = type("Made", (), {"largest": 1 << 20, "made": 4 << 20})()
    for wall, threaded in ((0.0019, False), (0.0017, True)):  # (whole: 2 ms)
        auto = _autochunk.AutoChunk()
        _warm_wholes(auto, ("k",), made, 0.002)
        for _ in range(_autochunk.UNJUDGED_SPLITS + _autochunk.TRIALS):
            auto.observe_chunked(("k",), 0.0012, 0.0022, wall)
        assert auto.threaded(("k",)) is threaded, wall


def _kept_threads(auto, key):
    made = type("Made", (), {"largest": 1 << 20, "made": 4 << 20})()
    _warm_wholes(auto, key, made, 0.002)
    for _ in range(_autochunk.UNJUDGED_SPLITS + _autochunk.TRIALS):
        assert auto.chunk_for(key) == 50
        auto.observe_chunked(key, 0.0012, 0.0022, 0.0014)
    assert auto.threaded(key)


def test_threads_kept_are_dropped_when_they_stop_paying_and_tried_again_later():
    """Split calls `STILL_SLOWER` in a row slower than the whole call by `SLOWER` (the
    machine got busy) go back to one thread; threads are tried again after `RETRY_CALLS` calls,
    then, where they still do not pay, after twice as many."""
    auto, key = _autochunk.AutoChunk(), ("k",)
    _kept_threads(auto, key)
    for _ in range(_autochunk.STILL_SLOWER - 1):
        auto.observe_chunked(key, 0.0012, 0.0022, 0.0025)
    auto.observe_chunked(key, 0.0012, 0.0022, 0.0021)  # (within SLOWER: the count restarts)
    for _ in range(_autochunk.STILL_SLOWER - 1):
        auto.observe_chunked(key, 0.0012, 0.0022, 0.0025)
    assert auto.threaded(key)
    auto.observe_chunked(key, 0.0012, 0.0022, 0.0025)
    assert not auto.threaded(key)
    for wait in (_autochunk.RETRY_CALLS, 2 * _autochunk.RETRY_CALLS):
        for _ in range(wait - 1):
            assert auto.chunk_for(key) is None  # (whole, on one thread)
        assert auto.chunk_for(key) == 50 and auto.threaded(key)  # (threads again)
        for _ in range(_autochunk.UNJUDGED_SPLITS + _autochunk.TRIALS):
            auto.observe_chunked(key, 0.0012, 0.0022, 0.0025)  # (still slower)
        assert not auto.threaded(key)


def test_threads_that_never_paid_are_not_tried_again():
    auto, key = _autochunk.AutoChunk(), ("k",)
    made = type("Made", (), {"largest": 1 << 20, "made": 4 << 20})()
    _warm_wholes(auto, key, made, 0.002)
    for _ in range(_autochunk.UNJUDGED_SPLITS + _autochunk.TRIALS):
        auto.observe_chunked(key, 0.0012, 0.0022, 0.0025)
    for _ in range(4 * _autochunk.RETRY_MAX):
        assert auto.chunk_for(key) is None


def test_threads_that_add_much_work_are_dropped():
    """A split 10% faster on idle cores whose threads take more than PARALLEL_WORK times
    the whole call's CPU time goes back to one thread: on busy cores the extra work is
    what it costs; one within that bound stays."""
    made = type("Made", (), {"largest": 1 << 20, "made": 4 << 20})()
    for work, threaded in ((0.0030, False), (0.0024, True)):  # (whole: 2 ms)
        auto = _autochunk.AutoChunk()
        _warm_wholes(auto, ("k",), made, 0.002)
        for _ in range(_autochunk.UNJUDGED_SPLITS + _autochunk.TRIALS):
            auto.observe_chunked(("k",), 0.0015, work)
        assert auto.threaded(("k",)) is threaded and (auto.chunk_for(("k",)) == 50) is threaded


def test_threads_dropped_after_one_thread_chunks_keep_those_chunks():
    """Cache-sized chunks timed on one thread and kept (3 ms against 6 ms whole), then
    on threads that add too much work: the chunks stay, on one thread (the rules of one
    thread would otherwise start again from the whole batch)."""
    auto, key = _autochunk.AutoChunk(), ("k",)
    made = type("Made", (), {"largest": 12 << 20, "made": 40 << 20})()  # (not cache-bound)
    for _ in range(1 + _autochunk.WARM_WHOLES):  # (chunks after warm whole calls)
        auto.observe_whole(key, 2048, made, [np.empty(1 << 17)], 0.006, workers=2)
    small = auto.chunk_for(key)
    assert small and not auto.threaded(key)
    for seconds in (0.01, 0.003, 0.003, 0.003):
        auto.observe_chunked(key, seconds)
    assert auto.threaded(key)
    for _ in range(_autochunk.UNJUDGED_SPLITS + _autochunk.TRIALS):
        auto.observe_chunked(key, 0.002, 0.0045)  # (1.5 x the one-thread chunks' work)
    assert auto.chunk_for(key) == small and not auto.threaded(key)
