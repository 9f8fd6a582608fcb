"""Every code example of the documentation site (`docs/*.md`) runs as written.

Each page runs in its own namespace, its blocks in reading order (later blocks use the
names earlier ones defined, as a reader's session would): a ```python block is
executed (its `assert`s are the checks), a ```pycon block is run as a doctest (what it
prints must be what the page shows). A block whose first line is `# needs: a, b` runs
only where the modules `a` and `b` are installed (Dask examples: `make test-dask`).
"""

from __future__ import annotations

import doctest
import importlib.util
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(DOCS.glob("*.md"))
BLOCK = re.compile(r"^```(python|pycon)\n(.*?)^```", flags=re.S | re.M)


def blocks(page: Path) -> list[tuple[str, str]]:
    """The page's (kind, code) blocks, each code preceded by blank lines so that the line
    numbers of tracebacks and warnings are the page's."""
    text = page.read_text()
    return [
        (m.group(1), "\n" * text.count("\n", 0, m.start(2)) + m.group(2))
        for m in BLOCK.finditer(text)
    ]


def missing_modules(code: str) -> list[str]:
    first = code.lstrip("\n").split("\n", 1)[0]
    if not first.startswith("# needs:"):
        return []
    names = [n.strip() for n in first.removeprefix("# needs:").split(",")]
    return [n for n in names if importlib.util.find_spec(n) is None]


def run_doctest(code: str, namespace: dict, name: str) -> None:
    test = doctest.DocTestParser().get_doctest(code, namespace, name, name, 0)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    runner = doctest.DocTestRunner(optionflags=flags)
    runner.run(test, clear_globs=False)
    failed, _ = runner.summarize(verbose=False)
    assert failed == 0, f"a doctest of {name} failed (its report is above)"


def test_the_site_has_pages_with_examples() -> None:
    assert len(PAGES) >= 12
    assert sum(len(blocks(p)) for p in PAGES) >= 30


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_page_examples_run(page: Path) -> None:
    namespace: dict = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    for kind, code in blocks(page):
        if missing_modules(code):
            continue
        if kind == "pycon":
            run_doctest(code, namespace, page.name)
        else:
            exec(compile(code, str(page), "exec"), namespace)
