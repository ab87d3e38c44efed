"""What the notebooks' ``parameters`` cells call: open a stored run, or make one.

Notebooks read two environment variables (papermill ``-p`` sets the same names):

``PSENS_RUN``
    Path of a stored run (``.zarr`` from :func:`psens.run`). Empty: make one.
``PSENS_SIZE``
    ``tiny`` (default): a synthetic run of the store schema, built in seconds
    (:func:`psens.synthetic.synthetic_run`); for CI and a first look. ``full``: the paper-size
    configuration through the run pipeline :func:`psens.run` (hours on a GPU; resumable).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from psens._validation import fail

__all__ = ["SIZES", "load_run", "registry_models"]

SIZES = ("tiny", "full")
_REGISTRY = Path(__file__).resolve().parents[1] / "data" / "models.csv"


def registry_models(
    path: str | os.PathLike | None = None, *, missing_ok: bool = False
) -> list[str]:
    """Names of the models in the model registry table (``data/models.csv``), in order.

    ``missing_ok``: return ``[]`` instead of raising when the table is not there (an
    installed, non-source psens).
    """
    import pandas as pd

    table = Path(path) if path is not None else _REGISTRY
    if not table.exists():
        if missing_ok:
            return []
        fail(
            "psens.widgets.registry_models",
            f"{table} not found",
            "Run from a source checkout, or list the models in the config yourself",
        )
    return pd.read_csv(table)["name"].astype(str).tolist()


def load_run(
    path: str | os.PathLike | None = None,
    size: str | None = None,
    *,
    tiny: Mapping[str, Any] | None = None,
    full: Mapping[str, Any] | None = None,
):
    """The run a notebook works on.

    Parameters
    ----------
    path : path, optional
        A stored run; default ``$PSENS_RUN``. When set, ``size`` is ignored.
    size : {"tiny", "full"}, optional
        Default ``$PSENS_SIZE`` or ``"tiny"``.
    tiny : mapping, optional
        Keyword arguments of :func:`psens.synthetic.synthetic_run`.
    full : mapping, optional
        The config of :func:`psens.run` (keys ``store, models, dataset, split, samples,
        templates, n_vars, tau, solver, seed``); the run resumes if its store exists.

    Returns
    -------
    xarray.Dataset
    """
    where = "psens.widgets.load_run"
    path = os.environ.get("PSENS_RUN", "") if path is None else path
    size = (os.environ.get("PSENS_SIZE", "") if size is None else size) or "tiny"
    if path:
        from psens.store import open_run

        return open_run(path)
    if size not in SIZES:
        fail(where, f"size={size!r} (PSENS_SIZE) is unknown", f"Use one of {SIZES}")
    if size == "tiny":
        from psens.synthetic import synthetic_run

        return synthetic_run(**dict(tiny or {}))
    if not full:
        fail(where, "size='full' needs a run config", "Pass full={...} (see the notebook)")
    import psens

    runner = getattr(psens, "run", None)
    if runner is not None and not callable(runner):  # the module psens.run
        runner = getattr(runner, "run", None)
    if runner is None:
        try:
            from psens.run import run as runner
        except ImportError:
            runner = None
    if runner is None:
        fail(
            where,
            "PSENS_SIZE=full needs the run pipeline psens.run, which this psens does not have",
            "Update psens, or set PSENS_RUN to a stored run, or use PSENS_SIZE=tiny",
            RuntimeError,
        )
    out = runner(dict(full))
    if out is None or isinstance(out, str | os.PathLike):
        from psens.store import open_run

        return open_run(out if out is not None else full["store"])
    return out
