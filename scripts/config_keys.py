"""Keep the key table of docs/runs.md equal to the config schema.

The table between the markers ``<!-- keys: python scripts/config_keys.py -->`` and
``<!-- /keys -->`` is :func:`psens.config_schema.markdown_table`, one line per row of
:data:`psens.config_schema.FIELDS`. After editing a row::

    python scripts/config_keys.py          # rewrite the table
    python scripts/config_keys.py --check  # exit 1 when the table is out of date

(the test suite runs the check).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from psens.config_schema import markdown_table

DOCS = Path(__file__).resolve().parents[1] / "docs" / "runs.md"
MARKERS = ("<!-- keys: python scripts/config_keys.py -->", "<!-- /keys -->")


def updated(text: str) -> str:
    """``text`` with :func:`psens.config_schema.markdown_table` between the markers."""
    start, end = MARKERS
    if text.count(start) != 1 or text.count(end) != 1:
        raise SystemExit(f"docs/runs.md needs the markers {start} and {end}, once each")
    head, rest = text.split(start)
    tail = rest.split(end)[1]
    return f"{head}{start}\n{markdown_table()}\n{end}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether it is up to date")
    args = parser.parse_args(argv)
    text = DOCS.read_text(encoding="utf-8")
    new = updated(text)
    if new == text:
        print("docs/runs.md: the key table is up to date")
        return 0
    if args.check:
        print("docs/runs.md: the key table is out of date; run python scripts/config_keys.py")
        return 1
    DOCS.write_text(new, encoding="utf-8")
    print("docs/runs.md: the key table rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
