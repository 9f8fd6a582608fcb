"""The bounded run of vmapx's differential fuzzer (`tests/fuzzing`; the long run is
`make fuzz`), and checks that the fuzzer itself sees defects and prints reproducers."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import optree
import pytest

import vmapx
from fuzzing import checks as C
from fuzzing.ops import OPS
from fuzzing.programs import generate
from fuzzing.runner import Failure, report, reproducer, run_seeds, shrink
from np_compat import requires_numpy2

BLOCKS = 6
PER_BLOCK = 1000  # programs per block (deterministic seeds; 4-5 s of CPU a block)


@requires_numpy2(
    "the fuzzer's dtype checks: on NumPy 1.26 the loop promotes per-example NumPy scalars "
    "by value (np.float32 ** 0.5 is float64 there) where vmap keeps float32; see "
    "test_fuzz_found.test_numpy1_scalar_power_promotes_like_the_loop"
)
@pytest.mark.parametrize("block", range(BLOCKS))
def test_fuzz_block(block: int) -> None:
    seeds = range(block * PER_BLOCK, (block + 1) * PER_BLOCK)
    failures, _, n = run_seeds(seeds)
    assert n == PER_BLOCK
    assert not failures, "\n".join(report(f) for f in failures[:3])


def test_programs_are_reproducible_python_source() -> None:
    for seed in range(50):
        p = generate(seed)
        assert p.source() == generate(seed).source()
        compile(p.source(), "<program>", "exec")
        assert callable(p.compile())
    assert len(OPS) > 150


def _a_case() -> C.Case:
    for seed in range(100):
        case = C.make_case(generate(seed), seed)
        if case.size >= 2 and not case.program.has_gen and "raises" not in case.program.tags:
            return case
    raise AssertionError("no case")


def test_a_wrong_vmap_is_caught_and_reproduced(monkeypatch: pytest.MonkeyPatch) -> None:
    """A vmap whose results are off by one: the check fails, shrinks, and the reproducer
    is Python source that holds the program."""
    case = _a_case()
    real = vmapx.vmap

    def off_by_one(f, **options):  # noqa: ANN001, ANN202
        g = real(f, **options)
        return lambda *a: optree.tree_map(lambda x: x + 1, g(*a))

    monkeypatch.setattr(C.vmapx, "vmap", off_by_one)
    with C.policy(), pytest.raises(C.Mismatch) as caught:
        C.check_vmap(case)
    failure = shrink(Failure(case.seed, "vmap", caught.value, case), budget_s=5)
    assert len(failure.case.program.stmts) <= len(case.program.stmts)
    text = reproducer(failure)
    compile(text, "<reproducer>", "exec")
    assert failure.case.program.source() in text


def test_a_result_where_the_loop_raises_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    case = _a_case()
    raising = replace(case.program, stmts=(*case.program.stmts,),
                      outs=("undefined_name",))  # fmt: skip
    monkeypatch.setattr(C.vmapx, "vmap", lambda f, **o: lambda *a: np.zeros(2))
    with C.policy(), pytest.raises(C.Mismatch, match="no error"):
        C.check_vmap(replace(case, program=raising))
