"""The NumPy surface: importing this package registers every family's rules."""

from . import (  # noqa: F401
    _tracer_api,  # noqa: F401  (installs the array interface on tracers)
    array_api,  # (installs the array API standard's members on tracers)
    contractions,
    creation,
    elementwise,
    fft,
    gather,
    indexing,
    io,
    joins,
    linalg,
    misc,
    reductions,
    scimath,
    setops,
    shapes,
    sorting,
    statistics,
    strings,
    ufuncs,
    windows,
)
