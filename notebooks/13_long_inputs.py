# %% [markdown]
# # 13 · Long inputs: sparse AND interactions beyond 2^n
#
# The exact IPS of the IPS paper (Qin et al., ICML 2026) decomposes $v$ over all $2^n$ masked prompts of an (item, template): 1,024 model calls at n = 10, 16,384 at n = 14, and out of reach for a long instruction with 32 content words ($4\cdot 10^9$). Appendix J names this limit and points to sparse methods. `psens.ips.sparse` queries a budget $B \ll 2^n$ of masked prompts and recovers the **salient Möbius (AND) interactions**; everything outside the recovered support is taken to be 0:
#
# * recovery: `psens.interactions.sparse.recover` — psens' own `lasso` (uniform queries, an L1 fit in the Fourier basis with hierarchical growth of the candidate orders, an unpenalised refit), or SPEX / ProxySPEX (Kang et al. 2025; Butler et al. 2025) through shapiq;
# * IPS: `psens.ips.sparse.sparse_ips` normalises over all $2(2^n-1)$ interactions with the unlisted ones 0 (so Min = 0), then salient sets, IPS per order and classes on the union of the recovered supports;
# * AND-OR: the γ split of eq. 12 needs all $2^n$ values; `split="restricted"` solves it over games supported on the downward closure of the recovered support (an upper bound on the exact optimum; equal to it on a complete support).
#
# **What this notebook shows.** (1) The validation on real SmolLM2 games, read from `data/sparse_validation.csv` (written by `scripts/validate_sparse.py`): recall of the exact top-10 AND interactions, error of the reconstructed $v$ on held-out masks and $|IPS_{sparse} - IPS_{exact}|$, per budget. (2) A long AlpacaEval instruction at n = 32 with **all** its content words: the first instruction of the set with exactly 32 content words.
#
# **How to run.** `PSENS_SIZE=tiny` (default, what CI runs) replaces the model by a planted sparse game over the same 32 words (no model call; illustration only). `PSENS_SIZE=full` scores the instruction with SmolLM2-135M-Instruct ($2 \times$ `BUDGET` masked prompts; the query logs go to `runs/sparse_n32/`, so a rerun is free).

# %% tags=["parameters"]
import os

# "tiny": a planted synthetic game over the instruction's words (seconds, CI).
# "full": SmolLM2-135M-Instruct on the instruction (about 10-15 min on 2 CPU cores).
PSENS_SIZE = os.environ.get("PSENS_SIZE", "tiny")
PSENS_RUN = os.environ.get("PSENS_RUN", "")  # not used: this notebook keeps its own logs

# %%
import time
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd

import psens
import psens.widgets  # every chart below renders offline
from psens.interactions.sparse import SparseInteractions, restricted_and_or
from psens.ips.sparse import content_words, sparse_classes, sparse_ips, sparse_sample

ROOT = Path.cwd().parent if Path.cwd().name == "notebooks" else Path.cwd()
TINY = PSENS_SIZE != "full"

# %% [markdown]
# ## 1 · Validation on real games
#
# Every row of the table is one (item, method, budget, seed): a sparse method queried `budget` masks of an exact game (all $2^n$ masked prompts of SmolLM2, cached) and is compared with the exact decomposition of the same game. `d_and_*` is $|IPS_{sparse} - IPS_{exact}|$ of the AND-only decomposition (what the recovery approximates); `d_split_canonical_*` compares the restricted AND-OR split on the recovered support with the canonical split of the whole game (what a run stores; its LP is affordable up to n = 10 here, so it is empty above), `d_split_sgd_*` with the split of the whole game by the paper's SGD solver (every n; a solver-dependent split). Methods that refused a budget (SPEX needs a minimum number of queries) are counted in `refused`.

# %%
val = pd.read_csv(ROOT / "data" / "sparse_validation.csv")
if "error" not in val:
    val["error"] = np.nan
ok = val[val["error"].isna()].copy()
for o in ("all", "low", "mid", "high"):
    ok[f"d_and_{o}"] = (ok[f"ips_sparse_and_{o}"] - ok[f"ips_exact_and_{o}"]).abs()
    for ref in ("canonical", "sgd"):
        d = ok[f"ips_sparse_restricted_{o}"] - ok.get(f"ips_exact_{ref}_{o}", np.nan)
        ok[f"d_split_{ref}_{o}"] = d.abs()
keys = ["n", "method", "fraction"]
summary = ok.groupby(keys)[
    [
        "queries",
        "recall_top10",
        "heldout_r2",
        "d_and_all",
        "d_and_low",
        "d_split_canonical_all",
        "d_split_sgd_all",
    ]
].mean()
summary["games"] = ok.groupby(keys).size()
summary["refused"] = val[val["error"].notna()].groupby(keys).size()
summary = summary.fillna({"refused": 0, "games": 0})
summary.round(3)

# %%
long = ok.melt(
    id_vars=keys,
    value_vars=["recall_top10", "heldout_r2", "d_and_all", "d_split_sgd_all"],
    var_name="metric",
)
alt.Chart(long, title="Sparse recovery on SmolLM2 games, by budget").mark_line(point=True).encode(
    x=alt.X("fraction:Q", title="budget (share of 2^n)", axis=alt.Axis(format="%")),
    y=alt.Y("mean(value):Q", title=None),
    color="method:N",
    strokeDash="n:N",
    facet=alt.Facet("metric:N", columns=4),
    tooltip=["method", "n", "fraction", alt.Tooltip("mean(value):Q", format=".3f")],
).properties(width=170, height=170).resolve_scale(y="independent")

# %% [markdown]
# ## 2 · A long instruction at n = 32
#
# The first AlpacaEval instruction with exactly 32 content words; `content_words` keeps all of them (phrases merged, stop words and punctuation fixed as background, no sampling). Two templates: the instruction template of appendix K.2 (`open`) and its upper-case variant.


# %%
def n_content(it):
    """Number of content words (-1 beyond the 64 a sparse game holds)."""
    try:
        return len(content_words(it))
    except ValueError:
        return -1


item = next(it for it in psens.datasets.load("alpaca-eval") if n_content(it) == 32)
words = content_words(item)
print(item.id, len(words), "words:", " · ".join(words))

# %%
TEMPLATES_USED = ["open", "open-case"]
BUDGET = 200 if TINY else 1000


class PlantedScorer:
    """Tiny mode: a planted sparse game over the 32 words instead of the model."""

    name = "planted"

    def __init__(self, n, seed=0):
        rng = np.random.default_rng(seed)
        keys = [0, *(1 << rng.choice(n, 6, replace=False))]
        keys += [(1 << a) | (1 << b) for a, b in rng.choice(n, (4, 2), replace=False)]
        base = rng.normal(size=len(keys)) * 2
        self.games = {
            t: SparseInteractions(
                n, np.asarray(keys, np.uint64), base + 0.5 * rng.normal(size=len(keys))
            )
            for t in TEMPLATES_USED
        }

    def encode(self, item, template, shots=(), variables=None):
        return None

    def value(self, item, template, masks, *, shots=(), variables=None, progress=None):
        return self.games[template](masks)


scorer = PlantedScorer(len(words)) if TINY else psens.models.load("smollm2-135m-instruct")
start = time.perf_counter()
res = sparse_sample(
    scorer,
    item,
    TEMPLATES_USED,
    budget=BUDGET,
    words=words,
    store=None if TINY else ROOT / "runs" / "sparse_n32",
    seed=0,
    degree=2 if TINY else None,
)
elapsed = time.perf_counter() - start
print(
    f"n = {res.n}, budget {BUDGET} per template: {res.attrs['scored']} masked prompts scored "
    f"({res.attrs['model_seconds']:.0f} s in the model), {elapsed:.0f} s in all"
)
for t in TEMPLATES_USED:
    info = res.recoveries[t].info
    print(t, f"support {len(res.games[t])}, degree {info['degree']}, CV R² {info['cv_r2']:.3f}")

# %% [markdown]
# The strongest recovered AND interactions under each template (the bias ∅ is $v$ of the fully masked prompt):

# %%
pd.concat({t: res.top(t, 8) for t in TEMPLATES_USED}, names=["template"]).round(3)

# %% [markdown]
# IPS on the recovered supports, per order band (§4.3), the three classes of fig. 3b, and the same with the AND-OR split restricted to the recovered support:

# %%
split = [restricted_and_or(res.recoveries[t].interactions) for t in TEMPLATES_USED]
by_order = pd.DataFrame(
    {
        "AND (sparse)": res.ips_by_order(),
        "AND-OR, restricted split": {
            o: sparse_ips(split, order=None if o == "all" else o)
            for o in ("all", "low", "mid", "high")
        },
    }
)
counts = sparse_classes([res.games[t] for t in TEMPLATES_USED])[0]
print("classes:", dict(zip(psens.ips.CLASSES, counts.tolist(), strict=True)))
by_order.round(3)
