"""`vmap` passes keyword arguments whole (as torch.func.vmap); a keyword argument that
looks like a batch gets a `KeywordArgumentWarning`, once per vmapped function."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from vmapx import vmap
from vmapx.errors import KeywordArgumentWarning

X = np.arange(12.0).reshape(4, 3)


def test_a_batch_sized_keyword_argument_is_passed_whole_with_a_notice():
    f = vmap(lambda x, y: x + y.sum())
    with pytest.warns(KeywordArgumentWarning, match=r"keyword argument `y`.*batch size \(4\)"):
        got = f(X, y=X)
    # the semantics: y is the whole batch in every example (the loop passing y whole)
    np.testing.assert_array_equal(got, np.stack([x + X.sum() for x in X]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(X, y=X)  # once per vmapped function


def test_the_notice_points_at_the_callers_line():
    with pytest.warns(KeywordArgumentWarning) as record:
        vmap(lambda x, y: x * y)(X, y=np.ones((4, 1)))
    assert record[0].filename == __file__


@pytest.mark.parametrize(
    "kwargs",
    [{"scale": 2.0}, {"w": np.ones(3)}, {"w": np.ones((3, 4))}, {"opts": {"n": 4}}],
)
def test_keyword_arguments_that_do_not_look_like_the_batch_pass_silently(kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vmap(lambda x, **kw: x)(X, **kwargs)


def test_a_batch_of_one_is_not_noticed():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vmap(lambda x, y: x + y.sum())(X[:1], y=X[:1])


def test_pytree_keyword_arguments_are_looked_into():
    with pytest.warns(KeywordArgumentWarning, match="`params`"):
        vmap(lambda x, params: x)(X, params={"a": np.ones(2), "b": np.ones((4, 2))})
