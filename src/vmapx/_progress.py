"""Progress bars for long chunked `vmap` calls (`progress=True`), drawn by `tqdm`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


def _nothing(n: int) -> None:
    pass


@contextmanager
def bar(total: int, enabled: bool) -> Iterator[Callable[[int], None]]:
    """A function that advances a bar of `total` steps (does nothing where not
    `enabled`); the bar closes at the end of the block."""
    if not enabled:
        yield _nothing
        return
    try:
        from tqdm.auto import tqdm
    except ImportError:
        raise ImportError(
            "vmap: `progress=True` draws its bar with tqdm, which is not installed; "
            "`pip install tqdm` (or `pip install vmapx[progress]`), or pass progress=False"
        ) from None
    with tqdm(total=total, unit="chunk", desc="vmap") as shown:
        yield shown.update
