"""The measured-effect column of docs/paper-conventions.md: psens's defaults against the IPS
paper's own choices (``preset = "paper"``), each changed alone.

Two kinds of rows:

* **recomputed** from the shipped run ``data/runs/arc.nc`` (SmolLM2-135M-Instruct and
  Gemma-3-270M, 8 ARC-Challenge validation items, 5 templates, n = 5): the AND-OR solver
  (the paper's eq. 12 trained by SGD as the interaction group's public code does,
  ``solver = "sgd"`` with ``preset = "paper"``, instead of the canonical least-norm optimum)
  and the normalisation (min-max over all :math:`2^{n+1}` effects, the empty set included,
  instead of :math:`S \\neq \\emptyset`). The stored scorings ``v`` and ``v_floor`` are
  decomposed again (:func:`resplit`), so IPS and its measured bfloat16 noise floor move
  together. These take seconds and need no model.
* **rerun** (``--rerun``): precision (float16), variable selection and the few-shot examples
  change the scored prompts, so they need new scorings: SmolLM2-135M-Instruct on the first
  3 items of the shipped run, templates ips1 and ips4 (the paper's few-shot pair, one
  pair), n = 5, with a bfloat16 noise floor, each against a default run of the same design
  on the same CPU. A few minutes of CPU: run it under the machine's CPU lock.

Every effect is the headline's IPS (:func:`psens.ips.headline`, all orders, 0-shot unless
the row says otherwise): per model the mean over items of per-item IPS (eq. 3, mean over the
template pairs); ``delta`` is the paired difference over items (paper setting − psens
default) with its 95 % bootstrap CI and sign-flip p (:func:`psens.stats.paired_test`). A row
is flagged ``inside the noise floor`` when the model's IPS is not above its measured floor
(the headline's caveat) under either setting: the template effect itself is then not told
apart from rounding noise, and neither is a change of it.

Run ``python scripts/paper_conventions.py [--rerun]``; it prints the CPU, the load and a
markdown table (``--json FILE`` also writes the rows).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from psens.store.labels import model_names

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "data" / "runs" / "arc.nc"
#: the rerun design (SmolLM2 only; the first 3 items of the shipped run; the few-shot pair)
RERUN_MODEL = "smollm2-135m-instruct"
RERUN_ITEMS = 3
RERUN_TEMPLATES = ["ips1", "ips4"]


def cpu_line() -> str:
    """The CPU model and the load average (printed with every measurement)."""
    from psens.models.hardware import cpu_name

    name = cpu_name()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"CPU: {name} ({os.cpu_count()} cores); load average {load}"


# ----------------------------------------------------------------------------- recomputed rows


def resplit(
    ds,
    *,
    solver: str | None = None,
    settings: dict[str, Any] | None = None,
    normalization: str | None = None,
):
    """The run ``ds`` analysed with another AND-OR split and/or normalisation.

    ``I_and``, ``I_or`` and ``gamma`` are recomputed from the stored ``v`` (each sample at
    its own n), the ``solver_*`` attrs replaced, and the measured floor recomputed from
    ``v`` and ``v_floor`` with the same split and normalisation
    (:func:`psens.ips.floor.floor_bands`). A run without a ``solver`` dim only.
    """
    from psens import store
    from psens.interactions import SolverSettings, and_or
    from psens.ips.floor import floor_bands
    from psens.settings import run_settings

    run = run_settings(ds)
    out = ds.load().copy()
    norm = run.normalization if normalization is None else normalization
    out.attrs["normalization"] = norm
    if solver is None:
        solver, settings = run.solver, run.and_or_kwargs()
    else:
        settings = dict(settings or {})
        attrs = SolverSettings(method=solver, **settings).to_attrs()
        out.attrs = {k: v for k, v in out.attrs.items() if not k.startswith("solver_")}
        out.attrs.update(attrs)
    dims = ("model", "sample", *[d for d in ds["v"].dims if d not in ("model", "sample")])
    v = np.asarray(ds["v"].transpose(*dims).values, dtype=float)
    w = np.asarray(ds["v_floor"].transpose(*dims).values, dtype=float)
    arrays = {k: np.full_like(v, np.nan) for k in ("I_and", "I_or", "gamma")}
    floor = np.full((*v.shape[:-1], len(store.FLOOR_BANDS)), np.nan)
    n_vars = np.asarray(ds["n_vars"].values, dtype=int)
    for n in np.unique(n_vars):
        rows = np.flatnonzero(n_vars == n)
        games = v[:, rows][..., : 1 << n]
        res = and_or(games, solver, **settings)
        for k in arrays:
            arrays[k][:, rows, ..., : 1 << n] = getattr(res, k)
        floor[:, rows] = floor_bands(
            games,
            w[:, rows][..., : 1 << n],
            orders=store.FLOOR_BANDS,
            solver=solver,
            tau=run.tau,
            settings=settings,
            normalization=norm,
        )
    for k, a in arrays.items():
        out[k] = (dims, a)
    band_dims = (*dims[:-1], "band")
    out["floor"] = (band_dims, floor)
    out["floor"] = out["floor"].transpose(*ds["floor"].dims)
    return out


def _first_shot(ds):
    """The run at its first shot setting only (the headline's), as a one-shot run."""
    return ds.isel(shot=[0]) if "shot" in ds.dims else ds


def compare(base, other, *, label: str, pools: str, shot: int | None = None) -> list[dict]:
    """One row per model: the headline IPS of ``base`` and ``other`` (all orders), their
    floors, the paired difference over items and the noise-floor flag."""
    from psens.ips.headline import NOT_ABOVE_FLOOR, headline
    from psens.ips.tables import at_shot, per_sample_ips
    from psens.stats import paired_test

    rows = []
    heads = [headline(x, shot=shot).set_index(["model", "order"]) for x in (base, other)]
    per = [at_shot(per_sample_ips(x, float(x.attrs["tau"])), shot) for x in (base, other)]
    for model in model_names(base):
        a = per[0].sel(model=model, order="all").values
        b = per[1].sel(model=model, order="all").values
        test = paired_test(b, a, n_boot=2000, n_perm=2000, seed=0)
        h0, h1 = heads[0].loc[(model, "all")], heads[1].loc[(model, "all")]
        inside = NOT_ABOVE_FLOOR in h0["caveats"] or NOT_ABOVE_FLOOR in h1["caveats"]
        rows.append(
            {
                "setting": label,
                "model": model,
                "pools": pools,
                "ips_default": float(h0["ips"]),
                "ips_paper": float(h1["ips"]),
                "delta": float(test["diff"]),
                "delta_lo": float(test["diff_lo"]),
                "delta_hi": float(test["diff_hi"]),
                "p_value": float(test["p_value"]),
                "n_items": int(test["n"]),
                "floor_default": float(h0["floor"]),
                "floor_paper": float(h1["floor"]),
                "inside_floor": bool(inside),
            }
        )
    return rows


SHIPPED_POOLS = "0-shot, 5 templates (10 pairs), 8 ARC-Challenge items"


def recomputed_rows(path: Path = RUN) -> list[dict]:
    """The solver and normalisation rows, recomputed from the shipped run."""
    import psens

    ds = _first_shot(psens.open_run(path).load())
    paper_split = {"solver": "sgd", "settings": {"preset": "paper"}}
    variants = {
        "solver": resplit(ds, **paper_split),
        "normalization": resplit(ds, normalization="all"),
        "solver + normalization": resplit(ds, **paper_split, normalization="all"),
    }
    rows = []
    for label, other in variants.items():
        rows += compare(ds, other, label=label, pools=SHIPPED_POOLS)
    return rows


def open_ended_variables() -> dict:
    """How many items of the shipped open-ended run (``data/runs/appendix_l.toml``, appendix
    L) get other variables under ``variables = "paper"``: where none does, the prompts, the
    scorings and so the IPS are the same, and no rerun is needed."""
    import tomllib

    from psens.config import RunConfig
    from psens.runner import Plan

    raw = tomllib.loads((ROOT / "data" / "runs" / "appendix_l.toml").read_text())
    raw["perturbations"] = str(ROOT / raw["perturbations"])
    words = {
        rule: [
            [str(x) for x in vs]
            for vs in Plan(RunConfig.from_dict(raw | {"variables": rule})).variables
        ]
        for rule in ("psens", "paper")
    }
    changed = sum(a != b for a, b in zip(words["psens"], words["paper"], strict=True))
    return {"items": len(words["psens"]), "changed": changed}


# ----------------------------------------------------------------------------- rerun rows


def _rerun_config(store: Path, ids: list[str], **extra) -> dict:
    cfg = {
        "store": str(store),
        "models": [RERUN_MODEL],
        "dataset": "arc-challenge",
        "split": "validation",
        "samples": ids,
        "templates": RERUN_TEMPLATES,
        "n_vars": 5,
        "shots": [0],
        "noise_floor": "bfloat16",
        "seed": 0,
        "threads": 2,
        "generate": False,
    }
    cfg.update(extra)
    return cfg


def rerun_rows(folder: Path) -> list[dict]:
    """Precision, variables, few-shot examples and the whole preset: small reruns."""
    import psens

    ids = [str(s) for s in psens.open_run(RUN)["sample"].values[:RERUN_ITEMS]]
    pools = f"{{shot}}, templates ips1/ips4 (1 pair), {len(ids)} ARC-Challenge items"
    designs = {
        "default": {"shots": [0, 1, 3]},
        "dtype": {"dtype": "float16"},
        "variables": {"variables": "paper"},
        "shots_from": {"shots": [0, 1, 3], "shots_from": "paper"},
        "preset": {"shots": [0, 1, 3], "preset": "paper"},
    }
    runs, seconds = {}, {}
    for name, extra in designs.items():
        start = time.perf_counter()
        cfg = _rerun_config(folder / f"{name}.zarr", ids, **extra)
        runs[name] = psens.run(cfg, overwrite=True, progress=False, quiet=True).load()
        seconds[name] = time.perf_counter() - start
        print(f"  rerun {name}: {seconds[name]:.0f} s", file=sys.stderr)
    base = runs["default"]
    rows = []
    rows += compare(
        base.isel(shot=[0]), runs["dtype"], label="dtype", pools=pools.format(shot="0-shot")
    )
    rows += compare(
        base.isel(shot=[0]), runs["variables"], label="variables", pools=pools.format(shot="0-shot")
    )
    for k in (1, 3):
        rows += compare(
            base,
            runs["shots_from"],
            label="shots_from",
            pools=pools.format(shot=f"{k}-shot"),
            shot=k,
        )
    for k in (0, 1, 3):
        rows += compare(
            base, runs["preset"], label="preset", pools=pools.format(shot=f"{k}-shot"), shot=k
        )
    for r in rows:
        r["rerun_seconds"] = round(seconds.get(r["setting"], float("nan")), 1)
    return rows


# ----------------------------------------------------------------------------- output


def effect_text(r: dict) -> str:
    """The effect cell of one row: IPS default → paper, Δ [CI] (n), floors, the flag."""
    flag = "; **inside the noise floor**" if r["inside_floor"] else ""
    return (
        f"{r['model']}: {r['ips_default']:.3f} → {r['ips_paper']:.3f}, "
        f"Δ {r['delta']:+.3f} [{r['delta_lo']:+.3f}, {r['delta_hi']:+.3f}], "
        f"p = {r['p_value']:.3f} (n = {r['n_items']}); "
        f"floor {r['floor_default']:.3f} → {r['floor_paper']:.3f}{flag}"
    )


def table(rows: list[dict]) -> str:
    lines = ["| setting | pools | effect on IPS (psens default → paper) |", "|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['setting']} | {r['pools']} | {effect_text(r)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rerun", action="store_true", help="also the rows that need scoring")
    parser.add_argument("--json", type=Path, help="write the rows to this file")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    print(cpu_line())
    start = time.perf_counter()
    rows = recomputed_rows()
    print(f"recomputed from {RUN.relative_to(ROOT)} in {time.perf_counter() - start:.1f} s")
    oe = open_ended_variables()
    print(
        f'open-ended items (appendix_l.toml): variables = "paper" changes the variables of '
        f"{oe['changed']} of {oe['items']} items"
    )
    if args.rerun:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            rows += rerun_rows(Path(tmp))
            print(f"reruns in {time.perf_counter() - start:.0f} s; {cpu_line()}")
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
