"""The NumPy surface: importing this package registers every family's rules."""

from . import (  # noqa: F401
    _tracer_api,  # noqa: F401  (installs the array interface on tracers)
    creation,
    gather,
    indexing,
    joins,
    misc,
    reductions,
    setops,
    shapes,
    sorting,
    statistics,
    ufuncs,
)
