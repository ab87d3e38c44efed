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

Three methods:

* ``"canonical"`` (the default) — among all optimal ``gamma`` (and ``q``), the one of least
  Euclidean norm: unique, so the same whatever the batch, the thread count, the solver's path
  or the order of the players; see :mod:`psens.interactions.canonical`.
* ``"exact"`` — an optimal vertex of the same convex problem (a linear program), see
  :mod:`psens.interactions.exact` for the algorithm and its stopping rule. The LP is
  degenerate, so which optimal vertex is returned is up to the simplex path.
* ``"sgd"`` — subgradient descent with momentum 0.9 and a learning rate decayed
  log-linearly from ``lr`` to ``lr / 10`` over ``steps`` steps. Every step uses the fast
  transforms and their transposes (:math:`O(n 2^n)`), batched one thread per game.
  ``preset="paper"`` / ``"paper-pq"`` run the interaction group's published procedure
  exactly as their code runs it (see :func:`and_or`).

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
.. [2] Li and Zhang, arXiv:2304.13312, 2023; the full reference is in :mod:`psens.interactions`.
.. [3] Mangasarian, O. L., and Meyer, R. R. "Nonlinear perturbation of linear programs."
   SIAM Journal on Control and Optimization 17(6), 745–752, 1979.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from psens._validation import check_game, check_in_interval, check_positive_int, fail
from psens.interactions import _sgd
from psens.interactions.transforms import mobius_and, mobius_or

__all__ = ["AndOrResult", "SolverSettings", "and_or", "l1_objective"]

Method = Literal["canonical", "exact", "sgd"]
Preset = Literal["paper", "paper-pq"]

METHODS: tuple[str, ...] = ("canonical", "exact", "sgd")
#: the solver of a run that names none (the least-norm optimum)
DEFAULT_SOLVER: Method = "canonical"

#: budgets per preset, from the group's LLM scripts (sjtu-xai-lab/interaction-sparsity,
#: scripts/bash_interaction_LLM.sh and demo/sparsify_*_train.py): 20 000 iterations at
#: lr 1e-5, and for the (gamma, q) loop 50 000 iterations at lr 1e-6 with qthres 0.04 of
#: |v(N) - v(∅)| ("vN-v0"). The loops themselves are interaction-concept's _train_p and
#: _train_p_q. (Their 20 000-iteration LLM setting, "mode=q", learns q for AND
#: interactions alone; "paper" applies its budget to the gamma-only AND-OR loop of eq. 12.)
PRESETS: dict[str, dict[str, float]] = {
    "paper": {"steps": 20_000, "lr": 1e-5, "qthres": 0.0},
    "paper-pq": {"steps": 50_000, "lr": 1e-6, "qthres": 0.04},
}

#: fields a preset fills when they are not given
_PRESET_FIELDS = ("steps", "lr", "qthres")
_DEFAULTS: dict[str, float] = {"steps": 20_000, "lr": 1e-5, "qthres": 0.0}


@dataclass(frozen=True)
class SolverSettings:
    """How an AND-OR decomposition is computed; copied verbatim into a run's attrs.

    SGD defaults follow the interaction group's public code (sjtu-xai-lab/interaction-concept):
    momentum 0.9, ``lr`` log-decayed to ``lr/10``, 20 000 steps (they use 10k–50k),
    ``qthres = 0`` (their code uses 0.02–0.04 when the noise term is on). ``steps``, ``lr``
    and ``qthres`` left as ``None`` are filled from ``preset`` (:data:`PRESETS`) or these
    defaults.

    Attributes
    ----------
    method : {"canonical", "exact", "sgd"}
    steps : int
        SGD steps (with a preset: the published iteration count, of which all but the last
        update the parameters).
    lr : float
        Initial SGD learning rate.
    momentum : float
        SGD momentum.
    qthres : float
        Bound of the noise term relative to ``|v(N) - v(∅)|``; 0 disables it. Every method
        accepts it (``"exact"``/``"canonical"`` solve the joint LP in ``(gamma, q)``).
    tol : float
        ``"exact"``/``"canonical"``: largest relative difference allowed between the LP
        optimum and the objective recomputed from the returned split.
    preset : {None, "paper", "paper-pq"}
        ``"sgd"`` only: run the published procedure (see :func:`and_or`).
    """

    method: Method = DEFAULT_SOLVER
    steps: int | None = None
    lr: float | None = None
    momentum: float = 0.9
    qthres: float | None = None
    tol: float = 1e-9
    preset: Preset | None = None

    def __post_init__(self) -> None:
        where = "SolverSettings"
        if self.method not in METHODS:
            fail(where, f"method={self.method!r} is unknown", f"Use one of {list(METHODS)}")
        if self.preset is not None:
            if self.preset not in PRESETS:
                fail(
                    where,
                    f"preset={self.preset!r} is unknown",
                    f"Use one of {list(PRESETS)}, or preset=None",
                )
            if self.method != "sgd":
                fail(
                    where,
                    f"preset={self.preset!r} reproduces the published SGD procedure, "
                    f"not method={self.method!r}",
                    "Use method='sgd' with a preset, or drop the preset",
                )
        fill = PRESETS[self.preset] if self.preset is not None else _DEFAULTS
        for name in _PRESET_FIELDS:
            if getattr(self, name) is None:
                value = fill[name]
                object.__setattr__(self, name, int(value) if name == "steps" else float(value))
        check_positive_int(self.steps, where, "steps")
        check_in_interval(self.lr, where, "lr", 0.0, np.inf)
        check_in_interval(self.momentum, where, "momentum", 0.0, 1.0, closed="left")
        try:
            negative = float(self.qthres) < 0
        except (TypeError, ValueError):
            negative = False  # check_in_interval names the type error
        if negative:
            fail(
                where,
                f"qthres={self.qthres!r} is negative",
                "Pass qthres >= 0 (the noise bound relative to |v(N) - v(∅)|; 0 turns it off)",
            )
        check_in_interval(self.qthres, where, "qthres", 0.0, 1.0, closed="left")
        check_in_interval(self.tol, where, "tol", 0.0, 1.0)

    def to_attrs(self) -> dict[str, Any]:
        """Plain ``{name: value}`` for zarr/netCDF attrs."""
        return {f"solver_{k}": v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_attrs(cls, attrs: Mapping[str, Any], method: str | None = None) -> SolverSettings:
        """The settings :meth:`to_attrs` wrote (``solver_*`` keys; a store's ``""`` is None).

        ``method`` overrides ``solver_method`` (default: the recorded one, else
        :data:`DEFAULT_SOLVER`; of another solver's settings only ``qthres`` and ``tol``
        carry over); fields a store does not hold keep their defaults.

        Examples
        --------
        >>> s = SolverSettings(method="sgd", steps=500, lr=1e-3)
        >>> SolverSettings.from_attrs(s.to_attrs()) == s
        True
        """
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {}
        for key, value in attrs.items():
            name = key[len("solver_") :] if str(key).startswith("solver_") else None
            if name in fields and value is not None and not (isinstance(value, str) and not value):
                values[name] = value.item() if hasattr(value, "item") else value
        if method is not None and method != values.get("method", method):
            # another solver's settings: only what every solver takes carries over
            values = {k: v for k, v in values.items() if k in ("qthres", "tol")}
        if method is not None:
            values["method"] = method
        values.setdefault("method", DEFAULT_SOLVER)
        return cls(**values)


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
    method: Method = DEFAULT_SOLVER,
    *,
    settings: SolverSettings | None = None,
    progress: bool = False,
    **kwargs: Any,
) -> AndOrResult:
    r"""AND-OR interactions of a batch of games ``v[..., 2**n]`` (paper eq. 12).

    Parameters
    ----------
    v : array_like, shape (..., 2**n)
        Games (bit ``i`` of the index = player ``i`` kept). Finite values.
    method : {"canonical", "exact", "sgd"}
        See the module docstring.
    settings : SolverSettings, optional
        All solver settings at once; keyword arguments (``steps``, ``lr``, ``momentum``,
        ``qthres``, ``tol``, ``preset``) override single fields.
    progress : bool
        Show a tqdm bar (SGD steps, or exact/canonical games).

    Returns
    -------
    AndOrResult
        ``I_and + I_or`` reconstruct ``v + q`` (``q = None``: ``v``) on every subset.

    Notes
    -----
    ``preset="paper"`` (method ``"sgd"``) runs the published procedure as the interaction
    group's code does (sjtu-xai-lab/interaction-concept, ``_train_p``; ``"paper-pq"``:
    ``_train_p_q``, which also learns ``q``):

    * the decomposed reward is :math:`v' = v - v(\emptyset)` ("gt-log-odds-v0");
    * ``steps`` is their ``niter``: :math:`\gamma = q = 0`, momentum buffers start at the
      first gradient, and ``steps - 1`` updates use the rates
      ``logspace(log10(lr), log10(lr) - 1, steps)[:-1]``;
    * ``q`` is clipped to :math:`\pm` ``qthres`` :math:`\cdot |v(N) - v(\emptyset)|` before
      every evaluation (qstd "vN-v0").

    Defaults: ``"paper"`` 20 000 iterations, ``lr = 1e-5``, no ``q``; ``"paper-pq"``
    50 000 iterations, ``lr = 1e-6``, ``qthres = 0.04`` (their LLM scripts). Their code runs
    in float32; here float64 input stays float64. The returned ``gamma`` and ``q`` are
    theirs, and so are all non-empty interactions. Only the empty set differs: the split is
    returned for ``v`` itself, :math:`I_{and}(\emptyset) = \tfrac12(v(\emptyset) +
    q(\emptyset)) + \gamma(\emptyset)` and :math:`I_{or}(\emptyset) = \tfrac12(v(\emptyset)
    + q(\emptyset)) - \gamma(\emptyset)`, each :math:`v(\emptyset)/2` above the authors'
    (whose two sum to :math:`q(\emptyset)`), so that universal matching holds for
    :math:`v + q`. ``loss`` is eq. 12's objective for ``v``, so it counts
    :math:`|I_{and}(\emptyset)| + |I_{or}(\emptyset)|` with that shift.

    Examples
    --------
    >>> v = np.array([0.0, 1.0, 1.0, 2.0])  # additive: v(T) = |T|
    >>> float(and_or(v, "exact").loss)  # two singleton effects of 1, wherever they are put
    2.0
    >>> res = and_or(v, "canonical")  # the least-norm optimum splits each effect equally
    >>> res.I_and[1:3].round(12).tolist(), res.I_or[1:3].round(12).tolist()
    ([0.5, 0.5], [0.5, 0.5])
    """
    known = {f.name for f in dataclasses.fields(SolverSettings)}
    unknown = set(kwargs) - known
    if unknown:
        fail(
            "and_or",
            f"unknown setting(s) {sorted(unknown)}",
            f"Use one of {[f.name for f in dataclasses.fields(SolverSettings)]}",
            TypeError,
        )
    if settings is None:
        st = SolverSettings(method=method, **kwargs)
    else:
        refill = {}
        if "preset" in kwargs:  # let the new preset fill what the call does not give
            refill = {k: None for k in _PRESET_FIELDS if k not in kwargs}
        st = dataclasses.replace(settings, method=method, **refill, **kwargs)
    a = np.asarray(v)
    n = check_game(a, "and_or")
    dtype = np.float32 if a.dtype == np.float32 else np.float64
    flat = np.ascontiguousarray(a.reshape(-1, a.shape[-1]), dtype=dtype)
    qbound = st.qthres * np.abs(flat[:, -1].astype(np.float64) - flat[:, 0])
    if st.method == "sgd":
        gamma, q, info = _run_sgd(flat, n, st, progress)
    elif st.method == "exact":
        from psens.interactions import exact

        if st.qthres > 0:
            gamma, q, info = exact.solve_gamma_q(flat, n, qbound, tol=st.tol, progress=progress)
        else:
            gamma, info = exact.solve_gamma(flat, n, tol=st.tol, progress=progress)
            q = None
    else:
        from psens.interactions.canonical import solve_canonical

        gamma, q, info = solve_canonical(
            flat, n, qbound=qbound if st.qthres > 0 else None, tol=st.tol, progress=progress
        )
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
    """Chunks of SGD steps in numba; the loop over chunks and the progress bar stay here.

    Without a preset: ``steps`` updates at ``lr * 10**(-linspace(0, 1, steps))`` on ``v``.
    With a preset: ``steps - 1`` updates at ``logspace(log10 lr, log10 lr - 1, steps)[:-1]``
    on ``v - v(∅)`` (the published loop, see :func:`and_or`).
    """
    dtype = flat.dtype
    if st.preset is None:
        work = flat
        lrs = st.lr * np.power(10.0, -np.linspace(0.0, 1.0, st.steps))
    else:
        work = np.ascontiguousarray(flat - flat[:, :1])
        log_lr = np.log10(st.lr)
        lrs = np.logspace(log_lr, log_lr - 1, st.steps)[:-1]
    lrs = lrs.astype(dtype)
    gamma = np.zeros_like(flat)
    q = np.zeros_like(flat)
    mg = np.zeros_like(flat)
    mq = np.zeros_like(flat)
    qb = (st.qthres * np.abs(flat[:, -1] - flat[:, 0])).astype(dtype)
    total = len(lrs)
    chunk = max(1, min(total, 500))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc=f"AND-OR sgd ({len(flat)} games, n={n})", unit="step")
    for start in range(0, total, chunk):
        part = lrs[start : start + chunk]
        _sgd.sgd_rows(work, n, part, dtype.type(st.momentum), qb, gamma, q, mg, mq)
        if bar is not None:
            bar.update(len(part))
    if bar is not None:
        bar.close()
    info = {"steps": st.steps, "updates": total, "preset": st.preset}
    return gamma, (q if st.qthres > 0 else None), info
