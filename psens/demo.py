"""`make demo`: the main job, offline.

Runs the embedded default: the offline SmolLM2-135M-Instruct, six ARC-Challenge items from
the offline copy, the paper's five templates, n = 5 input variables, τ = 0.1, the canonical
AND-OR solver (the least-norm optimal split, unique for each game). Writes the store
(``runs/demo.zarr``), an HTML report (``runs/demo.html``) and prints the summary. A second
call resumes (and finishes at once). Scale up by editing the config: more ``samples``, a
larger ``n_vars``, hub ``models``, ``device = "cuda"``, ``scheduler = "local:N"``.
"""

from __future__ import annotations

import argparse
import sys
import time

DEFAULT_CONFIG = {
    "store": "runs/demo.zarr",
    "models": ["smollm2-135m-instruct"],
    "dataset": "arc-challenge",
    "split": "validation",
    "samples": 6,
    "templates": "ips5",
    "n_vars": 5,
    "tau": 0.1,
    "solver": "canonical",
    "seed": 0,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=DEFAULT_CONFIG["store"])
    parser.add_argument("--report", default="runs/demo.html")
    parser.add_argument("--samples", type=int, default=DEFAULT_CONFIG["samples"])
    parser.add_argument("--n-vars", type=int, default=DEFAULT_CONFIG["n_vars"])
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)

    from psens.pipeline import run
    from psens.report import write_report
    from psens.runner import summarize

    start = time.perf_counter()
    cfg = {**DEFAULT_CONFIG, "store": args.store, "samples": args.samples, "n_vars": args.n_vars}
    ds = run(cfg, overwrite=args.overwrite)
    report = write_report(ds, args.report, summarize(ds, wall=time.perf_counter() - start))
    print(f"store: {args.store}\nreport: {report}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
