"""Op-table rows for contractions, numpy.linalg and numpy.fft (see `op_table.py`)."""

from __future__ import annotations

from op_spec import Op

OPS: list[Op] = []
