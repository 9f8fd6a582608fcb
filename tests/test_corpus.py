"""The corpus of real library functions (`vmapx.libraries.corpus`): every entry gives the
loop's answer under vmap, and what batches now keeps batching."""

from __future__ import annotations

import pytest

pytest.importorskip("scipy")
from vmapx.libraries import corpus  # noqa: E402

ENTRIES = corpus.entries()

# entries that run batched today, per library (a drop is a regression)
BATCHED_AT_LEAST = {
    "numpy.fft": 5, "numpy.polynomial": 5, "scipy.integrate": 2, "scipy.linalg": 15,
    "scipy.signal": 13, "scipy.spatial.distance": 20, "scipy.special": 62,
    "scipy.stats": 29, "user code": 4,
}  # fmt: skip


@pytest.fixture(scope="module")
def results():
    return [corpus.measure(e) for e in ENTRIES]


def test_the_corpus_is_large(results):
    assert len(results) >= 150


def test_every_entry_equals_the_loop(results):
    wrong = [(r["library"], r["name"], r["error"]) for r in results if not r["correct"]]
    assert wrong == []


def test_what_batches_keeps_batching(results):
    for lib, floor in BATCHED_AT_LEAST.items():
        batched = sum(r["batched"] for r in results if r["library"] == lib)
        assert batched >= floor, (lib, batched, floor)
