# %% [markdown]
# # 05 · Factors that change prompt sensitivity (IPS paper §4.2–4.3)
#
# The IPS paper measures the prompt sensitivity of 50 LLMs with the *interaction-based prompt sensitivity* (IPS, eq. 3): how much the salient AND/OR interactions between the input words change when the prompt template changes (0 = identical interactions, 2 = every salient interaction flips sign). It then disentangles four factors (§4.2):
#
# 1. supervised fine-tuning: **instruct/chat models are less sensitive** than their base models (fig. 5);
# 2. scale: **larger models are less sensitive** within a series (fig. 6);
# 3. architecture: **dense models are less sensitive than MoE** models of the same family (fig. 7; table 7 controls for activated parameters);
# 4. prompting: **few-shot prompts reduce sensitivity**, most from 0 to 1 shot (fig. 8).
#
# §4.3 finds one mechanism behind all four: they mostly stabilise **low-order** interactions (few words), while high-order interactions stay unstable (fig. 10).
#
# Every number below comes with uncertainty, which the paper does not report: a bootstrap 95 % CI over samples for each IPS, and a paired sign-flip permutation test for each difference (`p_value`), so a factor effect can be told from noise.

# %% [markdown]
# ## Parameters
#
# Without `PSENS_RUN` the notebook builds a **synthetic run** (`psens.synthetic.paper_run`): real model names and metadata from `data/models.csv`, but toy interactions whose instability follows the directions the paper reports (instruct < base, larger < smaller, dense < MoE, fewer shots → more sensitive). The numbers are illustrative only; point `PSENS_RUN` at a stored run (`psens run …`) to analyse real models. `PSENS_SIZE=full` uses all 50 paper models.

# %% tags=["parameters"]
import os

# Parameters (papermill can override them; CI sets the environment variables)
PSENS_RUN = os.environ.get("PSENS_RUN", "")  # path of a stored run; empty -> synthetic run
PSENS_SIZE = os.environ.get("PSENS_SIZE", "tiny")  # "tiny" (seconds) or "full"


# %%
import altair as alt
import pandas as pd

import psens.ips.factors as F
from psens.ips import charts as ips_charts
from psens.ips import tables
from psens.ips.factors import charts as plots
from psens.synthetic import TINY_MODELS

try:  # interactive, offline charts in Jupyter; harmless when run headless
    alt.renderers.enable("jupyter", offline=True)
except Exception as exc:  # e.g. anywidget missing: keep altair's default renderer
    print(f"altair jupyter renderer unavailable ({exc}); using the default renderer")
pd.set_option("display.precision", 3)
pd.set_option("display.width", 160)

TINY = PSENS_SIZE != "full"
N_BOOT, N_PERM = (200, 500) if TINY else (1000, 2000)
if PSENS_RUN:
    from psens.store import open_run

    ds = F.attach_metadata(open_run(PSENS_RUN))  # fills empty model metadata from models.csv
else:
    names = TINY_MODELS if TINY else None  # None = all 50 paper models
    ds = F.paper_run(names, n_samples=12 if TINY else 60, shots=(0, 1, 2, 3))
print(dict(ds.sizes))

# %% [markdown]
# ## Model metadata
#
# Comparisons pick their models by metadata (family, series, kind, architecture, size), joined from `data/models.csv` with `F.attach_metadata`. `F.select_models` slices a run by any of them.

# %%
F.model_frame(ds)

# %%
tuned = F.select_models(ds, kind="tuned")  # instruct or chat
small_dense = F.select_models(ds, arch="dense", params=(None, 8))
list(tuned.model.values), list(small_dense.model.values)

# %% [markdown]
# ## Factor 1 · instruct/chat vs base (fig. 5)
#
# Pairs are the paper's (appendix E.2) whose two models are in the run. `pairs` has one row per pair and order band: the two IPS, `diff`, the relative change `rel_change` = (IPS_A − IPS_B)/IPS_B with A = instruct, B = base, their CIs and the paired `p_value`. The paper: almost every instruct/chat model is less sensitive than its base model.

# %%
r1 = F.instruct_vs_base(ds, n_boot=N_BOOT, n_perm=N_PERM)
r1.pairs[r1.pairs.order == "all"]

# %%
r1.chart()

# %% [markdown]
# ### Representation metrics beside IPS (appendix H, table 6)
#
# Cosine similarity (↑ stable) and L2 distance (↓ stable) of the final-layer hidden states under template changes, for the same pairs. The paper found them inconsistent with each other and with IPS (e.g. Llama-2-13B: the base model looks more stable by both). The `*_says_tuned_stabler` columns show where each metric points.

# %%
rep = F.representation_table(ds, n_boot=N_BOOT, n_perm=N_PERM)
rep

# %%
plots.representation_chart(rep)

# %% [markdown]
# ## Factor 2 · model scale (fig. 6)
#
# Series of one family and training kind by size. ΔIPS does not suit a continuous factor (§4.3), so the summary gives the rank correlation of IPS with size (`spearman_rho`, negative = larger is more stable) and each step's change. In the chart, lighter bars are smaller models.

# %%
r2 = F.scale_series(ds, n_boot=N_BOOT, n_perm=N_PERM)
r2.summary[r2.summary.order == "all"]

# %%
r2.chart()

# %% [markdown]
# ## Factor 3 · dense vs MoE (fig. 7, table 7)
#
# All (dense, MoE) pairs within a family; a family's ΔIPS is the mean over its pairs, as in the paper. The paper: in Llama, Qwen and Olmo every MoE model is more sensitive; Mistral is the exception, explained by Mixtral's larger activated size (appendix I).

# %%
r3 = F.dense_vs_moe(ds, n_boot=N_BOOT, n_perm=N_PERM)
r3.summary[r3.summary.order == "all"]

# %%
r3.chart()

# %% [markdown]
# Table 7 controls for activated parameters: pairs of a dense and a MoE model with similar activated size and the same training kind. The paper (ARC): Qwen1.5-MoE-A2.7B-chat 1.665 vs Qwen2.5-3B-instruct 1.606; OLMoE-7B 1.714 vs OLMo-1B 1.632; Qwen3-30B-A3B 1.642 vs Qwen3-4B 1.568; Qwen3-30B-A3B-instruct 1.580 vs Qwen3-4B-instruct 1.483 — MoE is always more sensitive.

# %%
r3b = F.matched_active(ds, n_boot=N_BOOT, n_perm=N_PERM)
r3b.pairs[r3b.pairs.order == "all"]

# %% [markdown]
# ## Factor 4 · 0-shot vs few-shot (fig. 8)
#
# Only prompt templates 1 and 4 (the pair with the highest 0-shot sensitivity, appendix E.6), with 0–3 in-context examples (the run's `shot` dim). Pairs are (k-shot, 0-shot) of one model, grouped by k. The paper: the largest drop is from 0 to 1 shot.

# %%
r4 = F.few_shot(ds, n_boot=N_BOOT, n_perm=N_PERM)
r4.summary[r4.summary.order == "all"]

# %%
r4.chart()

# %% [markdown]
# ## The common mechanism: ΔIPS by order (§4.3, fig. 10)
#
# The same factors restricted to low- (|S| ≤ n/3), mid- and high-order interactions. The paper: all factors reduce the sensitivity of **low-order** interactions most, mid-order less, high-order hardly at all. Each chart compares two groups of models: on the left their IPS, on the right ΔIPS = (IPS_A − IPS_B)/IPS_B averaged over matched pairs (an instruct/chat model and the base model of the same series and size; every dense and MoE model of one family; each model at k shots and at 0 shots). Bars below zero mean the factor lowers the sensitivity of that band; whiskers are bootstrap 95 % CIs over samples. Notebook 04 has the same figure as a widget (`FactorCompare`).

# %%
per_sample = tables.per_sample_ips(ds)
meta = tables.model_meta(ds)
fig10 = {
    "instruct/chat vs base": dict(
        by="kind", a=["chat", "instruct"], b=["base"], match="series+params"
    ),
    "dense vs MoE": dict(by="arch", a=["dense"], b=["moe"], match="family"),
}
if "shot" in ds.dims:
    shots = [int(k) for k in ds["shot"].values]
    fig10["few-shot vs 0-shot"] = dict(by="shot", a=[k for k in shots if k > 0], b=[0])
fig10 = {
    label: tables.factor_table(per_sample, meta, **kwargs, n_boot=N_BOOT)
    for label, kwargs in fig10.items()
}
alt.vconcat(*[ips_charts.factor_chart(g, d, title=label) for label, (g, d) in fig10.items()])

# %%
pd.concat({label: d.set_index("order") for label, (_, d) in fig10.items()}, names=["factor"])

# %% [markdown]
# The paired version for the paper's own pairings, with the permutation test: every comparison above has one `summary` row per group and order band.

# %%
r1.summary[r1.summary.order != "all"]

# %% [markdown]
# ## Any comparison you like
#
# `F.compare_models` takes explicit `(A, B[, group])` pairs, so any two groups can be compared with the same statistics; build the pairs from metadata.

# %%
base = list(F.select_models(ds, kind="base").model.values)
tuned = list(F.select_models(ds, kind="tuned", arch="dense").model.values)
pairs = [(t, b, "tuned vs base") for t in tuned for b in base]
mine = F.compare_models(ds, pairs, n_boot=N_BOOT, n_perm=N_PERM)
mine.summary

# %% [markdown]
# ## IPS vs output consistency (fig. 4b)
#
# Output consistency = share of samples whose prediction is the same under all templates. The paper finds IPS negatively correlated with it across models, i.e. IPS agrees with the coarse metric while resolving more. (The synthetic run's predictions are noisy, so expect a weak correlation here.)

# %%
cons = F.ips_vs_consistency(ds, n_boot=N_BOOT)
F.consistency_correlation(cons)

# %%
plots.consistency_chart(cons)
