"""Op-table rows for gather/scatter, sorting, statistics and misc functions (see `op_table.py`)."""

from __future__ import annotations

from op_spec import Op

OPS: list[Op] = []
