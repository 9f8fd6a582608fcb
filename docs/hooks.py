"""MkDocs hooks: the pages' generated parts, made at build time from the code itself.

- `<!-- coverage-table -->` becomes the table of `vmapx.coverage()` with the derivative
  columns (what `python -m vmapx coverage --rules` prints), so the page is never stale;
- `<!-- include: PATH -->` becomes the Markdown file PATH (relative to the repository),
  its first heading left out (the page has its own);
- the benchmark chart `benchmarks/results.png` is copied into the site.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
CHART = "benchmarks/results.png"


def coverage_markdown() -> str:
    """`vmapx.coverage()` and the derivative rules as a Markdown table with totals."""
    from vmapx._coverage import _name, rules_report

    report = {_name(func): entry for func, entry in rules_report().items()}
    counts = Counter(e["batch"] for e in report.values())
    totals = ", ".join(f"{counts.get(k, 0)} {k}" for k in ("native", "fallback", "refused"))
    lines = [
        f"**{len(report)} functions and ufuncs: {totals}.**",
        "",
        "| function | batch | jvp | vjp |",
        "|---|---|---|---|",
    ]
    for name in sorted(report, key=str.lower):
        e = report[name]
        lines.append(f"| `{name}` | {e['batch']} | {e['jvp']} | {e['vjp']} |")
    return "\n".join(lines)


def _include(match: re.Match) -> str:
    text = (ROOT / match.group(1)).read_text()
    return re.sub(r"\A# .*\n", "", text)


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001
    markdown = re.sub(r"<!-- include: (\S+) -->", _include, markdown)
    if "<!-- coverage-table -->" in markdown:
        markdown = markdown.replace("<!-- coverage-table -->", coverage_markdown())
    return markdown


def on_files(files, config):  # noqa: ANN001, ANN201
    files.append(
        File(CHART, src_dir=str(ROOT), dest_dir=config["site_dir"], use_directory_urls=False)
    )
    return files
