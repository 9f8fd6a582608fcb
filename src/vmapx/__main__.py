"""`python -m vmapx`: the command line (`coverage`, `--version`, `--help`)."""

from __future__ import annotations

import argparse
import os
import sys


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m vmapx",
        description="vmapx: vectorizing map and composable function transforms for NumPy.",
    )
    parser.add_argument("--version", action="store_true", help="print vmapx's version")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    coverage = commands.add_parser(
        "coverage",
        help="list every overridable NumPy function and ufunc with how vmap handles it",
        description="List every NumPy function and ufunc that NumPy lets libraries "
        "override, with how vmap handles it: native (a batching rule), fallback (a "
        "per-example loop with a PerformanceWarning) or refused (a clear error).",
    )
    coverage.add_argument(
        "--rules", action="store_true", help="add the JVP and VJP columns (derivative rules)"
    )
    coverage.add_argument(
        "--libraries",
        action="store_true",
        help="run the corpus of library functions (vmapx.libraries.corpus): batched or "
        "fallback per library, wrong answers, speed-up over the loop at batch 16",
    )
    coverage.add_argument(
        "--where", action="store_true", help="add the file:line that registered each rule"
    )
    return parser


def _write(text: str) -> int:
    """Print `text`; a reader that closed the pipe (`| head`) ends the command quietly."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        # (Python would report the failed flush of stdout at exit: point it at devnull)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command line with `argv` (without the program name); the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.version:
        from . import __version__

        return _write(__version__)
    if args.command == "coverage" and args.libraries:
        from .libraries.corpus import summary_table

        return _write(summary_table())
    if args.command == "coverage":
        from ._coverage import coverage_table

        return _write(coverage_table(rules=args.rules, where=args.where))
    parser.print_help(sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
