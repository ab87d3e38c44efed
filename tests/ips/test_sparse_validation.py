"""The sparse validation table (scripts/validate_sparse.py) on tiny synthetic games: rows
are computed once per game, kept when their cached game is gone, recomputed when a game's
templates change, and agree with the exact decomposition when the budget covers 2**n."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from tests.support import ROOT


@pytest.fixture
def vs(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location(
        "validate_sparse", ROOT / "scripts" / "validate_sparse.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "GAMES", tmp_path / "games")
    monkeypatch.setattr(mod, "OUT", tmp_path / "data" / "sparse_validation.csv")
    monkeypatch.setattr(mod, "FRACTIONS", (1.0,))  # every mask: exact recovery
    mod.GAMES.mkdir()
    yield mod
    sys.modules.pop("bench", None)


def _game(vs, item: str, template: str, n: int = 4, seed: int = 0) -> None:
    """A synthetic game (sparse in the AND basis) cached like a scored one."""
    rng = np.random.default_rng(seed)
    coef = np.zeros(2**n)
    coef[rng.choice(2**n, 12, replace=False)] = rng.normal(size=12)
    # v(T) = sum over S ⊆ T of coef[S]: the superset-sum (zeta) transform, by bits
    v = coef.copy()
    for i in range(n):
        has = (np.arange(2**n) >> i) & 1 == 1
        v[has] += v[np.arange(2**n)[has] ^ (1 << i)]
    attrs = {"dataset": "synthetic", "item": item, "template": template, "n": n}
    xr.Dataset({"v": (("subset",), v)}, attrs=attrs).to_netcdf(
        vs.game_path("synthetic", item, template, n)
    )


def _table(vs, **kw) -> pd.DataFrame:
    vs.table(methods=("lasso",), seeds=1, **kw)
    return pd.read_csv(vs.OUT, dtype={"item": str})


def test_rows_are_kept_and_recomputed_only_when_a_game_changes(vs, monkeypatch):
    _game(vs, "a", "t1")
    _game(vs, "a", "t2", seed=1)
    _game(vs, "b", "t1", seed=2)
    first = _table(vs)
    assert sorted(first["item"]) == ["a", "b"]
    assert set(first["templates"]) == {"t1|t2", "t1"}
    # one template: recall and v error, no IPS
    assert first.loc[first["item"] == "b", "ips_sparse_and_all"].isna().all()
    assert first.loc[first["item"] == "a", "ips_sparse_and_all"].notna().all()

    # b gains its second template, a's cached game disappears: a's row stays as it was,
    # b's row is recomputed for the pair, c (unchanged) is not computed again
    _game(vs, "c", "t1", seed=4)
    _table(vs, ns=[4])
    _game(vs, "b", "t2", seed=3)
    vs.game_path("synthetic", "a", "t1", 4).unlink()
    vs.game_path("synthetic", "a", "t2", 4).unlink()
    computed = []
    rows = vs.game_rows
    monkeypatch.setattr(vs, "game_rows", lambda *a: computed.append(a[1]) or rows(*a))
    second = _table(vs, ns=[4])
    assert computed == ["b"]
    assert sorted(second["item"]) == ["a", "b", "c"]
    pd.testing.assert_frame_equal(
        second[second["item"] == "a"].reset_index(drop=True),
        first[first["item"] == "a"].reset_index(drop=True),
        check_dtype=False,
    )
    b = second[second["item"] == "b"]
    assert list(b["templates"]) == ["t1|t2"]
    assert b["ips_sparse_and_all"].notna().all()


def test_an_exact_recovery_scores_perfectly(vs, monkeypatch):
    """With a stand-in method that returns the exact Möbius coefficients from the queried
    half of the masks, every metric of the table is at its perfect value."""
    import psens.interactions.sparse as sparse
    from psens.interactions import mobius_and

    def oracle(game, n, budget, *, method, seed):
        every = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(bool)
        full = game(every)
        masks = every[np.random.default_rng(seed).permutation(2**n)[: 2 ** (n - 1)]]
        return sparse.Recovery(
            interactions=sparse.SparseInteractions.from_dense(mobius_and(full)),
            masks=masks,
            values=game(masks),
            method=method,
            budget=budget,
            info={},
        )

    monkeypatch.setattr(sparse, "recover", oracle)
    _game(vs, "a", "t1", n=6)
    _game(vs, "a", "t2", n=6, seed=1)
    row = _table(vs).iloc[0]
    assert row["recall_top10"] == 1.0
    assert row["heldout_mae"] < 1e-9
    assert row["heldout_r2"] == pytest.approx(1.0)
    for o in vs.ORDERS:
        assert row[f"ips_sparse_and_{o}"] == pytest.approx(row[f"ips_exact_and_{o}"], nan_ok=True)
    assert np.isfinite(row["ips_exact_canonical_all"]) and np.isfinite(row["ips_exact_sgd_all"])
