"""Shared input checks.

Every check raises ``ValueError`` (or ``TypeError`` for wrong types) with one
message template: ``"<where>: <what is wrong>. <how to fix it>."`` so that users
learn the fix from the message, before any expensive work starts.
"""

from __future__ import annotations

import difflib
import reprlib
from typing import Any

import numpy as np

__all__ = [
    "check_finite",
    "check_game",
    "check_in_interval",
    "check_keys",
    "check_positive_int",
    "check_same_shape",
    "fail",
    "max_players",
    "shown",
]

#: Largest number of players a game may have by default (2**24 float64 = 128 MiB per game).
MAX_PLAYERS = 24


#: The most characters of a user's value a message quotes (:func:`shown`).
SHOWN_CHARS = 80

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxother, _REPR.maxstring, _REPR.maxlong = 3, 60, SHOWN_CHARS, 40
_REPR.maxdict = _REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxfrozenset = 6


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` as a message quotes it: at most ``limit`` characters (cut with
    ``"..."``), built without writing out a large value in full (a nested list of a million
    entries costs as much as one of six).

    Examples
    --------
    >>> shown("ips1")
    "'ips1'"
    >>> shown(list(range(10**6)))
    '[0, 1, 2, 3, 4, 5, ...]'
    >>> len(shown("x" * 500)) <= 80
    True
    """
    text = _REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fail(where: str, problem: str, fix: str, exc: type[Exception] = ValueError) -> None:
    """Raise ``exc`` with the project's message template."""
    raise exc(f"{where}: {problem}. {fix}.")


def max_players() -> int:
    """The default cap on the number of players (``MAX_PLAYERS``)."""
    return MAX_PLAYERS


def check_finite(a: np.ndarray, where: str, name: str = "v") -> None:
    """Refuse NaN or infinite entries, naming how many there are and the first one."""
    finite = np.isfinite(a)
    if not finite.all():
        bad = np.argwhere(~finite)
        first = tuple(int(i) for i in bad[0])
        fail(
            where,
            f"{name} has {len(bad)} NaN/inf entries (first at index {first})",
            f"Clean {name} first (e.g. drop the failed model calls or clamp log-odds)",
        )


def check_game(
    v: np.ndarray,
    where: str,
    *,
    name: str = "v",
    allow_nan: bool = False,
    max_n: int | None = None,
) -> int:
    """Check a batch of games ``v[..., 2**n]`` and return ``n``.

    Refuses a non-numeric array, a last axis that is not a power of two, an ``n``
    whose working arrays would not fit in memory, and NaN/inf values (unless
    ``allow_nan``; padded subsets of a stored run are NaN by design).
    """
    a = np.asarray(v)
    if a.ndim == 0:
        fail(where, f"{name} is a scalar", "Pass an array whose last axis has 2**n entries")
    if not np.issubdtype(a.dtype, np.number) or np.issubdtype(a.dtype, np.complexfloating):
        fail(
            where,
            f"{name} has dtype {a.dtype}",
            "Pass real numbers (float32 or float64)",
            TypeError,
        )
    size = a.shape[-1]
    if size < 1 or size & (size - 1):
        fail(
            where,
            f"the last axis of {name} has length {size}, which is not a power of two",
            "Put the 2**n subsets (bitmask order, bit i = player i kept) on the last axis",
        )
    n = size.bit_length() - 1
    cap = MAX_PLAYERS if max_n is None else max_n
    if n > cap:
        need = 3 * a.size * 8 / 2**30
        fail(
            where,
            f"{name} has n={n} players; the working arrays would need about {need:.1f} GiB",
            f"Use at most n={cap} players (pass max_n= to raise the cap if you have the memory)",
        )
    if not allow_nan:
        check_finite(a, where, name)
    return n


def check_same_shape(a: np.ndarray, b: np.ndarray, where: str, names: tuple[str, str]) -> None:
    """Refuse two arrays of different shapes."""
    if np.shape(a) != np.shape(b):
        fail(
            where,
            f"{names[0]} has shape {np.shape(a)} but {names[1]} has shape {np.shape(b)}",
            "Pass arrays of the same shape",
        )


def check_in_interval(
    x: float,
    where: str,
    name: str,
    low: float,
    high: float,
    *,
    closed: str = "neither",
) -> float:
    """Check ``low < x < high`` (``closed`` in {"neither", "left", "right", "both"})."""
    try:
        xf = float(x)
    except (TypeError, ValueError):
        fail(where, f"{name}={shown(x)} is not a number", f"Pass a number for {name}", TypeError)
    lo_ok = xf >= low if closed in ("left", "both") else xf > low
    hi_ok = xf <= high if closed in ("right", "both") else xf < high
    if not (lo_ok and hi_ok and np.isfinite(xf)):
        lb = "[" if closed in ("left", "both") else "("
        rb = "]" if closed in ("right", "both") else ")"
        fail(
            where,
            f"{name}={shown(x)} is outside {lb}{low}, {high}{rb}",
            f"Choose {name} in that range",
        )
    return xf


def check_positive_int(x: int, where: str, name: str, *, minimum: int = 1) -> int:
    """Check an integer ``x >= minimum``."""
    if isinstance(x, bool) or not isinstance(x, int | np.integer):
        fail(where, f"{name}={shown(x)} is not an integer", f"Pass an integer {name}", TypeError)
    if x < minimum:
        fail(where, f"{name}={x} is below {minimum}", f"Pass {name} >= {minimum}")
    return int(x)


def check_keys(
    raw: Any, names: list[str], required: tuple[str, ...], where: str = "psens config"
) -> None:
    """Refuse a config that is not a mapping, has an unknown key (naming the closest valid
    key) or lacks a required key."""
    if not isinstance(raw, dict):
        fail(where, f"a config must be a mapping, got {type(raw).__name__}", "Pass a dict")
    for key in raw:
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f"Did you mean {close[0]!r}?" if close else f"Valid keys: {names}"
            fail(where, f"unknown key {shown(key)}", hint.rstrip("?."))
    for key in required:
        if key not in raw:
            fail(where, f"the required key {shown(key)} is missing", f"Add {key} = ...")
