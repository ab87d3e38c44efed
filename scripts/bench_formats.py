"""`make bench` rows for the budgeted best/worst format search (psens.formats.search).

The target oracle is the shipped cloze format-space run (``data/runs/cloze-formats.nc``: 16
formats x all 570 ARC-Easy validation items per model, each option's text scored as a
continuation, where the offline models are above chance and the formats differ
measurably): each model's stored per-item correctness under every format, replayed as the
answer of a model call. Target: the spread the search reports — the full-data accuracy of
the format it answers as best minus that of the one it answers as worst — is at least 90 %
of the true spread in at least 9 of 10 seeds, with at most 30 % of the calls of evaluating
every format on every item; the hit rates of the exact best and worst are beside it.

Each model's search is :func:`paired_search` (psens's default: paired elimination)
with a budget of 30 % of the calls, over 10 seeds; the target rows also give the rates over
50 seeds (no target), so that the 10 are not read as the whole story. The truth is each
format's accuracy over the whole item pool (:func:`psens.formats.analysis.correctness`);
a seed finds the best (worst) format when the format it answers has the highest (lowest)
pool accuracy — **a format tied with the true best (worst) counts as a hit**,
and each row says how many formats share the extreme.
``ratio`` is all calls / calls used (target >= 1 / 0.3). Each target row also says the
smallest budget (10 %, 20 %, … 90 %, 99 % of the calls) at which the search finds both
exact extremes in 9 of 10 seeds (:func:`budget_needed`).

Context rows, no target: the letter-formulation oracle (``data/runs/formats-acc.nc``: 16
formats x 150 ARC-Challenge items, where the models answer at chance and the formats barely
differ), each model's items with the formats shuffled (a null), and SYNTHETIC spaces.
FormatSpread's kind of search (:func:`thompson_search`, independent Beta posteriors) on the
same budget is in each row for comparison (``thompson_*``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RUN = ROOT / "data" / "runs" / "formats-acc.nc"
CLOZE = ROOT / "data" / "runs" / "cloze-formats.nc"
SPREAD_SHARE = 0.9
FRACTION = 0.3
SEEDS = 10
WIDE_SEEDS = 50  # the target rows also give the rate over this many seeds (no target)


def _row(label: str, correct: np.ndarray, *, target: bool, spread: bool = False) -> dict:
    from psens.formats.search import budget_needed, hit_rates, thompson_search

    t = time.perf_counter()
    fig = hit_rates(correct, fraction=FRACTION, seeds=SEEDS)
    wall = (time.perf_counter() - t) / SEEDS
    base = hit_rates(correct, fraction=FRACTION, seeds=SEEDS, search=thompson_search)
    needed = budget_needed(correct, hits=9, seeds=SEEDS)["fraction"] if target else None
    wide = hit_rates(correct, fraction=FRACTION, seeds=WIDE_SEEDS) if target else None
    n_items, k = correct.shape
    ratio = fig["all_calls"] / fig["max_calls"]
    found = fig["spread_hits"] if spread else min(fig["best_hits"], fig["worst_hits"])
    ok = ratio >= 1 / FRACTION - 1e-9 and found >= 0.9 * SEEDS
    name = (
        f"format search (paired elimination; {label}, {k} formats x {n_items} items): "
        f"reported spread >= {100 * SPREAD_SHARE:.0f} % of the true spread "
        f"({fig['true_spread']:.3f}) in {fig['spread_hits']}/{SEEDS} seeds (smallest share "
        f"{np.nanmin(fig['spread_ratios']) if fig['true_spread'] > 0 else float('nan'):.2f}); "
        f"hits best {fig['best_hits']}/{SEEDS}, worst {fig['worst_hits']}/{SEEDS} "
        f"(ties with the true extreme count: {fig['n_best_ties']} format(s) tied best, "
        f"{fig['n_worst_ties']} tied worst), budget used {100 * fig['budget_fraction_used']:.1f} "
        f"% of {fig['all_calls']} calls (allowed {100 * FRACTION:.0f} %); mean accuracy gap "
        f"to the true best {fig['best_regret']:.3f}, worst {fig['worst_regret']:.3f}; Thompson "
        f"baseline spread {base['spread_hits']}/{SEEDS}, best {base['best_hits']}/{SEEDS}, "
        f"worst {base['worst_hits']}/{SEEDS}"
    )
    if target:
        name += (
            f"; over {WIDE_SEEDS} seeds: spread >= {100 * SPREAD_SHARE:.0f} % in "
            f"{wide['spread_hits']}/{WIDE_SEEDS}, best {wide['best_hits']}/{WIDE_SEEDS}, worst "
            f"{wide['worst_hits']}/{WIDE_SEEDS}"
        )
    if target:
        rate, n_b, n_w = informed_bound(correct)
        name += (
            f"; a search told the top two and the six lowest formats for free, on all the "
            f"budget: spread >= {100 * SPREAD_SHARE:.0f} % in {100 * rate:.1f} % of random "
            f"item orders (top two on {n_b} items, six lowest on {n_w})"
        )
        name += "; budget needed for 9 of 10 (both): " + (
            f"{100 * needed:.0f} % of the calls" if needed else "more than 99 % of the calls"
        )
    return {
        "name": name,
        "psens_seconds": wall,
        "baseline_seconds": wall * ratio,  # context only: calls scale the cost
        "ratio": ratio,
        "target": 1 / FRACTION if target else None,
        **({"ok": bool(ok)} if target else {}),
        **fig,
        **{
            f"thompson_{key}": base[key]
            for key in ("spread_hits", "best_hits", "worst_hits", "mean_calls")
        },
        **({f"wide_{key}": wide[key] for key in ("seeds", "spread_hits")} if target else {}),
        **({"fraction_needed_for_9_of_10": needed} if target else {}),
    }


def informed_bound(
    correct: np.ndarray,
    *,
    fraction: float = FRACTION,
    n_best: int = 2,
    n_worst: int = 6,
    orders: int = 1000,
    seed: int = 0,
) -> tuple[float, int, int]:
    """How often a search TOLD for free that the best format is one of the ``n_best``
    highest and the worst one of the ``n_worst`` lowest (pool accuracy) keeps >= 90 % of
    the true spread, spending the whole budget ``⌊fraction · N · k⌋`` on those formats:
    the ``n_best`` on the first ``n_b`` items of a random order, the ``n_worst`` on the first
    ``n_w`` (``n_best · n_b + n_worst · n_w ≤`` budget), answering the formats with the most
    (fewest) correct of them. Returns the best rate over ``n_b`` (over ``orders`` random
    orders) with its ``n_b``, ``n_w``: an upper figure for a search that must find the
    contenders itself."""
    n_items, k = correct.shape
    acc = correct.mean(axis=0)
    rank = np.argsort(acc, kind="stable")
    top, low = rank[-n_best:], rank[:n_worst]
    rng = np.random.default_rng(seed)
    order = rng.random((orders, n_items)).argsort(axis=1)
    cum = np.concatenate([np.zeros((orders, 1, k)), np.cumsum(correct[order], axis=1)], axis=1)
    cum = cum + 1e-6 * rng.random((orders, 1, k))  # ties drawn at random
    ok = acc[:, None] - acc[None, :] >= SPREAD_SHARE * (acc.max() - acc.min()) - 1e-12
    budget = int(np.floor(fraction * correct.size))
    best = (0.0, 0, 0)
    for n_b in range(1, n_items + 1):  # a loop over splits, vectorised over the orders
        n_w = min(n_items, (budget - n_best * n_b) // n_worst)
        if n_w < 1:
            break
        b = top[cum[:, n_b, top].argmax(axis=1)]
        w = low[cum[:, n_w, low].argmin(axis=1)]
        best = max(best, (float(ok[b, w].mean()), n_b, int(n_w)))
    return best


def bench() -> list[dict]:
    import psens
    from psens.formats.analysis import correctness

    rows = []
    if not CLOZE.exists():  # the target rows need the shipped cloze oracle
        return [
            {
                "name": "format search on the cloze oracle",
                "error": f"{CLOZE.relative_to(ROOT)} is not shipped yet (its config waits in "
                "data/runs/pending/cloze-formats.toml; psens run resumes it)",
            },
            *_context_rows(),
        ]
    for model, x in correctness(psens.open_run(CLOZE).load()).items():
        rows.append(_row(f"{model}, cloze, ARC-Easy", x, target=True, spread=True))
    return rows + _context_rows()


def _context_rows() -> list[dict]:
    import psens
    from psens.formats.analysis import correctness

    rows = []
    ds = psens.open_run(RUN).load()
    for model, x in correctness(ds).items():
        rows.append(_row(f"{model}, letters, ARC-Challenge", x, target=False))
        # context, no target: the same items with formats that do not matter (each item's
        # correctness shuffled across the formats): the hit rate of a pool whose "best"
        # and "worst" format are noise — compare the spread's permutation p-value
        rng = np.random.default_rng(0)
        null = np.take_along_axis(x, rng.random(x.shape).argsort(axis=1), axis=1)
        rows.append(_row(f"{model}, formats shuffled within items (null)", null, target=False))
    # context, no target: SYNTHETIC spaces (labelled so) of the shipped run's size whose
    # formats differ: accuracies spread 0.15-0.85, items sharing a difficulty
    for seed in (0, 1):
        rows.append(_row(f"SYNTHETIC data, seed {seed}", synthetic_space(seed), target=False))
    return rows


def synthetic_space(seed: int, n_items: int = 150, k: int = 16) -> np.ndarray:
    """SYNTHETIC ``correct[item, format]``: one clear best (0.85) and worst (0.15) format
    around a middle drawn from 0.35-0.6, each item's difficulty shared by every format."""
    rng = np.random.default_rng(seed)
    acc = np.r_[0.15, rng.uniform(0.35, 0.6, k - 2), 0.85]
    shared, own = rng.random((n_items, 1)), rng.random((n_items, k))
    return ((0.5 * shared + 0.5 * own) < acc).astype(float)


if __name__ == "__main__":
    from bench import _print, machine  # scripts/bench.py: the one machine line and row format

    print(f"machine: {machine()}")
    for row in bench():
        _print(row)
