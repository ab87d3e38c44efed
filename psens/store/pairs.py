"""Template pairs by name: the ``pair`` coordinate of runs and IPS results, selectable by its
label (part of the run schema: :func:`psens.open_run` indexes a run's pairs).

IPS compares a sample's interactions under two templates (IPS paper eq. 3, over unordered
template pairs). Results that keep the ``pair`` dim (:func:`psens.ips.ips_pairs`,
:func:`psens.ips.interaction_classes`, :func:`psens.ips.sample_ips` with ``per_pair=True``)
label it ``"a|b"`` (:func:`psens.ips.pair_labels`) and carry the two templates as the
coordinates ``pair_a`` and ``pair_b``. The labels are indexed by :class:`PairIndex`, so a
pair is selected by name, in either order and with ``|`` or ``-`` between the names::

    res = psens.ips.ips_pairs(ds, tau=0.1)
    res.sel(pair="ips1|ips2")          # the label itself
    res.sel(pair="ips1-ips2")          # the same pair
    res.sel(pair=["ips2|ips1", "ips1-ips5"])

:func:`resolve_pair` is the lookup behind it (also used by ``ds.psens.pair`` and the
widgets), so every place that takes a pair by name accepts the same spellings.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from xarray.core.indexes import PandasIndex

from psens._validation import fail

__all__ = [
    "SEPARATORS",
    "PairIndex",
    "RunPairIndex",
    "index_run_pairs",
    "pair_coords",
    "resolve_pair",
]

#: how two template names may be joined in a pair name (the label uses the first)
SEPARATORS = ("|", "-", " vs ")


def _aliases(a: str, b: str) -> list[str]:
    """Every accepted spelling of the unordered pair ``{a, b}``."""
    return [f"{x}{sep}{y}" for sep in SEPARATORS for x, y in ((a, b), (b, a))]


def resolve_pair(
    query: Any,
    templates_a: Sequence[str],
    templates_b: Sequence[str],
    where: str = "pair",
    exc: type[Exception] = ValueError,
) -> int:
    """The position of the pair named ``query`` among the pairs ``zip(templates_a, templates_b)``.

    ``query`` is a label (``"ips1|ips2"``, ``"ips2-ips1"``, ``"ips1 vs ips2"``: order and
    separator are free) or a tuple of two template names. A spelling that fits two pairs
    (template names that contain a separator) is refused: use the tuple form. An unknown
    pair raises ``exc`` (``ValueError``; ``KeyError`` from ``.sel``) naming the templates.

    Examples
    --------
    >>> resolve_pair("ips3-ips1", ["ips1", "ips1", "ips2"], ["ips2", "ips3", "ips3"])
    1
    """
    ta, tb = [str(t) for t in templates_a], [str(t) for t in templates_b]
    pairs = list(zip(ta, tb, strict=True))
    if isinstance(query, tuple) and len(query) == 2:
        hits = [k for k, p in enumerate(pairs) if set(p) == {str(query[0]), str(query[1])}]
        hits = hits if str(query[0]) != str(query[1]) else []
    elif isinstance(query, str | np.str_):
        hits = [k for k, (a, b) in enumerate(pairs) if str(query) in _aliases(a, b)]
    else:
        hits = []
    if len(hits) == 1:
        return hits[0]
    names = sorted(set(ta) | set(tb))
    if hits:
        fail(where, f"{query!r} names {len(hits)} pairs", "Pass the two names as a tuple", exc)
    example = f", e.g. {pairs[0][0] + '|' + pairs[0][1]!r}" if pairs else ""
    fail(where, f"no template pair {query!r}", f"Use two of {names}{example}", exc)
    raise AssertionError  # unreachable


def _split(label: str) -> tuple[str, str] | None:
    parts = str(label).split("|")
    return (parts[0], parts[1]) if len(parts) == 2 else None


class PairIndex(PandasIndex):
    """A pandas index of ``"a|b"`` pair labels that also finds ``"b|a"``, ``"a-b"``, ...

    Labels that are not names of a pair (already ``"a|b"``, slices, arrays of positions)
    are passed to :class:`xarray.indexes.PandasIndex` unchanged.
    """

    def _pairs(self) -> tuple[list, list[str], list[str]]:
        """The index's keys and the two templates of each."""
        labels = [str(x) for x in self.index]
        split = [_split(x) or (x, "") for x in labels]
        a, b = zip(*split, strict=True) if split else ((), ())
        return labels, list(a), list(b)

    def _canonical(self, query: Any) -> Any:
        if isinstance(query, str | np.str_ | tuple):
            keys, a, b = self._pairs()
            if isinstance(query, str) and query in keys:
                return query
            return keys[resolve_pair(query, a, b, f".sel({self.dim}=...)", KeyError)]
        if isinstance(query, list | np.ndarray) and np.asarray(query).dtype.kind in "OU":
            return [self._canonical(q) for q in np.asarray(query, dtype=object).tolist()]
        return query

    def sel(self, labels: dict[Any, Any], method=None, tolerance=None):
        """Select by pair name (any order, ``|`` or ``-``); see :func:`resolve_pair`."""
        labels = {k: self._canonical(v) for k, v in labels.items()}
        return super().sel(labels, method=method, tolerance=tolerance)


class RunPairIndex(PairIndex):
    """The integer ``pair`` index of a run (the store's schema) that also takes pair names:
    ``ds.sel(pair="ips1|ips4")``, ``"ips4-ips1"`` or ``("ips1", "ips4")`` select the pair of
    those two templates (:func:`resolve_pair`; an unknown pair raises a ``KeyError`` naming
    the templates); integers select as before. Attached by :func:`index_run_pairs`."""

    def __init__(self, array, dim, coord_dtype=None, *, fastpath=False, names=None):
        super().__init__(array, dim, coord_dtype, fastpath=fastpath)
        self.names: dict[int, tuple[str, str]] = dict(names or {})

    def _replace(self, index, dim=None, coord_dtype=None):
        out = super()._replace(index, dim, coord_dtype)
        out.names = self.names
        return out

    def _pairs(self) -> tuple[list, list[str], list[str]]:
        keys = list(self.names)
        return keys, [self.names[k][0] for k in keys], [self.names[k][1] for k in keys]


def index_run_pairs(ds):
    """``ds`` with its ``pair`` dim indexed by :class:`RunPairIndex` (the pair numbers kept,
    names from the ``template_a``/``template_b`` coordinates); unchanged without them."""
    import xarray as xr

    if not {"pair", "template_a", "template_b"} <= set(ds.coords):
        return ds
    numbers = np.asarray(ds["pair"].values)
    names = {
        int(p): (str(a), str(b))
        for p, a, b in zip(numbers, ds["template_a"].values, ds["template_b"].values, strict=True)
    }
    index = RunPairIndex(pd.Index(numbers), "pair", names=names)
    return ds.assign_coords(xr.Coordinates.from_xindex(index))


def pair_coords(templates_a: Sequence[str], templates_b: Sequence[str], dim: str = "pair"):
    """Coordinates of a ``pair`` dim: ``"a|b"`` labels indexed by :class:`PairIndex`, and
    ``pair_a``/``pair_b`` (the two templates of each pair).

    Examples
    --------
    >>> import xarray as xr
    >>> da = xr.DataArray([0.5, 1.5], dims="pair", coords=pair_coords(["t1", "t1"], ["t2", "t3"]))
    >>> float(da.sel(pair="t3-t1"))
    1.5
    """
    import xarray as xr

    ta = [str(t) for t in templates_a]
    tb = [str(t) for t in templates_b]
    labels = pd.Index(np.asarray([f"{a}|{b}" for a, b in zip(ta, tb, strict=True)], dtype=object))
    coords = xr.Coordinates.from_xindex(PairIndex(labels, dim))
    return coords.assign(
        pair_a=(dim, np.asarray(ta, dtype=object)), pair_b=(dim, np.asarray(tb, dtype=object))
    )
