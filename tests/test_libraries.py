"""Library adapters (`vmapx.libraries`): scipy.special derivatives against finite
differences; adapted SciPy / numpy.polynomial functions against the loop."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import vmapx
from harness import check_vmap
from vmapx.errors import DifferentiationError

sc = pytest.importorskip("scipy.special")
sl = pytest.importorskip("scipy.linalg")
ss = pytest.importorskip("scipy.signal")
sd = pytest.importorskip("scipy.spatial.distance")
si = pytest.importorskip("scipy.integrate")
stats = pytest.importorskip("scipy.stats")
P = np.polynomial.polynomial
special = pytest.importorskip("vmapx.libraries.scipy_special")

_DOMAIN = (
    dict.fromkeys("logit erfinv ndtri ellipk ellipe".split(), (0.1, 0.9))
    | dict.fromkeys(
        "gammainc gammaincc entr cbrt expi exp1 boxcox boxcox1p xlogy xlog1py rel_entr kl_div "
        "beta betaln gammaln gamma rgamma digamma y0 y1 yv k0 k1 k0e k1e kv kve pseudo_huber "
        "huber i0e i1e log1p".split(),
        (0.3, 2.0),
    )
    | {"erfcinv": (0.1, 1.9)}
)
_ORDER_FIRST = {"iv", "ive", "jv", "yv", "kv", "kve", "gammainc", "gammaincc"}  # (order, x)
_ORDER_LAST = {"boxcox", "boxcox1p"}  # (x, lmbda)


@pytest.mark.parametrize("name", special.DIFFERENTIATED)
def test_scipy_special_derivatives_match_finite_differences(name):
    u = getattr(sc, name)
    lo, hi = _DOMAIN.get(name, (-1.5, 1.5))
    x = np.random.default_rng(0).uniform(lo, hi, (3, 4))
    if name in _ORDER_FIRST:
        f = lambda x: np.sum(u(1.3, x))  # noqa: E731
    elif name in _ORDER_LAST:
        f = lambda x: np.sum(u(x, 0.7))  # noqa: E731
    elif u.nin == 2:
        f = lambda x: np.sum(u(x, x[::-1] + 0.1))  # noqa: E731
    else:
        f = lambda x: np.sum(u(x))  # noqa: E731
    vmapx.check_grads(f, (x[0],), order=2)
    check_vmap(vmapx.grad(f), (x,))


def test_an_order_argument_is_not_given_a_zero_derivative():
    for transform in (vmapx.grad, vmapx.jacfwd):
        with pytest.raises(DifferentiationError, match=r"scipy\.special\.jv.*argument 0"):
            transform(lambda v: sc.jv(v, 1.0))(1.5)


RNG = np.random.default_rng(1)
_M = RNG.normal(size=(4, 3, 3))
SPD = _M @ np.swapaxes(_M, 1, 2) + 3 * np.eye(3)
VEC = RNG.normal(size=(4, 3))
PTS = RNG.normal(size=(4, 5, 3))
SIG = RNG.normal(size=(4, 32))

ADAPTED = {
    "linalg.solve": (sl.solve, (SPD, VEC)),
    "linalg.solve pos": (lambda a, b: sl.solve(np.triu(a), b, assume_a="pos"), (SPD, VEC)),
    "linalg.inv": (sl.inv, (SPD,)),
    "linalg.det": (sl.det, (SPD,)),
    "linalg.cholesky": (sl.cholesky, (SPD,)),
    "linalg.cho_solve": (lambda a, b: sl.cho_solve(sl.cho_factor(a), b), (SPD, VEC)),
    "linalg.cho_factor": (lambda a: sl.cho_factor(a, lower=True)[0], (SPD,)),
    "linalg.solve_triangular": (lambda a, b: sl.solve_triangular(a, b, lower=True), (SPD, VEC)),
    "linalg.eigh": (lambda a: sl.eigh(a)[0], (SPD,)),
    "linalg.svdvals": (sl.svdvals, (SPD,)),
    "linalg.norm": (sl.norm, (SPD,)),
    "linalg.expm": (sl.expm, (SPD / 10,)),
    "linalg.lu_factor": (lambda a: sl.lu_factor(a), (SPD,)),
    "distance.cdist": (sd.cdist, (PTS, PTS[::-1])),
    "distance.cdist cosine": (lambda x: sd.cdist(x, x, "cosine"), (PTS,)),
    "distance.pdist": (lambda x: sd.pdist(x, "cityblock"), (PTS,)),
    "distance.squareform": (lambda x: sd.squareform(sd.pdist(x)), (PTS,)),
    "distance.euclidean": (sd.euclidean, (VEC, VEC[::-1])),
    "distance.correlation": (sd.correlation, (VEC, VEC[::-1])),
    "signal.lfilter": (lambda y: ss.lfilter([1, 0.5], [1, -0.2], y), (SIG,)),
    "signal.filtfilt": (lambda y: ss.filtfilt([1, 0.5], [1, -0.2], y), (SIG,)),
    "signal.savgol_filter": (lambda y: ss.savgol_filter(y, 5, 2), (SIG,)),
    "signal.welch": (lambda y: ss.welch(y, nperseg=8), (SIG,)),
    "signal.detrend": (ss.detrend, (SIG,)),
    "signal.convolve": (lambda y: ss.convolve(y, np.ones(3) / 3, mode="same"), (SIG,)),
    "signal.correlate": (lambda y, k: ss.correlate(y, k), (SIG, VEC)),
    "integrate.trapezoid": (si.trapezoid, (SIG,)),
    "integrate.cumulative_trapezoid": (lambda y: si.cumulative_trapezoid(y, initial=0), (SIG,)),
    "polynomial.polyfit": (lambda y: P.polyfit(np.linspace(0, 1, 32), y, 3), (SIG,)),
    "polynomial.polyval": (lambda c: P.polyval(0.3, c), (VEC,)),
    "special.logsumexp": (sc.logsumexp, (SIG,)),
    "special.softmax": (sc.softmax, (SIG,)),
    "special.polygamma": (lambda x: sc.polygamma(1, x), (np.abs(VEC) + 1,)),
}


@pytest.mark.parametrize("name", ADAPTED)
def test_adapted_functions_batch_like_the_loop(name):
    f, args = ADAPTED[name]
    check_vmap(f, args)  # (a PerformanceWarning would fail: warnings are errors here)


DIFFERENTIABLE = {
    "logsumexp": sc.logsumexp,
    "log_softmax": lambda y: sc.log_softmax(y)[1:3],
    "softmax": lambda y: sc.softmax(y)[0],
    "norm.logpdf": lambda y: stats.norm.logpdf(y[:3], 0.5, 2.0),
    "linalg.solve": lambda y: sl.solve(SPD[0], y[:3]),
    "linalg.cholesky": lambda y: sl.cholesky(SPD[0] + np.diag(y[:3] ** 2)),
    "distance.cdist": lambda y: sd.cdist(y[:6].reshape(2, 3), PTS[0]),
    "integrate.trapezoid": si.trapezoid,
}


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_adapted_functions_differentiate(name):
    f = DIFFERENTIABLE[name]
    loss = lambda y: np.sum(f(y) ** 2)  # noqa: E731
    vmapx.check_grads(loss, (SIG[0],), order=2)
    check_vmap(vmapx.grad(loss), (SIG,))


def test_plain_calls_reach_the_library_and_uninstall_restores_it():
    import vmapx.libraries as libraries

    assert "scipy.linalg" in libraries.installed()
    adapter = sl.solve
    assert adapter.__wrapped__(SPD[0], VEC[0]) is not None  # (the library's own function)
    np.testing.assert_array_equal(sl.solve(SPD[0], VEC[0]), adapter.__wrapped__(SPD[0], VEC[0]))
    libraries.uninstall()
    try:
        assert sl.solve is adapter.__wrapped__
        with pytest.warns(vmapx.PerformanceWarning):
            vmapx.vmap(sl.solve)(SPD, VEC)
    finally:
        libraries.install()
    assert sl.solve is not adapter.__wrapped__ and type(sl.solve) is type(adapter)


@pytest.mark.parametrize("name", ["welch", "periodogram"])
def test_a_user_function_given_to_the_library_sees_one_example(name):
    """`detrend=callable` is applied by SciPy to the data: one library call on the whole
    batch would hand it every example at once (a mean over the batch, not the example)."""
    options = {"welch": {"nperseg": 8}, "periodogram": {}}[name]
    fun = functools.partial(getattr(ss, name), **options)
    signals = SIG + 10 * np.arange(len(SIG))[:, None]  # (examples with different means)

    def f(y):
        return fun(y, detrend=lambda seg: seg - seg.mean())[1]

    with pytest.warns(vmapx.PerformanceWarning, match="once per example"):
        check_vmap(f, (signals,))  # (the library, one example at a time)
