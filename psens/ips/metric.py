r"""Interaction-based Prompt Sensitivity (IPS paper §3.2–3.3, §4.1, §4.3).

All functions take raw AND/OR interactions with the template axis second to last,
``I[..., template, 2**n]`` (NaN on subsets beyond a sample's own ``n``), or a run
Dataset with named dims (``template``, ``subset``), and return per-sample values.

Conventions (docs/conventions.md):

* Normalisation (§3.2), per game over all AND and OR interactions with :math:`S\neq\emptyset`:
  :math:`\tilde I = \mathrm{sgn}(I)\,(|I| - \min)/(\max - \min)`; the empty set is the bias,
  left out of normalisation, salient sets and IPS. A game whose interactions all have the same
  magnitude normalises to 0 (no salient interaction). ``normalization="all"`` (a run's
  ``normalization`` key) is the paper's literal reading instead: min and max over all
  :math:`2^{n+1}` effects, :math:`I_{and}(\emptyset)` and :math:`I_{or}(\emptyset)` included,
  which then also count in the salient sets (not in the order bands, which start at
  :math:`|S| = 1`).
* Salient set: :math:`|\tilde I| > \tau`; AND-S and OR-S are different interactions.
* IPS (eq. 3), per sample: for every unordered template pair, the mean over the union of both
  salient sets of :math:`|a-b| / ((|a|+|b|)/2)`; then the mean over pairs. Values lie in [0, 2].
* Orders (§4.3): low :math:`1\le|S|\le\lfloor n/3\rfloor`, mid up to :math:`\lfloor 2n/3\rfloor`,
  high above, ``n`` the sample's own number of variables.
* Empty cases: a pair with no salient interaction (in the requested order) is skipped; a sample
  with no such pair is NaN; :func:`aggregate` skips NaN and reports how many were skipped.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from psens._validation import check_game, check_in_interval, check_same_shape, fail
from psens.interactions.transforms import reconstruct
from psens.settings import (
    DEFAULT_NORMALIZATION,
    DEFAULT_TAU,
    NORMALIZATIONS,
    run_settings,
    tau_of,
)
from psens.store import DONE, FAILED, PENDING
from psens.store.labels import model_names, order_band, order_of_subsets
from psens.store.pairs import label_array, pair_coords, pair_label

__all__ = [
    "CLASSES",
    "ORDERS",
    "ORDER_LEVELS",
    "aggregate",
    "block_status",
    "check_taus",
    "class_masks",
    "class_shares",
    "interaction_classes",
    "ips",
    "ips_term",
    "n_players",
    "nanmean",
    "normalize",
    "order_band",
    "order_masks",
    "order_of_subsets",
    "pair_labels",
    "salient",
    "sample_ips",
    "select_solver",
    "solver_names",
    "sparsity_curve",
    "template_pairs",
    "topk_matching_error",
]

Order = Literal["low", "mid", "high"]
ORDERS: tuple[str, ...] = ("low", "mid", "high")
#: ``"all"`` (every order, eq. 3) then the order bands of §4.3: the values of every ``order``
#: dim and column
ORDER_LEVELS: tuple[str, ...] = ("all", *ORDERS)
CLASSES: tuple[str, ...] = ("opposite_sign", "same_sign_different_effect", "same_sign_similar")
TEMPLATE_DIM, SUBSET_DIM = "template", "subset"


# ----------------------------------------------------------------------------- helpers


def n_players(I: np.ndarray) -> np.ndarray:
    """Each game's own number of players, from its count of finite (non-padded) subsets."""
    count = np.isfinite(I).sum(axis=-1)
    n = np.zeros(count.shape, dtype=np.int64)
    nz = count > 0
    n[nz] = np.round(np.log2(count[nz])).astype(np.int64)
    if np.any(nz & (2**n != count)):
        fail(
            "ips",
            "some games have a number of finite subsets that is not a power of two",
            "Pad games beyond a sample's n with NaN only on subsets that use missing players",
        )
    return n


def order_masks(
    n: np.ndarray, size: int, order: Order | None, normalization: str = DEFAULT_NORMALIZATION
) -> np.ndarray:
    """Boolean ``[..., size]``: subsets ``S != ∅`` within the sample's ``n`` and of ``order``
    (with ``normalization="all"`` and no order, ``S = ∅`` too)."""
    k = order_of_subsets(size)
    n = np.asarray(n)[..., None]
    empty_too = order is None and _check_normalization(normalization, "ips") == "all"
    inside = ((k >= 1) | empty_too) & (np.arange(size) < (1 << n))
    if order is None:
        return inside
    if order not in ORDERS:
        fail("ips", f"order={order!r} is unknown", f"Use one of {ORDERS} or None")
    return inside & (order_band(k, n) == order)


def _check_normalization(normalization: Any, where: str) -> str:
    """One of :data:`psens.settings.NORMALIZATIONS`."""
    if normalization not in NORMALIZATIONS:
        fail(
            where,
            f"normalization={normalization!r} is unknown",
            f"Use one of {list(NORMALIZATIONS)}",
        )
    return str(normalization)


def _normalization_of(ds, normalization: str | None) -> str:
    """``normalization`` of a call with a run Dataset: the run's own unless given."""
    return run_settings(ds).normalization if normalization is None else normalization


def template_pairs(n_templates: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices ``(i, j)``, ``i < j``, of all unordered template pairs."""
    return np.triu_indices(n_templates, k=1)


def _check_tau(tau: Any, where: str) -> float:
    """A threshold must be a real number in (0, 1); a string (``"0.1"``) or a bool is refused."""
    if isinstance(tau, bool) or not isinstance(tau, int | float | np.integer | np.floating):
        fail(
            where,
            f"tau={tau!r} is a {type(tau).__name__}, not a number",
            "Pass tau as a float, e.g. tau=0.1",
            TypeError,
        )
    return check_in_interval(tau, where, "tau", 0.0, 1.0)


def _as_arrays(I_and, I_or, where: str):
    """Both interaction arrays as float, checked to hold games ``[..., 2**n]``.

    Refused: different shapes, an empty batch, inf, NaN in one array where the other is
    finite, and NaN that is not padding. A game of ``k`` players padded to ``n`` is finite on
    exactly its first ``2**k`` subsets (all its subsets) and NaN beyond; a game that is NaN
    everywhere (a failed block) is allowed and yields NaN.
    """
    a, o = np.asarray(I_and, dtype=float), np.asarray(I_or, dtype=float)
    check_same_shape(a, o, where, ("I_and", "I_or"))
    check_game(a, where, name="I_and", allow_nan=True)
    if a.size == 0:
        fail(
            where,
            f"the interactions are empty (shape {a.shape})",
            "Pass at least one game (no axis of length 0)",
        )
    if np.isinf(a).any() or np.isinf(o).any():
        fail(where, "interactions contain inf", "Recompute the games; only NaN padding is allowed")
    nan_a, nan_o = np.isnan(a), np.isnan(o)
    if (nan_a != nan_o).any():
        first = tuple(int(i) for i in np.argwhere(nan_a != nan_o)[0])
        which = (
            "I_or is NaN where I_and is not" if nan_o[first] else "I_and is NaN where I_or is not"
        )
        fail(
            where,
            f"{which} (first at index {first})",
            "Pass the AND and OR parts of the same games (NaN only on padded subsets)",
        )
    count = (~nan_a).sum(axis=-1, keepdims=True)
    padding = np.arange(a.shape[-1]) >= count
    if (nan_a != padding).any():
        first = tuple(int(i) for i in np.argwhere(nan_a & ~padding)[0])
        fail(
            where,
            f"I_and/I_or are NaN at subset {first[-1]} of game {first[:-1]}, which is not "
            "padding (a game is finite on all 2**n subsets of its own n players)",
            "Recompute that game; only subsets beyond a game's own n may be NaN",
        )
    return a, o


# ----------------------------------------------------------------------------- normalisation


def normalize(
    I_and, I_or, normalization: str = DEFAULT_NORMALIZATION
) -> tuple[np.ndarray, np.ndarray]:
    r"""Min-max normalised interactions :math:`\tilde I` (paper §3.2), per game.

    .. math::
        \tilde I_S = \mathrm{sgn}(I_S)\,\frac{|I_S| - \min}{\max - \min}

    ``normalization="nonempty"`` (default): min and max are taken over the absolute values of
    all AND and OR interactions with :math:`S \neq \emptyset` of the same game; the empty set
    is returned as NaN (it is the bias). ``"all"``: over all :math:`2^{n+1}` effects, the
    empty set included and normalised like the rest (the paper's literal wording).

    Examples
    --------
    >>> a, o = normalize([0.5, 2.0, -1.0, 0.0], [0.5, 0.0, 4.0, 0.0])
    >>> a.tolist(), o.tolist()
    ([nan, 0.5, -0.25, 0.0], [nan, 0.0, 1.0, 0.0])
    >>> a, o = normalize([8.0, 2.0, -1.0, 0.0], [0.0, 0.0, 4.0, 0.0], "all")
    >>> a.tolist(), o.tolist()
    ([1.0, 0.25, -0.125, 0.0], [0.0, 0.0, 0.5, 0.0])
    """
    a, o = _as_arrays(I_and, I_or, "normalize")
    first = 0 if _check_normalization(normalization, "normalize") == "all" else 1
    both = np.concatenate([np.abs(a[..., first:]), np.abs(o[..., first:])], axis=-1)
    missing = np.isnan(both)
    with np.errstate(all="ignore"):
        lo = np.where(missing, np.inf, both).min(axis=-1, keepdims=True, initial=np.inf)
        hi = np.where(missing, -np.inf, both).max(axis=-1, keepdims=True, initial=-np.inf)
        span = hi - lo
        scale = np.where(span > 0, span, np.inf)

        def norm(x):
            out = np.sign(x) * (np.abs(x) - lo) / scale
            if first:
                out[..., 0] = np.nan
            return out

        return norm(a), norm(o)


def salient(
    I_and, I_or, tau: float = DEFAULT_TAU, normalization: str = DEFAULT_NORMALIZATION
) -> tuple[np.ndarray, np.ndarray]:
    r"""Salient-set masks :math:`|\tilde I| > \tau` for AND and OR (paper §4.1)."""
    _check_tau(tau, "salient")
    na, no = normalize(I_and, I_or, normalization)
    with np.errstate(invalid="ignore"):
        return np.abs(na) > tau, np.abs(no) > tau


# ----------------------------------------------------------------------------- IPS


def _paired(
    I_and,
    I_or,
    tau: float,
    order: Order | None,
    where: str,
    normalization: str = DEFAULT_NORMALIZATION,
):
    """Normalised values of both templates of every pair, and the interactions that count.

    Returns ``a, b, keep`` shaped ``[..., pair, 2 * 2**n]`` (AND then OR on the last axis);
    ``keep`` marks the subsets within either template's ``n`` and of ``order``
    (:func:`order_masks`), for :func:`_salient_union` and :func:`_union_ips`.
    """
    _check_tau(tau, where)
    ra, ro = _as_arrays(I_and, I_or, where)
    if ra.ndim < 2:
        fail(
            where,
            f"interactions have shape {ra.shape}; need [..., template, 2**n]",
            "Put at least two templates on the second-to-last axis",
        )
    if ra.shape[-2] < 2:
        fail(where, f"only {ra.shape[-2]} template", "Pass at least two templates to compare")
    na, no = normalize(ra, ro, normalization)
    x = np.concatenate([na, no], axis=-1)  # [..., T, 2K]
    keep = order_masks(n_players(ra), ra.shape[-1], order, normalization)  # [..., T, K]
    keep = np.concatenate([keep, keep], axis=-1)
    i, j = template_pairs(ra.shape[-2])
    return x[..., i, :], x[..., j, :], keep[..., i, :] | keep[..., j, :]


def _union_top(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r""":math:`\max(|a|, |b|)`, NaN only where both are NaN: an interaction is in the union
    of both salient sets at :math:`\tau` iff this exceeds :math:`\tau`."""
    with np.errstate(invalid="ignore"):
        return np.fmax(np.abs(a), np.abs(b))


def _salient_union(a: np.ndarray, b: np.ndarray, keep: np.ndarray, tau: float) -> np.ndarray:
    r"""The union of both templates' salient sets, as a mask (§4.1, eq. 3):

    .. math::
        S \in \Omega_T \cup \Omega_{\hat T} \iff
        \max(|\tilde I_S(x|T)|, |\tilde I_S(x|\hat T)|) > \tau

    among the subsets marked by ``keep`` (within ``n``, of the order band); ``a``, ``b``,
    ``keep`` broadcast.
    """
    with np.errstate(invalid="ignore"):
        return keep & (_union_top(a, b) > tau)


def _union_ips(a, b, keep, taus) -> np.ndarray:
    r"""The IPS kernel: eq. 3's mean over the union of salient sets, for every row, group of
    subsets and threshold at once.

    .. math::
        \mathrm{IPS}_{T,\hat T}(\tau, g) = \frac{1}{|\Omega^g_{union}(\tau)|}
        \sum_{S\in\Omega^g_{union}(\tau)} \frac{|a_S - b_S|}{(|a_S| + |b_S|)/2},\qquad
        \Omega^g_{union}(\tau) = \{S \in g : \max(|a_S|, |b_S|) > \tau\}

    Parameters
    ----------
    a, b : ndarray, shape (..., M)
        Normalised effects of the same ``M`` interactions under the two templates of each
        row (a row is e.g. a sample's template pair); NaN counts as not salient.
    keep : bool ndarray, shape (..., G, M)
        The subsets of each group ``g`` (e.g. an order band); its leading dims broadcast
        against those of ``a``.
    taus : 1-d array
        Thresholds, sorted ascending.

    Returns
    -------
    ndarray, shape (..., G, len(taus))
        NaN where a group has no salient interaction at that threshold.

    One threshold with many salient interactions: the terms (:func:`ips_term`) of the union
    are summed per row and group. Otherwise only the interactions above the smallest threshold
    are touched; each term is binned by how many thresholds lie below :math:`\max(|a|, |b|)`,
    summed per row, group and bin with ``np.bincount`` and turned into every threshold's sum
    by a reversed cumulative sum (no loop over rows, subsets, pairs or thresholds).
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim == 1:
        return _union_ips(a[None], b[None], keep, taus)[0]
    taus = np.asarray(taus, dtype=float)
    lead, size = a.shape[:-1], a.shape[-1]
    groups, n_tau = keep.shape[-2], taus.size
    abs_a, abs_b = np.abs(a), np.abs(b)
    with np.errstate(invalid="ignore"):
        top = np.fmax(abs_a, abs_b)  # _union_top, with |a| and |b| kept for the terms
        salient = top > taus[0]  # salient at the smallest τ at least
    keep = np.broadcast_to(keep, (*lead, groups, size))
    if n_tau == 1 and salient.mean() > 0.25:  # one threshold, many salient: sum them all
        term = np.where(salient, _term(a, b, abs_a, abs_b), 0.0)
        if groups == 1:  # one group: no group axis to broadcast over
            inside = keep[..., 0, :]
            tot = np.where(inside, term, 0.0).sum(axis=-1)[..., None, None]
            cnt = (inside & salient).sum(axis=-1)[..., None, None]
        else:
            inside = keep & salient[..., None, :]
            tot = np.where(inside, term[..., None, :], 0.0).sum(axis=-1)[..., None]
            cnt = inside.sum(axis=-1)[..., None]
    else:  # only the salient terms, binned by the thresholds below max(|a|, |b|)
        top, a, b = top.reshape(-1), a.reshape(-1), b.reshape(-1)
        index, weight = [], []
        for g in range(groups):  # a handful of groups (order bands), never subsets or pairs
            pos = np.flatnonzero(keep[..., g, :] & salient)
            bins = np.searchsorted(taus, top[pos], side="left") - 1  # salient at τ_k: >= k
            index.append((pos // size * groups + g) * n_tau + bins)
            weight.append(ips_term(a[pos], b[pos]))
        flat, length = np.concatenate(index), int(np.prod(lead)) * groups * n_tau
        tot = np.bincount(flat, np.concatenate(weight), length).reshape(*lead, groups, n_tau)
        cnt = np.bincount(flat, minlength=length).reshape(*lead, groups, n_tau)
        tot = np.cumsum(tot[..., ::-1], axis=-1)[..., ::-1]  # salient at τ_k: bins k and above
        cnt = np.cumsum(cnt[..., ::-1], axis=-1)[..., ::-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)


def _is_dataset(obj) -> bool:
    return type(obj).__name__ == "Dataset"


def _dataset_tau(ds, I_or, tau: float | None, where: str) -> float:
    """``tau`` of a call with a run Dataset first: ``f(ds, 0.2)`` means ``tau=0.2``, and
    no τ at all means the run's own (:func:`psens.settings.tau_of`)."""
    if I_or is None:
        return tau_of(ds, tau)
    if np.ndim(I_or) == 0 and isinstance(I_or, int | float | np.floating):
        return float(I_or)
    fail(where, "I_or was given with a run Dataset", f"Pass {where}(ds, tau=..., order=...)")
    raise AssertionError  # unreachable


def solver_names(ds) -> list[str]:
    """The AND-OR solvers whose interactions a run holds: its ``solver`` coordinate (a run
    with ``solver = [...]``), else its one solver (``solver_method`` attr)."""
    return list(run_settings(ds).solvers)


def select_solver(ds, solver: str | None = None):
    """The run with one solver's interactions (``I_and``, ``I_or``, ``gamma``, ``floor``).

    A run with a ``solver`` dim (config ``solver = ["canonical", "sgd"]``) is selected at
    ``solver`` (default: the first) and the dim dropped; its ``solver_*`` attrs become that
    solver's settings. A run with one solver is returned as it is (``solver``, when given,
    must be that solver).

    Parameters
    ----------
    ds : xarray.Dataset
        A run or a slice of one.
    solver : str, optional
        ``"canonical"``, ``"exact"`` or ``"sgd"``.
    """
    import json

    names = solver_names(ds)
    if solver is not None and solver not in names:
        fail("select_solver", f"solver={solver!r} is not in the run", f"Use one of {names}")
    if "solver" not in getattr(ds, "dims", ()):
        return ds
    chosen = names[0] if solver is None else solver
    out = ds.sel(solver=chosen, drop=True)
    each = ds.attrs.get("solvers")
    if isinstance(each, str) and each:
        each = json.loads(each)
    if isinstance(each, dict) and chosen in each:
        out.attrs = {**ds.attrs, **each[chosen]}
    out.attrs["solver_method"] = chosen
    return out


def _no_solver_for_arrays(solver: str | None, where: str) -> None:
    if solver is not None:
        fail(where, "solver= was given with arrays", "Pass solver= with a run Dataset only")


def nanmean(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Mean along ``axis`` skipping NaN; NaN (no warning) where nothing is left.

    The one way psens averages over pairs, samples or models (empty cases are skipped).
    """
    x = np.asarray(x, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        cnt = np.isfinite(x).sum(axis=axis)
        tot = np.nansum(x, axis=axis)
        return np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)


def ips_term(a, b) -> np.ndarray:
    r"""The IPS term of one interaction under two templates (eq. 3's summand):
    :math:`|a - b| \,/\, ((|a| + |b|)/2)`, in [0, 2] (NaN where both are 0).

    ``a`` and ``b`` are normalised effects :math:`\tilde I_S(x|T)`,
    :math:`\tilde I_S(x|\hat T)`. The one definition of the term: the one IPS kernel
    (:func:`_union_ips`) averages it over the union of salient sets for the dense
    (:func:`ips_pairs`, :func:`sample_ips`) and the sparse path
    (:func:`psens.ips.sparse.sparse_ips`).

    Examples
    --------
    >>> ips_term(np.array([0.5, 0.5, 0.2]), np.array([0.5, -0.5, 0.0])).tolist()
    [0.0, 2.0, 2.0]
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return _term(a, b, np.abs(a), np.abs(b))


def _term(a: np.ndarray, b: np.ndarray, abs_a: np.ndarray, abs_b: np.ndarray) -> np.ndarray:
    """:func:`ips_term` given ``|a|`` and ``|b|`` already (the dense kernel has them)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.abs(a - b) / ((abs_a + abs_b) / 2)


def class_masks(a, b) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""The stable/unstable class of each interaction under two templates (§3.3, fig. 3b):
    ``(opposite, different, similar)`` boolean masks in the order of :data:`CLASSES`.

    * opposite sign: one strictly positive, the other strictly negative;
    * same sign, different effect: not opposite and :math:`|b|/|a| > 2` or :math:`< 0.5`
      (one side exactly 0 included);
    * same sign, similar: the rest.

    The one definition of the rule (:func:`interaction_classes` and
    :func:`psens.ips.sparse.sparse_classes` count these masks).

    Examples
    --------
    >>> [m.tolist() for m in class_masks(np.array([0.4, 0.4, 0.4]), np.array([-0.1, 0.1, 0.3]))]
    [[True, False, False], [False, True, False], [False, False, True]]
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        opposite = ((a > 0) & (b < 0)) | ((a < 0) & (b > 0))
        ratio = np.abs(b) / np.abs(a)
        different = ~opposite & ((ratio > 2) | (ratio < 0.5) | (a == 0) | (b == 0))
    return opposite, different, ~opposite & ~different


def ips_pairs(
    I_and,
    I_or=None,
    tau: float | None = None,
    order: Order | None = None,
    *,
    solver: str | None = None,
    normalization: str | None = None,
):
    r"""IPS of every unordered template pair, ``[..., pair]`` (NaN: no salient interaction).

    .. math::
        \mathrm{IPS}_{T,\hat T}(x) = \frac{1}{|\Omega_{union}|}\sum_{S\in\Omega_{union}}
        \frac{|\tilde I_S(x|T) - \tilde I_S(x|\hat T)|}
             {(|\tilde I_S(x|T)| + |\tilde I_S(x|\hat T)|)/2}

    Pairs are ordered as :func:`template_pairs`. A run Dataset may be passed as the first
    argument (``I_or`` left out), as for :func:`ips`: the result is then a DataArray with a
    ``pair`` dim labelled ``"a|b"``, computed block-wise by :func:`sample_ips` (of one
    ``solver``'s interactions: :func:`select_solver`). ``normalization`` as for :func:`ips`.
    """
    if _is_dataset(I_and):
        tau = _dataset_tau(I_and, I_or, tau, "ips_pairs")
        order_arg = "all" if order is None else order
        da = sample_ips(
            I_and,
            tau,
            orders=order_arg,
            per_pair=True,
            solver=solver,
            normalization=normalization,
        )
        da.name = "ips" if order is None else f"ips_{order}"
        da.attrs["order"] = order or "all"
        return da
    _no_solver_for_arrays(solver, "ips_pairs")
    if I_or is None:
        fail("ips_pairs", "I_or is missing", "Pass ips_pairs(I_and, I_or) or ips_pairs(ds)")
    tau = tau_of(I_and, tau)
    norm = DEFAULT_NORMALIZATION if normalization is None else normalization
    a, b, keep = _paired(I_and, I_or, tau, order, "ips", norm)
    return _union_ips(a, b, keep[..., None, :], [tau])[..., 0, 0]


def ips(
    I_and,
    I_or=None,
    tau: float | None = None,
    order: Order | None = None,
    *,
    solver: str | None = None,
    normalization: str | None = None,
):
    r"""Interaction-based Prompt Sensitivity per sample (paper eq. 3), the mean over pairs.

    Parameters
    ----------
    I_and, I_or : array_like, shape (..., template, 2**n)
        Raw interactions (NaN beyond a sample's own n). Alternatively pass a run
        :class:`xarray.Dataset` as the first argument (with ``I_and``/``I_or`` variables and
        ``template``/``subset`` dims) and leave ``I_or`` out: it is then computed by
        :func:`sample_ips`, block by block, so a lazily opened store is never loaded whole.
    tau : float in (0, 1), optional
        Salience threshold on normalised interactions; default: a run's own
        (:func:`psens.settings.tau_of`), 0.1 (the paper's) for arrays.
    order : {"low", "mid", "high"}, optional
        Restrict to interactions of that order (§4.3).
    solver : str, optional
        For a run with several solvers' interactions: whose (default: the first;
        :func:`select_solver`).
    normalization : {"nonempty", "all"}, optional
        What the min-max normalisation spans (:func:`normalize`); default: a run's own
        (``run_settings(ds).normalization``), ``"nonempty"`` for arrays.

    Returns
    -------
    ndarray of shape (...) or DataArray
        Per-sample IPS in [0, 2]; NaN when no template pair has a salient interaction.
        For a Dataset: a DataArray over its dims other than ``template``/``subset`` (in the
        Dataset's order, with the coordinates on them), named ``ips`` (``ips_<order>``),
        with ``attrs`` ``tau`` and ``order``; blocks that are not done (pending or failed)
        are NaN, counted in ``attrs`` ``blocks_pending`` and ``blocks_failed``. Average over
        samples with :func:`aggregate`.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> I = rng.normal(size=16)
    >>> float(ips(np.stack([I, I]), np.stack([I, I])))  # identical templates
    0.0
    >>> float(ips(np.stack([I, -I]), np.stack([I, -I])))  # every sign flipped
    2.0
    """
    if _is_dataset(I_and):
        return _ips_dataset(
            select_solver(I_and, solver),
            _dataset_tau(I_and, I_or, tau, "ips"),
            order,
            normalization,
        )
    _no_solver_for_arrays(solver, "ips")
    if I_or is None:
        fail("ips", "I_or is missing", "Pass ips(I_and, I_or) or ips(run_dataset)", TypeError)
    tau = tau_of(I_and, tau)
    return nanmean(ips_pairs(I_and, I_or, tau, order, normalization=normalization))


def _ips_dataset(ds, tau: float, order: Order | None, normalization: str | None = None):
    """:func:`ips` of a run Dataset, computed by :func:`sample_ips` (block-wise, so a lazily
    opened store is never loaded whole), as a DataArray over the Dataset's other dims."""
    import xarray as xr

    for name in ("I_and", "I_or"):
        if name not in ds:
            fail("ips", f"the Dataset has no {name!r} variable", "Pass a psens run Dataset")
    a = ds["I_and"].transpose(..., TEMPLATE_DIM, SUBSET_DIM)
    lead = a.dims[:-2]
    value = sample_ips(
        ds, tau, orders="all" if order is None else order, normalization=normalization
    )
    out = xr.DataArray(
        value.transpose(*lead).values,
        dims=lead,
        coords={k: c for k, c in a.coords.items() if set(c.dims) <= set(lead)},
    )
    out.name = "ips" if order is None else f"ips_{order}"
    out.attrs.update(tau=tau, order=order or "all")
    out.attrs.update({k: value.attrs[k] for k in ("blocks_pending", "blocks_failed")})
    return out


def aggregate(values, dim: str | int = "sample"):
    """Mean over samples (or models) skipping NaN, with how many were skipped.

    Returns ``(mean, n_skipped)`` for arrays (``dim`` an axis, default the last), or a
    DataArray with ``attrs["n_skipped"]`` / ``attrs["n_used"]`` for a DataArray.
    """
    if type(values).__name__ == "DataArray":
        axis_dim = dim if isinstance(dim, str) else values.dims[dim]
        mean = values.mean(axis_dim, skipna=True)
        skipped = values.isnull().sum(axis_dim)
        mean.attrs.update(values.attrs)
        mean.attrs["n_skipped"] = int(skipped.sum())
        mean.attrs["n_used"] = int(values.notnull().sum())
        return mean
    x = np.asarray(values, dtype=float)
    axis = -1 if isinstance(dim, str) else dim
    return nanmean(x, axis), np.isnan(x).sum(axis=axis)


# ----------------------------------------------------------------------------- classes


def interaction_classes(
    I_and,
    I_or=None,
    tau: float | None = None,
    *,
    order: Order | None = None,
    predictions=None,
    solver: str | None = None,
    normalization: str | None = None,
) -> dict[str, np.ndarray]:
    r"""Stable/unstable classes of salient interactions for every template pair (§3.3, fig. 3b).

    Over the union of both salient sets of a pair, with normalised effects ``a`` and ``b``:

    * ``opposite_sign``: one strictly positive, the other strictly negative;
    * ``same_sign_different_effect``: not opposite and :math:`|b|/|a| > 2` or :math:`< 0.5`
      (includes one side exactly 0);
    * ``same_sign_similar``: the rest.

    Parameters
    ----------
    predictions : array_like, shape (..., template), optional
        The model's prediction per template; adds ``changed[..., pair]`` (the two templates'
        predictions differ), to split the counts as in fig. 3b (see :func:`class_shares`).
    solver : str, optional
        For a run with several solvers' interactions: whose (default: the first).
    normalization : {"nonempty", "all"}, optional
        As for :func:`ips` (default: a run's own, ``"nonempty"`` for arrays).

    Returns
    -------
    dict
        ``counts``: int array ``[..., pair, 3]`` in the order of :data:`CLASSES`;
        ``pairs``: the ``(i, j)`` template indices; ``changed`` when predictions are given.
        For a run Dataset as the first argument (``I_or`` left out): an xarray Dataset with
        ``counts(..., pair, class)`` and, when the run has predictions, ``changed(..., pair)``;
        computed one model at a time.
    """
    if _is_dataset(I_and):
        if predictions is not None:
            fail(
                "interaction_classes",
                "predictions were given with a run Dataset",
                "Leave them out: they come from the run's prediction variable",
            )
        tau = _dataset_tau(I_and, I_or, tau, "interaction_classes")
        norm = _normalization_of(I_and, normalization)
        return _classes_dataset(select_solver(I_and, solver), tau, order, norm)
    _no_solver_for_arrays(solver, "interaction_classes")
    if I_or is None:
        fail("interaction_classes", "I_or is missing", "Pass (I_and, I_or) or a run Dataset")
    tau = tau_of(I_and, tau)
    norm = DEFAULT_NORMALIZATION if normalization is None else normalization
    a, b, keep = _paired(I_and, I_or, tau, order, "interaction_classes", norm)
    pos = np.flatnonzero(_salient_union(a, b, keep, tau))  # classified where salient only
    row, lead = pos // a.shape[-1], a.shape[:-1]
    masks = class_masks(a.reshape(-1)[pos], b.reshape(-1)[pos])
    rows = int(np.prod(lead))
    counts = np.stack([np.bincount(row[c], minlength=rows) for c in masks], axis=-1)
    counts = counts.reshape(*lead, len(CLASSES))
    n_templates = np.shape(I_and)[-2]
    i, j = template_pairs(n_templates)
    out: dict[str, np.ndarray] = {"counts": counts, "pairs": np.stack([i, j], axis=-1)}
    if predictions is not None:
        p = np.asarray(predictions)
        if p.shape != (*counts.shape[:-2], n_templates):
            fail(
                "interaction_classes",
                f"predictions have shape {p.shape}, expected {(*counts.shape[:-2], n_templates)}",
                "Pass one prediction per sample and template",
            )
        out["changed"] = p[..., i] != p[..., j]
    return out


def _classes_dataset(
    ds, tau: float, order: Order | None, normalization: str = DEFAULT_NORMALIZATION
):
    import xarray as xr

    for name in ("I_and", "I_or"):
        if name not in ds:
            fail("interaction_classes", f"the Dataset has no {name!r}", "Pass a psens run")
    a_da = ds["I_and"].transpose(..., TEMPLATE_DIM, SUBSET_DIM)
    o_da = ds["I_or"].transpose(..., TEMPLATE_DIM, SUBSET_DIM)
    pred = ds["prediction"].transpose(*a_da.dims[:-1]) if "prediction" in ds else None
    lead = a_da.dims[:-2]
    templates = [str(t) for t in ds[TEMPLATE_DIM].values]
    models = range(ds.sizes["model"]) if "model" in lead else [None]
    counts, changed = [], []
    for m in models:  # one model at a time: a lazily opened run is never loaded whole
        sel = {} if m is None else {"model": m}
        p = None if pred is None else np.asarray(pred.isel(sel).values).astype(str)
        res = interaction_classes(
            a_da.isel(sel).values,
            o_da.isel(sel).values,
            tau,
            order=order,
            predictions=p,
            normalization=normalization,
        )
        counts.append(res["counts"])
        if p is not None:
            changed.append(res["changed"])
    stack = (lambda x: np.stack(x)) if "model" in lead else (lambda x: x[0])
    coords = {k: c for k, c in a_da.coords.items() if set(c.dims) <= set(lead)}
    coords.update({d: label_array(a_da[d].values) for d in lead if d in a_da.coords})
    coords["class"] = list(CLASSES)
    i, j = template_pairs(len(templates))
    out = xr.Dataset(
        {"counts": ([*lead, "pair", "class"], stack(counts))},
        coords=coords,
        attrs={"tau": tau, "order": order or "all"},
    ).assign_coords(pair_coords([templates[k] for k in i], [templates[k] for k in j]))
    if changed:
        out["changed"] = ([*lead, "pair"], stack(changed))
    return out


def class_shares(counts: np.ndarray, changed: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Shares of the three classes pooled over everything (fig. 3b).

    Returns ``{"all": shares[3]}`` and, with ``changed``, ``"changed"`` / ``"unchanged"``
    (NaN shares when a group has no salient interaction).
    """
    c = np.asarray(counts).reshape(-1, 3).astype(float)

    def share(rows):
        tot = rows.sum(axis=0)
        s = tot.sum()
        return tot / s if s > 0 else np.full(3, np.nan)

    out = {"all": share(c)}
    if changed is not None:
        ch = np.asarray(changed).reshape(-1)
        out["changed"], out["unchanged"] = share(c[ch]), share(c[~ch])
    return out


# ----------------------------------------------------------------------------- sparsity


def sparsity_curve(I_and, I_or) -> np.ndarray:
    """Normalised :math:`|\\tilde I|` of every AND and OR interaction, sorted descending (fig. 2a).

    Shape ``[..., 2 * (2**n - 1)]`` (padded subsets are NaN and sorted last).
    """
    na, no = normalize(I_and, I_or)
    x = np.abs(np.concatenate([na[..., 1:], no[..., 1:]], axis=-1))
    return -np.sort(-x, axis=-1)  # np.sort puts NaN last


def topk_matching_error(v, I_and, I_or, fraction: float) -> np.ndarray:
    r"""Matching error when only the top ``fraction`` of interactions is kept (fig. 2b).

    The bias (both empty-set terms) is always kept; of the :math:`2(2^n-1)` AND and OR
    interactions, the :math:`\lceil fraction \cdot 2(2^n-1)\rceil` largest in :math:`|I|` are kept
    and the rest set to 0. Returns :math:`\frac{1}{2^n}\sum_T |v(T) - \phi_k(T)|` per game.
    """
    check_in_interval(fraction, "topk_matching_error", "fraction", 0.0, 1.0, closed="right")
    a, o = _as_arrays(I_and, I_or, "topk_matching_error")
    vv = np.asarray(v, dtype=float)
    check_same_shape(vv, a, "topk_matching_error", ("v", "I_and"))
    check_game(a, "topk_matching_error", name="I_and")
    mag = np.concatenate([np.abs(a[..., 1:]), np.abs(o[..., 1:])], axis=-1)
    k = int(np.ceil(fraction * mag.shape[-1]))
    order = np.argsort(-mag, axis=-1, kind="stable")
    keep = np.zeros(mag.shape, dtype=bool)
    np.put_along_axis(keep, order[..., :k], True, axis=-1)
    half = a.shape[-1] - 1
    ka = np.concatenate([np.ones((*a.shape[:-1], 1), bool), keep[..., :half]], axis=-1)
    ko = np.concatenate([np.ones((*a.shape[:-1], 1), bool), keep[..., half:]], axis=-1)
    phi = reconstruct(np.where(ka, a, 0.0), np.where(ko, o, 0.0))
    return np.abs(vv - phi).mean(axis=-1)


# ----------------------------------------------------------------------------- run engine
# Per-sample IPS for many thresholds and order bands in one pass (IPS paper eq. 3, §4.3, F.8).
#
# :func:`sample_ips` gives the same numbers as :func:`psens.ips.ips` (a test pins that), but
# normalises every game once and evaluates all thresholds ``τ`` and all order bands from
# that one normalisation:
#
# * for a template pair, an interaction is in the union of salient sets at ``τ`` iff
#   :math:`\max(|\tilde I_S(x|T)|, |\tilde I_S(x|\hat T)|) > \tau`;
# * so each term :math:`|a-b|/((|a|+|b|)/2)` is binned by how many thresholds lie below its
#   ``max``, and a reversed cumulative sum of the binned sums and counts gives the pair's IPS
#   at every ``τ`` (``np.bincount`` over all rows at once: no loop over samples, pairs or τ).
#
# The run is read one model and a block of samples at a time, so a lazily opened store is
# never loaded whole.

_CHUNK_ELEMENTS = 1 << 22  # values per array in one block (32 MiB of float64)


def check_taus(taus: Any, where: str) -> np.ndarray:
    """Thresholds as a 1-d float array, each strictly inside (0, 1)."""
    for t in np.ravel(np.asarray(taus, dtype=object)):
        _check_tau(t, where)
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
    normalization: str = DEFAULT_NORMALIZATION,
) -> np.ndarray:
    """IPS of every selected template pair: ``[..., pair, order, tau]`` (NaN: no salient S).

    ``I_and``/``I_or`` are ``[..., template, 2**n]``; ``taus`` sorted ascending. All
    thresholds and order bands come from one :func:`_union_ips` call.
    """
    na, no = normalize(I_and, I_or, normalization)
    x = np.concatenate([na, no], axis=-1)  # [..., T, 2K]
    size = I_and.shape[-1]
    i, j = template_pairs(I_and.shape[-2])
    i, j = i[pair_idx], j[pair_idx]
    n = n_players(I_and)[..., 0]  # a sample's n is the same for all its templates
    keep = np.stack(
        [order_masks(n, size, None if o == "all" else o, normalization) for o in orders], axis=-2
    )  # [..., order, K]
    keep = np.concatenate([keep, keep], axis=-1)[..., None, :, :]  # [..., 1 (pair), order, 2K]
    return _union_ips(x[..., i, :], x[..., j, :], keep, taus)


def pair_labels(templates: Sequence[str]) -> list[str]:
    """``"a|b"`` labels (:func:`psens.ips.pairs.pair_label`) of the unordered template pairs,
    in :func:`template_pairs` order."""
    i, j = template_pairs(len(templates))
    return [pair_label(templates[p], templates[q]) for p, q in zip(i, j, strict=True)]


def sample_ips(
    ds,
    tau: float | Sequence[float] | None = None,
    *,
    orders: Sequence[str] | str = ORDER_LEVELS,
    templates: Sequence[str] | None = None,
    pairs: Any = None,
    per_pair: bool = False,
    models: Sequence[str] | None = None,
    solver: str | None = None,
    normalization: str | None = None,
):
    r"""Per-sample IPS (eq. 3) of a run, for one or many thresholds and order bands.

    .. math::
        \mathrm{IPS}(x) = \mathbb E_{T,\hat T}\frac{1}{|\Omega_{union}|}
        \sum_{S\in\Omega_{union}} \frac{|\tilde I_S(x|T) - \tilde I_S(x|\hat T)|}
        {(|\tilde I_S(x|T)| + |\tilde I_S(x|\hat T)|)/2}

    Parameters
    ----------
    ds : xarray.Dataset
        A run (``I_and``, ``I_or`` over ``model, sample, [shot,] template, subset``) or a
        slice of one; a missing ``model`` or ``sample`` dim is left out of the result.
    tau : float or sequence of float in (0, 1), optional
        Salience threshold(s); a sequence adds a ``tau`` dim (appendix F.8). Default: the
        run's own (:func:`psens.settings.tau_of`).
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
    solver : str, optional
        For a run with several solvers' interactions (a ``solver`` dim): whose (default:
        the first; :func:`select_solver`).
    normalization : {"nonempty", "all"}, optional
        What the min-max normalisation spans (:func:`normalize`; default: the run's own,
        :func:`psens.settings.run_settings`).

    Returns
    -------
    xarray.DataArray
        dims ``model, sample, [shot,] [pair,] [order,] [tau]``; NaN where a sample has no
        salient interaction in any used pair, and for every block that is not done
        (pending or failed: skipped, whatever numbers it holds; ``attrs`` ``blocks_pending``
        and ``blocks_failed`` say how many there were). Average over samples with
        :func:`psens.ips.aggregate`.

    Examples
    --------
    >>> from psens.synthetic import synthetic_run
    >>> ds = synthetic_run(n_samples=3)
    >>> sample_ips(ds, [0.05, 0.1], orders="all").dims
    ('model', 'sample', 'tau')
    """
    import xarray as xr

    where = "sample_ips"
    for name in ("I_and", "I_or"):
        if name not in ds:
            fail(where, f"the Dataset has no {name!r} variable", "Pass a psens run Dataset")
    normalization = _check_normalization(_normalization_of(ds, normalization), where)
    tau = tau_of(ds, tau)
    ds = select_solver(ds, solver)
    added = [d for d in ("model", "sample") if d not in ds["I_and"].dims]
    if added:  # a slice of a run: treat the missing dims as length one
        if models is not None and "model" in added:
            fail(where, "models= was given but the Dataset has no model dim", "Leave models out")
        ds = ds[["I_and", "I_or", *(["status"] if "status" in ds else [])]].expand_dims(added)
    scalar_tau = np.ndim(tau) == 0
    taus = check_taus(tau, where)
    sort = np.argsort(taus, kind="stable")
    unsort = np.argsort(sort, kind="stable")
    taus_sorted = taus[sort]
    single_order = isinstance(orders, str)
    orders = _check_orders(orders, where)
    if models is not None:
        missing = [m for m in models if m not in set(model_names(ds))]
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
    status = block_status(ds)
    skip = np.zeros((n_m, n_s), bool) if status is None else status != DONE
    out = np.empty((n_m, n_s, *rest, *shape_tail))
    for m in range(n_m):  # one model and a block of samples at a time (bounded memory)
        for s0 in range(0, n_s, step):
            sl = slice(s0, min(n_s, s0 + step))
            if skip[m, sl].all():  # pending or failed: never read
                out[m, sl] = np.nan
                continue
            a = a_da.isel(model=m, sample=sl).values
            o = o_da.isel(model=m, sample=sl).values
            if skip[m, sl].any():  # their values (e.g. of an interrupted attempt) count as NaN
                rows = skip[m, sl].reshape(-1, *(1,) * (a.ndim - 1))
                a, o = np.where(rows, np.nan, a), np.where(rows, np.nan, o)
            a, o = _as_arrays(a, o, where)
            out[m, sl] = _pair_block(a, o, taus_sorted, orders, pair_idx, normalization)
    out = out[..., unsort]
    dims = [*lead_dims, "pair", "order", "tau"]
    coords: dict[str, Any] = {d: label_array(ds[d].values) for d in lead_dims if d in ds.coords}
    for name in ("family", "series", "kind", "arch", "params", "active_params"):
        if name in ds.coords and ds[name].dims == ("model",):
            coords[name] = ("model", ds[name].values)
    coords.update(
        pair=label_array(np.asarray([labels[k] for k in pair_idx], dtype=object)),
        order=list(orders),
        tau=taus,
    )
    da = xr.DataArray(out, dims=dims, coords=coords, name="ips")
    if per_pair:  # selectable by name: da.sel(pair="ips1|ips2") or "ips2-ips1"
        i, j = template_pairs(len(tnames))
        da = da.drop_vars("pair").assign_coords(
            pair_coords([tnames[i[k]] for k in pair_idx], [tnames[j[k]] for k in pair_idx])
        )
    else:
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
    if added:
        da = da.isel({d: 0 for d in added})
    da.attrs.update(
        tau=float(taus[0]) if scalar_tau else taus.tolist(),
        templates=tnames,
        pairs=[labels[k] for k in pair_idx],
        blocks_pending=0 if status is None else int((status == PENDING).sum()),
        blocks_failed=0 if status is None else int((status == FAILED).sum()),
        normalization=normalization,
    )
    return da


def block_status(ds) -> np.ndarray | None:
    """The ``status`` of every (model, sample) block of a run Dataset (0 pending, 1 done,
    2 failed), as a ``[model, sample]`` array; None when the Dataset has no status."""
    if "status" not in ds.variables or set(ds["status"].dims) != {"model", "sample"}:
        return None
    return np.asarray(ds["status"].transpose("model", "sample").values)
