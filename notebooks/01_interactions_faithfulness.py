# %% [markdown]
# # 01 · Interactions and their faithfulness (IPS paper §3.1–3.2, fig. 2)
#
# The IPS paper explains a model's answer score $v(x_T)$ on a masked input (only the words in $T$ kept) as a sum of **AND-OR interactions**: each set $S$ of input words has an effect $I(S)$ that switches on when all words of $S$ are present (AND) or any of them is (OR). Before using interactions to study prompt sensitivity, the paper checks two things, and so does this notebook:
#
# 1. **Universal matching (theorem 3.1):** the interactions reproduce the model's output on all $2^n$ masked inputs exactly.
# 2. **Sparsity (fig. 2a):** only a few interactions are salient; a logical model with the top 3–5 % of them already matches the output closely (fig. 2b).
#
# **How to run.** Cell by cell, top to bottom. The `parameters` cell reads two environment
# variables (papermill's `-p` sets the same names):
#
# * `PSENS_RUN=path` opens a stored run: a `.zarr` store (`psens run`) or a `.nc` export
#   (`psens export`);
# * otherwise the real run shipped in `data/runs/arc.nc` is opened when the checkout has it,
#   else (or with `PSENS_SIZE=tiny`) a small **synthetic** run with the exact layout of a
#   real one is built in seconds (no model is called: its numbers illustrate the method, not
#   the paper's findings, and its charts say "synthetic data"); `PSENS_SIZE=full` runs the
#   paper-size configuration with `psens.run` (hours of GPU time; it resumes where it stopped).
#
# Every section checks what the run supports (models, shots, metadata) and says so when it
# needs more. Where the paper is quoted, the cell below computes what this run shows.
#
# Every chart is a widget: move a control and the chart updates in place; click a model
# on a chart to pick it (shift-click adds, double-click clears).
#

# %% tags=["parameters"]
import os

# A stored run: a .zarr store (psens run) or a .nc file (psens export). Empty: the shipped
# run data/runs/arc.nc when the checkout has it, else a synthetic run.
PSENS_RUN = os.environ.get("PSENS_RUN", "")
# "": the shipped run (tiny when it is absent); "tiny": a synthetic run of the same schema,
# built in seconds (CI, first look); "full": the paper-size configuration through psens.run.
PSENS_SIZE = os.environ.get("PSENS_SIZE", "")


# %% [markdown]
# ## The run
#
# A run is one `xarray.Dataset`: the games `v` and the interactions `I_and`, `I_or` over *model × sample × template × subset* (subset = bitmask of kept words, bit *i* = word *i*), the words of each sample in `word(sample, var)`, predictions and model metadata.

# %%
import pandas as pd

import psens
import psens.widgets as pw
from psens.store.labels import model_names

# PSENS_SIZE=full: the paper's MCQ setting (§4.1, table 1), data/examples/paper_table1.toml
FULL = pw.paper_config("table1")
TINY = dict(n_samples=12, seed=0)

ds = pw.load_run(PSENS_RUN, PSENS_SIZE, tiny=TINY, full=FULL)
print(pw.describe(ds))
ds


# %% [markdown]
# ## Theorem 3.1: the interactions reproduce every masked output
#
# $v(x_T) = I_{and}(\emptyset) + I_{or}(\emptyset) + \sum_{\emptyset \neq S \subseteq T} I_{and}(S) + \sum_{S \cap T \neq \emptyset} I_{or}(S)$ for every $T \subseteq N$. `psens.reconstruct` evaluates the right-hand side with fast transforms; the largest gap over every stored game should be at float precision (the run also stores it per block as `matching_error`).

# %%
import numpy as np

gaps = {}
for n in np.unique(ds["n_vars"].values):
    keep = np.flatnonzero(ds["n_vars"].values == n)
    sub = ds.isel(sample=keep, subset=slice(0, 2 ** int(n)))
    phi = psens.reconstruct(sub["I_and"].values, sub["I_or"].values)
    gaps[int(n)] = float(np.nanmax(np.abs(phi - sub["v"].values)))
print("largest |v - phi| by number of words n:", gaps)
print("stored matching_error (max):", float(ds["matching_error"].max()))
worst = max(gaps.values())
print(
    pw.paper_vs_run(
        "that the AND-OR interactions reproduce the output on every masked input (theorem 3.1)",
        f"the largest gap over all stored games is {worst:.1e}",
        worst < 1e-6,
        ds,
    )
)

# %% [markdown]
# ## What an interaction looks like
#
# The strongest interactions of one game, labelled by their words (`psens.widgets.subset_label` turns a bitmask into `AND {lay, eggs}`). Effects are min-max normalised per game as in §3.2: $\tilde I = \mathrm{sgn}(I)(|I| - \min)/(\max - \min)$ over all AND and OR interactions except the empty set (the bias).

# %%
game = ds.isel(model=0, sample=0, template=0)
if "shot" in game.dims:
    game = game.isel(shot=0)
n = int(game["n_vars"])
words = list(game["word"].values[:n])
size = 2**n
a, o = game["I_and"].values[:size], game["I_or"].values[:size]
na, no = psens.ips.normalize(a, o)
rows = [
    (kind, pw.subset_label(s, words, kind), float(x[s]))
    for kind, x in (("AND", na), ("OR", no))
    for s in range(1, 2**n)
]
top = pd.DataFrame(rows, columns=["kind", "S", "normalised effect"])
pw.show(top.reindex(top["normalised effect"].abs().sort_values(ascending=False).index).head(8), ds)

# %% [markdown]
# ## Sparsity and top-k matching (fig. 2)
#
# Panel (a) sorts $|\tilde I(S)|$ of one sample and template for each model; the dashed line is the salience threshold $\tau$. Panel (b) plots the model's output on all masked inputs in ascending order (red, as in the paper) against the logical model that keeps only the top fraction of interactions (blue). Panel (c) averages that matching error over every game of each model. Move the *top* slider: at 100 % panel (b) is exact (theorem 3.1).

# %%
sparsity = pw.Sparsity(ds, fraction=0.05)
sparsity

# %% [markdown]
# Widgets are traitlets objects, so everything the controls do can be scripted. The matching error (relative to the range of $v$) at 3 % and 5 % of the interactions, per model:

# %%
sparsity.fraction = 0.03  # the slider above moves too
errors = sparsity.tables["errors"]
at = errors[errors["fraction"].isin([0.03, 0.05, 1.0])].pivot(
    index="model", columns="fraction", values="relative"
)
pw.show(at.round(4), ds)

# %% [markdown]
# **The paper reports** (fig. 2) that every LLM encodes only a few salient interactions and that keeping the top 3 % or 5 % of them already gives a small matching error (Llama-2-7b in fig. 2b; more models in appendix F). The paper shows this as curves, without a number for "small"; below, "few" is read as fewer than a quarter of all interactions salient ($|\tilde I| > \tau$) and "small" as a mean error at 5 % below a tenth of the range of $v$. With $n \le 6$ words a game has at most 126 interactions, so 5 % keeps only a handful.

# %%
tau = psens.run_settings(ds).tau  # the τ the run was made with
shares = {}
for model in model_names(ds):
    frame = ds.sel(model=[model]).psens.to_frame(tau)
    shares[str(model)] = float(frame["salient"].mean())
for model in at.index:
    share, err5 = shares[str(model)], float(at.loc[model, 0.05])
    print(
        pw.verdict(
            f"{model}: {share:.0%} of the interactions are salient; matching error with the "
            f"top 5 %: {err5:.3f} of the range of v",
            share < 0.25 and err5 < 0.1,
            ds,
        )
    )
