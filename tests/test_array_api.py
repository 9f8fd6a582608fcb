"""Traced values speak the Python array API standard: the namespace's functions batch and
differentiate, the tracer's members answer as the standard says, and libraries with
array-API support (array-api-compat, SciPy with SCIPY_ARRAY_API=1, scikit-learn with
array_api_dispatch) give the loop's answer."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import vmapx
from harness import assert_same, check_vmap
from np_compat import requires_numpy2
from vmapx._numpy import array_api as xp

pytestmark = requires_numpy2("the array API standard in NumPy's main namespace")
rng = np.random.default_rng(0)
M = rng.normal(size=(4, 3, 3)) + 3.0

CASES = {
    "permute_dims": lambda x: xp.permute_dims(x, (1, 0)),
    "matrix_transpose": lambda x: xp.matrix_transpose(x),
    "mT": lambda x: x.mT,
    "concat": lambda x: xp.concat([x, x], axis=0),
    "stack": lambda x: xp.stack([x, 2 * x], axis=-1),
    "astype": lambda x: xp.astype(x, xp.float32),
    "vecdot": lambda x: xp.vecdot(x, x),
    "matmul": lambda x: xp.matmul(x, x),
    "cumulative_sum": lambda x: xp.cumulative_sum(x, axis=1),
    "unstack": lambda x: xp.unstack(x)[1],
    "vector_norm": lambda x: xp.linalg.vector_norm(x),
    "matrix_norm": lambda x: xp.linalg.matrix_norm(x),
    "eigvalsh": lambda x: xp.linalg.eigvalsh(x @ x.mT),
    "std": lambda x: xp.std(x, correction=1),
    "var": lambda x: xp.var(x, axis=0),
    "asarray": lambda x: xp.asarray(x) + xp.asarray([1.0, 2, 3]),
    "asarray of a list": lambda x: xp.asarray([x[0], x[1]]),
    "asarray dtype": lambda x: xp.asarray(x, dtype=xp.float32),
    "take": lambda x: xp.take(x, xp.asarray([0, 2]), axis=1),
    "sort descending": lambda x: xp.sort(x, axis=1, descending=True),
    "argsort descending": lambda x: xp.argsort(xp.round(x), axis=1, descending=True),
    "argsort": lambda x: xp.argsort(x, axis=0),
    "pow": lambda x: xp.pow(x, 2.0),
    "acos": lambda x: xp.acos(x / 10),
    "atan2": lambda x: xp.atan2(x, x.mT),
    "clip": lambda x: xp.clip(x, 2.5, 3.5),
    "where": lambda x: xp.where(x > 3, x, 0.0),
    "result_type": lambda x: xp.zeros(3, dtype=xp.result_type(x, xp.float32)),
    "isdtype": lambda x: x * xp.isdtype(x.dtype, "real floating"),
    "device": lambda x: xp.zeros_like(x, device=x.device) + x.to_device("cpu"),
    "namespace": lambda x: x.__array_namespace__().sum(x, axis=1),
    "count_nonzero": lambda x: xp.count_nonzero(x > 3),
    "searchsorted": lambda x: xp.searchsorted(xp.sort(x[0]), x[1]),
    "fft": lambda x: xp.fft.fft(x),
    "expand_dims": lambda x: xp.expand_dims(x, axis=0),
    "max": lambda x: xp.max(x, axis=1),
    "logaddexp": lambda x: xp.logaddexp(x, x.mT),
    "broadcast_to": lambda x: xp.broadcast_to(x[0], (2, 3)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_namespace_function_equals_the_loop(name: str) -> None:
    check_vmap(CASES[name], [M])


@pytest.mark.parametrize(
    "f",
    [
        lambda x: xp.sum(xp.linalg.vector_norm(xp.permute_dims(x, (1, 0)), axis=0)),
        lambda x: xp.sum(xp.pow(xp.matrix_transpose(x), 3.0) * xp.exp(x / 10)),
        lambda x: xp.mean(xp.vecdot(x, xp.flip(x, axis=1))),
        lambda x: xp.sum(xp.sort(x, axis=0, descending=True)[0] * xp.asarray([1.0, 2, 3])),
    ],
)
def test_namespace_functions_differentiate(f) -> None:
    vmapx.check_grads(f, (M[0],), order=2)
    got = vmapx.vmap(vmapx.grad(f))(M)
    assert_same(got, np.stack([vmapx.grad(f)(m) for m in M]))


def test_the_namespace_has_every_name_array_api_strict_has() -> None:
    strict = pytest.importorskip("array_api_strict")
    missing = {n for n in dir(strict) if not n.startswith("_") and not hasattr(xp, n)}
    flags = {"ArrayAPIStrictFlags", "Device", "ModuleType", "get_array_api_strict_flags",
             "set_array_api_strict_flags", "reset_array_api_strict_flags"}  # fmt: skip
    assert missing <= flags, missing - flags


def test_tracer_members() -> None:
    def f(x):
        assert x.__array_namespace__() is xp
        assert x.__array_namespace__(api_version="2023.12") is xp
        assert x.device == "cpu" and x.to_device("cpu") is x
        return x

    vmapx.vmap(f)(M)


def test_unknown_api_version_and_device_are_refused() -> None:
    with pytest.raises(ValueError, match="api_version='1999.01'"):
        vmapx.vmap(lambda x: x.__array_namespace__(api_version="1999.01"))(M)
    with pytest.raises(ValueError, match="device 'gpu'"):
        vmapx.vmap(lambda x: x.to_device("gpu"))(M)


def test_array_api_compat_finds_the_namespace() -> None:
    compat = pytest.importorskip("array_api_compat")

    seen = []

    def f(x):
        seen.append((compat.array_namespace(x), compat.is_array_api_obj(x), compat.device(x)))
        return compat.array_namespace(x).tanh(x)

    vmapx.vmap(f)(M)
    assert seen == [(xp, True, "cpu")]
    check_vmap(f, [M])


def _run_with_env(code: str, **env: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=300, env={**os.environ, **env},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


LIBRARY_CHECK = """
    import sys, warnings
    sys.path.insert(0, {tests!r})
    import numpy as np
    import vmapx
    from passthrough_cases import cases
    {setup}
    batched = 0
    for name, f, args in cases():
        if not name.startswith({prefix!r}):
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = vmapx.vmap(f)(*args)
        want = np.stack([f(*ex) for ex in zip(*args)])
        assert np.allclose(got, want) and got.dtype == want.dtype, name
        batched += not any(w.category is vmapx.PerformanceWarning for w in caught)
    print(batched)
"""
TESTS = os.path.dirname(__file__)


def test_scipy_in_array_api_mode_gives_the_loops_answer() -> None:
    pytest.importorskip("scipy")
    code = LIBRARY_CHECK.format(tests=TESTS, setup="", prefix="scipy")
    assert int(_run_with_env(code, SCIPY_ARRAY_API="1")) >= 15


def test_sklearn_with_array_api_dispatch_gives_the_loops_answer() -> None:
    pytest.importorskip("sklearn")
    pytest.importorskip("array_api_compat")
    setup = "import sklearn; sklearn.set_config(array_api_dispatch=True)"
    code = LIBRARY_CHECK.format(tests=TESTS, setup=setup, prefix="sklearn")
    assert int(_run_with_env(code, SCIPY_ARRAY_API="1")) >= 4
