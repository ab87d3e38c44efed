r"""Sparse AND (Möbius) interactions of games too large for all :math:`2^n` values (n ≤ 64).

The exact decomposition (:mod:`psens.interactions.transforms`) needs every value of the game,
:math:`2^n` model calls, which limits it to n ≈ 12–16 words (IPS paper, appendix J). When the
game is *sparse* — a few interactions carry almost all of it — the interactions can be
recovered from a budget of :math:`B \ll 2^n` queries:

.. math::  v(T) \approx \hat v(T) = \sum_{S \subseteq T,\ S \in K} I_{and}(S),
           \qquad |K| \ll 2^n,

and every interaction outside the recovered support :math:`K` is taken to be exactly 0.

Methods (:func:`recover`):

* ``"lasso"`` (psens' own, the default) — ``B`` coalitions drawn uniformly (each word kept
  with probability 1/2; the full and the empty prompt always included), an L1-regularised
  least-squares fit in the orthogonal Fourier (parity) basis
  :math:`\chi_S(T) = \prod_{i\in S}(2\,[i\in T]-1)` over :math:`|S| \le d`
  (cross-validated penalty, then an unpenalised refit on the selected support), converted to
  Möbius coefficients by :math:`I_{and}(R) = \sum_{S \supseteq R} f_S\, 2^{|R|}(-1)^{|S|-|R|}`.
  All orders are candidates up to the largest whose features fit ``max_features``; higher
  orders (up to ``degree``, default 5) enter hierarchically, a set once two of its subsets
  one word smaller were selected (:func:`fit_queries`).
* ``"spex"`` — SPEX (Kang et al. 2025): structured queries that alias the Fourier spectrum
  into bins, decoded by sparse-graph peeling (BCH-coded delays), through shapiq's
  implementation (``sparse-transform``). Its query count is set by the budget rounded down to
  what the code design allows; it needs a minimum budget and refuses less.
* ``"proxyspex"`` — ProxySPEX (Butler et al. 2025): uniform queries, a gradient-boosted tree
  proxy (LightGBM, cross-validated) whose Fourier transform is read off its trees, refined by
  ridge regression on the strongest coefficients; through shapiq (needs ``lightgbm``).

Subsets and masks are ``uint64`` bitmasks (bit ``i`` = word ``i``; n ≤ 64) or boolean arrays
``[m, n]`` (any n); int64 masks cannot hold n > 62 and are refused there.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
.. [2] Kang, J. S., Butler, L., Agarwal, A., Erginbas, Y. E., Pedarsani, R., Ramchandran, K.,
   and Yu, B. "SPEX: Scaling Feature Interaction Explanations for LLMs." Proceedings of the
   42nd International Conference on Machine Learning (ICML), 2025. arXiv:2502.13870.
.. [3] Butler, L., Kang, J. S., Agarwal, A., Erginbas, Y. E., Yu, B., and Ramchandran, K.
   "ProxySPEX: Inference-Efficient Interpretability via Sparse Feature Interactions in
   LLMs." arXiv:2505.17495, 2025.
.. [4] Li and Zhang, arXiv:2304.13312, 2023; the full reference is in :mod:`psens.interactions`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from psens._validation import check_positive_int, fail

__all__ = [
    "MAX_SPARSE_PLAYERS",
    "METHODS",
    "Recovery",
    "SparseAndOr",
    "SparseInteractions",
    "as_bits",
    "check_budget",
    "check_memory",
    "check_seed",
    "downward_closure",
    "fit_queries",
    "fourier_to_mobius",
    "pack_bits",
    "popcount",
    "recover",
    "restricted_and_or",
    "subsets_of",
    "unpack_bits",
]

#: Largest number of players of a sparse game (subsets are uint64 bitmasks).
MAX_SPARSE_PLAYERS = 64
Method = Literal["lasso", "spex", "proxyspex"]
METHODS: tuple[str, ...] = ("lasso", "spex", "proxyspex")
#: Smallest budget :func:`recover` accepts (the fits below it are meaningless).
MIN_BUDGET = 8
#: Default cap on the candidate Fourier features of one ``lasso`` round.
MAX_FEATURES = 6000
#: Largest |v| a game may return: squares and sums of squares of the fit stay finite.
MAX_VALUE = 1e100
#: Share of the available RAM a recovery may plan to use.
MEMORY_SHARE = 0.8


# ----------------------------------------------------------------------------- bitmasks


def _check_n(n, where: str) -> int:
    n = check_positive_int(n, where, "n")
    if n > MAX_SPARSE_PLAYERS:
        fail(
            where,
            f"n={n} words is above the {MAX_SPARSE_PLAYERS} a sparse game supports "
            "(subsets are 64-bit masks)",
            f"Use at most {MAX_SPARSE_PLAYERS} words",
        )
    return n


def _check_keys(keys: np.ndarray, n: int, where: str) -> np.ndarray:
    """``uint64`` subset keys of ``n`` words: a key naming a word ≥ n is refused."""
    if n < MAX_SPARSE_PLAYERS and keys.size and int(keys.max()) >> n:
        fail(
            where,
            f"a subset names word {int(keys.max()).bit_length() - 1} of a game of n={n} words",
            f"Pass subsets of words 0..{n - 1} (or the game's true n)",
        )
    return keys


def as_bits(masks, n: int, where: str = "psens.interactions.sparse") -> np.ndarray:
    """Masks as a boolean array ``[m, n]`` (column ``i`` = word ``i`` kept).

    Accepts a boolean (or 0/1) array ``[m, n]`` for any n, integer bitmasks for n ≤ 62
    (int64) and ``uint64`` bitmasks for n ≤ 64.
    """
    a = np.asarray(masks)
    if a.ndim == 2:
        if a.shape[1] != n:
            fail(where, f"masks have {a.shape[1]} columns for n={n} words", f"Pass [m, {n}]")
        if a.dtype != bool:
            if not np.isin(a, (0, 1)).all():
                fail(where, "2-d masks hold values other than 0/1", "Pass a boolean array")
            a = a.astype(bool)
        return a
    a = np.atleast_1d(a)
    if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
        fail(
            where,
            f"masks must be bitmasks [m] or booleans [m, n]; got {a.dtype} of shape {a.shape}",
            "Pass integer bitmasks (bit i = word i kept) or a boolean array",
            TypeError,
        )
    if a.dtype != np.uint64:
        if n > 62:
            fail(
                where,
                f"int64 bitmasks cannot hold n={n} words",
                "Pass uint64 bitmasks or a boolean array [m, n] for n > 62",
            )
        if a.size and (a.min() < 0 or a.max() >= 2**n):
            fail(where, f"masks must lie in [0, 2**{n})", "Use bits 0..n-1 only")
        a = a.astype(np.uint64)
    elif n < 64 and a.size and (a >> np.uint64(n)).any():
        fail(where, f"masks use bits beyond word {n - 1}", "Use bits 0..n-1 only")
    return unpack_bits(a, n)


def pack_bits(bits) -> np.ndarray:
    """Boolean ``[m, n]`` (n ≤ 64) to ``uint64`` bitmasks."""
    b = np.asarray(bits, dtype=bool)
    if b.shape[-1] > MAX_SPARSE_PLAYERS:
        fail("pack_bits", f"{b.shape[-1]} words do not fit 64 bits", "Use at most 64 words")
    weights = np.left_shift(np.uint64(1), np.arange(b.shape[-1], dtype=np.uint64))
    return (b.astype(np.uint64) * weights).sum(axis=-1, dtype=np.uint64)


def unpack_bits(keys, n: int) -> np.ndarray:
    """``uint64`` bitmasks to boolean ``[m, n]``."""
    k = np.asarray(keys, dtype=np.uint64)
    return ((k[..., None] >> np.arange(n, dtype=np.uint64)) & np.uint64(1)).astype(bool)


def popcount(keys) -> np.ndarray:
    """Number of set bits of each ``uint64`` key."""
    k = np.asarray(keys, dtype=np.uint64)
    return np.unpackbits(k.view(np.uint8).reshape(*k.shape, 8), axis=-1).sum(axis=-1)


def subsets_of(keys, block: int = 2**22) -> tuple[np.ndarray, np.ndarray]:
    """Every subset of every key (the empty set and the key included).

    Returns ``(owner, sub)``: ``sub[j]`` is a subset of ``keys[owner[j]]``; the subsets of
    one key are listed together, in the order of the binary counter over its set bits
    (lowest bit first). Vectorised over keys and subsets (one doubling step per word of a
    key size), in blocks of about ``block`` subsets (a key of more words than
    ``log2(block)`` is one block of its own).
    """
    keys = np.asarray(keys, dtype=np.uint64).ravel()
    size = popcount(keys)
    owners, subs = [], []
    for k in np.unique(size).tolist():  # one step per key size
        which = np.nonzero(size == k)[0]
        step = max(1, block // 2**k)
        for a in range(0, which.size, step):
            part = which[a : a + step]
            # the value of each set bit of each key: [m, k], lowest first
            bit = np.nonzero(unpack_bits(keys[part], 64))[1].reshape(part.size, k)
            weight = np.uint64(1) << bit.astype(np.uint64)
            sub = np.zeros((part.size, 1), np.uint64)
            for j in range(k):  # doubling: the subsets without word j, then with it
                sub = np.concatenate([sub, sub | weight[:, j : j + 1]], axis=1)
            owners.append(np.repeat(part, 2**k))
            subs.append(sub.ravel())
    if not subs:
        return np.zeros(0, np.int64), np.zeros(0, np.uint64)
    owner, sub = np.concatenate(owners), np.concatenate(subs)
    order = np.argsort(owner, kind="stable")  # keys in their given order
    return owner[order], sub[order]


# ----------------------------------------------------------------------------- containers


@dataclass(frozen=True)
class SparseInteractions:
    r"""Interactions of one game on a support; every other subset's interaction is 0.

    ``kind="and"`` (Möbius): :math:`\hat v(T) = \sum_{S\subseteq T} I(S)`;
    ``kind="or"``: :math:`\hat v(T) = I(\emptyset) + \sum_{S\cap T\neq\emptyset} I(S)`.

    Attributes
    ----------
    n : int
        Number of words (players).
    subsets : ndarray of uint64
        Sorted, unique bitmasks of the support (the empty set 0 is the bias).
    values : ndarray of float64
        The interaction of each subset.
    """

    n: int
    subsets: np.ndarray
    values: np.ndarray
    kind: str = "and"

    def __post_init__(self) -> None:
        s = np.asarray(self.subsets, dtype=np.uint64).ravel()
        v = np.asarray(self.values, dtype=np.float64).ravel()
        if s.shape != v.shape:
            fail("SparseInteractions", "subsets and values differ in length", "Pass one each")
        if not np.isfinite(v).all():
            fail("SparseInteractions", "values contain NaN or inf", "Pass finite values")
        if self.kind not in ("and", "or"):
            fail("SparseInteractions", f"kind={self.kind!r}", "Use 'and' or 'or'")
        _check_keys(s, self.n, "SparseInteractions")
        order = np.argsort(s, kind="stable")
        s, v = s[order], v[order]
        if np.unique(s).size != s.size:
            fail("SparseInteractions", "a subset is listed twice", "Sum duplicates first")
        object.__setattr__(self, "subsets", s)
        object.__setattr__(self, "values", v)

    @property
    def sizes(self) -> np.ndarray:
        """:math:`|S|` of every listed subset."""
        return popcount(self.subsets)

    @property
    def bias(self) -> float:
        """The empty-set term (0 when not listed)."""
        hit = self.subsets == 0
        return float(self.values[hit][0]) if hit.any() else 0.0

    def __len__(self) -> int:
        return int(self.subsets.size)

    def __call__(self, masks) -> np.ndarray:
        """The game these interactions represent, at ``masks`` (bitmasks or booleans)."""
        t = pack_bits(as_bits(masks, self.n, "SparseInteractions"))
        out = np.zeros(t.size)
        s, val = self.subsets, self.values
        step = max(1, (1 << 22) // max(s.size, 1))
        for a in range(0, t.size, step):
            tt = t[a : a + step, None]
            if self.kind == "and":
                hit = (s[None, :] & ~tt) == 0
                out[a : a + step] = hit.astype(float) @ val
            else:
                hit = ((s[None, :] & tt) != 0) | (s[None, :] == 0)
                out[a : a + step] = hit.astype(float) @ val
        return out

    def to_dense(self) -> np.ndarray:
        """All :math:`2^n` interactions (n ≤ 24)."""
        if self.n > 24:
            fail("SparseInteractions.to_dense", f"2**{self.n} is too large", "Use n <= 24")
        out = np.zeros(2**self.n)
        out[self.subsets.astype(np.int64)] = self.values
        return out

    @classmethod
    def from_dense(cls, I, kind: str = "and", *, keep_zeros: bool = True):
        """From a dense ``[2**n]`` array (the complete support; or only its nonzeros)."""
        a = np.asarray(I, dtype=float).ravel()
        n = round(math.log2(a.size))
        if 2**n != a.size:
            fail("SparseInteractions.from_dense", f"length {a.size}", "Pass 2**n values")
        idx = np.arange(a.size) if keep_zeros else np.nonzero(a)[0]
        return cls(n, idx.astype(np.uint64), a[idx], kind)

    def top(self, k: int) -> SparseInteractions:
        """The ``k`` largest in :math:`|I|` among the non-empty subsets (bias kept)."""
        nonempty = self.subsets != 0
        idx = np.nonzero(nonempty)[0]
        keep = idx[np.argsort(-np.abs(self.values[idx]), kind="stable")[:k]]
        keep = np.concatenate([np.nonzero(~nonempty)[0], keep])
        return SparseInteractions(self.n, self.subsets[keep], self.values[keep], self.kind)


@dataclass(frozen=True)
class SparseAndOr:
    """AND and OR interactions of one game on supports (see :func:`restricted_and_or`)."""

    I_and: SparseInteractions
    I_or: SparseInteractions
    objective: float = float("nan")
    support: str = "restricted"

    @property
    def n(self) -> int:
        return self.I_and.n

    def __call__(self, masks) -> np.ndarray:
        return self.I_and(masks) + self.I_or(masks)


@dataclass
class Recovery:
    """Result of :func:`recover`: the interactions and every query made."""

    interactions: SparseInteractions
    masks: np.ndarray  # bool [queries, n]
    values: np.ndarray  # v at those masks
    method: str
    budget: int
    info: dict = field(default_factory=dict)

    @property
    def queries(self) -> int:
        """Distinct masks queried."""
        return len(self.values)


# ----------------------------------------------------------------------------- transforms


def fourier_to_mobius(subsets, coeffs, n: int) -> SparseInteractions:
    r"""Möbius (AND) interactions of :math:`f(T) = \sum_S f_S \chi_S(T)`,
    :math:`\chi_S(T) = \prod_{i\in S}(2[i\in T]-1)`.

    .. math::  I_{and}(R) = \sum_{S \supseteq R} f_S\, 2^{|R|}\,(-1)^{|S|-|R|}

    Each Fourier term spreads over the :math:`2^{|S|}` subsets of S (so keep |S| small).
    """
    where = "psens.interactions.sparse.fourier_to_mobius"
    n = _check_n(n, where)
    s = _check_keys(np.asarray(subsets, dtype=np.uint64).ravel(), n, where)
    f = np.asarray(coeffs, dtype=float).ravel()
    if f.shape != s.shape:
        fail(where, f"{s.size} subsets and {f.size} coefficients", "Pass one coefficient each")
    nz = f != 0.0
    owner, r = subsets_of(s[nz])
    k, size = popcount(s[nz])[owner], popcount(r)
    contrib = f[nz][owner] * 2.0**size * np.where((k - size) % 2 == 0, 1.0, -1.0)
    keys, inv = np.unique(r, return_inverse=True)
    vals = np.bincount(inv.ravel(), contrib, keys.size)
    # terms that cancel (a Möbius term spreads over all Fourier subsets of its set) are 0
    tiny = 1e-12 * max(float(np.abs(f).max()) if f.size else 0.0, 1e-300)
    keep = (np.abs(vals) > tiny) | (keys == 0)
    return SparseInteractions(n, keys[keep], vals[keep], "and")


def downward_closure(subsets, n: int) -> np.ndarray:
    """All subsets of the given subsets (the empty set included), sorted ``uint64``."""
    keys = _check_keys(np.unique(np.asarray(subsets, dtype=np.uint64)), n, "downward_closure")
    size = popcount(keys)
    big = int(size.max(initial=0))
    if big > 20:
        fail(
            "downward_closure",
            f"a subset of {big} words has 2**{big} subsets",
            "Keep the support to interactions of at most 20 words",
        )
    closed = np.zeros(1, np.uint64)
    for k in range(big, 0, -1):  # largest first: a key inside the closure adds nothing
        new = keys[size == k]
        new = new[~np.isin(new, closed)]
        if new.size:
            closed = np.sort(np.concatenate([closed, subsets_of(new)[1]]))
            closed = closed[np.r_[True, closed[1:] != closed[:-1]]]  # (sorting beats hashing)
    return closed


def _features(bits: np.ndarray, subsets: np.ndarray) -> np.ndarray:
    """Fourier features :math:`\\chi_S(T)` ``[m, k]`` (±1) of boolean masks."""
    sb = unpack_bits(subsets, bits.shape[1])  # [k, n]
    minus = (~bits).astype(np.int32) @ sb.T.astype(np.int32)  # words of S dropped from T
    return np.where(minus % 2 == 0, 1.0, -1.0)


def _subsets_up_to(n: int, degree: int) -> np.ndarray:
    """All subsets of at most ``degree`` of ``n`` words, by size, each size in the
    lexicographic order of ``itertools.combinations``."""
    levels = [np.zeros(1, np.uint64)]
    top = np.full(1, -1)  # highest word of each subset of the last level
    words = np.arange(n)
    for _ in range(degree):  # extend each subset by one word above its highest
        ext = words[None, :] > top[:, None]  # [m, n]
        row, word = np.nonzero(ext)
        levels.append(levels[-1][row] | (np.uint64(1) << word.astype(np.uint64)))
        top = word
    return np.concatenate(levels)


def _n_features(n: int, degree: int) -> int:
    return sum(math.comb(n, k) for k in range(degree + 1))


# ----------------------------------------------------------------------------- sampling


def _first_occurrences(keys: np.ndarray) -> np.ndarray:
    """Positions of the first occurrence of each distinct key, in the keys' order."""
    return np.sort(np.unique(keys, return_index=True)[1])


def _uniform_masks(n: int, budget: int, rng: np.random.Generator) -> np.ndarray:
    """``budget`` distinct uniform masks, the full and the empty one first (bool [B, n])."""
    if n <= 20:
        rest = rng.permutation(np.arange(1, 2**n - 1, dtype=np.int64))[: budget - 2]
        keys = np.concatenate([[2**n - 1, 0], rest]).astype(np.uint64)
        return unpack_bits(keys, n)
    seen = np.array([2**n - 1, 0], dtype=np.uint64)  # the full and empty masks first
    keys = [seen]
    got = 2
    while got < budget:  # draws of `budget` rows; each new mask kept at its first draw
        draw = pack_bits(rng.random((budget, n)) < 0.5)
        first = _first_occurrences(draw)
        new = draw[first][~np.isin(draw[first], seen)][: budget - got]
        keys.append(new)
        seen = np.concatenate([seen, new])
        got += new.size
    return unpack_bits(np.concatenate(keys), n)


class _Recorder:
    """Wraps the game: batched calls, each distinct mask queried once, all kept."""

    def __init__(self, game: Callable[[np.ndarray], np.ndarray], n: int) -> None:
        self.game, self.n = game, n
        self._blocks: list[np.ndarray] = []  # the queried masks, in query order
        self._values = np.zeros(0)  # their values
        self._keys = np.zeros(0, np.uint64)  # their packed keys, sorted, and
        self._where = np.zeros(0, np.int64)  # the query number of each

    @property
    def masks(self) -> np.ndarray:
        """The distinct masks queried, in query order (bool ``[q, n]``)."""
        return np.concatenate(self._blocks) if self._blocks else np.zeros((0, self.n), bool)

    @property
    def values(self) -> np.ndarray:
        """The values of :attr:`masks`."""
        return self._values

    def __call__(self, bits) -> np.ndarray:
        b = np.asarray(bits, dtype=bool).reshape(-1, self.n)
        keys = pack_bits(b)
        first = _first_occurrences(keys)  # each distinct mask of the batch once
        at = np.minimum(np.searchsorted(self._keys, keys[first]), self._keys.size - 1)
        seen = self._keys[at] == keys[first] if self._keys.size else np.zeros(first.size, bool)
        new = first[~seen]
        if new.size:
            got = np.asarray(self.game(b[new]), dtype=float).ravel()
            if got.shape != (new.size,) or not np.isfinite(got).all():
                fail(
                    "psens.interactions.sparse.recover",
                    f"the game returned {got.shape} values (finite: {np.isfinite(got).all()}) "
                    f"for {new.size} masks",
                    "Return one finite value per mask",
                )
            _check_values(got, "psens.interactions.sparse.recover")
            at = self._values.size + np.arange(new.size)
            self._blocks.append(b[new])
            self._values = np.concatenate([self._values, got])
            order = np.argsort(keys[new])  # insert the new keys in sorted place
            pos = np.searchsorted(self._keys, keys[new][order])
            self._keys = np.insert(self._keys, pos, keys[new][order])
            self._where = np.insert(self._where, pos, at[order])
        return self._values[self._where[np.searchsorted(self._keys, keys)]]


# ----------------------------------------------------------------------------- recovery


def _check_values(y: np.ndarray, where: str) -> None:
    big = float(np.max(np.abs(y))) if y.size else 0.0
    if big > MAX_VALUE:
        fail(
            where,
            f"the game's values reach |v| = {big:.3g}, beyond {MAX_VALUE:.0e} (the fit's sums of "
            "squares overflow)",
            "Rescale the game (log-odds are within about +-16)",
        )


def check_seed(seed, where: str) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        fail(where, f"seed={seed!r} is not a non-negative integer", "Pass e.g. seed=0")
    return int(seed)


def _lasso_columns(n: int, degree: int | None, max_features: int) -> int:
    """The most feature columns the ``lasso`` fit can build (:func:`fit_queries`)."""
    degree = min(n, 5) if degree is None else min(int(degree), n)
    d0 = min(degree, _full_degree(n, max_features))
    return _n_features(n, d0) - 1 + (degree - d0) * max_features


def _memory_per_query(n: int, method: str, degree: int | None, max_features: int) -> float:
    """Bytes one query costs a recovery: its mask and key in the design and the recorder
    (with their sorted copies), and for ``lasso`` its row of the feature matrix, three
    times (the matrix, its extension and the copy scikit-learn fits on)."""
    design = 4 * n + 64
    if method == "lasso":
        return design + 3 * 8 * _lasso_columns(n, degree, max_features)
    return design + 8 * 8 * n  # shapiq's designs: float rows of n entries, a few at once


def check_memory(
    budget: int, n: int, method: str, degree: int | None, max_features: int, where: str
) -> None:
    """Refuse a budget whose arrays would not fit in the available RAM, before any is made,
    naming the largest budget that fits."""
    from psens.models import hardware

    per_query = _memory_per_query(n, method, degree, max_features)
    have = MEMORY_SHARE * hardware.available_ram()
    if budget * per_query <= have:
        return
    most = int(have // per_query)
    gib = 2**30
    fix = (
        f"Pass budget <= {most:,}"
        if most >= MIN_BUDGET
        else "Lower max_features or degree, or free memory"
    ) + (" (or lower max_features)" if method == "lasso" and most >= MIN_BUDGET else "")
    fail(
        where,
        f"budget={budget:,} at n={n} ({method}) needs about {budget * per_query / gib:.1f} GiB, "
        f"more than the {have / gib:.1f} GiB of RAM available",
        fix,
    )


def check_budget(budget, n: int, where: str) -> int:
    if isinstance(budget, bool) or not isinstance(budget, int | np.integer):
        fail(where, f"budget={budget!r} is not an integer", "Pass a query count, e.g. 500")
    budget = int(budget)
    if budget < MIN_BUDGET:
        fail(where, f"budget={budget} is below {MIN_BUDGET} queries", "Pass a larger budget")
    if n <= 62 and budget > 2**n:
        fail(
            where,
            f"budget={budget} is more than the 2**{n} = {2**n} masks of the game",
            "Use the exact decomposition (psens.interactions.and_or) or a smaller budget",
        )
    return budget


def recover(
    game: Callable[[np.ndarray], np.ndarray],
    n: int,
    budget: int,
    *,
    method: Method = "lasso",
    seed: int = 0,
    degree: int | None = None,
    max_features: int = MAX_FEATURES,
    batch: int = 256,
) -> Recovery:
    r"""Recover the salient AND (Möbius) interactions of a game from ``budget`` queries.

    Parameters
    ----------
    game : callable
        ``game(bits)`` with ``bits`` a boolean ``[m, n]`` array (column ``i`` = word ``i``
        kept) returns the ``m`` values :math:`v(T)`. It is called in batches of at most
        ``batch`` distinct masks; a mask is never queried twice.
    n : int
        Number of words, 1 ≤ n ≤ 64.
    budget : int
        Largest number of distinct masks to query (``spex`` may use fewer: the largest count
        its code design allows within the budget).
    method : {"lasso", "spex", "proxyspex"}
        See the module docstring.
    seed : int
        Seed of the query design (and of the cross-validation folds).
    degree : int, optional
        ``lasso``: highest interaction order (default 5, at most n; see
        :func:`fit_queries`). ``spex``: its degree parameter (default 5).

    Returns
    -------
    Recovery
        ``interactions`` (Möbius, the bias included; every subset not listed is 0), the
        queried ``masks`` (bool) and their ``values``, and ``info`` (degree, used budget,
        cross-validated R² for ``lasso``).
    """
    where = "psens.interactions.sparse.recover"
    n = _check_n(n, where)
    if method not in METHODS:
        fail(where, f"method={method!r} is unknown", f"Use one of {METHODS}")
    budget = check_budget(budget, n, where)
    batch = check_positive_int(batch, where, "batch")
    max_features = check_positive_int(max_features, where, "max_features")
    seed = check_seed(seed, where)
    if degree is not None:
        degree = check_positive_int(degree, where, "degree")
    check_memory(budget, n, method, degree, max_features, where)  # before any allocation
    rec = _Recorder(game, n)

    def query(bits: np.ndarray) -> np.ndarray:
        out = np.empty(len(bits))
        for a in range(0, len(bits), batch):
            out[a : a + batch] = rec(bits[a : a + batch])
        return out

    rng = np.random.default_rng(seed)
    if method == "lasso":
        inter, info = _lasso(query, n, budget, rng, degree, max_features, seed)
    elif method == "spex":
        inter, info = _spex(query, n, budget, degree, seed)
    else:
        inter, info = _proxyspex(query, n, budget, seed)
    return Recovery(
        interactions=inter,
        masks=rec.masks,
        values=rec.values,
        method=method,
        budget=budget,
        info=info,
    )


def _full_degree(n: int, max_features: int) -> int:
    """The largest order whose every subset fits ``max_features`` Fourier features."""
    degree = 1
    while degree < n and _n_features(n, degree + 1) <= max_features:
        degree += 1
    return degree


def _lasso(query, n, budget, rng, degree, max_features, seed):
    bits = _uniform_masks(n, budget, rng)
    y = query(bits)
    return fit_queries(bits, y, degree=degree, max_features=max_features, seed=seed)


#: pairs of selected sets formed at once by :func:`_grow` (bounds its memory)
_PAIR_BLOCK = 2**22


def _grow(selected: np.ndarray, k: int, limit: int) -> np.ndarray:
    """Subsets of size ``k`` that are the union of two selected ``k - 1``-subsets (at most
    ``limit``, the most supported first: by the number of such pairs, then by key)."""
    sel = np.unique(np.asarray(selected, dtype=np.uint64))
    sel = sel[popcount(sel) == k - 1]
    m = sel.size
    step = max(1, _PAIR_BLOCK // max(m, 1))  # rows of the pair table per block
    unions = []
    for a in range(0, m, step):  # blocks of rows; each pair (i < j) once
        u = sel[a : a + step, None] | sel[None, :]
        upper = np.arange(a, min(a + step, m))[:, None] < np.arange(m)[None, :]
        u = u[upper]
        unions.append(u[popcount(u) == k])
    keys, count = np.unique(np.concatenate(unions or [sel[:0]]), return_counts=True)
    best = keys[np.lexsort((keys, -count))][:limit]
    return np.sort(best)


def _lasso_fit(X, y, budget, seed):
    from sklearn.linear_model import LassoCV

    folds = min(5, max(2, budget // 4))
    model = LassoCV(cv=folds, alphas=25, max_iter=3000, tol=1e-4, random_state=seed)
    with np.errstate(all="ignore"):
        model.fit(X, y)
    coef = model.coef_.copy()
    sel = np.nonzero(coef)[0]
    intercept = float(model.intercept_)
    if 0 < sel.size < 0.5 * budget:  # debias: least squares on the selected support
        A = np.concatenate([np.ones((budget, 1)), X[:, sel]], axis=1)
        sol = np.linalg.lstsq(A, y, rcond=None)[0]
        intercept, coef = float(sol[0]), np.zeros_like(coef)
        coef[sel] = sol[1:]
    mse = float(np.min(np.mean(model.mse_path_, axis=1)))
    return intercept, coef, sel, mse


def fit_queries(
    masks,
    values,
    *,
    degree: int | None = None,
    max_features: int = MAX_FEATURES,
    seed: int = 0,
) -> tuple[SparseInteractions, dict]:
    r"""The ``lasso`` fit on given queries (e.g. a stored query log, to re-analyse it).

    Fourier features :math:`\chi_S` and an intercept. All subsets up to the largest order
    ``d0`` that fits ``max_features`` features are candidates; higher orders up to ``degree``
    (default 5, at most n) enter hierarchically: a subset of size ``k`` becomes a candidate
    when it is the union of two selected ``k - 1``-subsets (a Möbius term on S has Fourier
    terms on every subset of S, so an exactly sparse game satisfies this). Each round,
    :class:`sklearn.linear_model.LassoCV` (k-fold) selects the support and least squares on
    it (when it holds fewer than half as many terms as queries) removes the L1 shrinkage.
    The result is converted to Möbius interactions (:func:`fourier_to_mobius`).

    Returns the interactions and ``info`` (``degree``: the highest order selected,
    ``used_budget``, ``cv_r2``: the cross-validated R² of the last round).
    """
    where = "psens.interactions.sparse.fit_queries"
    bits = np.asarray(masks)
    if bits.ndim != 2 or bits.dtype != bool:
        fail(where, "masks must be a boolean array [m, n]", "Pass the queried masks as bool")
    y = np.asarray(values, dtype=float).ravel()
    if y.shape != (bits.shape[0],) or not np.isfinite(y).all():
        fail(where, "values must be one finite number per mask", "Pass v at the masks")
    _check_values(y, where)
    max_features = check_positive_int(max_features, where, "max_features")
    seed = check_seed(seed, where)
    budget, n = bits.shape
    if budget < MIN_BUDGET:
        fail(where, f"{budget} queries are fewer than {MIN_BUDGET}", "Query more masks")
    if degree is None:
        degree = min(n, 5)
    else:
        degree = check_positive_int(degree, where, "degree")
        if degree > n:
            fail(where, f"degree={degree} is above n={n}", f"Pass degree <= {n}")
    d0 = min(degree, _full_degree(n, max_features))
    cand = _subsets_up_to(n, d0)[1:]  # the intercept is fitted separately
    X = _features(bits, cand)
    intercept, coef, sel, mse = _lasso_fit(X, y, budget, seed)
    for k in range(d0 + 1, degree + 1):
        chosen = cand[sel]
        new = _grow(chosen, k, max_features)
        if new.size == 0:
            break
        cand = np.concatenate([cand, new])
        X = np.concatenate([X, _features(bits, new)], axis=1)
        intercept, coef, sel, mse = _lasso_fit(X, y, budget, seed)
    keys = np.concatenate([[np.uint64(0)], cand[sel]])
    vals = np.concatenate([[intercept], coef[sel]])
    inter = fourier_to_mobius(keys, vals, n)
    var = float(np.var(y))
    r2 = 1 - mse / var if var > 0 else float("nan")
    if r2 < 0:
        import warnings

        warnings.warn(
            f"{where}: the cross-validated R² is {r2:.2f} < 0 (the fit predicts held-out "
            f"queries worse than their mean, n={n}, {budget} queries): the recovered "
            "interactions are unreliable"
            + ("; at this n use the exact decomposition" if n <= 16 else "; raise the budget"),
            stacklevel=2,
        )
    top = int(popcount(cand[sel]).max()) if sel.size else 0
    return inter, {"degree": top, "used_budget": budget, "cv_r2": r2}


def _shapiq_game(query, n):
    def f(inputs):
        return query(np.asarray(inputs).astype(bool).reshape(-1, n))

    return f


def _spex(query, n, budget, degree, seed):
    from shapiq.approximator.sparse import SPEX
    from sparse_transform.qsft.qsft import transform
    from sparse_transform.qsft.signals.input_signal_subsampled import SubsampledSignal
    from sparse_transform.qsft.utils.general import fourier_to_mobius as f2m

    where = "psens.interactions.sparse.recover"
    if n < 4:
        fail(where, f"SPEX needs at least 4 words (n={n})", "Use method='lasso'")
    # sparse-transform draws its query design from numpy's global generator
    np.random.seed(seed)  # noqa: NPY002
    approx = SPEX(n=n, index="FBII", random_state=seed, degree_parameter=degree or 5)
    try:
        used = approx._set_transform_budget(budget)
    except ValueError:
        need = _spex_min_budget(n, approx)
        fail(
            where,
            f"budget={budget} is too small for SPEX at n={n} words"
            + (f" (it needs about {need})" if need else ""),
            "Pass a larger budget or use method='lasso'",
        )
    if used > budget:
        fail(where, f"SPEX would use {used} queries > budget={budget}", "Raise the budget")
    signal = SubsampledSignal(func=_shapiq_game(query, n), n=n, q=2, query_args=approx.query_args)
    four = {
        tuple(np.nonzero(k)[0]): float(np.real(v))
        for k, v in transform(signal, **approx.decoder_args).items()
    }
    moeb = f2m(four) if four else {(): 0.0}
    keys = np.asarray([sum(1 << int(i) for i in k) for k in moeb], dtype=np.uint64)
    vals = np.asarray([float(np.real(v)) for v in moeb.values()])
    keys, inv = np.unique(keys, return_inverse=True)
    vals = np.bincount(inv.ravel(), vals, keys.size)
    return SparseInteractions(n, keys, vals, "and"), {
        "degree": approx.degree_parameter,
        "used_budget": int(used),
        "b": int(approx.query_args["b"]),
    }


def _spex_min_budget(n: int, approx) -> int | None:
    from sparse_transform.qsft.signals.input_signal_subsampled import SubsampledSignal

    try:
        return int(SubsampledSignal.get_number_of_samples(n, 3, 2, 2, approx.query_args))
    except Exception:  # only a hint in an error message
        return None


def _proxyspex(query, n, budget, seed):
    where = "psens.interactions.sparse.recover"
    try:
        import lightgbm  # noqa: F401
    except ImportError:
        fail(
            where,
            "method='proxyspex' needs the lightgbm package",
            "pip install lightgbm (or use method='lasso')",
            ImportError,
        )
    from shapiq.approximator.sparse import ProxySPEX

    approx = ProxySPEX(n=n, index="FBII", random_state=seed)
    captured: dict = {}

    def grab(moebius_transform):
        captured.update(moebius_transform)
        approx._interaction_lookup = {(): 0}
        return np.zeros(1)

    approx._process_moebius = grab
    try:
        approx.approximate(budget, _shapiq_game(query, n))
    except (IndexError, ValueError) as err:  # e.g. a proxy with a single coefficient
        fail(
            where,
            f"ProxySPEX failed at budget={budget}, n={n} ({type(err).__name__}: {err})",
            "Pass a larger budget or use method='lasso'",
        )
    moeb = captured or {(): 0.0}
    keys = np.asarray([sum(1 << int(i) for i in k) for k in moeb], dtype=np.uint64)
    vals = np.asarray([float(np.real(v)) for v in moeb.values()])
    keys, inv = np.unique(keys, return_inverse=True)
    vals = np.bincount(inv.ravel(), vals, keys.size)
    return SparseInteractions(n, keys, vals, "and"), {"used_budget": budget}


# ----------------------------------------------------------------------------- AND-OR


def _or_matrix(D: np.ndarray):
    r"""Sparse matrix C with :math:`I_{or} = C\,b` for a game whose Möbius coefficients
    ``b`` live on the downward-closed set ``D``:
    :math:`I_{or}(Q) = (-1)^{|Q|+1}\sum_{R\supseteq Q,\,R\in D} b_R` for :math:`Q\neq\emptyset`,
    :math:`I_{or}(\emptyset) = b_\emptyset`."""
    from scipy import sparse as sp

    cols, q = subsets_of(D)
    keep = (q != 0) | (D[cols] == 0)  # the constant maps to the OR bias only
    cols, q = cols[keep], q[keep]
    rows = np.searchsorted(D, q)
    vals = np.where(q == 0, 1.0, np.where(popcount(q) % 2 == 1, 1.0, -1.0))
    return sp.csr_matrix((vals, (rows, cols)), shape=(len(D), len(D)))


def restricted_and_or(I_and: SparseInteractions) -> SparseAndOr:
    r"""The AND-OR split of eq. 12 restricted to games supported on the recovered support.

    With :math:`m` the Möbius interactions of :math:`v` on the support :math:`K`, and
    :math:`D` its downward closure (all subsets of the sets in :math:`K`), the split
    :math:`v_{and} = v/2 + \gamma`, :math:`v_{or} = v/2 - \gamma` is searched over all
    :math:`\gamma` whose Möbius interactions :math:`g` live on :math:`D`:

    .. math::
        \min_{g \in \mathbb R^{D}} \sum_{S\in D} |m_S/2 + g_S|
            + \sum_{Q \in D} |(C(m/2 - g))_Q|

    with :math:`C` the AND-to-OR change of basis on :math:`D` (:math:`\prod_{i\in R}x_i =
    \sum_{\emptyset\neq Q\subseteq R}(-1)^{|Q|+1}[Q\cap T\neq\emptyset]`; D downward closed
    makes it square and invertible), solved as an LP with HiGHS. Both interaction sets then
    live on :math:`D` and reproduce :math:`\hat v` exactly (universal matching).

    What it is and is not: the feasible set is the exact problem's (eq. 12) intersected with
    "γ supported on D", so its objective is an *upper bound* of the exact optimum of
    :math:`\hat v`, equal to it when :math:`D` is the whole power set (tested). The exact split
    may place interactions outside :math:`D` (an OR of many words is dense in the AND basis),
    which no query budget ≪ :math:`2^n` can certify; compare with the exact canonical split
    where n is small (the table of docs/long-inputs.md). The returned split is an optimal vertex (as
    ``method="exact"``), not the least-norm one.
    """
    from scipy import sparse as sp
    from scipy.optimize import linprog

    where = "psens.interactions.sparse.restricted_and_or"
    if I_and.kind != "and":
        fail(where, "the interactions are not AND (Möbius)", "Pass the AND interactions")
    D = downward_closure(I_and.subsets, I_and.n)
    if D.size > 200_000:
        fail(where, f"the closed support has {D.size} subsets", "Recover a sparser support")
    m = np.zeros(D.size)
    m[np.searchsorted(D, I_and.subsets)] = I_and.values
    C = _or_matrix(D)
    k = D.size
    eye = sp.identity(k, format="csr")
    # variables [g (k), s (k), t (k)]: s >= |m/2 + g|, t >= |C(m/2 - g)|
    half = m / 2
    Cm = C @ half
    A = sp.vstack(
        [
            sp.hstack([eye, -eye, sp.csr_matrix((k, k))]),  # g - s <= -m/2
            sp.hstack([-eye, -eye, sp.csr_matrix((k, k))]),  # -g - s <= m/2
            sp.hstack([-C, sp.csr_matrix((k, k)), -eye]),  # -Cg - t <= -Cm/2
            sp.hstack([C, sp.csr_matrix((k, k)), -eye]),  # Cg - t <= Cm/2
        ],
        format="csr",
    )
    b = np.concatenate([-half, half, -Cm, Cm])
    c = np.concatenate([np.zeros(k), np.ones(2 * k)])
    bounds = [(None, None)] * k + [(0, None)] * (2 * k)
    res = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    if res.status != 0:
        fail(where, f"the LP did not solve ({res.message})", "Report this game")
    g = res.x[:k]
    ia = half + g
    io = C @ (half - g)
    return SparseAndOr(
        SparseInteractions(I_and.n, D, ia, "and"),
        SparseInteractions(I_and.n, D, io, "or"),
        objective=float(np.abs(ia).sum() + np.abs(io).sum()),
    )
