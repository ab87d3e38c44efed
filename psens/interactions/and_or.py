r"""AND-OR decomposition of a game (Li & Zhang 2023; IPS paper §3.1 and eq. 12).

A game ``v`` is split into an AND part and an OR part,

.. math::
    v_{and} = \tfrac12 (v + q) + \gamma, \qquad v_{or} = \tfrac12 (v + q) - \gamma,

and ``gamma`` is chosen to make the interactions sparse,

.. math::
    \min_\gamma \; \sum_{S \subseteq N} |I_{and}(S)| + |I_{or}(S)|, \qquad
    I_{and} = M v_{and}, \; I_{or} = L_{or} v_{or}

(eq. 12). ``q`` is an optional bounded noise term, :math:`|q_T| \le` ``qthres`` :math:`\cdot
|v(N) - v(\emptyset)|`, used by the interaction group's public code; the IPS paper uses
``gamma`` only (``qthres = 0``, the default). Universal matching holds for ``v + q``.

Two methods:

* ``"sgd"`` — the published procedure: subgradient descent with momentum 0.9 and a learning
  rate decayed log-linearly from ``lr`` to ``lr / 10`` over ``steps`` steps. Every step uses the
  fast transforms and their transposes (:math:`O(n 2^n)`), batched one thread per game.
* ``"exact"`` — the optimum of the same convex problem (a linear program), see
  :mod:`psens.interactions.exact` for the algorithm and its stopping rule.

References
----------
.. [1] Qin, R., Wang, Q., Wang, T., Wei, Z., and Shen, W. "Evaluating and Explaining Prompt
   Sensitivity of LLMs Using Interactions." Proceedings of the 43rd International Conference
   on Machine Learning (ICML), PMLR 306, 2026. arXiv:2608.18539.
.. [2] Li, M., and Zhang, Q. "Defining and Quantifying AND-OR Interactions for Faithful and
   Concise Explanation of DNNs." arXiv:2304.13312, 2023.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from psens._validation import check_game, check_in_interval, check_positive_int, fail
from psens.interactions import _sgd
from psens.interactions.transforms import mobius_and, mobius_or

__all__ = ["AndOrResult", "SolverSettings", "and_or", "l1_objective"]

Method = Literal["sgd", "exact"]


@dataclass(frozen=True)
class SolverSettings:
    """How an AND-OR decomposition is computed; copied verbatim into a run's attrs.

    Defaults follow the interaction group's public code (sjtu-xai-lab/interaction-concept):
    momentum 0.9, ``lr`` log-decayed to ``lr/10``, 20 000 steps (they use 10k–50k),
    ``qthres = 0`` (their code uses 0.02–0.04 when the noise term is on).

    Attributes
    ----------
    method : {"sgd", "exact"}
    steps : int
        SGD steps.
    lr : float
        Initial SGD learning rate.
    momentum : float
        SGD momentum.
    qthres : float
        Bound of the noise term relative to ``|v(N) - v(∅)|``; 0 disables it.
    tol : float
        ``"exact"``: largest relative difference allowed between the LP optimum and the
        objective recomputed from the returned split.
    """

    method: Method = "sgd"
    steps: int = 20_000
    lr: float = 1e-5
    momentum: float = 0.9
    qthres: float = 0.0
    tol: float = 1e-9

    def __post_init__(self) -> None:
        where = "SolverSettings"
        if self.method not in ("sgd", "exact"):
            fail(where, f"method={self.method!r} is unknown", "Use 'sgd' or 'exact'")
        check_positive_int(self.steps, where, "steps")
        check_in_interval(self.lr, where, "lr", 0.0, np.inf)
        check_in_interval(self.momentum, where, "momentum", 0.0, 1.0, closed="left")
        check_in_interval(self.qthres, where, "qthres", 0.0, 1.0, closed="left")
        check_in_interval(self.tol, where, "tol", 0.0, 1.0)
        if self.method == "exact" and self.qthres > 0:
            fail(
                where,
                "the 'exact' method solves the gamma-only problem (qthres > 0 is not convex-LP)",
                "Use method='sgd' with qthres, or qthres=0 with 'exact'",
            )

    def to_attrs(self) -> dict[str, Any]:
        """Plain ``{name: value}`` for zarr/netCDF attrs."""
        return {f"solver_{k}": v for k, v in dataclasses.asdict(self).items()}


@dataclass
class AndOrResult:
    """Result of :func:`and_or` for a batch of games (arrays shaped like ``v``).

    ``I_and + I_or`` reconstruct ``v + q`` on every subset (universal matching).
    """

    I_and: np.ndarray
    I_or: np.ndarray
    gamma: np.ndarray
    q: np.ndarray | None
    loss: np.ndarray
    settings: SolverSettings
    info: dict[str, Any] = field(default_factory=dict)


def l1_objective(I_and: np.ndarray, I_or: np.ndarray) -> np.ndarray:
    r"""Eq. 12's objective per game: :math:`\sum_S |I_{and}(S)| + |I_{or}(S)|`."""
    return np.abs(I_and).sum(axis=-1) + np.abs(I_or).sum(axis=-1)


def _decompose(v: np.ndarray, gamma: np.ndarray, q: np.ndarray | None):
    base = 0.5 * (v if q is None else v + q)
    return mobius_and(base + gamma), mobius_or(base - gamma)


def and_or(
    v,
    method: Method = "sgd",
    *,
    settings: SolverSettings | None = None,
    progress: bool = False,
    **kwargs: Any,
) -> AndOrResult:
    """AND-OR interactions of a batch of games ``v[..., 2**n]`` (paper eq. 12).

    Parameters
    ----------
    v : array_like, shape (..., 2**n)
        Games (bit ``i`` of the index = player ``i`` kept). Finite values.
    method : {"sgd", "exact"}
        See the module docstring.
    settings : SolverSettings, optional
        All solver settings at once; keyword arguments (``steps``, ``lr``, ``momentum``,
        ``qthres``, ``tol``) override single fields.
    progress : bool
        Show a tqdm bar (SGD steps, or exact-solver games).

    Returns
    -------
    AndOrResult

    Examples
    --------
    >>> v = np.array([0.0, 1.0, 1.0, 2.0])  # additive: v(T) = |T|
    >>> float(and_or(v, "exact").loss)  # two singleton effects of 1, wherever they are put
    2.0
    """
    base = settings if settings is not None else SolverSettings(method=method)
    unknown = set(kwargs) - {f.name for f in dataclasses.fields(SolverSettings)}
    if unknown:
        fail(
            "and_or",
            f"unknown setting(s) {sorted(unknown)}",
            f"Use one of {[f.name for f in dataclasses.fields(SolverSettings)]}",
            TypeError,
        )
    st = dataclasses.replace(base, method=method, **kwargs)
    a = np.asarray(v)
    n = check_game(a, "and_or")
    dtype = np.float32 if a.dtype == np.float32 else np.float64
    flat = np.ascontiguousarray(a.reshape(-1, a.shape[-1]), dtype=dtype)
    if st.method == "sgd":
        gamma, q, info = _run_sgd(flat, n, st, progress)
    else:
        from psens.interactions.exact import solve_gamma

        gamma, info = solve_gamma(flat, n, tol=st.tol, progress=progress)
        q = None
    I_and, I_or = _decompose(flat, gamma, q)
    shape = a.shape
    return AndOrResult(
        I_and=I_and.reshape(shape),
        I_or=I_or.reshape(shape),
        gamma=gamma.reshape(shape),
        q=None if q is None else q.reshape(shape),
        loss=l1_objective(I_and, I_or).reshape(shape[:-1]),
        settings=st,
        info=info,
    )


def _run_sgd(flat: np.ndarray, n: int, st: SolverSettings, progress: bool):
    """Chunks of SGD steps in numba; the loop over chunks and the progress bar stay here."""
    dtype = flat.dtype
    lrs = (st.lr * np.power(10.0, -np.linspace(0.0, 1.0, st.steps))).astype(dtype)
    gamma = np.zeros_like(flat)
    q = np.zeros_like(flat)
    mg = np.zeros_like(flat)
    mq = np.zeros_like(flat)
    qb = (st.qthres * np.abs(flat[:, -1] - flat[:, 0])).astype(dtype)
    chunk = max(1, min(st.steps, 500))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=st.steps, desc=f"AND-OR sgd ({len(flat)} games, n={n})", unit="step")
    for start in range(0, st.steps, chunk):
        part = lrs[start : start + chunk]
        _sgd.sgd_rows(flat, n, part, dtype.type(st.momentum), qb, gamma, q, mg, mq)
        if bar is not None:
            bar.update(len(part))
    if bar is not None:
        bar.close()
    return gamma, (q if st.qthres > 0 else None), {"steps": st.steps}
