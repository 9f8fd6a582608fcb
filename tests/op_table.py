"""The op table: one row per NumPy operation, driving every systematic test.

A row gives the per-example function, the per-example shapes and dtypes of its
arguments, the input domain, and whether it is differentiable. `tests/test_ops.py`
runs each row through vmap-vs-loop over every in_axes placement, batch sizes 0/1/3,
and nested vmap; the autodiff tests run the differentiable rows through check_grads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.testing.overrides import get_overridable_numpy_ufuncs

import op_table_contractions
import op_table_indexing
import op_table_shapes
import op_table_stats
from np_compat import NUMPY2, np2
from op_spec import Op, _random  # noqa: F401

# -- ufuncs: generated from NumPy's own list ------------------------------------------

_UFUNC_DOMAINS = {
    "arccosh": (1.1, 3.0),
    "arccos": (0.1, 0.9),
    "arcsin": (0.1, 0.9),
    "arctanh": (0.1, 0.9),
    "log": (0.2, 2.0),
    "log2": (0.2, 2.0),
    "log10": (0.2, 2.0),
    "log1p": (0.2, 2.0),
    "sqrt": (0.2, 2.0),
    "reciprocal": (0.5, 2.0),
    "power": (0.5, 2.0),
    "float_power": (0.5, 2.0),
    "divide": (0.5, 2.0),
    "true_divide": (0.5, 2.0),
    "floor_divide": (0.5, 2.0),
    "remainder": (0.5, 2.0),
    "mod": (0.5, 2.0),
    "fmod": (0.5, 2.0),
    "divmod": (0.5, 2.0),
    "left_shift": (0, 4),
    "right_shift": (0, 4),
    "ldexp": (0, 4),
}
_NON_DIFF = {
    "sign", "floor", "ceil", "trunc", "rint", "fix", "isnan", "isinf", "isfinite", "signbit",
    "floor_divide", "remainder", "mod", "fmod", "divmod", "spacing", "nextafter", "heaviside",
    "frexp", "modf", "ldexp", "copysign", "logical_and", "logical_or", "logical_xor",
    "logical_not", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "isnat", "conjugate", "conj",
}  # fmt: skip


def _ufunc_types(ufunc: np.ufunc) -> str | None:
    """The input type codes to test a ufunc with: float64 where it has a loop."""
    ins = [t.split("->")[0] for t in ufunc.types]
    for want in ("d" * ufunc.nin, None):
        for t in ins:
            if (want is not None and t == want) or (want is None and "d" in t):
                return t
    for t in ins:
        if t in ("l" * ufunc.nin, "?" * ufunc.nin, "q" * ufunc.nin):
            return t
    return None


def _ufunc_ops() -> list[Op]:
    ops = []
    for u in sorted(get_overridable_numpy_ufuncs(), key=lambda u: u.__name__):
        if u.signature is not None or u.__name__ == "isnat":
            continue
        types = _ufunc_types(u)
        if types is None:
            continue
        dtypes = tuple(np.dtype(c).name for c in types)
        shapes = ((3, 4), (4,), (2, 1, 4))[: u.nin]
        domain = _UFUNC_DOMAINS.get(u.__name__, (0.1, 0.9) if "d" in types else (-3, 3))
        if "d" not in types and u.__name__ not in ("left_shift", "right_shift"):
            domain = (1, 5) if u.__name__ in ("gcd", "lcm", "floor_divide", "remainder",
                                               "fmod", "divmod") else domain  # fmt: skip
        ops.append(Op(f"ufunc.{u.__name__}", u, shapes, dtypes, domain,
                      diff="d" in types and u.__name__ not in _NON_DIFF, covers=(u,)))  # fmt: skip
    return ops


def _reduce_ops() -> list[Op]:
    ops = []
    for name in ("add", "multiply", "maximum", "minimum", "logaddexp"):
        u = getattr(np, name)
        ops += [
            Op(f"{name}.reduce", lambda x, u=u: u.reduce(x, axis=1), ((3, 4),), domain=(0.5, 2)),
            Op(
                f"{name}.reduce_all",
                lambda x, u=u: u.reduce(x, axis=None),
                ((3, 4),),
                domain=(0.5, 2),
            ),  # fmt: skip
            Op(
                f"{name}.accumulate",
                lambda x, u=u: u.accumulate(x, axis=-1),
                ((3, 4),),
                domain=(0.5, 2),
            ),  # fmt: skip
            Op(f"{name}.outer", lambda x, y, u=u: u.outer(x, y), ((3,), (2, 2)), domain=(0.5, 2)),
        ]
    ops += [
        Op(
            "add.reduce_where",
            lambda x, w: np.add.reduce(x, axis=0, where=w),
            ((3, 4), (4,)),
            ("float64", "bool"),
            diff=False,
        ),  # fmt: skip
        Op("add.reduceat", lambda x: np.add.reduceat(x, [0, 2, 3], axis=1), ((3, 5),)),
        Op("add.at", _add_at, ((5,), (3,)), diff=False, needs_batched=(0,)),
    ]
    return ops


def _add_at(x: Any, v: Any) -> Any:
    x = x.copy()
    np.add.at(x, np.array([0, 2, 0]), v)
    return x


def _axis_reductions() -> list[Op]:
    ops = []
    for f in (np.sum, np.prod, np.max, np.min, np.mean, np.std, np.var, np.ptp, np.amax,
              np.amin, np.nansum, np.nanprod, np.nanmax, np.nanmin, np.nanmean, np.nanstd,
              np.nanvar):  # fmt: skip
        diff = f not in (np.ptp,)
        ops += [
            Op(f"{f.__name__}", f, ((3, 4),), covers=(f,), diff=diff),
            Op(f"{f.__name__}.axis0", lambda x, f=f: f(x, axis=0), ((3, 4),), diff=diff),
            Op(
                f"{f.__name__}.axis-1.keepdims",
                lambda x, f=f: f(x, axis=-1, keepdims=True),
                ((2, 3, 4),),
                diff=diff,
            ),  # fmt: skip
            Op(f"{f.__name__}.axes", lambda x, f=f: f(x, axis=(0, 2)), ((2, 3, 4),), diff=diff),
        ]
    for f in (np.argmax, np.argmin, np.nanargmax, np.nanargmin):
        ops += [
            Op(f"{f.__name__}", f, ((3, 4),), diff=False, covers=(f,)),
            Op(f"{f.__name__}.axis1", lambda x, f=f: f(x, axis=1), ((3, 4),), diff=False),
        ]
    for f in (np.cumsum, np.cumprod, np.nancumsum, np.nancumprod):
        ops += [
            Op(f"{f.__name__}", f, ((3, 4),), covers=(f,)),
            Op(f"{f.__name__}.axis0", lambda x, f=f: f(x, axis=0), ((3, 4),)),
        ]
    for f in (np.all, np.any, np.count_nonzero):
        ops += [
            Op(f"{f.__name__}", f, ((3, 4),), ("bool",), diff=False, covers=(f,)),
            Op(
                f"{f.__name__}.axis1", lambda x, f=f: f(x, axis=1), ((3, 4),), ("bool",), diff=False
            ),  # fmt: skip
        ]
    ops += [
        Op(
            "cumulative_sum",
            lambda x: np2.cumulative_sum(x, axis=1, include_initial=True),
            ((3, 4),),
            covers=(np2.cumulative_sum,),
        ),  # fmt: skip
        Op(
            "cumulative_prod",
            lambda x: np2.cumulative_prod(x, axis=0),
            ((3, 4),),
            covers=(np2.cumulative_prod,),
        ),  # fmt: skip
        Op(
            "sum.where",
            lambda x, w: np.sum(x, where=w),
            ((3, 4), (4,)),
            ("float64", "bool"),
            diff=False,
        ),  # fmt: skip
        Op(
            "sum.where_axis",
            lambda x, w: np.sum(x, axis=1, where=w),
            ((3, 4), (3, 4)),
            ("float64", "bool"),
            diff=False,
        ),  # fmt: skip
    ]
    return ops


def _shape_ops() -> list[Op]:
    return [
        Op("reshape", lambda x: np.reshape(x, (4, -1)), ((3, 4),), covers=(np.reshape,)),
        Op("method.reshape", lambda x: x.reshape(2, 6), ((3, 4),)),
        Op("ravel", np.ravel, ((3, 4),), covers=(np.ravel,)),
        Op("method.flatten", lambda x: x.flatten(), ((3, 4),)),
        Op("transpose", np.transpose, ((2, 3, 4),), covers=(np.transpose,)),
        Op("transpose.axes", lambda x: np.transpose(x, (1, 2, 0)), ((2, 3, 4),)),
        Op("method.T", lambda x: x.T, ((3, 4),)),
        Op("moveaxis", lambda x: np.moveaxis(x, 0, -1), ((2, 3, 4),), covers=(np.moveaxis,)),
        Op("swapaxes", lambda x: np.swapaxes(x, 0, 2), ((2, 3, 4),), covers=(np.swapaxes,)),
        Op("squeeze", np.squeeze, ((1, 3, 1),), covers=(np.squeeze,)),
        Op("squeeze.axis", lambda x: np.squeeze(x, axis=-1), ((1, 3, 1),)),
        Op(
            "expand_dims", lambda x: np.expand_dims(x, (0, -1)), ((3,),), covers=(np.expand_dims,)
        ),  # fmt: skip
        Op("copy", np.copy, ((3,),), covers=(np.copy,)),
        Op(
            "astype", lambda x: np2.astype(x, np.float32), ((3,),), diff=False, covers=(np2.astype,)
        ),  # fmt: skip
        Op("method.astype", lambda x: x.astype(np.int64), ((3,),), diff=False),
        Op("real", np.real, ((3,),), ("complex128",), diff=False, covers=(np.real,)),
        Op("imag", np.imag, ((3,),), ("complex128",), diff=False, covers=(np.imag,)),
        Op(
            "shape_meta",
            lambda x: np.zeros(np.shape(x)) + np.ndim(x) + np.size(x),
            ((2, 3),),
            covers=(np.shape, np.ndim, np.size),
        ),  # fmt: skip
        Op(
            "concatenate",
            lambda x, y: np.concatenate([x, y], axis=-1),
            ((3, 2), (3, 4)),
            covers=(np.concatenate,),
        ),  # fmt: skip
        Op(
            "concatenate.none", lambda x, y: np.concatenate([x, y], axis=None), ((3, 2), (4,))
        ),  # fmt: skip
        Op(
            "stack", lambda x, y: np.stack([x, y], axis=1), ((3, 2), (3, 2)), covers=(np.stack,)
        ),  # fmt: skip
        Op("zeros_like", lambda x: np.zeros_like(x) + 1, ((3,),), covers=(np.zeros_like,)),
        Op("ones_like", lambda x: np.ones_like(x, shape=(2,)), ((3,),), covers=(np.ones_like,)),
        Op(
            "full_like",
            lambda x, v: np.full_like(x, v),
            ((3,), ()),
            covers=(np.full_like,),
            needs_batched=(0,),
        ),  # fmt: skip
        Op("empty_like.fill", _empty_like_fill, ((3,),), covers=(np.empty_like,)),
    ]


def _empty_like_fill(x: Any) -> Any:
    out = np.empty_like(x)
    out[:] = x * 2
    return out


def _index_ops() -> list[Op]:
    idx = np.array([2, 0, 2])
    return [
        Op("getitem.int", lambda x: x[1], ((3, 4),)),
        Op("getitem.slice", lambda x: x[1:, ::2], ((3, 4),)),
        Op("getitem.none_ellipsis", lambda x: x[None, ..., 1], ((3, 4),)),
        Op("getitem.array", lambda x: x[idx], ((3, 4),)),
        Op("getitem.array_second", lambda x: x[:, idx], ((3, 4),)),
        Op("getitem.separated", lambda x: x[idx, :, idx], ((3, 4, 3),)),
        Op("getitem.mask_fixed", lambda x: x[np.array([True, False, True])], ((3, 4),)),
        Op(
            "getitem.batched_index",
            lambda x, i: x[i],
            ((3, 4), ()),
            ("float64", "int64"),
            domain=(0, 2),
            needs_batched=(0,),
        ),  # fmt: skip
        Op(
            "getitem.batched_index_second",
            lambda x, i: x[:, i],
            ((3, 4), (2,)),
            ("float64", "int64"),
            domain=(0, 2),
            needs_batched=(0,),
        ),  # fmt: skip
        Op(
            "getitem.batched_two",
            lambda x, i, j: x[i, :, j],
            ((3, 4, 3), (2,), (2,)),
            ("float64", "int64", "int64"),
            domain=(0, 2),
            needs_batched=(0,),
        ),  # fmt: skip
        Op(
            "getitem.batched_adjacent",
            lambda x, i, j: x[:, i, j],
            ((2, 3, 3), (2,), ()),
            ("float64", "int64", "int64"),
            domain=(0, 2),
            needs_batched=(0,),
        ),  # fmt: skip
        Op("setitem.int", _set(lambda x, v: (1, v)), ((3, 4), (4,)), needs_batched=(0,)),
        Op(
            "setitem.slice",
            _set(lambda x, v: ((slice(None), slice(1, 3)), v[:2])),
            ((3, 4), (4,)),
            needs_batched=(0,),
        ),  # fmt: skip
        Op(
            "setitem.scalar", _set(lambda x, v: ((0, 0), v[0])), ((3, 4), (4,)), needs_batched=(0,)
        ),  # fmt: skip
        Op("setitem.array", _set(lambda x, v: (idx[:2], v)), ((3, 4), (4,)), needs_batched=(0,)),
        Op(
            "setitem.array_second",
            _set(lambda x, v: ((slice(None), idx), v[:3])),
            ((3, 4), (4,)),
            needs_batched=(0,),
        ),  # fmt: skip
        Op(
            "setitem.batched_index",
            _set_at,
            ((3, 4), (), (4,)),
            ("float64", "int64", "float64"),
            domain=(0, 2),
            diff=False,
            needs_batched=(0,),
        ),  # fmt: skip
        Op("setitem.mask", _set_mask, ((3, 4),)),
        Op("iadd", _iadd, ((3,), (3,)), needs_batched=(0,)),
    ]


def _set(make: Callable) -> Callable:
    def f(x: Any, v: Any) -> Any:
        x = x.copy()
        i, val = make(x, v)
        x[i] = val
        return x

    return f


def _set_at(x: Any, i: Any, v: Any) -> Any:
    x = x.copy()
    x[i] = v
    return x


def _set_mask(x: Any) -> Any:
    x = x.copy()
    x[x < 0] = 0.0
    return x


def _iadd(x: Any, y: Any) -> Any:
    z = x * 1.0
    z += y
    z *= 2
    return z


def _gufunc_ops() -> list[Op]:
    return [
        Op("matmul.mm", np.matmul, ((2, 3), (3, 4)), covers=(np.matmul,)),
        Op("matmul.mv", np.matmul, ((2, 3), (3,))),
        Op("matmul.vm", np.matmul, ((3,), (3, 4))),
        Op("matmul.vv", np.matmul, ((3,), (3,))),
        Op("matmul.stacked", np.matmul, ((2, 2, 3), (3, 4))),
        Op("operator.matmul", lambda a, b: a @ b, ((2, 3), (3,))),
        Op("vecdot", np2.vecdot, ((2, 3), (3,)), covers=(np2.vecdot,)),
        Op("matvec", np2.matvec, ((2, 3), (3,)), covers=(np2.matvec,)),
        Op("vecmat", np2.vecmat, ((3,), (3, 4)), covers=(np2.vecmat,)),
        Op(
            "matmul.axes",
            lambda a, b: np.matmul(a, b, axes=[(1, 0), (1, 0), (0, 1)]),
            ((2, 3), (4, 2)),
        ),  # fmt: skip
    ]


# variable-width strings are NumPy 2; the string rows need it (np.strings) anyway
_S = np.dtypes.StringDType() if NUMPY2 else np.dtype("U")
_WORDS = np.array(["ab\tc", " cde ", "xy", "zz z", "q1", "ABC", "12", " "], dtype=_S)


def _words(shape: tuple[int, ...], dtype: object = _S) -> Callable:
    def make(rng: np.random.Generator) -> list:
        return [rng.choice(_WORDS, size=shape).astype(dtype)]

    return make


def _string_ops() -> list[Op]:
    """String ufuncs, called directly (the private ones are what `np.strings` uses)."""
    um, i64 = np2._core.umath, np.int64
    ch = lambda c: np.array(c, dtype=_S)  # noqa: E731
    calls = {
        "_center": lambda a: um._center(a, i64(7), ch("*")),
        "_ljust": lambda a: um._ljust(a, i64(7), ch("*")),
        "_rjust": lambda a: um._rjust(a, i64(7), ch("*")),
        "_zfill": lambda a: um._zfill(a, i64(7)),
        "_expandtabs": lambda a: um._expandtabs(a, i64(4)),
        "_lstrip_chars": lambda a: um._lstrip_chars(a, ch("a ")),
        "_rstrip_chars": lambda a: um._rstrip_chars(a, ch("c ")),
        "_strip_chars": lambda a: um._strip_chars(a, ch("c ")),
        "_lstrip_whitespace": um._lstrip_whitespace,
        "_rstrip_whitespace": um._rstrip_whitespace,
        "_strip_whitespace": um._strip_whitespace,
        "_partition": lambda a: um._partition(a, ch("c")),
        "_rpartition": lambda a: um._rpartition(a, ch("c")),
        "_replace": lambda a: um._replace(a, ch("c"), ch("QQ"), i64(-1)),
        "_slice": lambda a: um._slice(a, i64(0), i64(2), i64(1)),
        "str_len": um.str_len,
    }
    for name in ("count", "find", "rfind", "startswith", "endswith"):
        calls[name] = (lambda u: lambda a: u(a, ch("z"), i64(0), i64(10)))(getattr(um, name))
    for name in ("index", "rindex"):
        calls[name] = (lambda u: lambda a: u(a, ch(""), i64(0), i64(10)))(getattr(um, name))
    for name in ("isalnum", "isalpha", "isdecimal", "isdigit", "islower", "isnumeric",
                 "isspace", "istitle", "isupper"):  # fmt: skip
        calls[name] = getattr(um, name)
    ops = [Op(f"strings.{n}", f, ((2, 3),), diff=False, make=_words((2, 3)),
              covers=(getattr(um, n),)) for n, f in calls.items()]  # fmt: skip
    ops.append(Op("strings._expandtabs_length", lambda a: um._expandtabs_length(a, i64(4)),
                  ((2, 3),), diff=False, make=_words((2, 3), "U5"),
                  covers=(um._expandtabs_length,)))  # fmt: skip
    st = np2.strings
    public = {
        "center": lambda a: st.center(a, 9, "*"),
        "ljust": lambda a: st.ljust(a, 7),
        "rjust": lambda a: st.rjust(a, 7, "-"),
        "replace": lambda a: st.replace(a, "z", "yy"),
        "partition": lambda a: st.partition(a, "c"),
        "rpartition": lambda a: st.rpartition(a, "z"),
        "zfill": lambda a: st.zfill(a, 6),
        "add": lambda a: st.add(a, a),
        "multiply": lambda a: st.multiply(a, 3),
        "mod": lambda a: st.mod(st.add("%s", a), "!"),
        "expandtabs": lambda a: st.expandtabs(a, 2),
        "translate": lambda a: st.translate(a, str.maketrans("az", "AZ")),
        "encode": lambda a: st.decode(st.encode(a)),
    }
    for name in ("upper", "lower", "capitalize", "swapcase", "title", "str_len"):
        public[name] = getattr(st, name)
    for name, fn in public.items():
        covers = (st.encode, st.decode) if name == "encode" else (getattr(st, name),)
        ops.append(Op(f"np.strings.{name}", fn, ((2, 3),), diff=False,
                      make=_words((2, 3), "U5"), covers=covers, data_dtype=True))  # fmt: skip
    return ops


def _misc_ops() -> list[Op]:
    from numpy.lib import scimath
    from numpy.lib.stride_tricks import sliding_window_view

    def dates(rng: np.random.Generator) -> list:
        days = rng.integers(0, 1000, size=(4,)).astype("datetime64[D]")
        days[rng.integers(0, 4)] = np.datetime64("NaT")
        return [days]

    def copy_into(x: Any) -> Any:
        out = np.zeros_like(x)
        np.copyto(out, x * 2, where=x > 0)
        return out

    ops = [
        Op("isnat", np.isnat, ((4,),), diff=False, make=dates, covers=(np.isnat,)),
        Op("copyto", copy_into, ((3, 4),), diff=False, covers=(np.copyto,)),
        Op(
            "copyto.src_batched",
            lambda x, y: _copy_src(x, y),
            ((3,), (3,)),
            diff=False,
            needs_batched=(0,),
        ),
        Op(
            "sliding_window_view",
            lambda x: sliding_window_view(x, 2),
            ((5,),),
            covers=(sliding_window_view,),
        ),  # fmt: skip
        Op(
            "sliding_window_view.axis",
            lambda x: sliding_window_view(x, (2, 2), axis=(1, 0)),
            ((3, 4),),
        ),  # fmt: skip
    ]
    # real results here; complex-for-some-examples is tested in test_coverage.py
    for f in (scimath.sqrt, scimath.log, scimath.log2, scimath.log10, scimath.arccos,
              scimath.arcsin, scimath.arctanh):  # fmt: skip
        ops.append(Op(f"emath.{f.__name__}", f, ((3,),), domain=(0.1, 0.9), diff=False,
                      covers=(f,)))  # fmt: skip
    ops.append(Op("emath.power", scimath.power, ((3,), (3,)), domain=(0.1, 2.0), diff=False,
                  covers=(scimath.power,)))  # fmt: skip
    like = [
        ("eye", lambda x: np.eye(3, like=x) @ x),
        ("identity", lambda x: np.identity(3, like=x) @ x),
        ("ones", lambda x: np.ones(3, like=x) * x),
        ("tri", lambda x: np.tri(3, like=x) @ x),
        ("full", lambda x: np.full(3, 2.0, like=x) * x),
        ("fromfunction", lambda x: np.fromfunction(lambda i: i * 1.0, (3,), like=x) + x),
        ("require", lambda x: np.require(np.ones(3), like=x) + x),
    ]
    for name, fn in like:  # `like=` is all NumPy dispatches on: the result is plain
        ops.append(Op(f"like.{name}", fn, ((3,),), diff=False, covers=(getattr(np, name),)))
    ops.append(Op("emath.logn", scimath.logn, ((3,), (3,)), domain=(0.5, 2.0), diff=False,
                  covers=(scimath.logn,)))  # fmt: skip
    return ops


def _copy_src(x: Any, y: Any) -> Any:
    out = np.zeros_like(x)
    np.copyto(out, y)
    return out


OPS: list[Op] = [
    *_ufunc_ops(),
    *_reduce_ops(),
    *_axis_reductions(),
    *_shape_ops(),
    *_index_ops(),
    *_gufunc_ops(),
    *_string_ops(),
    *_misc_ops(),
    # one file per family keeps rows next to each other without edit conflicts
    *op_table_shapes.OPS,  # shapes, joins, splits, creation
    *op_table_contractions.OPS,  # contractions, linalg, fft
    *op_table_indexing.OPS,  # gather/scatter, set functions, sorting
    *op_table_stats.OPS,  # statistics, polynomials, misc numerics
]
