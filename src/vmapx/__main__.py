"""`python -m vmapx coverage`: print the coverage table."""

import sys

from ._coverage import coverage_table


def main(argv: list[str]) -> int:
    if argv[1:] == ["coverage"]:
        print(coverage_table())
        return 0
    print("usage: python -m vmapx coverage", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
