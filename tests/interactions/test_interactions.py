"""Transforms and AND-OR solvers against literal references, closed forms and properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from psens.interactions import (
    and_or,
    inverse_mobius_and,
    inverse_mobius_or,
    l1_objective,
    mobius_and,
    mobius_and_transpose,
    mobius_or,
    mobius_or_transpose,
    reconstruct,
)
from tests.support import (
    dense_matrix,
    lp_optimum,
    matching_ref,
    mobius_and_ref,
    mobius_or_ref,
)

floats = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)


@st.composite
def games(draw, max_n=6, max_batch=3):
    n = draw(st.integers(0, max_n))
    batch = draw(st.integers(1, max_batch))
    return draw(arrays(np.float64, (batch, 1 << n), elements=floats))


# ----------------------------------------------------------------------------- literal refs


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 7])
def test_transforms_match_literal_definitions(n):
    rng = np.random.default_rng(n)
    v = rng.normal(size=(4, 1 << n))
    np.testing.assert_allclose(mobius_and(v), mobius_and_ref(v), atol=1e-9)
    np.testing.assert_allclose(mobius_or(v), mobius_or_ref(v), atol=1e-9)


@pytest.mark.parametrize("n", [10, 12, 13])
def test_blocked_kernel_matches_plain_butterfly(n):
    """Sizes beyond the cache-blocking width (2**11) against a plain numpy butterfly."""
    rng = np.random.default_rng(0)
    v = rng.normal(size=(2, 1 << n))
    ref = v.copy()
    for i in range(n):
        r = ref.reshape(2, -1, 2, 1 << i)
        r[:, :, 1, :] -= r[:, :, 0, :]
    np.testing.assert_allclose(mobius_and(v), ref, atol=1e-9)


@pytest.mark.parametrize("n", [1, 3, 5])
def test_transposes_are_matrix_transposes(n):
    for fwd, tr in ((mobius_and, mobius_and_transpose), (mobius_or, mobius_or_transpose)):
        np.testing.assert_allclose(dense_matrix(tr, n), dense_matrix(fwd, n).T, atol=1e-12)


# ----------------------------------------------------------------------------- properties


@settings(max_examples=60, deadline=None)
@given(games())
def test_inverses(v):
    np.testing.assert_allclose(inverse_mobius_and(mobius_and(v)), v, atol=1e-6, rtol=1e-9)
    np.testing.assert_allclose(inverse_mobius_or(mobius_or(v)), v, atol=1e-6, rtol=1e-9)


@settings(max_examples=60, deadline=None)
@given(games(), st.data())
def test_universal_matching_for_any_split(v, data):
    gamma = data.draw(arrays(np.float64, v.shape, elements=floats))
    I_and, I_or = mobius_and(0.5 * v + gamma), mobius_or(0.5 * v - gamma)
    np.testing.assert_allclose(reconstruct(I_and, I_or), v, atol=1e-6, rtol=1e-9)
    if v.shape[-1] <= 16:
        np.testing.assert_allclose(matching_ref(I_and, I_or), v, atol=1e-6, rtol=1e-9)


@settings(max_examples=40, deadline=None)
@given(games(max_n=5), st.data())
def test_transpose_adjoint_identity(v, data):
    g = data.draw(arrays(np.float64, v.shape, elements=floats))
    for fwd, tr in ((mobius_and, mobius_and_transpose), (mobius_or, mobius_or_transpose)):
        lhs = (fwd(v) * g).sum(-1)
        rhs = (v * tr(g)).sum(-1)
        np.testing.assert_allclose(lhs, rhs, rtol=1e-9, atol=1e-3)


# ----------------------------------------------------------------------------- closed forms


def _unanimity(n, s, weight=1.0):
    """v(T) = weight if S ⊆ T: a pure AND game of S."""
    t = np.arange(1 << n)
    return weight * ((t & s) == s).astype(float)


def _disjunction(n, s, weight=1.0):
    """v(T) = weight if S ∩ T ≠ ∅: a pure OR game of S."""
    t = np.arange(1 << n)
    return weight * ((t & s) != 0).astype(float)


def test_closed_form_games():
    n = 4
    and_game = _unanimity(n, 0b0110, 3.0)
    expected = np.zeros(16)
    expected[0b0110] = 3.0
    np.testing.assert_allclose(mobius_and(and_game), expected)
    or_game = _disjunction(n, 0b1010, 2.0)
    expected = np.zeros(16)
    expected[0b1010] = 2.0
    np.testing.assert_allclose(mobius_or(or_game) + 0.0, expected, atol=1e-12)
    additive = np.array([bin(t).count("1") for t in range(16)], float)  # v(T)=|T|
    np.testing.assert_allclose(
        mobius_and(additive), [1.0 if bin(s).count("1") == 1 else 0 for s in range(16)]
    )


def test_float32_stays_float32_and_input_untouched():
    v = np.random.default_rng(1).normal(size=(3, 32)).astype(np.float32)
    keep = v.copy()
    out = mobius_and(v)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(v, keep)
    np.testing.assert_allclose(out, mobius_and_ref(v.astype(float)), atol=1e-4)
    mobius_and(v, out=v)  # explicit in place
    np.testing.assert_allclose(v, out)


def test_labelled_input():
    xr = pytest.importorskip("xarray")
    v = xr.DataArray(np.random.default_rng(2).normal(size=(8, 3)), dims=("subset", "sample"))
    out = mobius_and(v)
    assert out.dims == ("subset", "sample")
    np.testing.assert_allclose(out.values, mobius_and_ref(v.values.T).T, atol=1e-9)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("v", "match"),
    [
        (np.zeros(6), "not a power of two"),
        (np.array([0.0, np.nan]), "NaN"),
        (np.array([0.0, np.inf]), "NaN/inf"),
        (np.float64(1.0), "scalar"),
    ],
)
def test_bad_games(v, match):
    with pytest.raises(ValueError, match=match):
        mobius_and(v)


def test_too_many_players_says_memory():
    from psens._validation import check_game

    with pytest.raises(ValueError, match=r"n=30 .* GiB"):
        check_game(np.broadcast_to(np.zeros(1), (1 << 30,)), "test")


def test_mismatched_shapes():
    with pytest.raises(ValueError, match="shape"):
        reconstruct(np.zeros(4), np.zeros(8))


# ----------------------------------------------------------------------------- solvers


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_exact_reaches_lp_optimum(n):
    rng = np.random.default_rng(10 + n)
    v = rng.normal(size=(3, 1 << n)) * 3
    res = and_or(v, "exact")
    for g in range(3):
        opt = lp_optimum(v[g])
        assert res.loss[g] == pytest.approx(opt, rel=1e-6, abs=1e-9)
    np.testing.assert_allclose(reconstruct(res.I_and, res.I_or), v, atol=1e-9)


def test_exact_on_pure_games_is_sparse():
    n = 4
    v = _unanimity(n, 0b0011, 2.0) + _disjunction(n, 0b1100, 1.0)
    res = and_or(v, "exact")
    assert res.loss == pytest.approx(lp_optimum(v), rel=1e-9)
    assert res.loss == pytest.approx(3.0, abs=1e-7)  # one AND effect of 2 + one OR effect of 1


def test_sgd_decreases_objective_and_matches():
    rng = np.random.default_rng(3)
    v = rng.normal(size=(4, 32))
    start = l1_objective(mobius_and(0.5 * v), mobius_or(0.5 * v))
    res = and_or(v, "sgd", steps=2000, lr=1e-2)
    assert np.all(res.loss < start)
    np.testing.assert_allclose(reconstruct(res.I_and, res.I_or), v, atol=1e-9)
    opt = np.array([lp_optimum(x) for x in v])
    assert np.all(res.loss <= opt * 1.05)


def test_sgd_matches_dense_reference_step_by_step():
    """A few steps of the numba SGD equal the same steps written with dense matrices."""
    n, steps, lr, mom = 3, 7, 0.05, 0.9
    v = np.random.default_rng(4).normal(size=1 << n)
    M, L = dense_matrix(mobius_and_ref, n), dense_matrix(mobius_or_ref, n)
    gamma, buf = np.zeros(1 << n), np.zeros(1 << n)
    lrs = lr * np.power(10.0, -np.linspace(0, 1, steps))
    for t in range(steps):
        ga = M.T @ np.sign(M @ (v / 2 + gamma))
        go = L.T @ np.sign(L @ (v / 2 - gamma))
        buf = mom * buf + (ga - go)
        gamma = gamma - lrs[t] * buf
    res = and_or(v, "sgd", steps=steps, lr=lr)
    np.testing.assert_allclose(res.gamma, gamma, atol=1e-12)


def test_sgd_noise_term_is_bounded():
    v = np.random.default_rng(5).normal(size=(2, 16))
    res = and_or(v, "sgd", steps=300, lr=1e-2, qthres=0.03)
    bound = 0.03 * np.abs(v[:, -1] - v[:, 0])
    assert np.all(np.abs(res.q) <= bound[:, None] + 1e-12)
    np.testing.assert_allclose(reconstruct(res.I_and, res.I_or), v + res.q, atol=1e-9)


def test_solver_settings_errors():
    v = np.zeros(4)
    with pytest.raises(TypeError, match="unknown setting"):
        and_or(v, "sgd", stepz=3)
    with pytest.raises(ValueError, match="method"):
        and_or(v, "newton")
    with pytest.raises(ValueError, match="lr"):
        and_or(v, "sgd", lr=-1.0)


# ----------------------------------------------------------------------------- converters


def test_msb_order_round_trip_and_meaning():
    from psens.interactions.convert import from_msb_order, to_msb_order

    v = np.random.default_rng(6).normal(size=(2, 16))
    np.testing.assert_array_equal(from_msb_order(to_msb_order(v)), v)
    # MSB-first: the set {player 0} is index 2**(n-1)
    msb = to_msb_order(v)
    assert msb[0, 8] == v[0, 1]
    assert msb[0, 1] == v[0, 8]


def test_shapiq_round_trip_matches_its_moebius():
    shapiq = pytest.importorskip("shapiq")
    from psens.interactions.convert import from_shapiq, to_shapiq

    n = 4
    v = np.random.default_rng(7).normal(size=1 << n)
    iv = to_shapiq(mobius_and(v))
    assert iv.index == "Moebius" and iv.n_players == n
    assert iv[(0, 2)] == pytest.approx(mobius_and(v)[0b0101])
    np.testing.assert_allclose(from_shapiq(iv), mobius_and(v))

    def value_fn(coalitions):
        return np.array([v[int(sum(1 << i for i in np.flatnonzero(c)))] for c in coalitions])

    exact = shapiq.ExactComputer(n_players=n, game=value_fn)
    np.testing.assert_allclose(from_shapiq(exact("Moebius")), mobius_and(v), atol=1e-9)


def test_exact_result_does_not_depend_on_earlier_calls():
    """Degenerate LPs: the vertex found must depend only on the call's own games."""
    rng = np.random.default_rng(8)
    first, other, game = rng.normal(size=(3, 1, 32))
    fresh = and_or(game, "exact")
    and_or(first, "exact")
    and_or(other, "exact")
    again = and_or(game, "exact")
    np.testing.assert_array_equal(fresh.gamma, again.gamma)
    np.testing.assert_array_equal(fresh.I_and, again.I_and)


def test_exact_result_does_not_depend_on_thread_count(monkeypatch):
    import psens.interactions.exact as exact

    v = np.random.default_rng(9).normal(size=(20, 32))
    parallel = and_or(v, "exact")
    monkeypatch.setattr(exact.os, "cpu_count", lambda: 1)
    serial = and_or(v, "exact")
    np.testing.assert_array_equal(parallel.gamma, serial.gamma)
    single = and_or(v[8:16], "exact")  # some games on their own
    np.testing.assert_array_equal(single.gamma, parallel.gamma[8:16])


def test_exact_result_does_not_depend_on_the_other_games_of_the_batch():
    # degenerate games (ties in |v| differences) have many optimal vertices: the one
    # returned must be a function of the game alone, as in a run solved sample by sample
    rng = np.random.default_rng(4)
    v = np.round(rng.normal(size=(12, 32)), 1)  # rounded: many ties, degenerate LPs
    together = and_or(v, "exact")
    for i in range(len(v)):
        alone = and_or(v[i], "exact")
        np.testing.assert_array_equal(alone.gamma, together.gamma[i])
    shuffled = and_or(v[::-1], "exact")
    np.testing.assert_array_equal(shuffled.gamma, together.gamma[::-1])


def test_silencing_highs_from_many_threads_leaves_stdout_where_it_was(tmp_path):
    """The HiGHS banner is silenced per solver built in the thread pool; overlapping silences
    must not leave file descriptor 1 on /dev/null (the CLI's later output would vanish)."""
    import os
    import threading
    import time

    from psens.interactions.exact import _silent_fd

    target = tmp_path / "out.txt"
    saved = os.dup(1)
    with open(target, "w") as f:
        os.dup2(f.fileno(), 1)
    try:
        start = threading.Barrier(8)

        def silence():
            start.wait()
            for _ in range(20):
                with _silent_fd(1):
                    time.sleep(0.001)  # the GIL is released, as when HiGHS builds a solver
                    os.write(1, b"hidden\n")

        threads = [threading.Thread(target=silence) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        os.write(1, b"shown\n")
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    assert target.read_text() == "shown\n"
