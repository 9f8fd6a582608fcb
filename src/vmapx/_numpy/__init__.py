"""The NumPy surface: importing this package registers every family's rules."""

from . import (  # noqa: F401
    _tracer_api,  # noqa: F401  (installs the array interface on tracers)
    contractions,
    creation,
    elementwise,
    fft,
    gather,
    indexing,
    joins,
    linalg,
    misc,
    reductions,
    setops,
    shapes,
    sorting,
    statistics,
    ufuncs,
)
