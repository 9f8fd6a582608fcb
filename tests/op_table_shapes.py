"""Op-table rows for shapes, joins, splits and creation (see `op_table.py`)."""

from __future__ import annotations

from op_spec import Op

OPS: list[Op] = []
