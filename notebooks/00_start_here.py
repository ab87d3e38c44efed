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
# **Opening the notebooks.** `make lab` starts JupyterLab from the project's environment on 127.0.0.1 and opens this notebook. Each notebook is a pair: `NN_name.ipynb` (open this one) and `NN_name.py` (the same cells as text; `make notebooks` syncs the pair after an edit). Run cells top to bottom. Every notebook reads `PSENS_RUN` (a stored run) or builds a small **synthetic** run in seconds — synthetic numbers illustrate a method, never a paper's findings.
#
# **A 20-minute workshop path** (2-core laptop, offline; `make demo` the day before):
#
# 1. (5 min) this notebook: the demo run, IPS by order, one item's interactions;
# 2. (5 min) **01** interactions reproduce the model exactly, and few are salient;
# 3. (5 min) **02** one item under two templates — stable and unstable interactions;
# 4. (5 min) **12** how much of IPS is the model: solvers and numerical noise.

# %% tags=["parameters"]
import os

# A stored run; by default the one `make demo` writes (a synthetic run if it is missing).
PSENS_RUN = os.environ.get("PSENS_RUN", "")
PSENS_SIZE = os.environ.get("PSENS_SIZE", "tiny")

# %%
from pathlib import Path

import psens
from psens.ips import aggregate, sample_ips
from psens.synthetic import synthetic_run

demo = Path.cwd().parent / "runs" / "demo.zarr"
if PSENS_RUN:
    ds, SOURCE = psens.open_run(PSENS_RUN), f"run {PSENS_RUN}"
elif demo.exists():
    ds, SOURCE = psens.open_run(demo), "the `make demo` run (SmolLM2-135M-Instruct, ARC)"
else:
    ds, SOURCE = (
        synthetic_run(n_samples=6, seed=0),
        "a synthetic run (run `make demo` for a real one)",
    )
print(SOURCE)
ds

# %% [markdown]
# ## IPS of each model, overall and by order
#
# IPS lies in [0, 2]: 0 when the salient interactions are identical under every template, 2 when every salient interaction flips sign. Low/mid/high are interactions of few, some, many words (§4.3). On the `make demo` run (canonical solver) expect about **1.52** overall (low 1.59, mid 1.65, high 1.32).

# %%
tau = float(ds.attrs.get("tau", 0.1))
per_sample = sample_ips(ds, tau, orders=("all", "low", "mid", "high"))
if "shot" in per_sample.dims:
    per_sample = per_sample.isel(shot=0)
summary = aggregate(per_sample, "sample")
summary.to_dataframe(name="IPS")[["IPS"]].unstack("order").round(3)

# %% [markdown]
# ## One item: its strongest interactions under two templates
#
# `ds.psens.to_frame` gives one row per interaction (AND or OR, a set of words), with its raw effect, its normalised effect Ĩ and whether it is salient (|Ĩ| > τ).

# %%
sample = str(ds["sample"].values[0])
rows = ds.isel(model=0).sel(sample=[sample]).psens.to_frame(tau, salient_only=True)
two = rows[rows.template.isin(list(ds["template"].values[:2]))]
two.sort_values("normalized", key=abs, ascending=False).head(10)[
    ["template", "kind", "words", "normalized"]
].round(3)

# %% [markdown]
# **Next:** notebooks 01–04 walk through the IPS paper section by section; 09–11 the other three methods; 12 checks how much of IPS is the model rather than the solver or numerical noise.
