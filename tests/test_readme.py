"""Every Python example in the README runs as written, in reading order (later
examples use the names earlier ones defined, as a reader's session would). A block
whose first line is `# needs: dask` runs where Dask and distributed (the extra
vmapx[dask]) are installed (`make test-dask`), and is left out elsewhere."""

from __future__ import annotations

import importlib.util
import re
import types
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_examples_run() -> None:
    # the stand-in for the compiled extension of the custom_vmap example
    ext = types.SimpleNamespace(
        norm=lambda x: np.sqrt((x * x).sum()),
        norm_rows=lambda x: np.sqrt((x * x).sum(-1)),
    )
    namespace = {"__name__": "readme", "my_extension": ext}
    assert len(BLOCKS) >= 4
    has_dask = all(importlib.util.find_spec(m) is not None for m in ("dask", "distributed"))
    for code in BLOCKS:
        if code.startswith("# needs: dask") and not has_dask:
            continue
        exec(compile(code, str(README), "exec"), namespace)
