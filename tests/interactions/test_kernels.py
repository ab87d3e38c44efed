"""Butterfly kernels: bit-identical to a literal reference of their arithmetic order.

The kernels group the one-bit butterflies into radix-4 steps (bits 0-1, 2-3, ... of the
low ``min(n, 11)`` bits, an odd one last as radix 2, then the same for the high bits).
Floating-point sums depend on that grouping, so the reference below replays it with numpy
(one whole-array step at a time) and every result must match it bit for bit, whatever the
vectorisation, cache blocking, batch or thread count of the kernels.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

from psens.interactions import (
    _kernels,
    inverse_mobius_and,
    inverse_mobius_or,
    mobius_and,
    mobius_and_transpose,
    mobius_or,
    mobius_or_transpose,
)

LOW_BITS = 11  # the grouping the reference replays (fixed: results must not depend on it)


def _steps(n: int) -> list[tuple[int, int]]:
    """(first bit, number of bits) of each radix step, in the order they are applied."""
    steps = []
    for b0, b1 in ((0, min(n, LOW_BITS)), (min(n, LOW_BITS), n)):
        b = b0
        while b + 1 < b1:
            steps.append((b, 2))
            b += 2
        if b < b1:
            steps.append((b, 1))
    return steps


def butterfly_ref(v: np.ndarray, sign: float, superset: bool) -> np.ndarray:
    """The butterfly transform of each row of ``v`` in the kernels' arithmetic order."""
    a = np.array(v, copy=True)
    n = a.shape[-1].bit_length() - 1
    s = a.dtype.type(sign)
    for b, width in _steps(n):
        h = 1 << b
        if width == 1:
            r = a.reshape(-1, 2, h)
            if superset:
                r[:, 0] = r[:, 0] + s * r[:, 1]
            else:
                r[:, 1] = r[:, 1] + s * r[:, 0]
            continue
        r = a.reshape(-1, 4, h)
        x0, x1, x2, x3 = (r[:, k].copy() for k in range(4))
        if superset:
            r[:, 0] = x0 + s * (x1 + x2) + x3
            r[:, 1] = x1 + s * x3
            r[:, 2] = x2 + s * x3
        else:
            r[:, 1] = x1 + s * x0
            r[:, 2] = x2 + s * x0
            r[:, 3] = x3 + s * (x1 + x2) + x0
    return a


def _or_ref(v: np.ndarray, kind: int) -> np.ndarray:
    """The OR maps of ``_kernels`` (0 forward, 1 transpose, 2 inverse) from ``butterfly_ref``."""
    a = np.array(v, copy=True)
    if kind == 0:
        out = -butterfly_ref(a, -1.0, True)[..., ::-1]
        out[..., 0] = a[..., 0]
    elif kind == 1:
        g0 = a[..., 0].copy()
        a[..., 0] = 0.0
        out = butterfly_ref(-a[..., ::-1], -1.0, False)
        out[..., 0] += g0
    else:
        i0 = a[..., 0].copy()
        a[..., 0] = 0.0
        z = butterfly_ref(a, 1.0, False)
        shift = i0 + z[..., -1]
        out = -z[..., ::-1] + shift[..., None]
    return np.ascontiguousarray(out)


def _games(rng, n: int, batch: int, dtype) -> np.ndarray:
    """Random games with entries spread over six orders of magnitude (rounding shows)."""
    size = (batch, 1 << n)
    return (rng.normal(size=size) * 10.0 ** rng.integers(-3, 4, size=size)).astype(dtype)


def _same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_butterfly_bit_identical_to_reference_n1_to_20(dtype):
    rng = np.random.default_rng(11)
    for n in range(1, 21):
        v = _games(rng, n, 1, dtype)
        for sign in (-1.0, 1.0):
            for superset in (False, True):
                got = v.copy()
                _kernels.butterfly(got, n, sign, superset)
                assert _same_bits(got, butterfly_ref(v, sign, superset)), (n, sign, superset)


def test_public_transforms_bit_identical_to_reference():
    rng = np.random.default_rng(12)
    for n in (1, 2, 5, 11, 12, 13, 16, 20):
        v = _games(rng, n, 1, np.float64)[0]
        assert _same_bits(mobius_and(v), butterfly_ref(v, -1.0, False))
        assert _same_bits(inverse_mobius_and(v), butterfly_ref(v, 1.0, False))
        assert _same_bits(mobius_and_transpose(v), butterfly_ref(v, -1.0, True))
        assert _same_bits(mobius_or(v), _or_ref(v, 0))
        assert _same_bits(mobius_or_transpose(v), _or_ref(v, 1))
        assert _same_bits(inverse_mobius_or(v), _or_ref(v, 2))
        out = np.empty_like(v)
        assert mobius_and(v, out=out) is out and _same_bits(out, butterfly_ref(v, -1.0, False))


@pytest.mark.parametrize("n", [1, 3, 4, 11, 12, 17, 20])
def test_batch_bit_identical_to_single_games(n):
    rng = np.random.default_rng(13)
    v = _games(rng, n, 3, np.float64)
    for sign, superset in ((-1.0, False), (1.0, False), (-1.0, True)):
        batch = v.copy()
        _kernels.butterfly(batch, n, sign, superset)
        for r in range(v.shape[0]):
            one = v[r : r + 1].copy()
            _kernels.butterfly(one, n, sign, superset)
            assert _same_bits(batch[r : r + 1], one), (n, r, sign, superset)
            row = v[r].copy()  # the serial kernel other numba code calls
            _kernels._row(row, n, v.dtype.type(sign), superset)
            assert _same_bits(row, one[0]), (n, r, sign, superset)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs 2 numba threads")
@pytest.mark.parametrize("n", [12, 16, 20])
def test_bits_do_not_depend_on_thread_count(n):
    rng = np.random.default_rng(14)
    cases = [
        (v, sign, superset)
        for v in (_games(rng, n, 1, np.float64), _games(rng, n, 3, np.float64))
        for sign, superset in ((-1.0, False), (1.0, False), (-1.0, True))
    ]
    before = numba.get_num_threads()
    results = {1: [], 2: []}
    try:
        for threads in (1, 2):
            numba.set_num_threads(threads)
            for v, sign, superset in cases:  # one game (serial) and a batch (one thread a game)
                got = v.copy()
                _kernels.butterfly(got, n, sign, superset)
                results[threads].append(got)
    finally:
        numba.set_num_threads(before)
    for one, two in zip(results[1], results[2], strict=True):
        assert _same_bits(one, two)
