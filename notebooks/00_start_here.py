# %% [markdown]
# # 00 · Start here
#
# **psens** measures and explains how much a language model's answer depends on the wording of the prompt. It implements four published methods on one data model (xarray Datasets: a zarr store while a run is written, a netCDF `.nc` file once exported or shipped):
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
# 1. (5 min) this notebook: one item and each model's answer under five templates; how much the
#    answers' interactions change between templates (IPS), and whether that is a finding — with
#    the answer asked as a letter, then in the cloze form;
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
from psens.ips.charts import order_ips_chart
from psens.ips.headline import headline_lines
from psens.ips.verdicts import findings_models

ds = pw.load_run(PSENS_RUN, PSENS_SIZE, tiny=dict(n_samples=6, seed=0))
if "shot" in ds.dims:  # this notebook looks at the 0-shot setting (notebook 05 at the others)
    ds = ds.sel(shot=ds["shot"].values[0])
print(pw.describe(ds))

# %% [markdown]
# ## One item, whole
#
# A run asks each model every item under several **templates**: the same question and options, worded a little differently (`Answer:` vs `ANSWER:`, `A.` vs `A)`). Here is the first item as the first template shows it, the right answer, and what each model answered under each template.

# %%
sample = str(ds["sample"].values[0])
print(str(ds["prompt"].sel(sample=sample).isel(template=0).values))
print("\nright answer:", str(ds["target"].sel(sample=sample).values))
answers = ds["prediction"].sel(sample=sample).to_pandas()
answers.index.name, answers.columns.name = "model", "template"
pw.show(answers, ds)

# %% [markdown]
# psens then **masks** the item's words (the `n` words below, each either kept or replaced by the model's unknown token: $2^n$ masked prompts per template) and scores every masked prompt by the log-odds of the right answer, $v$. The AND-OR interactions split $v$ exactly into effects of *sets* of words (notebook 01).

# %%
print("words masked:", [str(w) for w in ds["word"].sel(sample=sample).values if str(w)])

# %% [markdown]
# ## IPS, its noise floor, and the verdict
#
# * **IPS** compares the salient interactions (normalised effect $|\tilde I| > \tau$) of two templates: 0 when they are identical, 2 when every one flips sign; a model's IPS is the mean over items and template pairs. Low/mid/high restrict it to interactions of few, some or many words (§4.3).
# * The **noise floor** is the IPS between two scorings of the *same* prompts (here float32 against bfloat16): what IPS numerical rounding alone gives. A template effect is only measured when IPS is above it.
# * **IPS − floor** is that margin, with a 95 % bootstrap CI over items; **d_z** is the margin in units of its spread across items (an effect size); **p** is the p-value of a paired sign-flip test over items: the share of random sign flips of the items' margins that give a mean margin at least this large (a small p: noise rarely gives such a margin).
# * The **verdict** says whether the model's IPS is a **finding**: above its floor *and* no caveat. A model answering one letter on most items ("majority answer A on 95 %"), answering at chance, or copying the few-shot examples' letter has an IPS that measures its answer preference, not how it reads the question — not a finding, even when its margin over the floor is clear.
#
# `ds.psens.headline()` computes all of it, the same numbers `psens summary` and the report print (black ticks on the chart: the floor).

# %%
tau = run_settings(ds).tau  # the τ the run was made with
head = ds.psens.headline()
print("\n".join(headline_lines(head)))
order_ips_chart(head, orders=("all", "low", "mid", "high"), title="IPS by order, floor as ticks")

# %% [markdown]
# The paper's mechanism claim is about these bands; the cell gives a verdict only for a model whose IPS is a finding.

# %%
# the verdict's models: the findings at the shot setting it uses (the one rule of every
# notebook, psens.ips.verdicts.findings_models)
why = findings_models(ds, heads=head)
print("verdicts use the models that are findings at", pw.shots_text([head.attrs["pooled"]["shot"]]))
print(
    "The paper reports that low-order interactions are the least sensitive and high-order "
    "ones the most (fig. 9)."
)
print("\n".join(pw.order_verdicts(head, ds, reasons=why)))

# %% [markdown]
# ## The item's strongest interactions under two templates
#
# `ds.psens.to_frame` gives one row per interaction (AND or OR, a set of words), with its raw effect, its normalised effect Ĩ and whether it is salient (|Ĩ| > τ). The five strongest of each template, side by side: the same words often carry different effects.

# %%
one = ds.isel(model=0).sel(sample=[sample])
rows = one.psens.to_frame(tau, salient_only=True)
t_a, t_b = (str(t) for t in ds["template"].values[:2])
top = (
    rows[rows.template.isin([t_a, t_b])]
    .assign(size=lambda d: d["normalized"].abs())
    .sort_values("size", ascending=False)
    .groupby("template", sort=False)
    .head(5)
    .sort_values(["template", "size"], ascending=[True, False])
)
pw.show(top[["template", "kind", "words", "normalized"]].round(3), ds)

# %% [markdown]
# ## The same models under another formulation: cloze
#
# Everything above asks the model for a **letter** (the options are listed, "Answer:" is followed by A, B, C or D; the IPS paper's formulation, "MCF"). Models this small answer lettered questions near chance, and often with one letter whatever the question — so their IPS says little about how they read the question. The field's standard answer for small models is the **cloze formulation** ("CF", lm-evaluation-harness and OLMES): the options are not listed; each option's *text* is scored as a continuation of the question, and the most likely one is the answer. psens's value $v$ is then the log-odds of the right option's text among the options (`docs/answer-formulations.md`).
#
# The shipped run `data/runs/cloze-arc-easy.nc` asks the same two models 40 ARC-Easy questions in the cloze form of the IPS templates. First the question as the first template shows it, the right option and each model's choice; then accuracy against chance in both formulations, and the cloze run's headline and verdict.

# %%
import pandas as pd

from psens.datasets import load

cloze = pw.load_run("data/runs/cloze-arc-easy.nc")
if "shot" in cloze.dims:  # the cloze run is 0-shot
    cloze = cloze.sel(shot=cloze["shot"].values[0])
item = str(cloze["sample"].values[0])
options = dict(next(x for x in load("arc-easy", "validation") if x.id == item).options)
print(str(cloze["prompt"].sel(sample=item).isel(template=0).values) + " …")
print("\noptions, each scored as a continuation:", options)
right = str(cloze["target"].sel(sample=item).values).strip()
print("right option:", right, options[right])
chosen = cloze["prediction"].sel(sample=item).to_pandas()
chosen.index.name, chosen.columns.name = "model", "template"
pw.show(chosen, cloze)

# %%
cloze_head = cloze.psens.headline()
rows = []
runs = {"letters (above)": (ds, head), "cloze": (cloze, cloze_head)}
for formulation, (run, h) in runs.items():
    why = findings_models(run, heads=h)  # 0-shot: the one rule, at the shot setting shown
    for r in h[h["order"] == "all"].itertuples():
        verdict = f"not a finding — {why[r.model]}" if why.get(r.model) else "a finding"
        rows.append(
            {
                "formulation": formulation,
                "model": r.model,
                "accuracy": r.accuracy,
                "chance": r.chance,
                "IPS": r.ips,
                "floor": r.floor,
                "verdict": verdict,
            }
        )
pw.show(pd.DataFrame(rows).round(3), ds, cloze)

# %%
print("\n".join(headline_lines(cloze_head)))
print(
    "\nThe paper reports that low-order interactions are the least sensitive and high-order "
    "ones the most (fig. 9). In the cloze form:"
)
print("\n".join(pw.order_verdicts(cloze_head, cloze)))
order_ips_chart(
    cloze_head,
    orders=("all", "low", "mid", "high"),
    title="Cloze run: IPS by order, floor as ticks",
)

# %% [markdown]
# Same models, same kind of question, two formulations: with letters the verdict is "not a finding" (answering one letter, at chance), so the paper's claims cannot be tested on that run; in the cloze form the models are above chance, the verdict above says whether their sensitivity to the template's wording clears its noise floor, and where it does, the order claim is tested on it (the lines above; notebook 04 goes through it band by band).

# %% [markdown]
# **Next:** notebooks 01–04 walk through the IPS paper section by section; 09–11 the other three methods; 12 checks how much of IPS is the model rather than the solver or numerical noise.
