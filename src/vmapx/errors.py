"""The errors and warnings vmapx raises. Every user-facing error is one of these.

Each error is also the builtin exception the ecosystem raises for its kind (as JAX
does): a bad argument is a `ValueError` or `TypeError`, a value that cannot be traced
or converted (`ConcretizationError`, an escaped tracer, no derivative rule) a
`TypeError`, something vmapx does not implement a `NotImplementedError`.
"""

from __future__ import annotations


class VmapxError(Exception):
    """Base class of every error vmapx raises on purpose."""


class InAxesError(VmapxError, ValueError):
    """`in_axes`/`out_axes` do not fit the arguments or outputs."""


class AxisSizeError(VmapxError, ValueError):
    """The mapped axes disagree in size, or no size can be determined."""


class OutputError(VmapxError, TypeError):
    """The mapped function returned something that is not an array."""


class OutputShapeError(VmapxError, ValueError):
    """The examples' results differ in shape or in structure, so they cannot be stacked
    into one batch (as `np.stack` of the loop's results cannot)."""


class ConcretizationError(VmapxError, TypeError):
    """A batched value had to become a single concrete value (`bool`, `float`,
    `np.asarray`, ...) and `fallback="error"` forbids the per-example loop."""


class FallbackError(VmapxError, NotImplementedError):
    """A NumPy function has no batching rule and `fallback="error"` forbids the loop."""


class EscapedTracerError(VmapxError, TypeError):
    """A traced value was used after its transform returned."""


class TraceMixError(VmapxError, TypeError):
    """A traced value was used inside a transform it does not belong to."""


class UnsupportedError(VmapxError, NotImplementedError, TypeError):
    """The operation cannot be supported on traced values at all."""


class ArgumentError(VmapxError, TypeError, ValueError):
    """A vmapx function got an argument of a type or value it does not take (a `vmap`
    option, a `workers` setting)."""


class RandomnessError(VmapxError, ValueError):
    """A random draw inside `vmap` with `randomness="error"`."""


class DifferentiationError(VmapxError, TypeError):
    """A function has no derivative rule for the requested transform, or a derivative
    transform got arguments that do not fit (`argnums`, `has_aux`, cotangents, ...)."""


class PerformanceWarning(UserWarning):
    """vmapx ran something per example (a loop) instead of batched."""


class DroppedDerivativeWarning(UserWarning):
    """A value traced by a derivative transform became a Python number (`float(x)`,
    `x.item()`): the number is a constant, so derivatives do not flow through it."""


class ControlFlowError(VmapxError, ValueError):
    """`cond`/`switch`/`while_loop`/`scan` got branches or a body whose results do not fit
    together (different structures or shapes where examples must be stitched)."""


class AxisNameError(VmapxError, NameError):
    """A collective (`psum`, ...) named an axis that no enclosing `vmap` has."""


class RegistrationError(VmapxError, ValueError):
    """A rule was registered where one already is (pass `replace=True` to mean it), or
    a registration was malformed."""


class KeywordArgumentWarning(UserWarning):
    """A keyword argument that looks like a batch (its leading axis has the batch size)
    was passed to every example unbatched: `vmap` maps positional arguments only, as
    `torch.func.vmap` does (`jax.vmap` maps keyword arguments along axis 0)."""


class RaggedInputError(VmapxError, TypeError):
    """An argument of `vmapx.map` is not a sequence of examples (or a pytree of such
    sequences) where one was expected."""


class PaddingError(VmapxError, ValueError):
    """`vmapx.map`'s padded mode cannot pad the examples as asked, or (`check=`) the padded
    results differ from the unpadded loop's: the function is not mask-aware."""


def raise_own_cause(error: BaseException) -> None:
    """NumPy turns an error raised while it converts a value it writes into an array
    (`buf[0] = x` calls `float(x)`) into its own `ValueError` ("setting an array element
    with a sequence") with vmapx's error as the cause: raise vmapx's error instead."""
    cause = error.__cause__
    if type(error) in (ValueError, TypeError) and isinstance(cause, ConcretizationError):
        raise cause from None
