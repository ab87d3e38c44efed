"""One IPS run from its config to its store: resolve once (:func:`psens.plan.resolve`),
take the store's lock, score (:func:`psens.runner.execute`).

The order is the data's: config → resolved run (:mod:`psens.plan`) → blocks scored and
written (:mod:`psens.runner`) → the stored Dataset (:func:`psens.open_run`). This module
sits above both, so neither imports the other back.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from psens import runner, store
from psens.config import RunConfig
from psens.plan import ResolvedRun, resolve

__all__ = ["run"]


def run(config, *, overwrite: bool = False, progress: bool = True, quiet: bool = False):
    """Run (or resume) an IPS experiment and return the stored Dataset.

    Parameters
    ----------
    config : dict, RunConfig, ResolvedRun, or path to a TOML/YAML file
        See :mod:`psens.config` for the keys; a :class:`psens.plan.ResolvedRun`
        (``psens.plan(config)``) is used as it is, nothing re-read.
    overwrite : bool
        Start over even if the store exists (default: resume it).
    progress : bool
        tqdm bars for models and samples.
    quiet : bool
        Print nothing (no estimate, no summary).

    Returns
    -------
    xarray.Dataset
        The run, as :func:`psens.open_run` returns it.

    Examples
    --------
    >>> ds = psens.run({"store": "runs/demo.zarr", "models": ["smollm2-135m-instruct"],
    ...                 "dataset": "arc-challenge", "split": "validation", "samples": 3,
    ...                 "templates": "ips5", "n_vars": 5})  # doctest: +SKIP
    """
    start = time.perf_counter()
    resolved = config if isinstance(config, ResolvedRun) else None
    cfg = resolved.config if resolved is not None else RunConfig.from_any(config)  # checked
    runner.check_disk(Path(cfg.store), 0)  # a folder that cannot be written, before its lock
    # the store's lock first: a store in use is refused at once, before the dataset is read
    with store.lock(cfg.store, "psens run"):  # held until the last block is written
        rr = resolve(resolved if resolved is not None else cfg, checked=True)
        ds = runner.execute(rr, overwrite, progress, quiet)
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, file=sys.stderr))
    say(runner.summarize(ds, wall=time.perf_counter() - start))
    return ds
