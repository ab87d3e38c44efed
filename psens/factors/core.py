r"""Per-sample IPS for many thresholds and order bands in one pass (IPS paper eq. 3, §4.3, F.8).

:func:`sample_ips` gives the same numbers as :func:`psens.ips.ips` (a test pins that), but
normalises every game once and evaluates all thresholds ``τ`` and all order bands from
that one normalisation:

* for a template pair, an interaction is in the union of salient sets at ``τ`` iff
  :math:`\max(|\tilde I_S(x|T)|, |\tilde I_S(x|\hat T)|) > \tau`;
* so each term :math:`|a-b|/((|a|+|b|)/2)` is binned by how many thresholds lie below its
  ``max``, and a reversed cumulative sum of the binned sums and counts gives the pair's IPS
  at every ``τ`` (``np.bincount`` over all rows at once: no loop over samples, pairs or τ).

The run is read one model and a block of samples at a time, so a lazily opened store is
never loaded whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from psens._validation import check_in_interval, fail
from psens.ips import ORDER_TYPES, n_players, nanmean, normalize, order_masks, template_pairs

__all__ = ["ORDER_LEVELS", "check_taus", "pair_labels", "sample_ips"]

#: order bands of §4.3 plus ``"all"`` (every order, eq. 3)
ORDER_LEVELS: tuple[str, ...] = ORDER_TYPES
_CHUNK_ELEMENTS = 1 << 22  # values per array in one block (32 MiB of float64)


def check_taus(taus: Any, where: str) -> np.ndarray:
    """Thresholds as a 1-d float array, each strictly inside (0, 1)."""
    arr = np.atleast_1d(np.asarray(taus, dtype=float))
    if arr.ndim != 1 or arr.size == 0:
        fail(where, f"thresholds {taus!r} are not a non-empty list", "Pass e.g. [0.05, 0.1]")
    for t in arr:
        check_in_interval(t, where, "tau", 0.0, 1.0)
    return arr


def _check_orders(orders: Sequence[str] | str, where: str) -> tuple[str, ...]:
    out = (orders,) if isinstance(orders, str) else tuple(orders)
    bad = [o for o in out if o not in ORDER_LEVELS]
    if bad or not out:
        fail(where, f"orders {bad or out!r} are unknown", f"Use some of {ORDER_LEVELS}")
    return out


def _pair_block(
    I_and: np.ndarray,
    I_or: np.ndarray,
    taus: np.ndarray,
    orders: tuple[str, ...],
    pair_idx: np.ndarray,
) -> np.ndarray:
    """IPS of every selected template pair: ``[..., pair, order, tau]`` (NaN: no salient S).

    ``I_and``/``I_or`` are ``[..., template, 2**n]``; ``taus`` sorted ascending.
    """
    na, no = normalize(I_and, I_or)
    x = np.concatenate([na, no], axis=-1)  # [..., T, 2K]
    size = I_and.shape[-1]
    i, j = template_pairs(I_and.shape[-2])
    i, j = i[pair_idx], j[pair_idx]
    a, b = np.abs(x[..., i, :]), np.abs(x[..., j, :])
    with np.errstate(invalid="ignore", divide="ignore"):
        term = np.abs(x[..., i, :] - x[..., j, :]) / ((a + b) / 2)
        top = np.fmax(a, b)
    finite = np.isfinite(top) & (top > 0)
    n = n_players(I_and)[..., 0]  # a sample's n is the same for all its templates
    n_tau = taus.size
    lead = top.shape[:-1]  # [..., pair]
    rows = int(np.prod(lead))
    out = np.empty((*lead, len(orders), n_tau))
    for k, order in enumerate(orders):
        keep = order_masks(n, size, None if order == "all" else order)  # [..., K]
        keep = np.concatenate([keep, keep], axis=-1)[..., None, :]  # [..., 1, 2K]
        valid = finite & keep
        bins = np.searchsorted(taus, np.where(valid, top, -1.0), side="left")  # #τ below top
        flat = (np.arange(rows).reshape(*lead, 1) * (n_tau + 1) + bins).ravel()
        tot = np.bincount(flat, np.where(valid, term, 0.0).ravel(), rows * (n_tau + 1))
        cnt = np.bincount(flat, valid.ravel().astype(float), rows * (n_tau + 1))
        # salient at τ_k  <=>  bin > k: reversed cumulative sums from bin k+1
        tot = np.cumsum(tot.reshape(rows, n_tau + 1)[:, ::-1], axis=1)[:, ::-1][:, 1:]
        cnt = np.cumsum(cnt.reshape(rows, n_tau + 1)[:, ::-1], axis=1)[:, ::-1][:, 1:]
        with np.errstate(invalid="ignore", divide="ignore"):
            val = np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)
        out[..., k, :] = val.reshape(*lead, n_tau)
    return out


def pair_labels(templates: Sequence[str]) -> list[str]:
    """``"a|b"`` labels of the unordered template pairs, in :func:`template_pairs` order."""
    i, j = template_pairs(len(templates))
    return [f"{templates[p]}|{templates[q]}" for p, q in zip(i, j, strict=True)]


def sample_ips(
    ds,
    tau: float | Sequence[float] = 0.1,
    *,
    orders: Sequence[str] | str = ORDER_LEVELS,
    templates: Sequence[str] | None = None,
    pairs: Any = None,
    per_pair: bool = False,
    models: Sequence[str] | None = None,
):
    r"""Per-sample IPS (eq. 3) of a run, for one or many thresholds and order bands.

    .. math::
        \mathrm{IPS}(x) = \mathbb E_{T,\hat T}\frac{1}{|\Omega_{union}|}
        \sum_{S\in\Omega_{union}} \frac{|\tilde I_S(x|T) - \tilde I_S(x|\hat T)|}
        {(|\tilde I_S(x|T)| + |\tilde I_S(x|\hat T)|)/2}

    Parameters
    ----------
    ds : xarray.Dataset
        A run (``I_and``, ``I_or`` over ``model, sample, [shot,] template, subset``).
    tau : float or sequence of float in (0, 1)
        Salience threshold(s); a sequence adds a ``tau`` dim (appendix F.8).
    orders : sequence of {"all", "low", "mid", "high"}
        Order bands (§4.3); ``"all"`` is the plain IPS. A single string drops the dim.
    templates : sequence of str, optional
        Use only these templates (e.g. ``("ips1", "ips4")`` for few-shot, appendix E.6).
    pairs : sequence of int or bool mask, optional
        Use only these template pairs (indices into the pairs of the used templates, in
        :func:`psens.ips.template_pairs` order), e.g. those of one perturbation kind.
    per_pair : bool
        Keep the ``pair`` dim instead of averaging over pairs (NaN pairs skipped).
    models : sequence of str, optional
        Only these models (the others are never read).

    Returns
    -------
    xarray.DataArray
        dims ``model, sample, [shot,] [pair,] [order,] [tau]``; NaN where a sample has no
        salient interaction in any used pair. Average over samples with
        :func:`psens.ips.aggregate`.

    Examples
    --------
    >>> from psens.testing import synthetic_run
    >>> ds = synthetic_run(n_samples=3)
    >>> sample_ips(ds, [0.05, 0.1], orders="all").dims
    ('model', 'sample', 'tau')
    """
    import xarray as xr

    where = "sample_ips"
    for name in ("I_and", "I_or"):
        if name not in ds:
            fail(where, f"the Dataset has no {name!r} variable", "Pass a psens run Dataset")
    scalar_tau = np.ndim(tau) == 0
    taus = check_taus(tau, where)
    sort = np.argsort(taus, kind="stable")
    unsort = np.argsort(sort, kind="stable")
    taus_sorted = taus[sort]
    single_order = isinstance(orders, str)
    orders = _check_orders(orders, where)
    if models is not None:
        missing = [m for m in models if m not in set(ds["model"].values.tolist())]
        if missing:
            fail(where, f"models {missing} are not in the run", "Check the model names")
        ds = ds.sel(model=list(models))
    if templates is not None:
        have = [str(t) for t in ds["template"].values]
        missing = [t for t in templates if t not in have]
        if missing:
            fail(where, f"templates {missing} are not in the run", f"Use some of {have}")
        ds = ds.sel(template=list(templates))
    tnames = [str(t) for t in ds["template"].values]
    if len(tnames) < 2:
        fail(where, f"only {len(tnames)} template", "Use at least two templates")
    labels = pair_labels(tnames)
    all_idx = np.arange(len(labels))
    if pairs is None:
        pair_idx = all_idx
    else:
        p = np.asarray(pairs)
        pair_idx = all_idx[p] if p.dtype == bool else p.astype(np.int64)
        if pair_idx.size == 0:
            fail(where, "no template pair is selected", "Select at least one pair")
    a_da = ds["I_and"].transpose("model", "sample", ..., "template", "subset")
    o_da = ds["I_or"].transpose("model", "sample", ..., "template", "subset")
    lead_dims = a_da.dims[:-2]
    n_m, n_s = ds.sizes["model"], ds.sizes["sample"]
    rest = a_da.shape[2:-2]
    per_sample = int(np.prod(rest)) * len(pair_idx) * 2 * a_da.shape[-1] * len(orders)
    step = max(1, _CHUNK_ELEMENTS // max(per_sample, 1))
    shape_tail = (len(pair_idx), len(orders), taus.size)
    out = np.empty((n_m, n_s, *rest, *shape_tail))
    for m in range(n_m):  # one model and a block of samples at a time (bounded memory)
        for s0 in range(0, n_s, step):
            sl = slice(s0, min(n_s, s0 + step))
            a = np.asarray(a_da.isel(model=m, sample=sl).values, dtype=float)
            o = np.asarray(o_da.isel(model=m, sample=sl).values, dtype=float)
            out[m, sl] = _pair_block(a, o, taus_sorted, orders, pair_idx)
    out = out[..., unsort]
    dims = [*lead_dims, "pair", "order", "tau"]
    coords: dict[str, Any] = {d: ds[d].values for d in lead_dims if d in ds.coords}
    for name in ("family", "series", "kind", "arch", "params", "active_params"):
        if name in ds.coords and ds[name].dims == ("model",):
            coords[name] = ("model", ds[name].values)
    coords.update(
        pair=np.asarray([labels[k] for k in pair_idx], dtype=object),
        order=list(orders),
        tau=taus,
    )
    da = xr.DataArray(out, dims=dims, coords=coords, name="ips")
    if not per_pair:
        da = xr.DataArray(
            nanmean(da.values, axis=dims.index("pair")),
            dims=[d for d in dims if d != "pair"],
            coords={k: v for k, v in coords.items() if k != "pair"},
            name="ips",
        )
    if scalar_tau:
        da = da.isel(tau=0, drop=True)
    if single_order:
        da = da.isel(order=0, drop=True)
    da.attrs.update(
        tau=float(taus[0]) if scalar_tau else taus.tolist(),
        templates=tnames,
        pairs=[labels[k] for k in pair_idx],
    )
    return da
