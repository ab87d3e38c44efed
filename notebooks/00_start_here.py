# %% [markdown]
# # 00 · Start here
#
# **psens** measures and explains how much a language model's answer depends on the wording of the prompt. It implements four published methods on one data model (xarray Datasets stored as zarr):
#
# | method | question it answers | notebooks |
# |---|---|---|
# | **IPS** — interaction-based prompt sensitivity (Qin et al., ICML 2026) | which *combinations of words* the model relies on, and how much they change between equivalent templates | 01–08, 12 |
# | **PSS** — ProSA's PromptSensiScore (Zhuo et al., Findings of EMNLP 2024) | how much an instance's *score* changes across prompt variants | 09 |
# | **EAS** — evaluation-attributable sensitivity (Muthukumarana et al.) | how much of the measured sensitivity comes from the *evaluator* (heuristic vs judge) | 10 |
# | **DBSA** — distribution-based sensitivity (Rauba, Wei and van der Schaar, AISTATS 2025) | which *words* move a black-box model's answer distribution | 11 |
#
# **Opening the notebooks.** `make lab` starts JupyterLab from the project's environment on 127.0.0.1 and opens this notebook. Each notebook is a pair: `NN_name.ipynb` (open this one) and `NN_name.py` (the same cells as text; `make notebooks` syncs the pair after an edit). Run cells top to bottom.
#
# **Which run.** Every IPS notebook reads `PSENS_RUN` (a `.zarr` store from `psens run`, or a `.nc` file from `psens export`). Without it, it opens the real run shipped in `data/runs/arc.nc` (SmolLM2-135M-Instruct and Gemma-3-270M on ARC-Challenge, shots 0/1/3, the five templates of fig. 15) when the checkout has it, and otherwise builds a small **synthetic** run in seconds. Synthetic numbers illustrate a method, never a paper's findings: their charts say "synthetic data" in the title.
#
# **Paper vs run.** Where a notebook quotes a paper, it says so ("the paper reports …, fig. N") and the cell below computes what the run at hand shows, and whether the paper's claim holds on it. A small run of small models often disagrees with the paper; the notebooks say so rather than repeat the paper.
#
# **A 20-minute workshop path** (2-core laptop, offline; `make demo` the day before):
#
# 1. (5 min) this notebook: the run, IPS by order, one item's interactions;
# 2. (5 min) **01** interactions reproduce the model exactly, and few are salient;
# 3. (5 min) **02** one item under two templates — stable and unstable interactions;
# 4. (5 min) **12** how much of IPS is the model: solvers and numerical noise.

# %% tags=["parameters"]
import os

# A stored run: a .zarr store (psens run) or a .nc file (psens export). Empty: the shipped
# run data/runs/arc.nc when the checkout has it, else a synthetic run.
PSENS_RUN = os.environ.get("PSENS_RUN", "")
# "": the shipped run (tiny when it is absent); "tiny": a synthetic run built in seconds.
PSENS_SIZE = os.environ.get("PSENS_SIZE", "")

# %%
import psens.widgets as pw
from psens import run_settings
from psens.ips.headline import headline_lines

ds = pw.load_run(PSENS_RUN, PSENS_SIZE, tiny=dict(n_samples=6, seed=0))
print(pw.describe(ds))
ds

# %% [markdown]
# ## IPS of each model, overall and by order
#
# IPS lies in [0, 2]: 0 when the salient interactions are identical under every template, 2 when every salient interaction flips sign. Low/mid/high are interactions of few, some, many words (§4.3). Runs with few-shot settings are shown at 0 shots here (notebook 04 compares the shots).
#
# `ds.psens.headline()` is the run's headline, the same numbers `psens summary` and the report print: what it pools, IPS with its bootstrap CI, the noise floor, accuracy, output consistency and the **caveats**. A model "not above the noise floor" has a template effect that numerical noise alone could give, so nothing about it is a finding; a model giving one answer on most items ("majority answer A on 95 %") has an output consistency that only says it always answers A.

# %%
tau = run_settings(ds).tau  # the τ the run was made with
head = ds.psens.headline()
print("\n".join(headline_lines(head)))
table = head.pivot(index="model", columns="order", values="ips")
pw.show(table[["all", "low", "mid", "high"]].round(3), ds)

# %% [markdown]
# The paper's mechanism claim is about these bands; the cell computes it for every model of the run.

# %%
print(
    "The paper reports that low-order interactions are the least sensitive and high-order "
    "ones the most (fig. 9)."
)
print("\n".join(pw.order_verdicts(head, ds)))

# %% [markdown]
# ## One item: its strongest interactions under two templates
#
# `ds.psens.to_frame` gives one row per interaction (AND or OR, a set of words), with its raw effect, its normalised effect Ĩ and whether it is salient (|Ĩ| > τ).

# %%
sample = str(ds["sample"].values[0])
one = ds.isel(model=0).sel(sample=[sample])
if "shot" in one.dims:
    one = one.isel(shot=0)
rows = one.psens.to_frame(tau, salient_only=True)
two = rows[rows.template.isin(list(ds["template"].values[:2]))]
pw.show(
    two.sort_values("normalized", key=abs, ascending=False)
    .head(10)[["template", "kind", "words", "normalized"]]
    .round(3),
    ds,
)

# %% [markdown]
# **Next:** notebooks 01–04 walk through the IPS paper section by section; 09–11 the other three methods; 12 checks how much of IPS is the model rather than the solver or numerical noise.
