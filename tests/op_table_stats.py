"""Op-table rows for statistics, polynomials and misc numeric functions (see `op_table.py`)."""

from __future__ import annotations

from op_spec import Op

OPS: list[Op] = []
