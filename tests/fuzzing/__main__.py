"""The long fuzz run (`make fuzz`): `python -m fuzzing` from `tests/`.

Environment: `VMAPX_FUZZ_SECONDS` (default 60) and `VMAPX_FUZZ_SEED` (default: a random
seed, printed). Each failure is shrunk and printed with a reproducer; alike failures are
printed once. Exits 1 when anything failed.
"""

from __future__ import annotations

import os
import sys
import time

from fuzzing.ops import OPS
from fuzzing.runner import STATS, report, run_seed, shrink


def main() -> int:
    seconds = float(os.environ.get("VMAPX_FUZZ_SECONDS", "60"))
    seed = int(os.environ.get("VMAPX_FUZZ_SEED") or int.from_bytes(os.urandom(4), "little"))
    print(f"vmapx fuzz: seed {seed}, {seconds:g} s, {len(OPS)} op-table entries", flush=True)
    deadline = time.monotonic() + seconds
    seen: dict[str, int] = {}
    refusals: dict[str, int] = {}
    n = 0
    start = time.monotonic()
    while time.monotonic() < deadline:
        program_seed = seed * 1_000_003 + n
        failures, refused = run_seed(program_seed)
        n += 1
        for _, message in refused:
            refusals[message[:120]] = refusals.get(message[:120], 0) + 1
        for failure in failures:
            key = failure.key()
            seen[key] = seen.get(key, 0) + 1
            if seen[key] == 1:
                print(report(shrink(failure)), flush=True)
    elapsed = time.monotonic() - start
    print(f"{n} programs in {elapsed:.1f} s ({n / elapsed:.1f}/s); checks run: {STATS}")
    print(
        f"{len(seen)} distinct failures ({sum(seen.values())} in all); "
        f"{len(refusals)} distinct refusals ({sum(refusals.values())} in all)"
    )
    for message, count in sorted(refusals.items(), key=lambda kv: -kv[1]):
        print(f"  refusal x{count}: {message}")
    print(f"seed {seed}")
    return 1 if seen else 0


if __name__ == "__main__":
    sys.exit(main())
