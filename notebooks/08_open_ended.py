# %% [markdown]
# # 08 · Open-ended items and variable selection (appendix K, L)
#
# Open-ended instructions (Dolly-15k) are much longer than MCQ items, and the cost of interactions grows as $2^n$. The paper keeps $n$ small by (1) treating stop words, punctuation and the instruction template as fixed background and (2) merging phrases into single variables (K.2). With no answer letter, psens scores the model's own greedy response to the unmasked prompt (mean per-token log-odds of its first tokens under teacher forcing; a documented choice of psens, see `psens.models.scorer`: the paper does not say).
#
# **The paper reports** (fig. 45–51; fig. 52–58 with paraphrased and reordered instructions) the same conclusions as for MCQ: instruct/chat below base, larger below smaller, dense below MoE, few-shot below 0-shot, and low-order interactions the least sensitive.
#
# **How to run.** Cell by cell, top to bottom. The `parameters` cell reads two environment
# variables (papermill's `-p` sets the same names):
#
# * `PSENS_RUN=path` opens a stored run: a `.zarr` store (`psens run`) or a `.nc` export
#   (`psens export`);
# * otherwise a small **synthetic** run over the instructions of this notebook is built in
#   seconds (the shipped `data/runs/arc.nc` is multiple-choice, so this notebook does not
#   open it by default) (no model is called: its numbers illustrate the method, not
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

# A stored run: a .zarr store (psens run) or a .nc file (psens export). Empty: a synthetic
# run over the instructions below (the shipped runs are multiple-choice, not open-ended).
PSENS_RUN = os.environ.get("PSENS_RUN", "")
# "" or "tiny": that synthetic run, built in seconds; "full": the Dolly configuration below
# through psens.run (hours of GPU time).
PSENS_SIZE = os.environ.get("PSENS_SIZE", "")


# %%
import psens.widgets as pw
from psens.store.labels import model_names

# Appendix K: Dolly-15k, the Llama-2 family, the instruction template of K.2. IPS needs two
# or more templates: its case and separator variants "open-case" and "open-colon" (built in;
# appendix L uses paraphrases and reordering instead, which are per-item rewrites). The
# paper-scale run is data/examples/paper_appendix_k.toml.
FULL = pw.paper_config("appendix_k")


# %% [markdown]
# ## Choosing the input variables (K.2)
#
# `psens.prompts.variables` segments the instruction into words, merges phrases (given ones, plus runs of capitalised words such as names), drops stop words and caps $n$ (deterministically, from a seed). The paper's worked example:

# %%
from psens.datasets import Item
from psens.prompts import variables

xfiles = Item(
    id="dolly/x-files",
    question=(
        "Identify from the following list characters from The X-Files who are "
        "bald or balding: Walter Skinner, John Fitzgerald Byers, Dana Scully, "
        "Melvin Frohike, Darius Michaud, Peter Watts, Conrad Strughold, Queequeg"
    ),
)
PHRASES = ["following list", "bald or balding"]
PAPER = [
    "Identify",
    "following list",
    "characters",
    "X-Files",
    "bald or balding",
    "Walter Skinner",
    "John Fitzgerald Byers",
    "Dana Scully",
    "Melvin Frohike",
    "Darius Michaud",
    "Peter Watts",
    "Conrad Strughold",
    "Queequeg",
]
ours = variables(xfiles, n_max=13, phrases=PHRASES, as_text=True)
print(ours)
print("same as the paper (K.2):", ours == PAPER)
print("without phrases, n_max=10:", variables(xfiles, n_max=10, as_text=True))

# %% [markdown]
# Thirteen variables mean $2^{13} = 8192$ masked prompts per item and template; with `n_max=10` the cap keeps a seeded subset. Two more instructions, written for this notebook, to have a few samples:

# %%
extra = [
    Item(
        id="demo/bread",
        question="Explain why sourdough bread rises more slowly "
        "than bread made with commercial yeast",
    ),
    Item(
        id="demo/rivers",
        question="Classify each river as European or South "
        "American: Danube, Amazon, Rhine, Orinoco, Loire, Paraná",
    ),
]
for item in extra:
    print(item.id, variables(item, n_max=6, phrases=PHRASES, as_text=True))

# %% [markdown]
# ## The run

# %%
# The tiny run: synthetic interactions whose variables are those chosen above, so labels
# read like the paper's. Llama-2-like model metadata, 0-3 shots (figs. 45-49).
MODELS = {
    # name: (family, series, kind, arch, params, active params, instability)
    "llama-2-7b": ("Llama", "Llama 2", "base", "dense", 7, 7, 0.8),
    "llama-2-7b-chat": ("Llama", "Llama 2", "chat", "dense", 7, 7, 0.55),
    "llama-2-13b-chat": ("Llama", "Llama 2", "chat", "dense", 13, 13, 0.45),
    "llama-moe-3.5b-sft": ("Llama", "Llama-MoE", "chat", "moe", 6.7, 3.5, 0.7),
}
ITEMS = [xfiles, *extra]
chosen = [variables(item, n_max=6, phrases=PHRASES, as_text=True) for item in ITEMS]
TINY = dict(
    models=MODELS, n_samples=len(ITEMS), n_vars=[len(c) for c in chosen], shots=[0, 1, 2, 3], seed=0
)
ds = pw.load_run(PSENS_RUN, PSENS_SIZE, tiny=TINY, full=FULL, shipped=False)
if not PSENS_RUN and PSENS_SIZE in ("", "tiny"):
    words = ds["word"].values.copy()
    for s, c in enumerate(chosen):
        words[s, : len(c)] = c
    ds = ds.assign_coords(word=(("sample", "var"), words))
print(pw.describe(ds))
ds


# %% [markdown]
# ## Sensitivity by order (fig. 49, fig. 56)
#
# **The paper reports** for open-ended instructions, as for MCQ, that low-order interactions are the least sensitive and high-order ones the most. Runs with few-shot settings are shown at 0 shots.

# %%
orders = pw.OrderIPS(ds, types=["all", "low", "mid", "high"])
orders

# %%
bands = orders.tables["ips"].pivot(index="model", columns="order", values="ips")
for model, row in bands.iterrows():
    text = f"{model}: low {row['low']:.2f}, mid {row['mid']:.2f}, high {row['high']:.2f}"
    print(pw.verdict(text, row["low"] < row["mid"] < row["high"], ds))

# %% [markdown]
# ## The factors (fig. 45, 47, 48, 50)
#
# Instruction tuning, pairing each base model with its chat version of the same size (**the paper reports** instruct/chat below base):

# %%
why = pw.lacks(ds, "the instruct vs base comparison", models=2, kinds=("base", "tuned"))
if why:
    print(why)
    tuned = None
else:
    tuned = pw.FactorCompare(ds, by="kind", match="series+params")
    delta = tuned.tables["delta"].set_index("order")
    if int(delta["n_pairs"].max()) == 0:
        print("no base/chat pair of one series and size in this run: comparing group means")
        tuned.match = "none"
        delta = tuned.tables["delta"].set_index("order")
    change = float(delta.loc["all", "rel_change"])
    print(pw.verdict(f"ΔIPS (instruct/chat vs base) {change:+.1%}", change < 0, ds))
tuned

# %% [markdown]
# Few-shot against 0-shot (fig. 48; **the paper reports** the big drop from 0 to 1 shot):

# %%
why = pw.lacks(ds, "the few-shot comparison", shots=True)
if why:
    print(why)
    shots = None
else:
    first = min(int(k) for k in ds["shot"].values if int(k) > 0)
    shots = pw.FactorCompare(ds, by="shot", a=[first], b=[0])
    change = float(shots.tables["delta"].set_index("order").loc["all", "rel_change"])
    print(pw.verdict(f"ΔIPS ({first}-shot vs 0-shot) {change:+.1%}", change < 0, ds))
shots

# %% [markdown]
# ## One instruction up close
#
# The interactions of the first instruction, labelled by the selected variables (phrases stay together, e.g. `{Walter Skinner, bald or balding}`).

# %%
pw.CaseStudy(ds, sample=str(ds["sample"].values[0]), top_k=8)

# %% [markdown]
# ## Appendix L · paraphrased and reordered instructions, next to a template change
#
# Appendix L perturbs the instruction itself: a **semantic paraphrase** and an **instruction reordering**, with the variables selected as in K.2 and the *same* variables in every version (`psens.perturbations.align_variables`: the K.2 units of the original found in every rewrite, matched case-insensitively, or paired by an explicit mapping such as "started" → "began"). **The paper reports** (fig. 52–58) that the conclusions of the template experiments hold under these harder perturbations.
#
# The shipped run `data/runs/appendix_l.nc` (config `data/runs/appendix_l.toml`) holds 4 AlpacaEval instructions with hand-written rewrites (`data/appendix_l/`, provenance in its README), scored by SmolLM2-135M-Instruct and Gemma-3-270M under two templates (`open`, `open-case`), each shown with the original, the paraphrase and the reordering. So the template pairs (`altering`: the upper-case section names) and the rewrite pairs (same template, instruction paraphrased or reordered) are measured on the same items and variables.

# %%
from pathlib import Path

import pandas as pd
from IPython.display import display

import psens
import psens.ips.factors as F
from psens.stats import change_verdict

APPENDIX_L = Path.cwd().parent / "data" / "runs" / "appendix_l.nc"
run_l = psens.open_run(APPENDIX_L) if APPENDIX_L.exists() else None
if run_l is None:
    print(f"{APPENDIX_L} not found: make shipped-run writes it")
else:
    print("template pairs by kind:", F.pair_kinds(run_l).value_counts().to_dict())
    s0 = 0
    for t in ("open", "open:paraphrase", "open:reorder"):
        text = str(run_l["prompt"].sel(template=t).values[s0]).split("### Instruction:\n")[-1]
        print(f"--- {t}: {text.split(chr(10))[0]}")
    print("variables:", [str(w) for w in run_l["word"].values[s0] if str(w)])

# %% [markdown]
# IPS per model for the template pairs against the paraphrase pairs and the reorder pairs, with bootstrap 95 % intervals over the items and a paired sign-flip p-value. The cell below first prints the run's number of items $n$ and the smallest paired p-value they allow, $2/2^n$: while it is at least 0.05 ($n \le 5$; the shipped run has 4 items), whichever kind comes out higher, the run cannot call it a finding; and SmolLM2-135M-Instruct vs Gemma-3-270M (base) is not a matched pair, so it says nothing about instruction tuning.

# %%
if run_l is not None:
    n_items = run_l.sizes["sample"]
    print(f"{n_items} items: the smallest possible paired p-value is {2 / 2**n_items:.3f}")
    cols = ["model", "ips_altering", "ips_altering_lo", "ips_altering_hi"]
    for rewrite in ("paraphrase", "reorder"):
        tab = F.ips_by_perturbation(run_l, kinds=("altering", rewrite), n_boot=1000, n_perm=2000)
        show = tab[[*cols, f"ips_{rewrite}", f"ips_{rewrite}_lo", f"ips_{rewrite}_hi", "p_value"]]
        display(show.round(3))
        for row in tab.itertuples():
            # the one verdict on a change (psens.stats.change_verdict: CI and paired test)
            why = change_verdict(row.diff_lo, row.diff_hi, row.p_value, words=("higher", "lower"))
            if 2 / 2**n_items >= 0.05 and not (row.diff_lo <= 0 <= row.diff_hi):
                why += f" (with {n_items} items the smallest possible p is {2 / 2**n_items:.3f})"
            print(
                f"{row.model}: IPS({rewrite}) - IPS(template change) = {row.difference:+.3f} "
                f"[{row.diff_lo:+.3f}, {row.diff_hi:+.3f}], p = {row.p_value:.3f} -> {why}"
            )

# %% [markdown]
# By order (fig. 56: **the paper reports** low-order interactions the least sensitive under these perturbations too), mean IPS over the pairs of each kind:

# %%
if run_l is not None:
    from psens.ips.metric import sample_ips

    kinds_l = F.pair_kinds(run_l)
    per = sample_ips(run_l, 0.1, per_pair=True).mean("sample")  # [model, order, pair]
    rows = []
    for kind in ("altering", "paraphrase", "reorder"):
        mask = (kinds_l == kind).to_numpy()
        sub = per.isel(pair=mask).mean("pair")
        for m in model_names(sub):
            rows.append(
                {
                    "model": str(m),
                    "kind": kind,
                    **{str(o): float(sub.sel(model=m, order=o)) for o in sub["order"].values},
                }
            )
    display(pd.DataFrame(rows).round(3))
