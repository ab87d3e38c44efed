"""Regenerate (or check) the real runs shipped in ``data/runs/``.

Each ``data/runs/<name>.toml`` is a ``psens run`` config; this script runs it from scratch
— an IPS run (PSS runs included: ``n_vars = 0``) into its store
(``runs/shipped/<name>.zarr``), exported to ``data/runs/<name>.nc``; a method run
(``method = "eas"`` / ``"dbsa"`` / ``"subjective"``) straight into ``data/runs/<name>.nc``
— the files the notebooks and widgets open by default. ``--check`` exports into a
temporary folder and compares every array with the committed file instead (exit code 1 on
any difference), so "regenerates bit for bit" is something a user can verify. Prints the
CPU, the wall and CPU time per run and the file sizes.

    python scripts/shipped_run.py            # regenerate every run (make shipped-run)
    python scripts/shipped_run.py --check    # recompute and compare with data/runs/*.nc
    python scripts/shipped_run.py --only arc # one of them
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from bench import cpu_model  # scripts/bench.py: the one CPU-model lookup

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "data" / "runs"


def regenerate(config: Path, out: Path) -> dict:
    """Run ``config`` from scratch (an IPS run into its ``store``, then exported to ``out``;
    a method run straight into ``out``)."""
    import psens
    from psens import method_runs, store
    from psens.config import RunConfig

    cfg = method_runs.load(config)
    wall, cpu = time.perf_counter(), time.process_time()
    if isinstance(cfg, RunConfig):
        ds = psens.run(cfg, overwrite=True, progress=True)
        failed = int((ds["status"].values != store.DONE).sum())
        if failed:
            raise SystemExit(f"{config.name}: {failed} blocks did not finish; not exported")
        store.to_netcdf(ds, out, overwrite=True)
    else:
        method_runs.run(cfg, out, progress=True, overwrite=True)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"wall": wall, "cpu": cpu, "bytes": out.stat().st_size}


def compare(a: Path, b: Path) -> list[str]:
    """Names of the variables and attributes that differ between two exported runs, both
    read under today's labels (:func:`psens.store.labels.label_run`: a committed file of an
    earlier psens holds pair numbers and coded format ids)."""
    import numpy as np
    import xarray as xr

    from psens.store import item_targets
    from psens.store.labels import label_run
    from psens.store.schema import CHECKSUM_ATTR

    with xr.open_datatree(a, engine="h5netcdf") as ta, xr.open_datatree(b, engine="h5netcdf") as tb:
        groups_a = {node.path: label_run(node.to_dataset()) for node in ta.subtree}
        groups_b = {node.path: label_run(node.to_dataset()) for node in tb.subtree}
        diffs = [f"group {g} (only in one file)" for g in sorted(set(groups_a) ^ set(groups_b))]
        for group in sorted(set(groups_a) & set(groups_b)):
            x, y = groups_a[group], groups_b[group]
            at = "" if group == "/" else f"{group}:"
            names = sorted(set(x.variables) | set(y.variables))
            for name in names:
                if name not in x.variables or name not in y.variables:
                    diffs.append(f"{at}{name} (only in one file)")
                    continue
                u, w = x[name].values, y[name].values
                if name == "target" and group == "/" and "template" in x.coords:
                    # read as psens reads it: an older format-space export holds the target
                    # in the first format's labels, a new one in the item's (item_targets)
                    u, w = item_targets(x), item_targets(y)
                if u.shape != w.shape:
                    diffs.append(f"{at}{name} (shape {u.shape} vs {w.shape})")
                elif u.dtype.kind == "f":
                    if not np.array_equal(u, w, equal_nan=True):
                        gap = np.nanmax(np.abs(u - w)) if np.isfinite(u - w).any() else np.nan
                        diffs.append(f"{at}{name} (max |diff| {gap:.3g})")
                elif not np.array_equal(u, w):
                    diffs.append(f"{at}{name}")
            for key in sorted(set(x.attrs) | set(y.attrs)):
                if key in ("run_id", "created"):  # new for every run by design
                    continue
                if key == CHECKSUM_ATTR:  # the file's seal: its digests, not run content
                    continue
                if key == "config" and _same_config(x.attrs.get(key), y.attrs.get(key)):
                    continue
                if (key in x.attrs) != (key in y.attrs) and _added_at_default(
                    key, x.attrs.get(key, y.attrs.get(key)), str(x.attrs.get("method", "ips"))
                ):
                    continue
                if str(x.attrs.get(key)) != str(y.attrs.get(key)):
                    diffs.append(f"{at}attrs[{key!r}]")
        return diffs


def _added_at_default(key: str, value, method: str) -> bool:
    """A run setting one file records and the other lacks, at the method's default: a key
    added to psens after the committed file was made (:func:`psens.config_schema.defaults`)."""
    from psens import config_schema

    try:
        defaults = config_schema.defaults(method)
    except Exception:  # an unknown method: nothing is a default
        return False
    return key in defaults and str(defaults[key]) == str(value)


def _same_config(a, b) -> bool:
    """Two recorded run configs that differ only by keys one of them lacks and the other
    holds at the key's default (a key added to psens after the committed file was made)."""
    import json

    from psens.config import RunConfig

    try:
        x, y = json.loads(str(a)), json.loads(str(b))
    except ValueError:
        return False
    if not isinstance(x, dict) or not isinstance(y, dict):
        return False
    defaults = RunConfig.defaults()
    for key in set(x) ^ set(y):
        value = x.get(key, y.get(key))
        if key not in defaults or value != defaults[key]:
            return False
    return all(x[k] == y[k] for k in set(x) & set(y))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed files")
    parser.add_argument("--only", help="the name of one config in data/runs/ (e.g. arc)")
    args = parser.parse_args(argv)
    configs = sorted(RUNS.glob("*.toml"))
    if args.only:
        configs = [c for c in configs if c.stem == args.only]
        if not configs:
            print(f"shipped_run: no data/runs/{args.only}.toml", file=sys.stderr)
            return 2
    os.chdir(ROOT)
    print(f"CPU: {cpu_model()} ({os.cpu_count()} cores)", file=sys.stderr)
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        for config in configs:
            target = RUNS / f"{config.stem}.nc"
            out = Path(tmp) / target.name if args.check else target
            got = regenerate(config, out)
            print(
                f"{config.stem}: {got['wall'] / 60:.1f} min wall, {got['cpu'] / 60:.1f} min CPU, "
                f"{got['bytes'] / 2**20:.2f} MiB -> {target.relative_to(ROOT)}",
                file=sys.stderr,
            )
            if args.check:
                diffs = compare(target, out)
                if diffs:
                    status = 1
                    print(f"{config.stem}: differs in {', '.join(diffs)}", file=sys.stderr)
                else:
                    print(f"{config.stem}: identical to the committed file", file=sys.stderr)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
