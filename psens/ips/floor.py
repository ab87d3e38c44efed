r"""The noise floor of IPS: the sensitivity that numerical noise alone produces.

IPS compares *salient* interactions — Möbius sums of up to :math:`2^n` values of
:math:`v` — so rounding noise in :math:`v` moves it. The floor of a prompt is the IPS between
two scorings of the **same** prompt that should not differ (float32 vs half precision, the
tree walk vs one prompt at a time, two batch layouts), computed exactly like eq. 3 of [1]_
with the two scorings in place of two templates:

.. math::
    \mathrm{floor}(x, T) = \frac{1}{|\Omega_{union}|}\sum_{S\in\Omega_{union}}
    \frac{|\tilde I_S(x|T) - \tilde I'_S(x|T)|}{(|\tilde I_S(x|T)| + |\tilde I'_S(x|T)|)/2}

where :math:`\tilde I` and :math:`\tilde I'` are the normalised interactions of the two
scorings and :math:`\Omega_{union}` the union of their salient sets. A template IPS that does
not exceed the floor says nothing about the model.

* :func:`floor_between` — the floor of two given scorings ``v_a``, ``v_b``;
  :func:`floor_bands` the same for several order bands at once (one decomposition);
* :func:`jitter_floor` — the floor of ``v`` against ``v`` plus Gaussian noise of a given
  :math:`\sigma` (for runs that were scored once; :data:`PRECISION_SIGMA` holds measured
  :math:`\sigma` of half-precision scoring);
* :func:`run_floor` — the jitter floor of every (model, sample, template) of a run;
* :func:`noise_floor` — a run's floor: the *measured* one when the run scored every prompt
  twice (config ``noise_floor``: float32 and half precision, stored as ``floor``), else the
  jitter floor; ``attrs["kind"]`` says which;
* :func:`floor_test` — per model, whether template IPS exceeds the floor: a paired
  sign-flip permutation test over samples, the mean difference with its bootstrap CI and the
  paired effect size :math:`d_z = \overline{\Delta} / s_\Delta`; its ``exceeds`` is
  :func:`exceeds_floor`, the one rule of the headline's ``above_floor``.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from psens._validation import check_in_interval, check_positive_int, fail
from psens.ips.metric import ORDER_LEVELS, ips, nanmean
from psens.settings import DEFAULT_NORMALIZATION, DEFAULT_SOLVER, DEFAULT_TAU, run_settings, tau_of

__all__ = [
    "FLOOR_ALPHA",
    "PRECISION_SIGMA",
    "exceeds_floor",
    "floor_bands",
    "floor_between",
    "floor_label",
    "floor_test",
    "floor_test_line",
    "jitter_floor",
    "noise_floor",
    "run_floor",
]

#: Mean absolute change of v (log-odds) when SmolLM2-135M-Instruct scores ARC prompts in half
#: precision instead of float32 (CPU, n = 8, 2 items × 5 templates; ``make bench`` measures
#: the bfloat16 figure again): a σ for :func:`jitter_floor` when a run was scored once.
PRECISION_SIGMA: dict[str, float] = {"float16": 0.011, "bfloat16": 0.09}
#: the level of the paired floor test an IPS must pass to be above its floor
FLOOR_ALPHA = 0.05


def exceeds_floor(diff_lo: Any, p_value: Any) -> np.ndarray:
    """Is an IPS above its noise floor? The one rule of every surface (the headline's
    ``above_floor``, :func:`floor_test`'s ``exceeds``): the lower end of the CI of
    IPS − floor is above 0 *and* the paired sign-flip p is below :data:`FLOOR_ALPHA` (with
    few items a CI can exclude 0 where the test cannot go below :math:`2/2^n`).

    Parameters
    ----------
    diff_lo : array_like
        Lower end of the bootstrap CI of IPS − floor.
    p_value : array_like
        Paired sign-flip p-value of IPS − floor.

    Returns
    -------
    numpy.ndarray
        Boolean, the broadcast shape of the inputs (NaN gives False).

    Examples
    --------
    >>> exceeds_floor([0.1, 0.1, -0.1], [0.01, 0.2, 0.01]).tolist()
    [True, False, False]
    """
    lo = np.asarray(diff_lo, dtype=float)
    p = np.asarray(p_value, dtype=float)
    with np.errstate(invalid="ignore"):
        return (lo > 0) & (p < FLOOR_ALPHA)


def _order_arg(order: str | None) -> str | None:
    """``"all"`` is every order (``None`` for :func:`psens.ips.ips`, which checks the rest)."""
    return None if order == "all" else order


def _decompose(v: np.ndarray, solver: str, settings: dict | None):
    from psens.interactions import and_or

    return and_or(v, solver, **(settings or {}))


def floor_between(
    v_a: Any,
    v_b: Any,
    *,
    solver: str = DEFAULT_SOLVER,
    tau: float = DEFAULT_TAU,
    order: str | None = None,
    settings: dict | None = None,
    normalization: str = DEFAULT_NORMALIZATION,
) -> np.ndarray:
    """IPS between two scorings of the same games, ``[...]`` (NaN: nothing salient).

    Parameters
    ----------
    v_a, v_b : array_like, shape (..., 2**n)
        The two scorings (e.g. float32 and bfloat16 ``v`` of the same prompts).
    solver : {"canonical", "exact", "sgd"}
        AND-OR split used for both (:func:`psens.interactions.and_or`).
    tau : float in (0, 1)
        Salience threshold.
    order : {"all", "low", "mid", "high"}, optional
        Restrict to one order band.
    settings : dict, optional
        Extra solver settings (``steps``, ``preset``, ...).
    normalization : {"nonempty", "all"}
        What the min-max normalisation spans (:func:`psens.ips.metric.normalize`).
    """
    band = "all" if order is None else order
    values = floor_bands(
        v_a,
        v_b,
        orders=[band],
        solver=solver,
        tau=tau,
        settings=settings,
        normalization=normalization,
    )
    return values[..., 0]


def floor_bands(
    v_a: Any,
    v_b: Any,
    *,
    orders: Sequence[str] = ORDER_LEVELS,
    solver: str = DEFAULT_SOLVER,
    tau: float = DEFAULT_TAU,
    settings: dict | None = None,
    normalization: str = DEFAULT_NORMALIZATION,
) -> np.ndarray:
    """:func:`floor_between` for several order bands from one decomposition, ``[..., order]``.

    ``floor_bands(a, b, orders=os)[..., k]`` equals ``floor_between(a, b, order=os[k])``; a
    run with ``noise_floor`` stores it as ``floor`` (bands ``all, low, mid, high``).
    """
    where = "floor_bands"
    orders = _check_orders(orders, where)
    a, b = np.asarray(v_a, dtype=float), np.asarray(v_b, dtype=float)
    if a.shape != b.shape:
        fail(where, f"shapes {a.shape} and {b.shape} differ", "Pass two scorings")
    check_in_interval(tau, where, "tau", 0.0, 1.0)
    both = _decompose(np.stack([a, b], axis=-2), solver, settings)
    values = [
        ips(both.I_and, both.I_or, tau=tau, order=_order_arg(o), normalization=normalization)
        for o in orders
    ]
    return np.stack(values, axis=-1)


def jitter_floor(
    v: Any,
    sigma: float,
    *,
    draws: int = 1,
    solver: str = DEFAULT_SOLVER,
    tau: float = DEFAULT_TAU,
    order: str | None = None,
    seed: int = 0,
    settings: dict | None = None,
    normalization: str = DEFAULT_NORMALIZATION,
) -> np.ndarray:
    r"""Floor of ``v`` against ``v + ε``, :math:`\varepsilon \sim N(0, \sigma^2)` i.i.d.

    The mean over ``draws`` independent noise draws (NaN draws skipped), shape ``v.shape[:-1]``.
    """
    check_in_interval(sigma, "jitter_floor", "sigma", 0.0, np.inf, closed="neither")
    check_positive_int(draws, "jitter_floor", "draws")
    vv = np.asarray(v, dtype=float)
    rng = np.random.default_rng(seed)
    noisy = vv[None] + sigma * rng.normal(size=(draws, *vv.shape))
    clean = np.broadcast_to(vv[None], noisy.shape)
    values = floor_between(
        clean,
        noisy,
        solver=solver,
        tau=tau,
        order=order,
        settings=settings,
        normalization=normalization,
    )
    return nanmean(values, axis=0)


def _check_orders(orders: Sequence[str] | str, where: str) -> list[str]:
    orders = [orders] if isinstance(orders, str) else list(orders)
    bad = [o for o in orders if o not in ORDER_LEVELS]
    if bad:  # before any decomposition
        fail(where, f"orders {bad} are unknown", f"Use some of {ORDER_LEVELS}")
    return orders


def _split(ds, solver: str | None, tau: float | None) -> tuple[str, dict | None, float]:
    """The AND-OR split and τ of a floor: the run's own (``solver_*``, ``tau`` attrs) unless
    given."""
    run = run_settings(ds)
    settings = None
    if solver is None:  # the run's own split, with its settings
        solver = run.solver
        settings = run.and_or_kwargs(solver)
    return solver, settings, float(tau_of(ds, tau))


def _by_games(ds, orders: list[str], floor_of, where: str):
    """``floor(model, sample, [shot,] template, order)`` of a run, one model and one ``n``
    at a time: ``floor_of(games, m, rows, n)`` gets the games ``v[rows, ..., template,
    :2**n]`` of model ``m`` and returns ``[rows, ..., template, order]``. Pending and failed
    blocks are NaN, and so are games with a NaN value (zeros are passed in their place)."""
    import xarray as xr

    for name in ("v", "n_vars"):
        if name not in ds.variables:
            fail(where, f"the Dataset has no {name!r}", "Pass a psens run (psens.open_run)")
    v_da = ds["v"].transpose("model", "sample", ..., "template", "subset")
    n_vars = np.asarray(ds["n_vars"].values, dtype=int)
    done = None
    if "status" in ds.variables:
        from psens.store import DONE

        done = np.asarray(ds["status"].transpose("model", "sample").values) == DONE
    out = np.full((*v_da.shape[:-1], len(orders)), np.nan)
    for m in range(v_da.sizes["model"]):
        v_m = np.asarray(v_da.isel(model=m).values, dtype=float)
        for n in np.unique(n_vars):
            rows = np.flatnonzero(n_vars == n)
            if done is not None:
                rows = rows[done[m, rows]]
            if rows.size == 0:
                continue
            games = v_m[rows][..., : 1 << int(n)]
            bad = ~np.isfinite(games).all(axis=-1)
            values = floor_of(np.where(bad[..., None], 0.0, games), m, rows, int(n))
            values[bad] = np.nan
            out[m, rows] = values
    coords = {d: ds[d].values for d in v_da.dims[:-1] if d in ds.coords}
    coords["order"] = orders
    return xr.DataArray(out, dims=[*v_da.dims[:-1], "order"], coords=coords, name="floor")


def run_floor(
    ds,
    sigma: float,
    *,
    draws: int = 1,
    orders: Sequence[str] = ORDER_LEVELS,
    solver: str | None = None,
    tau: float | None = None,
    seed: int = 0,
):
    """Jitter floor of every (model, sample, [shot,] template) of a run, per order band.

    Each sample is decomposed at its own ``n`` with the run's solver (``solver_method`` attr)
    and τ (``tau`` attr) unless given; pending and failed blocks are NaN. One model at a time;
    the bands share one decomposition (each band equals :func:`jitter_floor` at that order).

    Returns
    -------
    xarray.DataArray
        ``floor(model, sample, [shot,] template, order)`` with attrs ``sigma``, ``draws``,
        ``tau``, ``solver``.
    """
    where = "run_floor"
    orders = _check_orders(orders, where)
    check_in_interval(sigma, where, "sigma", 0.0, np.inf, closed="neither")
    check_positive_int(draws, where, "draws")
    solver, settings, tau = _split(ds, solver, tau)
    norm = run_settings(ds).normalization

    def jitter(games, m, rows, n):  # as jitter_floor: one seeded noise draw for all bands
        noisy = games[None] + sigma * np.random.default_rng(seed).normal(size=(draws, *games.shape))
        clean = np.broadcast_to(games[None], noisy.shape)
        values = floor_bands(
            clean,
            noisy,
            orders=orders,
            solver=solver,
            tau=tau,
            settings=settings,
            normalization=norm,
        )
        return nanmean(np.moveaxis(values, 0, -1), axis=-1)

    out = _by_games(ds, orders, jitter, where)
    out.attrs = {"sigma": sigma, "draws": draws, "tau": tau, "solver": solver}
    return out


NOISE_FLOOR_KINDS = ("auto", "measured", "jitter")


def noise_floor(
    ds,
    *,
    kind: str = "auto",
    tau: float | None = None,
    sigma: float | None = None,
    orders: Sequence[str] = ORDER_LEVELS,
    draws: int = 1,
    seed: int = 0,
    solver: str | None = None,
):
    """A run's noise floor: the measured one when the run has it, else the jitter floor.

    A run with the config key ``noise_floor`` scored every masked prompt twice — with the
    model in float32 and in half precision — and stored the IPS between the two scorings as
    ``floor`` (the *measured* floor). Other runs get :func:`run_floor` (the *jitter* floor,
    ``σ`` = ``PRECISION_SIGMA["bfloat16"]`` unless given). Both have the same shape, so
    :func:`floor_test` and the tables use them the same way.

    Parameters
    ----------
    ds : xarray.Dataset
        A run (:func:`psens.open_run`).
    kind : {"auto", "measured", "jitter"}
        ``"auto"``: measured when stored, else jitter; ``"measured"`` refuses a run without
        a stored floor; ``"jitter"`` computes the jitter floor even when one is stored.
    tau : float, optional
        Salience threshold (default: the run's). The measured floor at another τ is
        recomputed from ``v`` and ``v_floor`` (:func:`floor_bands`).
    sigma, draws, seed : jitter floor settings (:func:`run_floor`); ``sigma`` is only used
        for the jitter floor.
    orders : order bands to return (of ``all, low, mid, high``).
    solver : str, optional
        In a run with several solvers: whose floor (default: the first;
        :func:`psens.ips.select_solver`).

    Returns
    -------
    xarray.DataArray
        ``floor(model, sample, [shot,] template, order)``; pending and failed blocks NaN.
        ``attrs``: ``kind`` (``"measured"``/``"jitter"``), ``tau``, ``solver``, and
        ``dtype`` (measured: the second scoring's dtype) or ``sigma`` and ``draws`` (jitter).
    """
    from psens.ips.metric import select_solver

    where = "noise_floor"
    if kind not in NOISE_FLOOR_KINDS:
        fail(where, f"kind = {kind!r}", f"Use one of {NOISE_FLOOR_KINDS}")
    orders = _check_orders(orders, where)
    if tau is not None:
        check_in_interval(tau, where, "tau", 0.0, 1.0)
    ds = select_solver(ds, solver)
    stored = "floor" in ds.variables and "band" in ds["floor"].dims
    if kind == "measured" and not stored:
        fail(
            where,
            "the run has no measured floor (no 'floor' variable)",
            'Run it with noise_floor = true, or use kind="jitter"',
        )
    if kind == "jitter" or not stored:
        sigma = PRECISION_SIGMA["bfloat16"] if sigma is None else sigma
        out = run_floor(ds, sigma, draws=draws, orders=orders, seed=seed, tau=tau)
        out.attrs["kind"] = "jitter"
        return out
    method, settings, run_tau = _split(ds, None, None)
    if tau is None or float(tau) == run_tau:
        da = ds["floor"].rename(band="order").sel(order=orders)
        lead = [d for d in ("model", "sample", "shot") if d in da.dims]
        da = da.transpose(*lead, "template", "order").load()
        if "status" in ds.variables:
            from psens.store import DONE

            da = da.where(ds["status"].load() == DONE).transpose(*lead, "template", "order")
        da.name = "floor"
    else:  # another τ: from the two stored scorings
        w_da = ds["v_floor"].transpose("model", "sample", ..., "template", "subset")

        def measured(games, m, rows, n):
            other = np.asarray(w_da.isel(model=m).values, dtype=float)[rows][..., : 1 << n]
            bad = ~np.isfinite(other).all(axis=-1)
            other = np.where(bad[..., None], games, other)
            values = floor_bands(
                games,
                other,
                orders=orders,
                solver=method,
                tau=tau,
                settings=settings,
                normalization=run_settings(ds).normalization,
            )
            values[bad] = np.nan
            return values

        da = _by_games(ds, orders, measured, where)
    da.attrs = {
        "kind": "measured",
        "dtype": str(ds.attrs.get("noise_floor", "")),
        "tau": run_tau if tau is None else float(tau),
        "solver": method,
    }
    return da


def floor_test(
    ips_values,
    floor_values,
    *,
    n_boot: int = 1000,
    n_perm: int = 2000,
    ci: float = 0.95,
    seed: Any = 0,
):
    r"""Per model (and order): does template IPS exceed its noise floor?

    ``ips_values`` is per-sample IPS (``psens.ips.sample_ips(ds, orders=...)``: dims
    ``model, sample, [order]``); ``floor_values`` the floor (:func:`noise_floor`, measured or
    jitter, or :func:`run_floor`), averaged over templates (and shots) to one value per
    sample. The test is paired over samples:
    :math:`\Delta_i = \mathrm{IPS}_i - \mathrm{floor}_i`.

    Returns
    -------
    pandas.DataFrame
        One row per model [× order]: ``ips``, ``floor``, ``diff`` with ``diff_lo``/``diff_hi``
        (percentile bootstrap), ``effect_size`` (:math:`d_z`), ``p_value`` (two-sided
        sign-flip permutation), ``n`` (paired samples), ``exceeds``
        (:func:`exceeds_floor`: ``diff_lo > 0`` and ``p_value <`` :data:`FLOOR_ALPHA`, the
        headline's ``above_floor``), ``floor_kind`` (``"measured"``, ``"jitter"``; the
        floor's ``kind`` attr, ``""`` when it has none).
    """
    import pandas as pd
    import xarray as xr

    from psens.stats import paired_test

    fl = floor_values
    extra = [d for d in fl.dims if d not in ips_values.dims]
    fl = fl.mean(extra, skipna=True) if extra else fl
    a, b = xr.align(ips_values, fl, join="inner")
    lead = [d for d in a.dims if d != "sample"]
    a = a.transpose(*lead, "sample")
    b = b.transpose(*lead, "sample")
    res = paired_test(a.values, b.values, n_boot=n_boot, n_perm=n_perm, ci=ci, seed=seed)
    diff = a.values - b.values
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # one paired sample: no d_z
        sd = np.nanstd(diff, axis=-1, ddof=1)
        effect = np.where(sd > 0, np.nanmean(diff, axis=-1) / sd, np.nan)
    index = pd.MultiIndex.from_product([a[d].values for d in lead], names=lead)
    frame = pd.DataFrame(
        {
            "ips": np.ravel(res["mean_a"]),
            "floor": np.ravel(res["mean_b"]),
            "diff": np.ravel(res["diff"]),
            "diff_lo": np.ravel(res["diff_lo"]),
            "diff_hi": np.ravel(res["diff_hi"]),
            "effect_size": np.ravel(effect),
            "p_value": np.ravel(res["p_value"]),
            "n": np.ravel(res["n"]),
        },
        index=index,
    ).reset_index()
    frame["exceeds"] = exceeds_floor(frame["diff_lo"], frame["p_value"])
    frame["floor_kind"] = str(floor_values.attrs.get("kind", ""))
    return frame


def floor_label(floor) -> str:
    """What a floor of :func:`noise_floor` is, in words (for tables, reports and widgets)."""
    attrs = getattr(floor, "attrs", {})
    if attrs.get("kind") == "measured":
        return f"measured: float32 vs {attrs.get('dtype') or 'half precision'} scoring"
    sigma = attrs.get("sigma")
    noise = f"v + N(0, {sigma:g}²)" if sigma is not None else "v + noise"
    return f"jitter: {noise}, no measured floor in this run"


def floor_test_line(row) -> str:
    """One row of :func:`floor_test` (or of ``order_ips_table(..., floor=...)``) as text:
    ``IPS − floor 0.661 [0.52, 0.80], d_z 3.10, p = 0.002 (n = 6)``."""

    def num(x, fmt=".3f"):
        return format(float(x), fmt) if np.isfinite(float(x)) else "n/a"

    return (
        f"IPS − floor {num(row['diff'])} [{num(row['diff_lo'])}, {num(row['diff_hi'])}], "
        f"d_z {num(row['effect_size'], '.2f')}, p = {num(row['p_value'], '.3g')} "
        f"(n = {int(row['n'] if 'n' in row else row['n_paired'])})"
    )
