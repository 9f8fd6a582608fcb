"""vmapx's differential fuzzer: random per-example NumPy programs, checked transform by
transform against the plain Python loop (and derivatives against finite differences).

- `ops`: the op table; each entry writes one statement of a program.
- `programs`: a `Program` (printable as plain Python source) and its random generation.
- `checks`: the differential checks (vmap, nested, chunked, jit, grad, random, threads).
- `runner`: runs seeds, shrinks failures to small reproducers; `python -m fuzzing`
  (`make fuzz`) is the long run.
"""
