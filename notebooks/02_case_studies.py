# %% [markdown]
# # 02 · Case studies and interaction classes (§3.3, fig. 3, fig. 19)
#
# The same input under two semantically equivalent templates $T$ and $\hat T$ (e.g. `Answer:` vs `ANSWER:`) can give the same prediction while the interactions behind it change a lot. This notebook looks at single samples (fig. 3a, fig. 19) and then counts, over all samples, how many salient interactions keep their effect (fig. 3b).
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


# %%

import psens.widgets as pw

# PSENS_SIZE=full: the paper's MCQ setting (§4.1, table 1), data/examples/paper_table1.toml
FULL = pw.paper_config("table1")
TINY = dict(n_samples=12, seed=0)

ds = pw.load_run(PSENS_RUN, PSENS_SIZE, tiny=TINY, full=FULL)
print(pw.describe(ds))
ds


# %% [markdown]
# ## One sample, two templates (fig. 3a, fig. 19)
#
# Bars are the normalised effects $\tilde I(S)$ of the strongest salient interactions (salient: $|\tilde I| > \tau$ under either template), $T$ in blue and $\hat T$ in red, each labelled by the words of $S$. The subtitle gives both predictions. We first pick a sample whose **prediction does not change** between the first two templates — the situation of the paper's fig. 19, where Llama-2-7b-chat answers `D` under both `Answer` and `ANSWER` while many interactions flip sign or change magnitude. (Runs with few-shot settings are shown at 0 shots.)

# %%
t_a, t_b = (str(t) for t in ds["template"].values[:2])
pred = ds["prediction"].sel(template=[t_a, t_b])
if "shot" in pred.dims:
    pred = pred.isel(shot=0)
same = (pred.isel(template=0) == pred.isel(template=1)).to_series()
model, sample = same[same].index[0] if same.any() else same.index[0]
if not same.any():
    print(f"no sample keeps its prediction between {t_a} and {t_b} in this run; showing {sample}")
case = pw.CaseStudy(ds, model=model, sample=sample, template_a=t_a, template_b=t_b)
case

# %% [markdown]
# Hover a bar for its class. Now a sample whose **prediction changes** (the top row of fig. 3a; the paper reports that nearly half of the salient interactions then reverse their sign).

# %%
changed = same[~same]
if len(changed):
    model2, sample2 = changed.index[0]
else:
    model2, sample2 = same.index[-1]
    print(f"no sample changes its prediction between {t_a} and {t_b}; showing {sample2}")
pw.CaseStudy(ds, model=model2, sample=sample2, template_a=t_a, template_b=t_b)

# %% [markdown]
# ## Stable and unstable interactions, over all samples (fig. 3b)
#
# Every salient interaction of a template pair falls into one class: **opposite sign**; **same sign, different effect** ($|b|/|a| > 2$ or $< 0.5$); **same sign, similar effect** (the only stable one). Shares are pooled over samples and template pairs, split by whether the prediction changed.

# %%
classes = pw.InteractionClasses(ds)
classes

# %% [markdown]
# ## Linking the views
#
# Click a model in the chart above: the case study switches to it (`pw.link_models`; `on_select(callback)` is the general hook). The same numbers as a table:

# %%
pw.link_models(classes, case)
shares = classes.tables["classes"].pivot_table(
    index=["model", "group"], columns="label", values="share"
)
pw.show(shares.round(3), ds)

# %% [markdown]
# **The paper reports** (fig. 3b): when the output changes, about 50 % of the salient interactions have the opposite sign, 42.6–47.4 % the same sign with a different effect and only 2.7–6.8 % a similar effect; when the output stays the same the picture improves, yet 60–80 % are still unstable. The cell checks the two qualitative points on this run: most salient interactions are unstable in both groups, and fewer are unstable when the output stays the same.

# %%
print(
    "The paper reports that most salient interactions are unstable (opposite sign or a "
    "different effect) whether or not the output changes, and fewer when it does not (fig. 3b)."
)
from psens.ips.verdicts import findings_models

stable = "same sign, similar effect"
# a model that is not a finding at the shot setting shown gets no verdict (the one rule)
shots = [int(ds["shot"].values[0])] if "shot" in ds.dims else None
why = findings_models(ds, shots)
print("verdicts use the models that are findings at", pw.shots_text(shots))
for model, rows in shares.groupby(level="model"):
    if why.get(str(model)):
        print(pw.verdict(f"{model}: not a finding ({why[str(model)]})", None, ds))
        continue
    unstable = 1 - rows[stable].droplevel("model") if stable in rows else None
    if unstable is None or not {"changed", "unchanged"} <= set(unstable.dropna().index):
        have = [] if unstable is None else list(unstable.dropna().index)
        print(
            pw.verdict(
                f"{model}: only outputs {have or 'none'} have salient interactions",
                None,
                ds,
            )
        )
        continue
    ch, un = float(unstable["changed"]), float(unstable["unchanged"])
    print(
        pw.verdict(
            f"{model}: unstable {ch:.0%} when the output changes, {un:.0%} when it does not",
            ch > 0.5 and un > 0.5 and un <= ch,
            ds,
        )
    )
