"""Model metadata on a run: join the model table, select models by metadata.

The run's ``model`` coordinate carries ``family, series, kind, arch, params,
active_params`` (:mod:`psens.store`). A run made without them (empty strings / NaN) gets
them from ``data/models.csv`` with :func:`attach_metadata`; groups of models are then
selected by metadata with :func:`select_models`, never by hand.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.

Model families, scales and architectures as listed in [1], appendix E.2.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from psens._validation import fail
from psens.store.labels import model_names

__all__ = ["META_COLUMNS", "TUNED_KINDS", "attach_metadata", "model_frame", "select_models"]

#: metadata coordinates on ``model`` that the join fills
META_COLUMNS: tuple[str, ...] = ("family", "series", "kind", "arch", "params", "active_params")
#: ``kind="tuned"`` selects these (the paper pools instruct and chat models)
TUNED_KINDS: tuple[str, ...] = ("instruct", "chat")
NUMERIC = ("params", "active_params")


def _empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float | np.floating):
        return bool(np.isnan(value))
    return str(value) == ""


def model_frame(ds):
    """The run's model metadata as a DataFrame indexed by model name."""
    import pandas as pd

    cols = {c: ds[c].values for c in META_COLUMNS if c in ds.coords}
    return pd.DataFrame(cols, index=pd.Index(model_names(ds), name="model"))


def attach_metadata(ds, table=None, *, overwrite: bool = False, strict: bool = False):
    """Fill the run's model metadata from the model table.

    Parameters
    ----------
    ds : xarray.Dataset
        A run (its ``model`` coordinate holds model names or hub ids).
    table : pandas.DataFrame, optional
        A table with a ``name`` column and any of :data:`META_COLUMNS` (and optionally
        ``hub_id``); default: :func:`psens.models.registry.model_table`.
    overwrite : bool
        Replace values already present (default: fill only empty ones).
    strict : bool
        Raise when a model is not in the table (default: warn and leave it empty).

    Returns
    -------
    xarray.Dataset
        A copy with the metadata coordinates filled.

    Examples
    --------
    >>> import psens.store as st
    >>> ds = st.build(models=["llama-2-7b"], samples=["s"], templates=["a", "b"],
    ...               words=[["w"]], prompts=[["p", "q"]], targets=[" A"], n_max=1)
    >>> str(attach_metadata(ds)["kind"].values[0])
    'base'
    """
    import pandas as pd

    if table is None:
        from psens.models.registry import model_table

        table = model_table()
    if "name" not in table.columns:
        fail("attach_metadata", "the table has no 'name' column", "Pass a table like models.csv")
    key = table["name"].astype(str).str.lower()
    by_name = table.set_index(key)
    hub = table.set_index(table["hub_id"].astype(str).str.lower()) if "hub_id" in table else None
    names = model_names(ds)
    rows: list[pd.Series | None] = []
    missing = []
    for name in names:
        k = name.strip().lower()
        if k in by_name.index:
            rows.append(by_name.loc[k])
        elif hub is not None and k in hub.index:
            rows.append(hub.loc[k])
        else:
            rows.append(None)
            missing.append(name)
    if missing:
        msg = f"{len(missing)} model(s) are not in the model table: {missing}"
        if strict:
            fail("attach_metadata", msg, "Add them to data/models.csv or pass table=")
        warnings.warn(f"attach_metadata: {msg}; their metadata stays empty", stacklevel=2)
    new = {}
    for col in META_COLUMNS:
        if col not in table.columns:
            continue
        numeric = col in NUMERIC
        if col in ds.coords:
            cur = list(ds[col].values)
        else:
            cur = [np.nan if numeric else ""] * len(names)
        out = []
        for old, row in zip(cur, rows, strict=True):
            val = None if row is None else row[col]
            if row is None or _empty(val) or not (overwrite or _empty(old)):
                out.append(old)
            else:
                out.append(float(val) if numeric else str(val))
        dtype = float if numeric else object
        new[col] = ("model", np.asarray(out, dtype=dtype))
    return ds.assign_coords(new)


def _match(values: np.ndarray, want: Any, numeric: bool) -> np.ndarray:
    if callable(want):
        return np.asarray([bool(want(v)) for v in values])
    if numeric and isinstance(want, tuple) and len(want) == 2:
        lo, hi = want
        v = values.astype(float)
        lo = -np.inf if lo is None else lo
        hi = np.inf if hi is None else hi
        return (v >= lo) & (v <= hi)
    if isinstance(want, str) or not isinstance(want, Iterable):
        want = [want]
    if numeric:
        return np.isin(values.astype(float), np.asarray(list(want), dtype=float))
    wanted = {str(w).lower() for w in want}
    return np.asarray([str(v).lower() in wanted for v in values])


def select_models(
    ds,
    *,
    names: Sequence[str] | None = None,
    kind: str | Sequence[str] | None = None,
    arch: str | Sequence[str] | None = None,
    family: str | Sequence[str] | None = None,
    series: str | Sequence[str] | None = None,
    params: Any = None,
    active_params: Any = None,
    where: Callable | None = None,
):
    """The run restricted to the models whose metadata match every given criterion.

    Parameters
    ----------
    names : sequence of str, optional
        Model names to keep (intersected with the other criteria).
    kind, arch, family, series : str or sequence of str, optional
        Case-insensitive values to keep; ``kind="tuned"`` means instruct or chat.
    params, active_params : number, sequence, ``(low, high)`` tuple or callable, optional
        Billions of parameters; a 2-tuple is an inclusive range (``None`` = open end).
    where : callable, optional
        ``where(row) -> bool`` on the rows of :func:`model_frame`.

    Raises
    ------
    ValueError
        When no model matches (the message lists the values the run has).

    Examples
    --------
    >>> from psens.synthetic import synthetic_run
    >>> model_names(select_models(synthetic_run(n_samples=2), kind="base"))
    ['toy-7b']
    """
    frame = model_frame(ds)
    keep = np.ones(len(frame), dtype=bool)
    given = {}
    if names is not None:
        keep &= np.isin(frame.index.values, [str(n) for n in names])
        given["names"] = list(names)
    crit = {
        "kind": kind,
        "arch": arch,
        "family": family,
        "series": series,
        "params": params,
        "active_params": active_params,
    }
    for col, want in crit.items():
        if want is None:
            continue
        if col not in frame.columns:
            fail(
                "select_models",
                f"the run has no {col!r} metadata",
                "Call psens.factors.attach_metadata(ds) first",
            )
        if col == "kind" and isinstance(want, str) and want.lower() == "tuned":
            want = TUNED_KINDS
        keep &= _match(frame[col].values, want, col in NUMERIC)
        given[col] = want
    if where is not None:
        keep &= np.asarray([bool(where(r)) for _, r in frame.iterrows()])
        given["where"] = where
    if not keep.any():
        have = {
            c: sorted({str(v) for v in frame[c].values})
            for c in crit
            if c in frame.columns and crit[c] is not None
        }
        fail(
            "select_models",
            f"no model matches {given} (the run has {have or list(frame.index)})",
            "Relax the criteria, or call attach_metadata(ds) if the metadata is empty",
        )
    return ds.isel(model=np.flatnonzero(keep))
