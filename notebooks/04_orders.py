# %% [markdown]
# # 04 · Interaction orders (§4.3, fig. 9, 10, 11)
#
# The **order** of an interaction is the number of words in $S$. With $n$ the sample's number of words: low $1 \le |S| \le \lfloor n/3 \rfloor$, mid up to $\lfloor 2n/3 \rfloor$, high above. IPS restricted to one band gives $IPS_{low}$, $IPS_{mid}$, $IPS_{high}$.
#
# **The paper reports** (fig. 9) that low-order interactions are the least sensitive and high-order ones the most, and (fig. 10) that the four factors that lower IPS (instruction tuning, dense instead of MoE, few-shot, and scale in fig. 11) act mostly on **low-order** interactions, less on mid-order, and hardly on high-order ones. The cells below compute both on the run at hand, for the factors it has.
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
import pandas as pd

import psens.widgets as pw
from psens.ips.headline import headline_lines, headlines
from psens.ips.verdicts import findings_models

# PSENS_SIZE=full: the paper's MCQ setting (§4.1, table 1), data/examples/paper_table1.toml
FULL = pw.paper_config("table1")
TINY = dict(n_samples=12, shots=[0, 1, 2, 3], seed=0)

ds = pw.load_run(PSENS_RUN, PSENS_SIZE, tiny=TINY, full=FULL)
print(pw.describe(ds))
ds


# %% [markdown]
# ## IPS by order, per model (fig. 9)
#
# Each bar is the mean over samples; a sample with no salient interaction of that order in any template pair is skipped (the tooltip and the status line count them). Try the τ slider, the sample subset (e.g. only samples with `n_vars=6`) and the model list. Runs with few-shot settings are shown at 0 shots.

# %%
orders = pw.OrderIPS(ds)
orders

# %%
heads = headlines(ds)  # every shot setting, the noise floor computed once
head = next(iter(heads.values()))  # the numbers psens summary prints, with the caveats
print("\n".join(headline_lines(head)))
print(
    "The paper reports that low-order interactions are the least sensitive and high-order "
    "ones the most (fig. 9)."
)
shot = head.attrs["pooled"]["shot"]  # fig. 9 at one shot setting: its findings (one rule)
why = findings_models(ds, None if shot is None else [shot], heads=heads)
print("verdicts use the models that are findings at", pw.shots_text([shot]))
print("\n".join(pw.order_verdicts(head, ds, reasons=why)))

# %% [markdown]
# ## Fig. 9 where the models are above chance: the cloze run
#
# The verdicts above can only be as good as the run: a model answering one letter, at chance or inside its noise floor gives "cannot test". The shipped run `data/runs/cloze-arc-easy.nc` asks the same two models 40 ARC-Easy questions with each option's text scored as a continuation (the cloze formulation, notebook 00), where both are above chance and above their floor. Each line is `psens.ips.claims.order_claim`: per item, IPS of the band minus IPS of the low band, the mean over items with its bootstrap CI and a paired sign-flip p-value; the claim holds only where the CI is above 0 and the test rejects (the rule of every verdict in psens, `psens.stats.is_finding`).

# %%
cloze = pw.load_run("data/runs/cloze-arc-easy.nc")
cloze_head = next(iter(headlines(cloze).values()))
print("\n".join(headline_lines(cloze_head)))
print("\n".join(pw.order_verdicts(cloze_head, cloze, reasons=findings_models(cloze))))
pw.OrderIPS(cloze)

# %% [markdown]
# **A second dataset: PIQA.** The shipped run `data/runs/cloze-piqa.nc` asks the same models 40 PIQA questions in the cloze formulation (the goal is the question, each of the two solutions scored as a continuation). Both answer above chance there too; whether their IPS is above its noise floor, and so whether fig. 9 can be tested on it, is the headline's verdict printed below — where it is not, every order line reads "cannot test".

# %%
piqa = pw.load_run("data/runs/cloze-piqa.nc")
piqa_head = next(iter(headlines(piqa).values()))
print("\n".join(headline_lines(piqa_head)))
print("\n".join(pw.order_verdicts(piqa_head, piqa, reasons=findings_models(piqa))))

# %% [markdown]
# ## Across model scales (fig. 11)
#
# The same numbers with one panel per order and models sorted by series and size.

# %%
pw.OrderIPS(ds, layout="by_order")

# %% [markdown]
# ## What the factors change (fig. 10)
#
# $\Delta IPS_{order} = (IPS^A_{order} - IPS^B_{order}) / IPS^B_{order}$ with A the models with the factor and B without. Negative: the factor lowers sensitivity. The paper averages over matched pairs (a base model and its instruct version of the same series and size; every dense and MoE model of one family; each model at k and at 0 shots). Each comparison below runs only when the run has a matched pair (`psens.ips.factors.matched_pairs`, the rule notebook 05 uses: instruct and base of one family and size, dense and MoE of one family); otherwise it says what is missing and gives no verdict — two unrelated models differ in far more than the factor. Models that are not findings — below their noise floor, answering one letter, at chance, or copying the few-shot examples' answer letter, at any shot setting — are left out of every verdict (`pw.findings_run`, the rule of `psens.ips.verdicts.findings`): their factor effects are noise or letter preference.

# %%
FACTORS = {
    "instruct vs base": dict(
        need=dict(models=2, kinds=("base", "tuned")), by="kind", match="series+params"
    ),
    "dense vs MoE": dict(need=dict(models=2, archs=("dense", "moe")), by="arch", match="family"),
    "few-shot vs 0-shot": dict(need=dict(shots=True), by="shot", match="none"),
}
fds, note = pw.findings_run(ds, heads)  # the models that are findings at every shot setting
print("factor verdicts use the models that are findings at", pw.shots_text(list(heads)))
print(note or "every model is a finding at every shot setting: all enter the factor verdicts")
compare = {}
for label, spec in FACTORS.items():
    why = pw.lacks(fds, f"the {label} comparison", **spec["need"])
    if why:
        print(why)
        continue
    w = pw.FactorCompare(fds, by=spec["by"], match=spec["match"])
    if w.refusal():  # no matched pair: the same refusal as notebook 05, no verdict
        print(f"{label}: not on this run — {w.refusal()}")
        continue
    compare[label] = w
print("comparisons this run supports:", list(compare) or "none")

# %% [markdown]
# **(a) instruction tuning** (A = chat/instruct, B = base), **(b) architecture** (A = dense, B = MoE) and **(c) few-shot** (A = 1 or more shots, B = 0 shots, each model with itself), those the run has:

# %%
from IPython.display import Markdown, display

for label, w in compare.items():
    display(Markdown(f"**{label}**"), w)
if not compare:
    print("this run supports none of the factor comparisons")

# %% [markdown]
# ## The numbers behind fig. 10
#
# Relative change by order for each factor the run supports (rows: factor; columns: order), and whether the paper's mechanism claim — the factor lowers low-order IPS, and low-order most — holds for it here.

# %%
rows = {label: w.tables["delta"].set_index("order")["rel_change"] for label, w in compare.items()}
if rows:
    print(
        "The paper reports that each factor lowers the sensitivity of low-order interactions "
        "most, mid-order less and high-order hardly (fig. 10)."
    )
    for label, d in rows.items():
        low, mid, high = (float(d[o]) for o in ("low", "mid", "high"))
        text = f"{label}: ΔIPS low {low:+.1%}, mid {mid:+.1%}, high {high:+.1%}"
        print(pw.verdict(text, low < 0 and low <= mid and low <= high, fds))
    table = pw.show(pd.DataFrame(rows).T, fds)
else:
    table = "no factor comparison on this run"
table
