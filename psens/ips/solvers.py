r"""How much IPS depends on the AND-OR solver: one game set, every decomposition, one table.

Eq. 12 of the IPS paper splits a game into AND and OR parts,

.. math::
    v_{and} = \tfrac12 v + \gamma, \quad v_{or} = \tfrac12 v - \gamma, \qquad
    \min_\gamma f(\gamma) = \sum_{S \subseteq N} |I_{and}(S)| + |I_{or}(S)|,

a linear program whose optimum :math:`z^*` is unique but whose optimal set
:math:`\Gamma^* = \{\gamma : f(\gamma) = z^*\}` is, on real games, a polytope with many
vertices. IPS (eq. 3) is computed from the interactions, not from :math:`f`, so two equally
optimal splits can give different IPS. :func:`solver_sensitivity` decomposes the same games
with several solvers —

* ``"canonical"``: the least-norm point :math:`\gamma^\dagger` of :math:`\Gamma^*` (unique);
* ``"exact"``: the optimal vertex HiGHS' dual simplex returns;
* ``"sgd"``: subgradient descent with psens' defaults (20 000 steps, lr :math:`10^{-5}`);
* ``"sgd-paper"`` / ``"sgd-paper-pq"``: the published procedure (``preset="paper"`` /
  ``"paper-pq"`` of :func:`psens.interactions.and_or`; ``"paper-pq"`` also learns the noise
  term :math:`q`);
* ``"vertex-0"``, ``"vertex-1"``, …: vertices of :math:`\Gamma^*` minimising random linear
  functions (:func:`psens.interactions.optimal_vertices`), i.e. other answers an LP solver
  could equally have given —

and reports, per sample, the IPS of every decomposition and the spread

.. math::
    \Delta(x) = \max_{s} \mathrm{IPS}_s(x) - \min_{s} \mathrm{IPS}_s(x)

over solvers :math:`s`, together with each decomposition's objective :math:`f` (and its
relative excess over the LP optimum), so that a reader sees which splits are optimal and how
much of a model's IPS is a property of the solver rather than of the model.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
.. [2] Li and Zhang, arXiv:2304.13312, 2023; the full reference is in :mod:`psens.interactions`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from psens._validation import check_game, check_in_interval, check_positive_int, fail
from psens.interactions import and_or, l1_objective, optimal_vertices
from psens.ips.metric import ORDER_LEVELS, ips, n_players
from psens.settings import tau_of
from psens.store.labels import model_names

__all__ = ["LP_SOLVERS", "SOLVERS", "solver_sensitivity", "solver_table"]

#: named solvers: the keyword arguments of :func:`psens.interactions.and_or`
SOLVERS: dict[str, dict[str, Any]] = {
    "canonical": {"method": "canonical"},
    "exact": {"method": "exact"},
    "sgd": {"method": "sgd"},
    "sgd-paper": {"method": "sgd", "preset": "paper"},
    "sgd-paper-pq": {"method": "sgd", "preset": "paper-pq"},
}
#: solvers that reach the LP optimum of eq. 12 (besides every ``vertex-j``)
LP_SOLVERS: tuple[str, ...] = ("canonical", "exact")
DEFAULT_SOLVERS: tuple[str, ...] = ("canonical", "exact", "sgd", "sgd-paper")
WHERE = "solver_sensitivity"
#: the order axis of the result: "all" (eq. 3) then the bands of §4.3
ORDERS_OUT: tuple[str, ...] = ORDER_LEVELS


def _check_solvers(solvers: Sequence[str] | str) -> tuple[str, ...]:
    names = (solvers,) if isinstance(solvers, str) else tuple(solvers)
    for name in names:
        if name not in SOLVERS:
            fail(
                WHERE,
                f"solver {name!r} is unknown",
                f"Use some of {list(SOLVERS)} (random optimal vertices come from n_vertices=)",
            )
    if len(set(names)) != len(names):
        fail(WHERE, f"solvers {list(names)} repeat a name", "List each solver once")
    return names


def _solver_names(solvers: tuple[str, ...], n_vertices: int) -> list[str]:
    return [*solvers, *(f"vertex-{j}" for j in range(n_vertices))]


def _decompose(
    v: np.ndarray,
    solvers: tuple[str, ...],
    n_vertices: int,
    seed: int,
    seconds: dict[str, float],
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{solver: (I_and, I_or)}`` of the games ``v[..., 2**n]``; adds wall time to ``seconds``."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name in solvers:
        start = time.perf_counter()
        res = and_or(v, **SOLVERS[name])
        seconds[name] += time.perf_counter() - start
        out[name] = (res.I_and, res.I_or)
    if n_vertices:
        start = time.perf_counter()
        res = optimal_vertices(v, n_vertices, seed=seed)
        share = (time.perf_counter() - start) / n_vertices
        for j in range(n_vertices):
            seconds[f"vertex-{j}"] += share
            out[f"vertex-{j}"] = (res.I_and[..., j, :], res.I_or[..., j, :])
    return out


def _ips_by_order(I_and: np.ndarray, I_or: np.ndarray, tau: float) -> np.ndarray:
    """IPS of every sample for the orders of :data:`ORDERS_OUT`: ``[..., order]``."""
    return np.stack([ips(I_and, I_or, tau, None if o == "all" else o) for o in ORDERS_OUT], axis=-1)


def _games_of_sample(games: np.ndarray, label: str) -> np.ndarray:
    """A stored sample's games cut to its own ``n`` (the subsets before the NaN padding)."""
    ns = np.unique(n_players(games))
    if len(ns) != 1:
        fail(
            WHERE,
            f"sample {label} has games of different sizes ({ns.tolist()} players)",
            "Check the run: all games of a sample have the sample's own n",
        )
    cut = games[..., : 1 << int(ns[0])]
    if not np.isfinite(cut).all():
        fail(
            WHERE,
            f"sample {label} has NaN inside its own subsets",
            "Recompute that block (psens.run resumes it) or pass models= without it",
        )
    return cut


def solver_sensitivity(
    data,
    *,
    solvers: Sequence[str] | str = DEFAULT_SOLVERS,
    n_vertices: int = 4,
    tau: float | None = None,
    seed: int = 0,
    models: Sequence[str] | None = None,
    progress: bool = True,
):
    r"""IPS of the same games under several AND-OR solvers, and its per-sample spread.

    For every solver :math:`s` (see the module docstring) the games are decomposed with
    :func:`psens.interactions.and_or` (the ``vertex-j`` with
    :func:`psens.interactions.optimal_vertices`), and IPS (eq. 3) is computed per sample with
    :func:`psens.ips.ips` for all orders and the bands of §4.3:

    .. math::
        \mathrm{IPS}_s(x) = \mathbb E_{T,\hat T}\frac{1}{|\Omega_{union}|}
        \sum_{S\in\Omega_{union}} \frac{|\tilde I^s_S(x|T) - \tilde I^s_S(x|\hat T)|}
        {(|\tilde I^s_S(x|T)| + |\tilde I^s_S(x|\hat T)|)/2}, \qquad
        \Delta(x) = \max_s \mathrm{IPS}_s(x) - \min_s \mathrm{IPS}_s(x).

    Parameters
    ----------
    data : array_like or xarray.Dataset
        Games ``v[..., template, 2**n]`` (one ``n``, finite), or a run Dataset
        (:func:`psens.open_run`, :func:`psens.synthetic.synthetic_run`) whose ``v`` is
        decomposed one model and one sample at a time, each sample with its own ``n`` (the
        subsets before its NaN padding); samples whose ``status`` is not done are skipped
        (NaN).
    solvers : sequence of str
        Names of :data:`SOLVERS`: ``"canonical"``, ``"exact"``, ``"sgd"``, ``"sgd-paper"``,
        ``"sgd-paper-pq"``.
    n_vertices : int
        Random optimal vertices to add as solvers ``"vertex-0"`` … (0: none).
    tau : float in (0, 1)
        Salience threshold of IPS; default: the run's own (:func:`psens.settings.tau_of`),
        0.1 (the paper's) for arrays.
    seed : int
        Seed of the vertices' random linear functions
        (:func:`psens.interactions.vertex_directions`).
    models : sequence of str, optional
        Runs only: these models (default all).
    progress : bool
        Runs only: a tqdm bar over samples.

    Returns
    -------
    xarray.Dataset
        * ``ips(solver, [model,] sample, [shot,] order)`` — per-sample IPS, ``order`` in
          ``("all", "low", "mid", "high")``; NaN where no template pair has a salient
          interaction, or the sample was skipped;
        * ``spread([model,] sample, [shot,] order)`` — :math:`\Delta(x)`, max − min over the
          solvers with a finite IPS (NaN if none);
        * ``objective(solver, ..., template)`` — eq. 12's loss
          (:func:`psens.interactions.l1_objective`) of every game;
        * ``excess(solver, ..., template)`` — ``objective / optimum − 1``, the optimum being
          the least objective of the LP solvers present (``canonical``, ``exact``,
          ``vertex-j``; they agree to 1e-9); absent when none of them ran;
        * ``seconds(solver)`` — wall time spent decomposing (a ``vertex-j`` is credited an
          equal share of the call that computes all vertices);
        * runs only: ``done(model, sample)`` and ``n_players(model, sample)`` (-1 when
          skipped).

        An array's leading axes are named ``sample`` (the last one) and ``dim_0``, ``dim_1``,
        … (the others). ``attrs``: ``tau``, ``n_vertices``, ``seed``, ``solvers``. Summarise
        with :func:`solver_table`.

    References
    ----------
    .. [1] Qin, R., Wang, Q., Wang, T., Wei, Z., and Shen, W. "Evaluating and Explaining
       Prompt Sensitivity of LLMs Using Interactions." Proceedings of the 43rd International
       Conference on Machine Learning (ICML), PMLR 306, 2026. arXiv:2608.18539.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> base = rng.laplace(size=(3, 1, 16))
    >>> v = base + 0.3 * rng.normal(size=(3, 4, 16))  # 3 samples, 4 templates, n = 4
    >>> res = solver_sensitivity(v, solvers=("canonical", "exact"), n_vertices=2)
    >>> res["ips"].dims, res["solver"].values.tolist()
    (('solver', 'sample', 'order'), ['canonical', 'exact', 'vertex-0', 'vertex-1'])
    >>> bool((abs(res["excess"]) < 1e-9).all())  # all four splits are optimal
    True
    """
    tau = tau_of(data, tau)
    names = _check_solvers(solvers)
    n_vertices = check_positive_int(n_vertices, WHERE, "n_vertices", minimum=0)
    tau = check_in_interval(tau, WHERE, "tau", 0.0, 1.0)
    seed = check_positive_int(seed, WHERE, "seed", minimum=0)
    if not names and not n_vertices:
        fail(WHERE, "no solver is selected", "Pass some solvers or n_vertices >= 1")
    if type(data).__name__ == "Dataset":
        out = _run_dataset(data, names, n_vertices, tau, seed, models, progress)
    else:
        if models is not None:
            fail(WHERE, "models= was given with an array of games", "Leave models out")
        out = _array(data, names, n_vertices, tau, seed)
    _finish(out, names, n_vertices)
    out.attrs.update(tau=tau, n_vertices=n_vertices, seed=seed, solvers=list(names))
    return out


def _check_templates(n_templates: int) -> None:
    if n_templates < 2:
        fail(
            WHERE,
            f"only {n_templates} template",
            "Put at least two templates on the second-to-last axis",
        )


def _array(data, names: tuple[str, ...], n_vertices: int, tau: float, seed: int):
    import xarray as xr

    v = np.asarray(data)
    check_game(v, WHERE)
    if v.ndim < 2:
        fail(
            WHERE,
            f"games have shape {v.shape}; need [..., template, 2**n]",
            "Put at least two templates on the second-to-last axis",
        )
    _check_templates(v.shape[-2])
    everything = _solver_names(names, n_vertices)
    seconds = dict.fromkeys(everything, 0.0)
    parts = _decompose(v, names, n_vertices, seed, seconds)
    lead = v.shape[:-2]
    dims = [f"dim_{k}" for k in range(len(lead) - 1)] + (["sample"] if lead else [])
    value = np.stack([_ips_by_order(*parts[s], tau) for s in everything])
    objective = np.stack([l1_objective(*parts[s]) for s in everything])
    coords: dict[str, Any] = {d: np.arange(size) for d, size in zip(dims, lead, strict=True)}
    coords.update(solver=everything, order=list(ORDERS_OUT), template=np.arange(v.shape[-2]))
    return xr.Dataset(
        {
            "ips": (["solver", *dims, "order"], value),
            "objective": (["solver", *dims, "template"], objective),
            "seconds": (["solver"], np.array([seconds[s] for s in everything])),
        },
        coords=coords,
    )


def _run_dataset(
    ds,
    names: tuple[str, ...],
    n_vertices: int,
    tau: float,
    seed: int,
    models: Sequence[str] | None,
    progress: bool,
):
    import xarray as xr
    from tqdm.auto import tqdm

    from psens.store import DONE

    if "v" not in ds:
        fail(WHERE, "the Dataset has no 'v' variable", "Pass a psens run Dataset (psens.open_run)")
    v_da = ds["v"]
    for dim in ("template", "subset"):
        if dim not in v_da.dims:
            fail(WHERE, f"'v' has no {dim!r} dim", "Pass a psens run Dataset (psens.open_run)")
    added = [d for d in ("model", "sample") if d not in v_da.dims]
    if models is not None and "model" in added:
        fail(WHERE, "models= was given but the Dataset has no model dim", "Leave models out")
    status = ds["status"] if "status" in ds else None
    if added:  # a slice of a run: treat the missing dims as length one
        v_da = v_da.expand_dims(added)
        if status is not None:
            status = status.expand_dims([d for d in added if d not in status.dims])
    if models is not None:
        have = set(model_names(v_da))
        missing = [m for m in models if m not in have]
        if missing:
            fail(WHERE, f"models {missing} are not in the run", "Check the model names")
        v_da = v_da.sel(model=list(models))
        if status is not None:
            status = status.sel(model=list(models))
    v_da = v_da.transpose("model", "sample", ..., "template", "subset")
    _check_templates(v_da.sizes["template"])
    n_m, n_s = v_da.sizes["model"], v_da.sizes["sample"]
    rest_dims = list(v_da.dims[2:-2])
    rest = tuple(v_da.shape[2:-2])
    n_t = v_da.sizes["template"]
    done = np.ones((n_m, n_s), dtype=bool)
    if status is not None:
        done = np.asarray(status.transpose("model", "sample").values) == DONE
    everything = _solver_names(names, n_vertices)
    seconds = dict.fromkeys(everything, 0.0)
    k = len(everything)
    value = np.full((k, n_m, n_s, *rest, len(ORDERS_OUT)), np.nan)
    objective = np.full((k, n_m, n_s, *rest, n_t), np.nan)
    n_of = np.full((n_m, n_s), -1, dtype=np.int64)
    sample_ids = [str(x) for x in v_da["sample"].values]
    model_ids = model_names(v_da)
    with tqdm(total=n_m * n_s, desc=WHERE, unit="sample", disable=not progress) as bar:
        for m in range(n_m):  # one model and one sample at a time: each with its own n
            for s in range(n_s):
                bar.update(1)
                if not done[m, s]:
                    continue
                raw = np.asarray(v_da.isel(model=m, sample=s).values, dtype=np.float64)
                games = _games_of_sample(raw, f"{sample_ids[s]!r} of {model_ids[m]!r}")
                n_of[m, s] = games.shape[-1].bit_length() - 1
                parts = _decompose(games, names, n_vertices, seed, seconds)
                for j, name in enumerate(everything):
                    value[j, m, s] = _ips_by_order(*parts[name], tau)
                    objective[j, m, s] = l1_objective(*parts[name])
    lead = ["model", "sample", *rest_dims]
    coords: dict[str, Any] = {
        c: (v_da[c].dims, v_da[c].values) for c in v_da.coords if set(v_da[c].dims) <= set(lead)
    }
    coords.update(solver=everything, order=list(ORDERS_OUT), template=v_da["template"].values)
    out = xr.Dataset(
        {
            "ips": (["solver", *lead, "order"], value),
            "objective": (["solver", *lead, "template"], objective),
            "seconds": (["solver"], np.array([seconds[s] for s in everything])),
            "done": (["model", "sample"], done),
            "n_players": (["model", "sample"], n_of),
        },
        coords=coords,
    )
    if added:
        out = out.isel({d: 0 for d in added})
    return out


def _finish(out, names: tuple[str, ...], n_vertices: int) -> None:
    """Add ``spread`` (max − min over solvers) and ``excess`` (over the LP optimum)."""
    value = out["ips"].values
    spread = np.fmax.reduce(value, axis=0) - np.fmin.reduce(value, axis=0)
    out["spread"] = (out["ips"].dims[1:], spread)
    lp = [
        j for j, s in enumerate(out["solver"].values) if s in LP_SOLVERS or s.startswith("vertex-")
    ]
    if lp:
        obj = out["objective"].values
        optimum = np.fmin.reduce(obj[lp], axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            scale = np.maximum(np.abs(optimum), np.finfo(np.float64).tiny)
            out["excess"] = (out["objective"].dims, obj / scale - optimum / scale)


def solver_table(result):
    """Mean IPS per solver and order (NaN skipped, counts reported), and the spread.

    Averages over every dim but ``solver``, ``model``, ``order`` and ``shot`` (the samples),
    as :func:`psens.ips.aggregate` does: NaN values are skipped and counted. Shot settings
    are never pooled (as in the headline): a result with a ``shot`` dim gives one block per
    shot setting, under a ``shot`` level.

    Parameters
    ----------
    result : xarray.Dataset
        The output of :func:`solver_sensitivity`.

    Returns
    -------
    pandas.DataFrame
        One row per solver, then ``"spread: mean"`` and ``"spread: max"`` (the per-sample
        spread's mean and maximum), under a ``model`` level when the result has one, under
        a ``shot`` level (first) when it has a ``shot`` dim.
        Columns: the mean per order (``all``, ``low``, ``mid``, ``high``), ``n_<order>``
        (values used) and, for solvers, ``max_excess`` (largest relative excess of the
        objective over the LP optimum; NaN without an LP solver) and ``seconds``.

    References
    ----------
    .. [1] Qin, R., Wang, Q., Wang, T., Wei, Z., and Shen, W. "Evaluating and Explaining
       Prompt Sensitivity of LLMs Using Interactions." Proceedings of the 43rd International
       Conference on Machine Learning (ICML), PMLR 306, 2026. arXiv:2608.18539.
    """
    import pandas as pd

    for name in ("ips", "spread", "objective"):
        if name not in result:
            fail("solver_table", f"the result has no {name!r}", "Pass solver_sensitivity(...)")
    if "shot" in result["ips"].dims:  # one block per shot setting, never pooled
        blocks = {int(k): solver_table(result.sel(shot=k)) for k in result["shot"].values}
        table = pd.concat(blocks, names=["shot"])
        table.attrs.update(result.attrs)
        return table
    orders = [str(o) for o in result["order"].values]
    has_model = "model" in result["ips"].dims
    names = model_names(result) if has_model else [None]
    rows, index = [], []

    def flat(da, keep: tuple[str, ...]):
        """``da`` as ``[..., values]`` with ``keep`` first, everything else flattened."""
        da = da.transpose(*keep, ...)
        return da.values.reshape(*da.shape[: len(keep)], -1)

    for m, model in enumerate(names):
        pick = {"model": m} if has_model else {}
        ips_v = flat(result["ips"].isel(pick), ("solver", "order"))  # [solver, order, values]
        obj_excess = flat(result["excess"].isel(pick), ("solver",)) if "excess" in result else None
        for j, solver in enumerate(result["solver"].values):
            row: dict[str, float] = {}
            for o, order in enumerate(orders):
                x = ips_v[j, o]
                cnt = int(np.isfinite(x).sum())
                row[order] = float(np.nansum(x) / cnt) if cnt else np.nan
                row[f"n_{order}"] = cnt
            worst = np.nan
            if obj_excess is not None and np.isfinite(obj_excess[j]).any():
                worst = float(np.nanmax(obj_excess[j]))
            row["max_excess"] = worst
            row["seconds"] = float(result["seconds"].values[j]) if "seconds" in result else np.nan
            rows.append(row)
            index.append((model, str(solver)))
        sp = flat(result["spread"].isel(pick), ("order",))  # [order, values]
        for label, how in (("spread: mean", "mean"), ("spread: max", "max")):
            row = {}
            for o, order in enumerate(orders):
                x = sp[o]
                cnt = int(np.isfinite(x).sum())
                if not cnt:
                    row[order] = np.nan
                elif how == "mean":
                    row[order] = float(np.nansum(x) / cnt)
                else:
                    row[order] = float(np.nanmax(x))
                row[f"n_{order}"] = cnt
            row["max_excess"], row["seconds"] = np.nan, np.nan
            rows.append(row)
            index.append((model, label))
    if has_model:
        idx = pd.MultiIndex.from_tuples(index, names=["model", "solver"])
    else:
        idx = pd.Index([s for _, s in index], name="solver")
    columns = [*orders, *(f"n_{o}" for o in orders), "max_excess", "seconds"]
    table = pd.DataFrame(rows, index=idx)[columns]
    table.attrs.update(result.attrs)
    return table
