r"""Energy distance, alternative statistics and fast permutation tests (paper §4, appendix B.4–B.6).

Everything here is pure numerics on arrays: embeddings in, floats out.

Conventions
-----------
* ``X`` (n × d) are the embeddings of the responses to the original prompt, ``Y`` (m × d)
  those to a perturbed prompt. A 1-D array is read as n samples of one dimension.
* The pooled sample is ``Z = [X; Y]`` (N = n + m rows) and ``D`` its N × N distance matrix.
* A permutation is a row of ``N`` indices into ``Z``; its first ``n`` entries form the
  permuted "original" group. :func:`permutation_indices` draws them from a seed, so a
  fast and a naive implementation can be run on exactly the same permutations.

Energy distance (V-statistic)
-----------------------------
.. math::

    E(X, Y) = \frac{2}{nm}\sum_{a,b} \delta(x_a, y_b) - \frac{1}{n^2}\sum_{a,a'}\delta(x_a, x_{a'})
              - \frac{1}{m^2}\sum_{b,b'}\delta(y_b, y_{b'})

(paper §4 "Distance measure", algorithm 1 lines 10–13, appendix B.4), with ``δ`` the cosine
distance ``1 - cos``, the L1 (city-block) or the L2 (Euclidean) distance. The diagonal terms
are included (V-statistic, as in the paper's code). In 1-D with L1/L2 it is the *square* of
``scipy.stats.energy_distance``. For cosine distance and any embeddings,
``E = ||x̄ - ȳ||²`` where ``x̄, ȳ`` are the means of the unit-normalised rows (because
``1 - cos(u, v) = ||û - v̂||² / 2``): with cosine, energy distance compares mean directions only.

Fast permutation test
---------------------
Let ``a ∈ {0,1}^N`` indicate the permuted original group and ``b = 1 - a``. Then

.. math::

    E = \frac{2\,a^\top D b}{nm} - \frac{a^\top D a}{n^2} - \frac{b^\top D b}{m^2},\qquad
    a^\top D b = a^\top r - a^\top D a,\quad b^\top D b = 1^\top D 1 - a^\top D a - 2 a^\top D b

with ``r = D 1``. For P permutations the indicator rows form a (P × N) matrix ``A`` and all
``a^T D a`` come from one matrix product ``(A D) ∘ A`` summed over rows: O(P N²) flops with
no distance recomputation, against O(P N² d) for the published approach (B.5), which
reshuffles the embeddings and calls ``cdist`` three times per permutation.

p-values use the +1 correction ``p = (k + 1) / (P + 1)`` with ``k`` the number of permuted
statistics at least as large as the observed one (a tolerance of ``1e-12 · max|D|`` absorbs
rounding, so identical samples give ``p = 1``). The published code uses ``k / P`` (which can
be 0) and no seed.

Alternative statistics (appendix B.6, §6.5)
-------------------------------------------
``"mean"`` and ``"emd"`` compare the distribution ``P0`` of distances within the original
responses (pairs ``a < a'``) with the distribution ``P1`` of distances between original and
perturbed responses (§3.2): ``|mean(P1) - mean(P0)|`` and the 1-D Wasserstein-1 distance
``W1(P0, P1)``. Unlike the published B.6 snippet — which shuffles the pooled *values* and
splits them as ``combined[:n1], combined[n2:]`` (wrong sizes whenever ``n1 != n2``) — the
permutation here reassigns *responses* to groups and recomputes ``P0`` and ``P1`` from ``D``,
which respects the dependence between pairs that share a response. For two plain 1-D samples,
:func:`permutation_test_1d` is the corrected version of the B.6 snippet itself.

References
----------
.. [1] Rauba et al., AISTATS 2025; the full reference is in :mod:`psens.dbsa`.

Energy distance E = 2A − B − C (§4; algorithm 1 lines 10–18), the permutation test (appendix
B.5) and the alternative statistics (mean difference, EMD; appendix B.6).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from .._validation import check_finite, check_positive_int, fail

__all__ = [
    "METRICS",
    "STATISTICS",
    "cross_distances",
    "energy_distance",
    "null_statistics",
    "p_value",
    "pairwise_distances",
    "permutation_indices",
    "permutation_test",
    "permutation_test_1d",
    "permutation_test_from_distances",
    "resolve_metric",
    "statistic_from_distances",
    "wasserstein_1d",
]

Metric = Literal["cosine", "l1", "l2"]
Statistic = Literal["energy", "emd", "mean"]

#: Accepted metric names and their canonical form.
METRICS: dict[str, str] = {
    "cosine": "cosine",
    "l1": "l1",
    "cityblock": "l1",
    "manhattan": "l1",
    "l2": "l2",
    "euclidean": "l2",
}
#: Accepted test statistics.
STATISTICS: tuple[str, ...] = ("energy", "emd", "mean")

#: Largest number of float64 entries a batched permutation block may hold (~128 MiB).
_BLOCK = 2**24


def resolve_metric(metric: str, where: str = "dbsa") -> str:
    """Return the canonical metric name (``"cosine"``, ``"l1"`` or ``"l2"``)."""
    key = str(metric).lower()
    if key not in METRICS:
        fail(where, f"unknown metric {metric!r}", f"Use one of {sorted(METRICS)}")
    return METRICS[key]


def _check_statistic(statistic: str, where: str) -> str:
    if statistic not in STATISTICS:
        fail(where, f"unknown statistic {statistic!r}", f"Use one of {list(STATISTICS)}")
    return statistic


def _as_samples(a: np.ndarray, where: str, name: str, minimum: int = 2) -> np.ndarray:
    """Coerce to a float64 (rows × dims) array; 1-D input is one dimension."""
    arr = np.asarray(a, dtype=float)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        fail(
            where,
            f"{name} has {arr.ndim} dimensions",
            f"Pass {name} as a (samples × features) matrix",
        )
    if arr.shape[0] == 0:
        fail(where, f"{name} is empty", f"Pass at least {minimum} samples in {name}")
    if arr.shape[0] < minimum:
        fail(
            where,
            f"{name} has {arr.shape[0]} sample(s)",
            f"Pass at least {minimum} samples per group (draw more responses)",
        )
    if arr.shape[1] == 0:
        fail(where, f"{name} has 0 features", "Pass embeddings with at least one dimension")
    check_finite(arr, where, name)
    return arr


def _as_pair(X, Y, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Both samples coerced by :func:`_as_samples`, refused when their dimensions differ."""
    X, Y = _as_samples(X, where, "X"), _as_samples(Y, where, "Y")
    if X.shape[1] != Y.shape[1]:
        fail(
            where,
            f"X has {X.shape[1]} features but Y has {Y.shape[1]}",
            "Embed both samples with the same model",
        )
    return X, Y


def _normalise_rows(z: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(z, axis=-1, keepdims=True)
    return z / np.where(norm > 0, norm, 1.0)


def cross_distances(X: np.ndarray, Y: np.ndarray, metric: str = "cosine") -> np.ndarray:
    """Distances ``δ(x_a, y_b)`` between the rows of ``X`` (n × d) and ``Y`` (m × d) → (n × m).

    Cosine distance is ``1 - cos`` (a zero row has cosine 0 with everything); L1 and L2
    use :func:`scipy.spatial.distance.cdist` (exact, no Gram-matrix cancellation).
    """
    metric = resolve_metric(metric, "cross_distances")
    X = np.asarray(X, dtype=float)
    Y = np.asarray(Y, dtype=float)
    if metric == "cosine":
        d = 1.0 - _normalise_rows(X) @ _normalise_rows(Y).T
        return np.maximum(d, 0.0)
    from scipy.spatial.distance import cdist

    return cdist(X, Y, "cityblock" if metric == "l1" else "euclidean")


def pairwise_distances(Z: np.ndarray, metric: str = "cosine") -> np.ndarray:
    """Symmetric (N × N) distance matrix of the rows of ``Z`` with a zero diagonal."""
    d = cross_distances(Z, Z, metric)
    d = 0.5 * (d + d.T)
    np.fill_diagonal(d, 0.0)
    return d


def energy_distance(X: np.ndarray, Y: np.ndarray, metric: str = "cosine") -> float:
    r"""Energy distance V-statistic between two samples of embeddings.

    .. math::

        E = \frac{2}{nm}\sum_{a=1}^{n}\sum_{b=1}^{m}\delta(x_a, y_b)
            - \frac{1}{n^2}\sum_{a,a'}\delta(x_a, x_{a'})
            - \frac{1}{m^2}\sum_{b,b'}\delta(y_b, y_{b'})

    (paper §4 and appendix B.4; algorithm 1 lines 10–13 with ``s`` a distance).

    Parameters
    ----------
    X : array of shape (n, d) or (n,)
        Embeddings of the original responses (n ≥ 2).
    Y : array of shape (m, d) or (m,)
        Embeddings of the perturbed responses (m ≥ 2).
    metric : {"cosine", "l1", "l2"}, default "cosine"
        ``δ``: cosine distance ``1 - cos``, city-block or Euclidean distance.

    Returns
    -------
    float
        ``E ≥ 0`` (all three distances are of negative type). In 1-D with L1/L2 it equals
        ``scipy.stats.energy_distance(x, y) ** 2``.

    Examples
    --------
    >>> round(energy_distance([0.0, 1.0], [0.0, 1.0], metric="l1"), 12)
    0.0
    >>> round(energy_distance([0.0, 0.0], [1.0, 1.0], metric="l2"), 12)
    2.0
    """
    where = "energy_distance"
    metric = resolve_metric(metric, where)
    X, Y = _as_pair(X, Y, where)
    n, m = len(X), len(Y)
    dxy = cross_distances(X, Y, metric).sum()
    dxx = pairwise_distances(X, metric).sum()
    dyy = pairwise_distances(Y, metric).sum()
    return float(2.0 * dxy / (n * m) - dxx / n**2 - dyy / m**2)


# --------------------------------------------------------------------------------------
# permutations


def permutation_indices(
    n_total: int, permutations: int, seed: int | np.random.Generator | None = 0
) -> np.ndarray:
    """Draw ``permutations`` random permutations of ``range(n_total)`` → int array (P, N).

    Rows are independent uniform permutations from ``numpy.random.default_rng(seed)``; the
    same seed always gives the same array (that is how fast and naive tests are compared).
    """
    n_total = check_positive_int(n_total, "permutation_indices", "n_total", minimum=2)
    permutations = check_positive_int(permutations, "permutation_indices", "permutations")
    rng = np.random.default_rng(seed)
    base = np.broadcast_to(np.arange(n_total), (permutations, n_total))
    return rng.permuted(base, axis=1)


def p_value(
    observed: np.ndarray | float, null: np.ndarray, atol: float = 0.0
) -> np.ndarray | float:
    """``(k + 1) / (P + 1)``, ``k = #{null ≥ observed - atol}`` over the last axis of ``null``."""
    null = np.asarray(null, dtype=float)
    obs = np.asarray(observed, dtype=float)
    k = np.sum(null >= obs[..., None] - atol, axis=-1)
    p = (k + 1.0) / (null.shape[-1] + 1.0)
    return float(p) if np.ndim(p) == 0 else p


def _indicator(idx: np.ndarray, size: int) -> np.ndarray:
    """0/1 float array (..., size) with ones at the indices ``idx`` (..., k) of each row."""
    a = np.zeros((*idx.shape[:-1], size), dtype=float)
    np.put_along_axis(a, idx, 1.0, axis=-1)
    return a


def _step(perms: np.ndarray, width: int) -> int:
    """Permutations per block so that one (..., block, width) float array stays ≤ ``_BLOCK``."""
    lead = int(np.prod(perms.shape[:-2], dtype=int))
    return max(1, _BLOCK // max(1, lead * width))


def _quadratic_forms(
    D: np.ndarray, n: int, perms: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(a'Da, a'Db, b'Db)`` for every permutation row; a, b indicate ``perms[..., :n]``, ``[n:]``.

    ``D`` (..., N, N) broadcasts against ``perms`` (..., P, K). When ``K == N`` (each row is a
    permutation of all of D) one product suffices, since ``b = 1 - a``; when ``K < N`` (rows pick
    a sub-pool of a larger matrix, as in the combined test) both indicators are multiplied.
    """
    N = D.shape[-1]
    K = perms.shape[-1]
    P = perms.shape[-2]
    shape = np.broadcast_shapes(D.shape[:-2], perms.shape[:-2])
    ada = np.empty((*shape, P))
    adb = np.empty((*shape, P))
    bdb = np.empty((*shape, P))
    step = _step(perms, N)
    if K == N:
        r = D.sum(axis=-1)
        tot = r.sum(axis=-1)
    for s in range(0, P, step):  # memory blocks, not one iteration per permutation
        blk = perms[..., s : s + step, :]
        a = _indicator(blk[..., :n], N)
        ad = np.matmul(a, D)
        ada[..., s : s + step] = np.einsum("...pn,...pn->...p", ad, a)
        if K == N:
            adb[..., s : s + step] = np.einsum("...pn,...n->...p", a, r) - ada[..., s : s + step]
            bdb[..., s : s + step] = (
                tot[..., None] - ada[..., s : s + step] - 2.0 * adb[..., s : s + step]
            )
        else:
            b = _indicator(blk[..., n:], N)
            adb[..., s : s + step] = np.einsum("...pn,...pn->...p", ad, b)
            bdb[..., s : s + step] = np.einsum("...pn,...pn->...p", np.matmul(b, D), b)
    return ada, adb, bdb


def _gather(D: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``D[..., rows, cols]``, the batch axes of ``D`` aligned with the leading axes of ``rows``."""
    if D.ndim == 2:
        return D[rows, cols]
    lead = D.shape[:-2]
    extra = rows.ndim - len(lead)
    grids = np.indices(lead, sparse=True)
    idx = tuple(g.reshape(g.shape + (1,) * extra) for g in grids)
    return D[(*idx, rows, cols)]


def wasserstein_1d(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Wasserstein-1 distance between the empirical distributions on the last axes of u and v.

    ``W1 = ∫ |F_u(t) - F_v(t)| dt``, evaluated exactly on the merged sorted sample;
    vectorised over all leading axes (equals :func:`scipy.stats.wasserstein_distance` row by row).
    """
    u = np.asarray(u, dtype=float)
    v = np.asarray(v, dtype=float)
    a, b = u.shape[-1], v.shape[-1]
    both = np.concatenate([u, v], axis=-1)
    order = np.argsort(both, axis=-1, kind="stable")
    s = np.take_along_axis(both, order, axis=-1)
    from_u = order < a
    cdf_u = np.cumsum(from_u, axis=-1) / a
    cdf_v = np.cumsum(~from_u, axis=-1) / b
    return np.sum(np.abs(cdf_u - cdf_v)[..., :-1] * np.diff(s, axis=-1), axis=-1)


def _emd_null(D: np.ndarray, n: int, perms: np.ndarray) -> np.ndarray:
    """W1 between within-original distances (pairs a < a') and cross distances, per permutation."""
    K = perms.shape[-1]
    m = K - n
    iu, ju = np.triu_indices(n, 1)
    P = perms.shape[-2]
    shape = np.broadcast_shapes(D.shape[:-2], perms.shape[:-2])
    out = np.empty((*shape, P))
    step = _step(perms, 4 * (len(iu) + n * m))
    for s in range(0, P, step):
        blk = np.broadcast_to(
            perms[..., s : s + step, :], (*shape, *perms[..., s : s + step, :].shape[-2:])
        )
        xi, yi = blk[..., :n], blk[..., n:]
        within = _gather(D, xi[..., iu], xi[..., ju])
        cross = _gather(D, xi[..., :, None], yi[..., None, :])
        cross = cross.reshape((*cross.shape[:-2], n * m))
        out[..., s : s + step] = wasserstein_1d(within, cross)
    return out


def null_statistics(
    D: np.ndarray, n: int, perms: np.ndarray, statistic: str = "energy"
) -> np.ndarray:
    """Test statistic for every permutation, from one precomputed distance matrix.

    Parameters
    ----------
    D : array (..., N, N)
        Pooled distance matrices (symmetric, zero diagonal); leading axes are a batch of
        independent tests and broadcast against those of ``perms``.
    n : int
        Size of the original group: the first ``n`` entries of each row of ``perms``.
    perms : int array (..., P, K)
        Rows of indices into D: the first ``n`` form the original group, the other
        ``K - n`` the perturbed group. Usually ``K = N`` and rows are permutations (see
        :func:`permutation_indices`); ``K < N`` picks a sub-pool of a larger matrix. The
        identity row gives the observed value.
    statistic : {"energy", "emd", "mean"}
        Energy distance (§4); ``|mean(P1) - mean(P0)|``; ``W1(P0, P1)`` (B.6).

    Returns
    -------
    array (..., P)
    """
    statistic = _check_statistic(statistic, "null_statistics")
    D = np.asarray(D, dtype=float)
    perms = np.asarray(perms)
    K = perms.shape[-1]
    m = K - n
    if K > D.shape[-1] or n < 2 or m < 1:
        fail(
            "null_statistics",
            f"index rows have length {K} with n={n} for a {D.shape[-1]} × {D.shape[-1]} matrix",
            "Pass rows of n + m indices into D, n >= 2 and m >= 1",
        )
    if statistic == "emd":
        return _emd_null(D, n, perms)
    ada, adb, bdb = _quadratic_forms(D, n, perms)
    if statistic == "energy":
        return 2.0 * adb / (n * m) - ada / n**2 - bdb / m**2
    # mean(P0) = a'Da / (n(n-1)) (zero diagonal, ordered pairs), mean(P1) = a'Db / (nm)
    return np.abs(adb / (n * m) - ada / (n * (n - 1)))


def statistic_from_distances(
    D: np.ndarray, n: int, statistic: str = "energy"
) -> np.ndarray | float:
    """Observed statistic (identity permutation) from pooled distances ``D`` (..., N, N)."""
    D = np.asarray(D, dtype=float)
    ident = np.broadcast_to(np.arange(D.shape[-1]), (*D.shape[:-2], 1, D.shape[-1]))
    out = null_statistics(D, n, ident, statistic)[..., 0]
    return float(out) if np.ndim(out) == 0 else out


def _tolerance(D: np.ndarray) -> np.ndarray:
    return 1e-12 * np.maximum(1.0, np.abs(D).max(axis=(-2, -1)))


def permutation_test_from_distances(
    D: np.ndarray,
    n: int,
    permutations: int = 500,
    seed: int | np.random.Generator | None = 0,
    statistic: str = "energy",
    *,
    perms: np.ndarray | None = None,
    return_null: bool = False,
) -> tuple[float, float] | tuple[float, float, np.ndarray]:
    """Permutation test on a precomputed pooled distance matrix ``D`` (N × N, first ``n`` = X).

    Returns ``(statistic, p_value)`` (and the null statistics when ``return_null``).
    ``perms`` overrides the permutations drawn from ``seed``.
    """
    where = "permutation_test"
    D = np.asarray(D, dtype=float)
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        fail(where, f"D has shape {D.shape}", "Pass a square pooled distance matrix")
    N = D.shape[0]
    if n < 2 or N - n < 2:
        fail(
            where,
            f"the groups have n={n} and m={N - n} samples",
            "Pass at least 2 samples per group",
        )
    if perms is None:
        perms = permutation_indices(N, permutations, seed)
    obs = statistic_from_distances(D, n, statistic)
    null = null_statistics(D, n, perms, statistic)
    p = p_value(obs, null, atol=float(_tolerance(D)))
    if return_null:
        return float(obs), float(p), null
    return float(obs), float(p)


def permutation_test(
    X: np.ndarray,
    Y: np.ndarray,
    permutations: int = 500,
    metric: str = "cosine",
    seed: int | np.random.Generator | None = 0,
    statistic: str = "energy",
) -> tuple[float, float]:
    r"""Two-sample permutation test of ``H0: S(x) = S(x')`` on response embeddings (appendix B.5).

    The pooled distance matrix is computed once; each permutation reassigns the ``n + m``
    pooled rows to the two groups by index, and all permutations are evaluated with one
    batched matrix product (see the module notes for the algebra).

    Parameters
    ----------
    X : array (n, d)
        Embeddings of the original responses (n ≥ 2).
    Y : array (m, d)
        Embeddings of the perturbed responses (m ≥ 2).
    permutations : int, default 500
        Number of random permutations P.
    metric : {"cosine", "l1", "l2"}, default "cosine"
    seed : int or Generator, default 0
        Seed of :func:`permutation_indices`.
    statistic : {"energy", "emd", "mean"}, default "energy"
        Energy distance (§4) or an appendix-B.6 alternative on the similarity distributions.

    Returns
    -------
    statistic : float
        The observed statistic (``energy_distance(X, Y, metric)`` for ``"energy"``).
    p_value : float
        ``(k + 1) / (P + 1)``, ``k = #{permuted statistic ≥ observed}``; never 0, at least
        ``1 / (P + 1)``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.normal(size=(20, 3)), rng.normal(3, 1, size=(20, 3))
    >>> e, p = permutation_test(X, Y, metric="l2")
    >>> p == 1 / 501
    True
    """
    where = "permutation_test"
    metric = resolve_metric(metric, where)
    _check_statistic(statistic, where)
    permutations = check_positive_int(permutations, where, "permutations")
    X, Y = _as_pair(X, Y, where)
    D = pairwise_distances(np.vstack([X, Y]), metric)
    return permutation_test_from_distances(D, len(X), permutations, seed, statistic)  # type: ignore[return-value]


def permutation_test_1d(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    permutations: int = 1000,
    statistic: str = "energy",
    seed: int | np.random.Generator | None = 0,
) -> tuple[float, float]:
    """Corrected appendix-B.6 test for two 1-D samples (e.g. two lists of similarity scores).

    Statistics: ``"mean"`` ``|mean(a) - mean(b)|``, ``"emd"`` Wasserstein-1 and ``"energy"``
    the scipy energy distance ``sqrt(E)``. The pooled values are permuted and split into
    groups of the *original* sizes ``len(a)`` and ``len(b)`` (the published snippet takes
    ``combined[n2:]`` for the second group). Returns ``(statistic, (k + 1) / (P + 1))``.

    Only valid when the values themselves are exchangeable under H0 (independent draws);
    for DBSA's similarity distributions use :func:`permutation_test` with
    ``statistic="mean"``/``"emd"``, which permutes responses.
    """
    where = "permutation_test_1d"
    _check_statistic(statistic, where)
    permutations = check_positive_int(permutations, where, "permutations")
    x = _as_samples(a, where, "a")[:, 0]
    y = _as_samples(b, where, "b")[:, 0]
    n = len(x)
    pooled = np.concatenate([x, y])
    perms = np.vstack(
        [np.arange(len(pooled)), permutation_indices(len(pooled), permutations, seed)]
    )
    g1, g2 = pooled[perms[:, :n]], pooled[perms[:, n:]]
    if statistic == "mean":
        stats = np.abs(g1.mean(axis=1) - g2.mean(axis=1))
    elif statistic == "emd":
        stats = wasserstein_1d(g1, g2)
    else:
        D = np.abs(pooled[:, None] - pooled[None, :])
        stats = np.sqrt(np.maximum(null_statistics(D, n, perms, "energy"), 0.0))
    tol = 1e-12 * max(1.0, float(np.abs(pooled).max()))
    return float(stats[0]), float(p_value(stats[0], stats[1:], atol=tol))
