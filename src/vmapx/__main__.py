"""`python -m vmapx coverage`: print the coverage table."""

import sys

from ._coverage import coverage_table


def main(argv: list[str]) -> int:
    if argv[1:2] == ["coverage"] and set(argv[2:]) <= {"--rules", "--where"}:
        print(coverage_table(rules="--rules" in argv, where="--where" in argv))
        return 0
    print("usage: python -m vmapx coverage [--rules] [--where]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
