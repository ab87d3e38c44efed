"""Read the judge verdicts of stored EAS and subjective PSS runs again with the current parser.

A method-run file keeps every judge reply (``judge_raw``) beside the verdict read from it
(``judge_status`` and ``judge`` / ``score``) and everything computed from the verdicts (EAS:
SensJ, EAS, zones, judge factor effects; subjective PSS: ``S_i``). When
:func:`psens.backends.parse_verdict` changes, running the config again gives the same replies
(greedy decoding) and the new parser's verdicts; this script gives that result without
calling any model: :func:`psens.method_runs.reread_verdicts` re-reads the stored replies and
recomputes what depends on them, and the file is rewritten the way a run writes it
(:func:`psens.store.write_method_run`: a hidden sibling renamed into place). Every other variable,
coordinate and attr is kept. A file whose verdicts already are the parser's is left as it is.

    python scripts/reparse_judged.py data/runs/eas.nc data/runs/pss-alpaca.nc
    python scripts/reparse_judged.py --check data/runs/eas.nc   # exit 1 if it would change
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path


def changes(before, after) -> Counter:
    """``(old status, new status) -> count`` of the verdicts whose status or value moved."""
    import numpy as np

    value = "judge" if "judge" in before.data_vars else "score"
    old_s, new_s = before["judge_status"].values.ravel(), after["judge_status"].values.ravel()
    old_v, new_v = before[value].values.ravel(), after[value].values.ravel()
    moved = (old_s != new_s) | ~((old_v == new_v) | (np.isnan(old_v) & np.isnan(new_v)))
    return Counter(zip(old_s[moved].tolist(), new_s[moved].tolist(), strict=True))


def main(argv: list[str] | None = None) -> int:
    import psens
    from psens import method_runs
    from psens.store import write_method_run

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="EAS or subjective PSS run files")
    parser.add_argument(
        "--check", action="store_true", help="only report; exit 1 if a file would change"
    )
    args = parser.parse_args(argv)
    stale = 0
    for path in args.files:
        before = psens.open_run(path)
        after = method_runs.reread_verdicts(before)
        moved = changes(before, after)
        total = before["judge_status"].size
        if not moved:
            print(f"{path}: all {total} verdicts are the parser's; unchanged")
            continue
        stale += 1
        what = ", ".join(f"{n} {a} -> {b}" for (a, b), n in sorted(moved.items()))
        print(f"{path}: {sum(moved.values())} of {total} verdicts change ({what})")
        if not args.check:
            write_method_run(after, path, overwrite=True)
            print(f"{path}: rewritten")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
