# %% [markdown]
# # 03 · IPS across models, and against output consistency (§4.1, fig. 4)
#
# **Interaction-based Prompt Sensitivity** (eq. 3): for each sample and each unordered pair of templates, the mean over the union of both salient sets of $|\tilde I_S(x|T) - \tilde I_S(x|\hat T)| / ((|\tilde I_S(x|T)| + |\tilde I_S(x|\hat T)|)/2)$; averaged over pairs, then samples. It lies in $[0, 2]$: 0 when nothing changes, 2 when every salient interaction flips sign or vanishes.
#
# **The paper reports** (fig. 4a) IPS from 1.268 (Qwen2.5-72B-Instruct) to 1.752 (Mistral-7B-v0.3) over 50 LLMs, with no family winning outright, and (fig. 4b) a negative correlation between IPS and output consistency (the share of samples answered identically under every template). The cells below compute both on the run at hand.
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
import altair as alt

import psens
import psens.widgets as pw
from psens.ips.headline import headline_lines

# PSENS_SIZE=full: the paper's MCQ setting (§4.1, table 1), data/examples/paper_table1.toml
FULL = pw.paper_config("table1")
TINY = dict(n_samples=12, seed=0)

ds = pw.load_run(PSENS_RUN, PSENS_SIZE, tiny=TINY, full=FULL)
print(pw.describe(ds))
ds


# %% [markdown]
# ## The metric, directly
#
# `psens.ips.ips(ds)` returns per-sample IPS; `psens.ips.aggregate` averages over samples, skipping samples with no salient interaction and saying how many it skipped. Runs with few-shot settings are compared at 0 shots here (notebook 04 and 05 compare the shots). `ds.psens.headline()` adds the CI, the noise floor, accuracy and the caveats — the numbers `psens summary` prints.

# %%
run = ds  # every shot setting: the chat check below looks at the few-shot answers too
if "shot" in ds.dims:
    ds = ds.sel(shot=ds["shot"].values[0])
per_sample = psens.ips.ips(ds, tau=0.1)
mean = psens.ips.aggregate(per_sample, "sample")
print("skipped (model, sample) cells:", mean.attrs["n_skipped"])
pw.show(mean.to_series().sort_values().round(3).to_frame("IPS"), ds)

# %%
head = ds.psens.headline()
print("\n".join(headline_lines(head)))

# %%
low, high = 1.268, 1.752
inside = bool(((mean >= low) & (mean <= high)).all())
print(
    pw.paper_vs_run(
        f"IPS between {low} and {high} for 50 LLMs on ARC (fig. 4a)",
        f"IPS {float(mean.min()):.3f}–{float(mean.max()):.3f} over "
        f"{mean.sizes['model']} model(s), {'inside' if inside else 'outside'} that range",
        inside,
        ds,
    )
)

# %% [markdown]
# ## All models, ascending (fig. 4a)
#
# The `OrderIPS` widget showing only the overall IPS (`types=['all']`) is the fig. 4a ranking; the τ slider recomputes it (appendix F.8: the paper finds the ranking stable for τ in 0.05–0.20; notebook 06 checks it).

# %%
overview = pw.OrderIPS(ds, types=["all"])
overview

# %% [markdown]
# ## IPS against output consistency (fig. 4b)
#
# Output consistency is the coarse, output-level metric: the share of samples whose prediction is the same under all templates. The paper finds IPS negatively correlated with it across models; a correlation needs at least three models. A model flagged "majority answer X" is consistent only because it gives X to nearly everything: the `caveats` column says so.

# %%
cols = ["model", "ips", "kind", "output_consistency", "majority_share", "caveats"]
table = head[head["order"] == "all"][[c for c in cols if c in head]].reset_index(drop=True)
why = pw.lacks(ds, "a correlation across models", models=3, instead="showing the table only")
if why:
    print(why)
    result = pw.show(table, ds)
else:
    r = table["ips"].corr(table["output_consistency"])
    rho = table["ips"].corr(table["output_consistency"], method="spearman")
    print(
        pw.paper_vs_run(
            "a negative correlation between IPS and output consistency across models (fig. 4b)",
            f"Pearson r = {r:.3f}, Spearman rho = {rho:.3f} over {len(table)} models",
            bool(r < 0) if r == r else None,
            ds,
        )
    )
    result = alt.JupyterChart(
        pw.charts.ips_consistency_chart(table), embed_options=pw.EMBED_OPTIONS
    )
result

# %% [markdown]
# ## Is it the model or the prompt?
#
# The paper asks every model with raw prompts ending in "Answer:" (fig. 15), instruct models included. An instruct model flagged "majority answer X on N %" may answer one letter because it is asked outside the chat format it was tuned on. The cell below asks the run's first items again (0-shot, template ips1), once as the raw prompt and once through the model's chat template (`psens.models.chat.chat_comparison`), and shows each answer distribution: if the one-letter answering stays with the chat template, it is the model; if it goes, it is the prompt format. It is given the whole run (`run`, every shot setting), so it also says when the model's letter follows the few-shot examples' answers (`psens.ips.verdicts.answer_confound`). It loads the model (SmolLM2-135M-Instruct on the shipped run: a few seconds on a CPU); on a synthetic run it says there is no model to ask.

# %%
message, asked, asked_chart = pw.chat_check(run, head)  # the whole run: 0-shot and few-shot
print(message)
asked_chart

# %%
asked

# %% [markdown]
# ## Drill down
#
# Pick models on the ranking above (click; shift-click adds): the class shares below follow (`pw.link_models`).

# %%
classes = pw.InteractionClasses(ds)
pw.link_models(overview, classes)
classes
