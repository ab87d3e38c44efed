# %% [markdown]
# # 02 · Case studies and interaction classes (§3.3, fig. 3, fig. 19)
#
# The same input under two semantically equivalent templates $T$ and $\hat T$ (e.g. `Answer:` vs `ANSWER:`) can give the same prediction while the interactions behind it change a lot. This notebook looks at single samples (fig. 3a, fig. 19) and then counts, over all samples, how many salient interactions keep their effect (fig. 3b).
#
# **How to run.** Cell by cell, top to bottom. The `parameters` cell reads two environment
# variables (papermill's `-p` sets the same names):
#
# * `PSENS_RUN=path/to/run.zarr` opens a stored run (from `psens.run`);
# * otherwise `PSENS_SIZE=tiny` (default) builds a small **synthetic** run with the exact
#   layout of a real one (no model is called, so the numbers illustrate the method, not the
#   paper's findings), and `PSENS_SIZE=full` runs the paper-size configuration with
#   `psens.run` (needs the model weights and hours of GPU time; it resumes where it stopped).
#
# Every chart is a widget: move a control and the chart updates in place; click a model
# on a chart to pick it (shift-click adds, double-click clears).
#

# %% tags=["parameters"]
import os

# A stored run (a .zarr folder written by psens.run). Empty: make one below.
PSENS_RUN = os.environ.get("PSENS_RUN", "")
# "tiny": a synthetic run of the same schema, built in seconds (CI, first look).
# "full": the paper-size configuration through psens.run (hours, GPU; resumable).
PSENS_SIZE = os.environ.get("PSENS_SIZE", "tiny")


# %%

import psens.widgets as pw

# The paper's MCQ setting (§4.1): ARC, five templates (fig. 15), n <= 10 words, tau = 0.1.
# The paper does not say how many ARC items it used; `samples` is ours to choose.
FULL = dict(
    store="runs/ips_arc.zarr",
    models=pw.registry_models(missing_ok=True),  # the 50 models of table 1 (data/models.csv)
    dataset="arc",
    split="test",
    samples=500,
    templates=["ips1", "ips2", "ips3", "ips4", "ips5"],
    n_vars=10,
    tau=0.1,
    solver="exact",
    seed=0,
)
TINY = dict(n_samples=12, seed=0)

ds = pw.load_run(PSENS_RUN, PSENS_SIZE, tiny=TINY, full=FULL)
ds


# %% [markdown]
# ## One sample, two templates (fig. 3a, fig. 19)
#
# Bars are the normalised effects $\tilde I(S)$ of the strongest salient interactions (salient: $|\tilde I| > \tau$ under either template), $T$ in blue and $\hat T$ in red, each labelled by the words of $S$. The subtitle gives both predictions. We first pick a sample whose **prediction does not change** between the first two templates: the situation of fig. 19, where Llama-2-7b-chat answers `D` under both `Answer` and `ANSWER` but many interactions flip sign or change magnitude.

# %%
t_a, t_b = (str(t) for t in ds["template"].values[:2])
pred = ds["prediction"].sel(template=[t_a, t_b])
same = (pred.isel(template=0) == pred.isel(template=1)).to_series()
model, sample = same[same].index[0] if same.any() else same.index[0]
case = pw.CaseStudy(ds, model=model, sample=sample, template_a=t_a, template_b=t_b)
case

# %% [markdown]
# Hover a bar for its class. Now a sample whose **prediction changes** (the top row of fig. 3a): the paper finds that nearly half of the salient interactions then reverse their sign.

# %%
changed = same[~same]
model2, sample2 = changed.index[0] if len(changed) else same.index[-1]
pw.CaseStudy(ds, model=model2, sample=sample2, template_a=t_a, template_b=t_b)

# %% [markdown]
# ## Stable and unstable interactions, over all samples (fig. 3b)
#
# Every salient interaction of a template pair falls into one class: **opposite sign**; **same sign, different effect** ($|b|/|a| > 2$ or $< 0.5$); **same sign, similar effect** (the only stable one). Shares are pooled over samples and template pairs, split by whether the prediction changed.
#
# **The paper reports** (fig. 3b): when the output changes, about 50 % opposite sign, 42.6–47.4 % same sign with a different effect and only 2.7–6.8 % similar; when the output stays the same the picture improves, yet the majority (60–80 %) of salient interactions are still unstable.

# %%
classes = pw.InteractionClasses(ds)
classes

# %% [markdown]
# ## Linking the views
#
# Click a model in the chart above: the case study switches to it (`pw.link_models`; `on_select(callback)` is the general hook). The same numbers as a table, for discussion:

# %%
pw.link_models(classes, case)
classes.tables["classes"].pivot_table(
    index=["model", "group"], columns="label", values="share"
).round(3)
