"""Template pairs by name: the ``pair`` coordinate of runs and IPS results, selectable by its
label (part of the run schema: :func:`psens.open_run` indexes a run's pairs).

IPS compares a sample's interactions under two templates (IPS paper eq. 3, over unordered
template pairs). A pair has one label everywhere, ``"a|b"`` (:func:`pair_label`; ``a`` the
earlier template of the run): the ``pair`` dim of a run (the store), and of every result
that keeps it (:func:`psens.ips.ips_pairs`, :func:`psens.ips.interaction_classes`,
:func:`psens.ips.sample_ips` with ``per_pair=True``), which also carry the two templates as
``pair_a``/``pair_b`` (a run: ``template_a``/``template_b``). The labels are indexed by
:class:`PairIndex`, so a pair is selected by name, in either order and with ``|``, ``-`` or
``" vs "`` between the names::

    ds = psens.open_run("data/runs/arc.nc")
    ds.sel(pair="ips1|ips4")            # the label itself
    res = psens.ips.ips_pairs(ds, tau=0.1)
    res.sel(pair="ips4-ips1")           # the same pair
    res.sel(pair=["ips2|ips1", "ips1-ips5"])

:func:`resolve_pair` is the lookup behind it (also used by ``ds.psens.pair`` and the
widgets), so every place that takes a pair by name accepts the same spellings. Runs written
before pairs were labelled (an integer ``pair``) are relabelled when read
(:func:`index_run_pairs`).

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
    "index_run_pairs",
    "label_array",
    "pair_coords",
    "pair_label",
    "resolve_pair",
]

#: how two template names may be joined in a pair name (the label uses the first)
SEPARATORS = ("|", "-", " vs ")


def pair_label(a: str, b: str) -> str:
    """The label of the template pair ``(a, b)``: ``"a|b"`` (the one spelling of a pair).

    Examples
    --------
    >>> pair_label("ips1", "ips4")
    'ips1|ips4'
    """
    return f"{a}{SEPARATORS[0]}{b}"


def label_array(values: Any) -> np.ndarray:
    """Text labels as a numpy string array (``<U``), other values unchanged.

    Runs hold text as object arrays (what zarr returns); xarray plots a coordinate of
    numpy strings but refuses one of objects, so results label their dims with this.

    Examples
    --------
    >>> label_array(np.array(["a", "bc"], dtype=object)).dtype
    dtype('<U2')
    """
    arr = np.asarray(values)
    if arr.dtype == object and arr.size and all(isinstance(x, str) for x in arr.ravel()):
        return arr.astype(str)
    return arr


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
    parts = str(label).split(SEPARATORS[0])
    return (parts[0], parts[1]) if len(parts) == 2 else None


class PairIndex(PandasIndex):
    """A pandas index of ``"a|b"`` pair labels that also finds ``"b|a"``, ``"a-b"``, ...

    ``names`` maps a label to its two templates (template names that contain ``|``);
    without it a label is split at ``|``. An integer selects the pair at that position
    (the pair numbers runs of earlier psens versions were indexed by). Other labels
    (already ``"a|b"``, slices, boolean masks) are passed to
    :class:`xarray.indexes.PandasIndex` unchanged; an unknown pair raises a ``KeyError``
    naming the templates.
    """

    def __init__(self, array, dim, coord_dtype=None, *, fastpath=False, names=None):
        super().__init__(array, dim, coord_dtype, fastpath=fastpath)
        self.names: dict[str, tuple[str, str]] = dict(names or {})

    def _replace(self, index, dim=None, coord_dtype=None):
        out = super()._replace(index, dim, coord_dtype)
        out.names = self.names
        return out

    def _pairs(self) -> tuple[list, list[str], list[str]]:
        """The index's keys and the two templates of each."""
        labels = [str(x) for x in self.index]
        split = [self.names.get(x) or _split(x) or (x, "") for x in labels]
        a, b = zip(*split, strict=True) if split else ((), ())
        return labels, list(a), list(b)

    def _canonical(self, query: Any) -> Any:
        if isinstance(query, int | np.integer) and not isinstance(query, bool | np.bool_):
            keys = self._pairs()[0]  # a pair number of earlier psens runs: its position
            if not -len(keys) <= int(query) < len(keys):
                fail(
                    f".sel({self.dim}=...)", f"no pair {query}", f"Use 0..{len(keys) - 1}", KeyError
                )
            return keys[int(query)]
        if isinstance(query, str | np.str_ | tuple):
            keys, a, b = self._pairs()
            if isinstance(query, str) and query in keys:
                return query
            return keys[resolve_pair(query, a, b, f".sel({self.dim}=...)", KeyError)]
        if isinstance(query, list | np.ndarray) and np.asarray(query).dtype.kind in "OUi":
            return [self._canonical(q) for q in np.asarray(query, dtype=object).tolist()]
        return query

    def sel(self, labels: dict[Any, Any], method=None, tolerance=None):
        """Select by pair name (any order, ``|``, ``-`` or ``" vs "``); see
        :func:`resolve_pair`."""
        labels = {k: self._canonical(v) for k, v in labels.items()}
        return super().sel(labels, method=method, tolerance=tolerance)


def _indexed(
    labels: Sequence[str], a: Sequence[str], b: Sequence[str], dim: str, text: bool = True
):
    """Coordinates of a ``dim`` of pair ``labels`` indexed by :class:`PairIndex` with the
    templates ``a``, ``b`` of each: numpy strings (``text``, results: plottable) or objects
    (a run, whose text is stored as objects)."""
    import xarray as xr

    values = np.asarray(list(labels), dtype=object)
    values = label_array(values) if text else values
    names = dict(zip(values.tolist(), zip(a, b, strict=True), strict=True))
    index = PairIndex(pd.Index(values), dim, coord_dtype=values.dtype, names=names)
    return xr.Coordinates.from_xindex(index)


def index_run_pairs(ds):
    """``ds`` with its ``pair`` dim labelled ``"a|b"`` (from the ``template_a``/``template_b``
    coordinates) and indexed by :class:`PairIndex`; unchanged without them.

    A run written before pairs were labelled holds the pair numbers ``0 .. P-1``: they are
    replaced by the labels (the pairs are in the same order), so every run reads the same.
    """
    if not {"pair", "template_a", "template_b"} <= set(ds.coords):
        return ds
    a = [str(x) for x in ds["template_a"].values]
    b = [str(x) for x in ds["template_b"].values]
    labels = [pair_label(x, y) for x, y in zip(a, b, strict=True)]
    return ds.assign_coords(_indexed(labels, a, b, "pair", text=False))


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
    ta = [str(t) for t in templates_a]
    tb = [str(t) for t in templates_b]
    coords = _indexed([pair_label(a, b) for a, b in zip(ta, tb, strict=True)], ta, tb, dim)
    return coords.assign(pair_a=(dim, label_array(ta)), pair_b=(dim, label_array(tb)))
