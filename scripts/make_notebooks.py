"""Write the IPS notebooks (01–04, 08) from the cell texts below, outputs stripped.

Run ``python scripts/make_notebooks.py`` after editing; the notebooks in ``notebooks/``
are generated files (edit here, not there). Each notebook's first code cell is tagged
``parameters`` (papermill) and reads ``PSENS_RUN`` / ``PSENS_SIZE`` from the environment.
"""

from __future__ import annotations

import sys
from pathlib import Path

from nbformat.v4 import new_code_cell, new_markdown_cell
from notebook_tools import write_all

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "notebooks"

PARAMETERS = """\
import os

# A stored run (a .zarr folder written by psens.run). Empty: make one below.
PSENS_RUN = os.environ.get("PSENS_RUN", "")
# "tiny": a synthetic run of the same schema, built in seconds (CI, first look).
# "full": the paper-size configuration through psens.run (hours, GPU; resumable).
PSENS_SIZE = os.environ.get("PSENS_SIZE", "tiny")
"""

HOW_TO_RUN = """\
**How to run.** Cell by cell, top to bottom. The `parameters` cell reads two environment
variables (papermill's `-p` sets the same names):

* `PSENS_RUN=path/to/run.zarr` opens a stored run (from `psens.run`);
* otherwise `PSENS_SIZE=tiny` (default) builds a small **synthetic** run with the exact
  layout of a real one (no model is called, so the numbers illustrate the method, not the
  paper's findings), and `PSENS_SIZE=full` runs the paper-size configuration with
  `psens.run` (needs the model weights and hours of GPU time; it resumes where it stopped).

Every chart is a widget: move a control and the chart updates in place; click a model
on a chart to pick it (shift-click adds, double-click clears).
"""

MCQ_FULL = """\
import altair as alt
import pandas as pd

import psens
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
"""


def nb01() -> list:
    return [
        new_markdown_cell(
            "# 01 · Interactions and their faithfulness (IPS paper §3.1–3.2, fig. 2)\n\n"
            "The IPS paper explains a model's answer score $v(x_T)$ on a masked input "
            "(only the words in $T$ kept) as a sum of **AND-OR interactions**: each set "
            "$S$ of input words has an effect $I(S)$ that switches on when all words of $S$ "
            "are present (AND) or any of them is (OR). Before using interactions to study "
            "prompt sensitivity, the paper checks two things, and so does this notebook:\n\n"
            "1. **Universal matching (theorem 3.1):** the interactions reproduce the model's "
            "output on all $2^n$ masked inputs exactly.\n"
            "2. **Sparsity (fig. 2a):** only a few interactions are salient; a logical model "
            "with the top 3–5 % of them already matches the output closely (fig. 2b).\n\n"
            + HOW_TO_RUN
        ),
        new_code_cell(PARAMETERS, metadata={"tags": ["parameters"]}),
        new_markdown_cell(
            "## The run\n\nA run is one `xarray.Dataset`: the games `v` and the "
            "interactions `I_and`, `I_or` over *model × sample × template × subset* "
            "(subset = bitmask of kept words, bit *i* = word *i*), the words of each "
            "sample in `word(sample, var)`, predictions and model metadata."
        ),
        new_code_cell(MCQ_FULL),
        new_markdown_cell(
            "## Theorem 3.1: the interactions reproduce every masked output\n\n"
            "$v(x_T) = I_{and}(\\emptyset) + I_{or}(\\emptyset) + "
            "\\sum_{\\emptyset \\neq S \\subseteq T} I_{and}(S) + "
            "\\sum_{S \\cap T \\neq \\emptyset} I_{or}(S)$ for every $T \\subseteq N$. "
            "`psens.reconstruct` evaluates the right-hand side with fast transforms; the "
            "largest gap over every stored game should be at float precision (the run "
            "also stores it per block as `matching_error`)."
        ),
        new_code_cell(
            "import numpy as np\n\n"
            "gaps = {}\n"
            "for n in np.unique(ds['n_vars'].values):\n"
            "    keep = np.flatnonzero(ds['n_vars'].values == n)\n"
            "    sub = ds.isel(sample=keep, subset=slice(0, 2 ** int(n)))\n"
            "    phi = psens.reconstruct(sub['I_and'].values, sub['I_or'].values)\n"
            "    gaps[int(n)] = float(np.nanmax(np.abs(phi - sub['v'].values)))\n"
            "print('largest |v - phi| by number of words n:', gaps)\n"
            "print('stored matching_error (max):', float(ds['matching_error'].max()))\n"
            "assert max(gaps.values()) < 1e-6"
        ),
        new_markdown_cell(
            "## What an interaction looks like\n\nThe strongest interactions of one game, "
            "labelled by their words (`psens.widgets.subset_label` turns a bitmask into "
            "`AND {lay, eggs}`). Effects are min-max normalised per game as in §3.2: "
            "$\\tilde I = \\mathrm{sgn}(I)(|I| - \\min)/(\\max - \\min)$ over all AND and OR "
            "interactions except the empty set (the bias)."
        ),
        new_code_cell(
            "game = ds.isel(model=0, sample=0, template=0)\n"
            "n = int(game['n_vars'])\n"
            "words = list(game['word'].values[:n])\n"
            "size = 2**n\n"
            "a, o = game['I_and'].values[:size], game['I_or'].values[:size]\n"
            "na, no = psens.ips.normalize(a, o)\n"
            "rows = [(kind, pw.subset_label(s, words, kind), float(x[s]))\n"
            "        for kind, x in (('AND', na), ('OR', no)) for s in range(1, 2**n)]\n"
            "top = pd.DataFrame(rows, columns=['kind', 'S', 'normalised effect'])\n"
            "top.reindex(top['normalised effect'].abs().sort_values(ascending=False).index).head(8)"
        ),
        new_markdown_cell(
            "## Sparsity and top-k matching (fig. 2)\n\n"
            "Panel (a) sorts $|\\tilde I(S)|$ of one sample and template for each model; "
            "the dashed line is the salience threshold $\\tau$. Panel (b) plots the model's "
            "output on all masked inputs in ascending order (red, as in the paper) against "
            "the logical model that keeps only the top fraction of interactions (blue). "
            "Panel (c) averages that matching error over every game of each model.\n\n"
            "**The paper reports** that every LLM encodes only a small number of salient "
            "interactions and that keeping the top 3 % or 5 % already gives a minimal "
            "matching error (Llama-2-7b in fig. 2b; more models in appendix F). Move the "
            "*top* slider: at 100 % panel (b) is exact (theorem 3.1)."
        ),
        new_code_cell("sparsity = pw.Sparsity(ds, fraction=0.05)\nsparsity"),
        new_markdown_cell(
            "Widgets are traitlets objects, so everything the controls do can be scripted. "
            "The matching error at 3 % and 5 % of the interactions, per model:"
        ),
        new_code_cell(
            "sparsity.fraction = 0.03  # the slider above moves too\n"
            "errors = sparsity.tables['errors']\n"
            "errors[errors['fraction'].isin([0.03, 0.05, 1.0])].pivot(index='model', "
            "columns='fraction', values='relative').round(4)"
        ),
        new_markdown_cell(
            "**Reading it.** On a real run the curves in (a) drop steeply after a handful of "
            "interactions and the 3–5 % error in (c) is small relative to the range of $v$. "
            "The synthetic tiny run plants four AND and four OR effects per sample and adds "
            "template noise, so its curves are sparse but its small-fraction errors are "
            "larger than a real model's."
        ),
    ]


def nb02() -> list:
    return [
        new_markdown_cell(
            "# 02 · Case studies and interaction classes (§3.3, fig. 3, fig. 19)\n\n"
            "The same input under two semantically equivalent templates $T$ and $\\hat T$ "
            "(e.g. `Answer:` vs `ANSWER:`) can give the same prediction while the "
            "interactions behind it change a lot. This notebook looks at single samples "
            "(fig. 3a, fig. 19) and then counts, over all samples, how many salient "
            "interactions keep their effect (fig. 3b).\n\n" + HOW_TO_RUN
        ),
        new_code_cell(PARAMETERS, metadata={"tags": ["parameters"]}),
        new_code_cell(MCQ_FULL),
        new_markdown_cell(
            "## One sample, two templates (fig. 3a, fig. 19)\n\n"
            "Bars are the normalised effects $\\tilde I(S)$ of the strongest salient "
            "interactions (salient: $|\\tilde I| > \\tau$ under either template), $T$ in blue "
            "and $\\hat T$ in red, each labelled by the words of $S$. The subtitle gives "
            "both predictions. We first pick a sample whose **prediction does not change** "
            "between the first two templates: the situation of fig. 19, where "
            "Llama-2-7b-chat answers `D` under both `Answer` and `ANSWER` but many "
            "interactions flip sign or change magnitude."
        ),
        new_code_cell(
            "t_a, t_b = (str(t) for t in ds['template'].values[:2])\n"
            "pred = ds['prediction'].sel(template=[t_a, t_b])\n"
            "same = (pred.isel(template=0) == pred.isel(template=1)).to_series()\n"
            "model, sample = same[same].index[0] if same.any() else same.index[0]\n"
            "case = pw.CaseStudy(ds, model=model, sample=sample, template_a=t_a, template_b=t_b)\n"
            "case"
        ),
        new_markdown_cell(
            "Hover a bar for its class. Now a sample whose **prediction changes** (the top "
            "row of fig. 3a): the paper finds that nearly half of the salient interactions "
            "then reverse their sign."
        ),
        new_code_cell(
            "changed = same[~same]\n"
            "model2, sample2 = changed.index[0] if len(changed) else same.index[-1]\n"
            "pw.CaseStudy(ds, model=model2, sample=sample2, template_a=t_a, template_b=t_b)"
        ),
        new_markdown_cell(
            "## Stable and unstable interactions, over all samples (fig. 3b)\n\n"
            "Every salient interaction of a template pair falls into one class: "
            "**opposite sign**; **same sign, different effect** ($|b|/|a| > 2$ or $< 0.5$); "
            "**same sign, similar effect** (the only stable one). Shares are pooled over "
            "samples and template pairs, split by whether the prediction changed.\n\n"
            "**The paper reports** (fig. 3b): when the output changes, about 50 % opposite "
            "sign, 42.6–47.4 % same sign with a different effect and only 2.7–6.8 % similar; "
            "when the output stays the same the picture improves, yet the majority "
            "(60–80 %) of salient interactions are still unstable."
        ),
        new_code_cell("classes = pw.InteractionClasses(ds)\nclasses"),
        new_markdown_cell(
            "## Linking the views\n\nClick a model in the chart above: the case study "
            "switches to it (`pw.link_models`; `on_select(callback)` is the general hook). "
            "The same numbers as a table, for discussion:"
        ),
        new_code_cell(
            "pw.link_models(classes, case)\n"
            "classes.tables['classes'].pivot_table(index=['model', 'group'], columns='label', "
            "values='share').round(3)"
        ),
    ]


def nb03() -> list:
    return [
        new_markdown_cell(
            "# 03 · IPS across models, and against output consistency (§4.1, fig. 4)\n\n"
            "**Interaction-based Prompt Sensitivity** (eq. 3): for each sample and each "
            "unordered pair of templates, the mean over the union of both salient sets of "
            "$|\\tilde I_S(x|T) - \\tilde I_S(x|\\hat T)| / ((|\\tilde I_S(x|T)| + "
            "|\\tilde I_S(x|\\hat T)|)/2)$; averaged over pairs, then samples. It lies in "
            "$[0, 2]$: 0 when nothing changes, 2 when every salient interaction flips sign "
            "or vanishes.\n\n**The paper reports** (fig. 4a) IPS from 1.268 "
            "(Qwen2.5-72B-Instruct) to 1.752 (Mistral-7B-v0.3) over 50 LLMs, with no "
            "family winning outright, and (fig. 4b) a negative correlation between IPS and "
            "output consistency (the share of samples answered identically under every "
            "template).\n\n" + HOW_TO_RUN
        ),
        new_code_cell(PARAMETERS, metadata={"tags": ["parameters"]}),
        new_code_cell(MCQ_FULL),
        new_markdown_cell(
            "## The metric, directly\n\n`psens.ips.ips(ds)` returns per-sample IPS; "
            "`psens.ips.aggregate` averages over samples, skipping samples with no salient "
            "interaction and saying how many it skipped."
        ),
        new_code_cell(
            "per_sample = psens.ips.ips(ds, tau=0.1)\n"
            "mean = psens.ips.aggregate(per_sample, 'sample')\n"
            "print('skipped (model, sample) cells:', mean.attrs['n_skipped'])\n"
            "mean.to_series().sort_values().round(3)"
        ),
        new_markdown_cell(
            "## All models, ascending (fig. 4a)\n\nThe `OrderIPS` widget showing only the "
            "overall IPS (`types=['all']`) is the fig. 4a ranking; the τ slider recomputes "
            "it (appendix F.8 shows the ranking is stable for τ in 0.05–0.20)."
        ),
        new_code_cell("overview = pw.OrderIPS(ds, types=['all'])\noverview"),
        new_markdown_cell(
            "## IPS against output consistency (fig. 4b)\n\nOutput consistency is the "
            "coarse, output-level metric: the share of samples whose prediction is the same "
            "under all templates. A fine-grained metric should correlate negatively with it."
        ),
        new_code_cell(
            "pred = ds['prediction'].astype(str)\n"
            "consistent = (pred == pred.isel(template=0)).all('template').mean('sample')\n"
            "table = overview.tables['ips'][['model', 'ips', 'kind']].copy()\n"
            "table['output_consistency'] = consistent.sel(model=table['model'].values).values\n"
            "print('Pearson r =', round(table['ips'].corr(table['output_consistency']), 3),\n"
            "      ' Spearman rho =', round(table['ips'].corr(table['output_consistency'], "
            "method='spearman'), 3))\n"
            "chart = pw.charts.ips_consistency_chart(table)\n"
            "alt.JupyterChart(chart, embed_options=pw.EMBED_OPTIONS)"
        ),
        new_markdown_cell(
            "## Drill down\n\nPick models on the ranking above (click; shift-click adds): "
            "the class shares below follow (`pw.link_models`)."
        ),
        new_code_cell(
            "classes = pw.InteractionClasses(ds)\npw.link_models(overview, classes)\nclasses"
        ),
    ]


def nb04() -> list:
    return [
        new_markdown_cell(
            "# 04 · Interaction orders (§4.3, fig. 9, 10, 11)\n\n"
            "The **order** of an interaction is the number of words in $S$. With $n$ the "
            "sample's number of words: low $1 \\le |S| \\le \\lfloor n/3 \\rfloor$, mid up to "
            "$\\lfloor 2n/3 \\rfloor$, high above. IPS restricted to one band gives "
            "$IPS_{low}$, $IPS_{mid}$, $IPS_{high}$.\n\n"
            "**The paper reports** (fig. 9): low-order interactions are the least sensitive, "
            "high-order the most. Fig. 10: the four factors that lower IPS (instruction "
            "tuning, dense instead of MoE, few-shot, and scale in fig. 11) act mostly on "
            "**low-order** interactions, less on mid-order, and hardly on high-order ones.\n\n"
            + HOW_TO_RUN
        ),
        new_code_cell(PARAMETERS, metadata={"tags": ["parameters"]}),
        new_code_cell(
            MCQ_FULL.replace(
                "TINY = dict(n_samples=12, seed=0)",
                "TINY = dict(n_samples=12, shots=[0, 1, 2, 3], seed=0)",
            )
        ),
        new_markdown_cell(
            "## IPS by order, per model (fig. 9)\n\nEach bar is the mean over samples; a "
            "sample with no salient interaction of that order in any template pair is "
            "skipped (the tooltip and the status line count them). Try the τ slider, the "
            "sample subset (e.g. only samples with `n_vars=6`) and the model list."
        ),
        new_code_cell("orders = pw.OrderIPS(ds)\norders"),
        new_markdown_cell(
            "## Across model scales (fig. 11)\n\nThe same numbers with one panel per order "
            "and models sorted by series and size."
        ),
        new_code_cell("pw.OrderIPS(ds, layout='by_order')"),
        new_markdown_cell(
            "## What the factors change (fig. 10)\n\n"
            "$\\Delta IPS_{type} = (IPS^A_{type} - IPS^B_{type}) / IPS^B_{type}$ with A the "
            "models with the factor and B without. Negative: the factor lowers sensitivity. "
            "The paper averages over matched pairs (a base model and its instruct version; "
            "every dense and MoE model of one family); choose that with *pair on*.\n\n"
            "**(a) instruction tuning:** A = chat/instruct, B = base."
        ),
        new_code_cell("pw.FactorCompare(ds, by='kind')"),
        new_markdown_cell("**(b) architecture:** A = dense, B = MoE, pairs within a family."),
        new_code_cell("pw.FactorCompare(ds, by='arch', match='family')"),
        new_markdown_cell(
            "**(c) few-shot:** A = 1-, 2- and 3-shot, B = 0-shot, each model with itself "
            "(only for runs with a `shot` dim; the tiny run has one)."
        ),
        new_code_cell(
            "if 'shot' in ds.dims and ds.sizes['shot'] > 1:\n"
            "    shots = pw.FactorCompare(ds, by='shot')\n"
            "else:\n"
            "    shots = 'this run has no few-shot settings'\n"
            "shots"
        ),
        new_markdown_cell(
            "## The numbers behind fig. 10\n\nRelative change by order for each factor, "
            "as a table (rows: factor; columns: order)."
        ),
        new_code_cell(
            "rows = {}\n"
            "for label, kwargs in [('instruct vs base', dict(by='kind')),\n"
            "                      ('dense vs MoE', dict(by='arch', match='family'))]:\n"
            "    delta = pw.FactorCompare(ds, **kwargs).tables['delta']\n"
            "    rows[label] = delta.set_index('type')['delta']\n"
            "if 'shot' in ds.dims and ds.sizes['shot'] > 1:\n"
            "    rows['few-shot vs 0-shot'] = shots.tables['delta'].set_index('type')['delta']\n"
            "pd.DataFrame(rows).T.style.format('{:+.1%}')"
        ),
    ]


def nb08() -> list:
    full = """\
import dataclasses

import altair as alt
import pandas as pd

import psens
import psens.widgets as pw
from psens.prompts import TEMPLATES, register

# Appendix K: Dolly-15k, the Llama-2 family, the instruction template of K.2. IPS needs two
# or more templates: case and separator variants of it, registered here (appendix L uses
# paraphrases and reordering instead, which are per-item rewrites).
base = TEMPLATES["open"]
register(dataclasses.replace(base, name="open-case", question="### INSTRUCTION:\\n{question}",
                             answer="### RESPONSE:", changes=("case",)), overwrite=True)
register(dataclasses.replace(base, name="open-colon", answer="### Response::",
                             changes=("double-colon",)), overwrite=True)
llama2 = [m for m in pw.registry_models(missing_ok=True) if m.startswith("llama-2")]
FULL = dict(
    store="runs/ips_dolly.zarr",
    models=llama2,
    dataset="dolly",
    split="train",
    samples=200,
    templates=["open", "open-case", "open-colon"],
    n_vars=10,
    tau=0.1,
    solver="exact",
    seed=0,
)
"""
    tiny = """\
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
TINY = dict(models=MODELS, n_samples=len(ITEMS), n_vars=[len(c) for c in chosen],
            shots=[0, 1, 2, 3], seed=0)
ds = pw.load_run(PSENS_RUN, PSENS_SIZE, tiny=TINY, full=FULL)
if not PSENS_RUN and PSENS_SIZE == "tiny":
    words = ds["word"].values.copy()
    for s, c in enumerate(chosen):
        words[s, : len(c)] = c
    ds = ds.assign_coords(word=(("sample", "var"), words))
ds
"""
    return [
        new_markdown_cell(
            "# 08 · Open-ended items and variable selection (appendix K, L)\n\n"
            "Open-ended instructions (Dolly-15k) are much longer than MCQ items, and the "
            "cost of interactions grows as $2^n$. The paper keeps $n$ small by (1) treating "
            "stop words, punctuation and the instruction template as fixed background and "
            "(2) merging phrases into single variables (K.2). With no answer letter, psens "
            "scores the model's own greedy response to the unmasked prompt (mean per-token "
            "log-odds of its first tokens under teacher forcing; DESIGN.md, a documented "
            "choice: the paper does not say).\n\n"
            "**The paper reports** (fig. 45–51; fig. 52–58 with paraphrased and reordered "
            "instructions) the same conclusions as for MCQ: instruct/chat below base, larger "
            "below smaller, dense below MoE, few-shot below 0-shot, and low-order "
            "interactions the least sensitive.\n\n" + HOW_TO_RUN
        ),
        new_code_cell(PARAMETERS, metadata={"tags": ["parameters"]}),
        new_code_cell(full),
        new_markdown_cell(
            "## Choosing the input variables (K.2)\n\n`psens.prompts.variables` segments "
            "the instruction into words, merges phrases (given ones, plus runs of "
            "capitalised words such as names), drops stop words and caps $n$ "
            "(deterministically, from a seed). The paper's worked example:"
        ),
        new_code_cell(
            "from psens.datasets import Item\n"
            "from psens.prompts import variables\n\n"
            "xfiles = Item(\n"
            "    id='dolly/x-files',\n"
            "    question=(\n"
            "        'Identify from the following list characters from The X-Files who are '\n"
            "        'bald or balding: Walter Skinner, John Fitzgerald Byers, Dana Scully, '\n"
            "        'Melvin Frohike, Darius Michaud, Peter Watts, Conrad Strughold, Queequeg'\n"
            "    ),\n"
            ")\n"
            "PHRASES = ['following list', 'bald or balding']\n"
            "PAPER = ['Identify', 'following list', 'characters', 'X-Files', 'bald or balding',\n"
            "         'Walter Skinner', 'John Fitzgerald Byers', 'Dana Scully', 'Melvin Frohike',\n"
            "         'Darius Michaud', 'Peter Watts', 'Conrad Strughold', 'Queequeg']\n"
            "ours = variables(xfiles, n_max=13, phrases=PHRASES, as_text=True)\n"
            "print(ours)\n"
            "print('same as the paper (K.2):', ours == PAPER)\n"
            "print('without phrases, n_max=10:', variables(xfiles, n_max=10, as_text=True))"
        ),
        new_markdown_cell(
            "Thirteen variables mean $2^{13} = 8192$ masked prompts per item and template; "
            "with `n_max=10` the cap keeps a seeded subset. Two more instructions, written "
            "for this notebook, to have a few samples:"
        ),
        new_code_cell(
            "extra = [\n"
            "    Item(id='demo/bread', question='Explain why sourdough bread rises more slowly '\n"
            "         'than bread made with commercial yeast'),\n"
            "    Item(id='demo/rivers', question='Classify each river as European or South '\n"
            "         'American: Danube, Amazon, Rhine, Orinoco, Loire, Paraná'),\n"
            "]\n"
            "for item in extra:\n"
            "    print(item.id, variables(item, n_max=6, phrases=PHRASES, as_text=True))"
        ),
        new_markdown_cell("## The run"),
        new_code_cell(tiny),
        new_markdown_cell(
            "## Sensitivity by order (fig. 49, fig. 56)\n\nLow-order interactions should "
            "be the least sensitive, high-order the most."
        ),
        new_code_cell("orders = pw.OrderIPS(ds, types=['all', 'low', 'mid', 'high'])\norders"),
        new_markdown_cell(
            "## The factors (fig. 45, 47, 48, 50)\n\nInstruction tuning, pairing each base "
            "model with its chat version of the same size:"
        ),
        new_code_cell("pw.FactorCompare(ds, by='kind', match='series+params')"),
        new_markdown_cell(
            "Few-shot against 0-shot (fig. 48; the paper: the big drop is 0 → 1 shot):"
        ),
        new_code_cell(
            "if 'shot' in ds.dims and ds.sizes['shot'] > 1:\n"
            "    shots = pw.FactorCompare(ds, by='shot', a=[1], b=[0])\n"
            "else:\n"
            "    shots = 'this run has no few-shot settings'\n"
            "shots"
        ),
        new_markdown_cell(
            "## One instruction up close\n\nThe interactions of the first instruction, "
            "labelled by the selected variables (phrases stay together, e.g. "
            "`{Walter Skinner, bald or balding}`)."
        ),
        new_code_cell("pw.CaseStudy(ds, sample=str(ds['sample'].values[0]), top_k=8)"),
    ]


NOTEBOOKS = {
    "01_interactions_faithfulness.ipynb": nb01,
    "02_case_studies.ipynb": nb02,
    "03_ips_across_models.ipynb": nb03,
    "04_orders.ipynb": nb04,
    "08_open_ended.ipynb": nb08,
}


def main(argv: list[str]) -> int:
    return write_all(NOTEBOOKS, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
