"""The one registry: no rule is replaced silently, every rule says where it came from,
and family defaults yield to a primitive's own rules in any order."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import vmapx
import vmapx.extend  # noqa: F401  (loads every rule vmapx registers)
from vmapx import _registry
from vmapx._registry import KINDS, Primitive, register, register_ufunc_defaults
from vmapx.errors import RegistrationError

PACKAGE_PARENT = os.path.dirname(os.path.dirname(vmapx.__file__))


def test_replacing_a_rule_is_refused_unless_asked():
    prim = Primitive("test_op", lambda x: x)
    register(prim, "batch", lambda trace, args, kwargs: None)
    with pytest.raises(RegistrationError, match=r"`test_op` already has a batch rule, "
                       r"registered at .*test_registry.py:\d+; this one is at "
                       r".*test_registry.py:\d+"):  # fmt: skip
        register(prim, "batch", lambda trace, args, kwargs: None)
    new = lambda trace, args, kwargs: 1  # noqa: E731
    register(prim, "batch", new, replace=True)  # meant: the test of `replace`
    assert prim.rules.batch is new


def test_unknown_kind():
    with pytest.raises(RegistrationError, match="unknown rule kind 'batching'"):
        register(Primitive("op", abs), "batching", abs)
    assert issubclass(RegistrationError, ValueError)


def test_importing_vmapx_replaces_no_rule():
    """Every registration vmapx makes at import goes through `register`, which raises on a
    replacement: a fresh import that succeeds replaced none (except where `replace=True`
    says why, which this lists: there is none in vmapx's own rules)."""
    code = (
        "import vmapx._registry as r\n"
        "calls = []\n"
        "orig = r.register\n"
        "def spy(func, kind, rule, *, replace=False, default=False):\n"
        "    if replace: calls.append((func, kind))\n"
        "    return orig(func, kind, rule, replace=replace, default=default)\n"
        "r.register = spy\n"
        "import vmapx\n"
        "print(len(calls))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"


def test_every_rule_has_a_source_line():
    count = 0
    for _key, prim in _registry.registered():
        rules = prim.rules
        for kind in KINDS:
            if getattr(rules, kind) is None:
                continue
            source = rules.sources[kind]
            path, line = source.rsplit(":", 1)
            full = path if os.path.isabs(path) else os.path.join(PACKAGE_PARENT, path)
            assert os.path.exists(full), source
            assert int(line) > 0
            count += 1
    assert count > 900


def test_an_ops_rules_are_listed_with_their_sources():
    rules = _registry.rules_of(np.matmul)
    assert rules.batch is not None and rules.jvp is not None and rules.vjp is not None
    assert rules.sources["batch"].startswith("vmapx/_numpy/contractions.py:")
    assert rules.sources["vjp"].startswith("vmapx/_numpy/contractions.py:")


def _new_ufunc():
    return np.frompyfunc(lambda a, b: a, 2, 1)


def test_family_defaults_yield_to_a_primitives_own_rule_in_any_order():
    own = lambda trace, args, kwargs: "own"  # noqa: E731
    # own rule first, then the primitive is created: the family default does not replace it
    early = _new_ufunc()
    register(early, "batch", own)
    assert _registry.prim_of(early).rules.batch is own
    # the primitive exists with the family default, then its own rule replaces it
    late = _new_ufunc()
    default = _registry.prim_of(late).rules.batch
    assert default is not None and "batch" in _registry.prim_of(late).rules.defaults
    register(late, "batch", own)
    assert _registry.prim_of(late).rules.batch is own
    assert "batch" not in _registry.prim_of(late).rules.defaults
    # but two own rules still conflict
    with pytest.raises(RegistrationError):
        register(late, "batch", own)


def test_two_family_defaults_of_one_kind_conflict():
    ufunc = _new_ufunc()
    _registry.prim_of(ufunc)  # created with the family's defaults

    def second_default(prim, uf, method):
        if uf is ufunc:
            register(prim, "batch", lambda trace, args, kwargs: None)

    with pytest.raises(RegistrationError, match="two family defaults"):
        register_ufunc_defaults(second_default)
    _registry._UFUNC_DEFAULTS.pop()  # the failing test hook must not stay


def test_new_ufunc_batches_by_the_family_default():
    ufunc = np.frompyfunc(lambda a, b: a * 2 + b, 2, 1)
    x = np.arange(6.0).reshape(2, 3).astype(object)
    got = vmapx.vmap(lambda a, b: ufunc(a, b))(x, x)
    np.testing.assert_array_equal(got, x * 2 + x)
