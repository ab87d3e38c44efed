# %% [markdown]
# # 09 · ProSA: PromptSensiScore (PSS) and decoding confidence
#
# ProSA (Zhuo et al., Findings of EMNLP 2024) measures prompt sensitivity **per instance**: the same question is asked with several prompt variants and the scores are compared within the question, so a model that is right under one wording and wrong under another counts as sensitive even when the dataset average does not move (§2.1, fig. 2). For an instance $i$ with prompt variants $P$ and scores $Y(p)\in[0,1]$:
#
# $$S_i = \frac{\sum_{p<q} |Y(p) - Y(q)|}{\binom{|P|}{2}} \quad\text{(eq. 1)}\qquad \mathrm{PSS} = \frac1N \sum_i S_i \quad\text{(eq. 2)}$$
#
# over **unordered** pairs (for binary correctness, $S_i$ is the share of variant pairs whose correctness differs). What the paper reports (author-reported, plotted rather than tabulated): Llama3-70B-Instruct is the most robust model overall (§3.3); few-shot examples lower PSS for all four Qwen1.5 models, most from 0 to 1 shot (§3.4, fig. 5); higher top-token confidence goes with lower PSS on CommonsenseQA (§5.2, fig. 7); subjective PSS on Arena Hard Auto is 0.249–0.266 for the five chat models against 0.275 for the reference row (tab. 2). PSS < 0.1 is the paper's rule of thumb for "robust" (§2.2), without justification.
#
# **How to run.** Top to bottom. The `parameters` cell reads `PSENS_SIZE` (`tiny`, the
# default, runs offline in seconds; `full` runs the live model sections) and `PSENS_LIVE=1`
# (live sections at tiny size too). The live sections use the offline SmolLM2-135M-Instruct
# (`psens.models.load("smollm2-135m-instruct")`; the first load converts its GGUF file once,
# 20–60 s, later loads take a few seconds) through `psens.models.LocalGenerator`, so nothing
# reaches a model hub. Charts are widgets: change a control and the chart updates in place.
#

# %% tags=["parameters"]
import os

# Not used by these notebooks (they do not read IPS runs); kept for the common interface.
PSENS_RUN = os.environ.get("PSENS_RUN", "")
# "tiny": offline in seconds (published data + synthetic scores); "full": live SmolLM2 runs.
PSENS_SIZE = os.environ.get("PSENS_SIZE", "tiny")
# Live SmolLM2 generation also at tiny size (the first model conversion takes 20-60 s).
PSENS_LIVE = os.environ.get("PSENS_LIVE", "") == "1" or PSENS_SIZE == "full"


# %%
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd

import psens
import psens.widgets as pw

pd.set_option("display.precision", 3)
pd.set_option("display.width", 160)

# published data shipped with the repository (data/reference, provenance in its README)
REFERENCE = Path.cwd().parent / "data" / "reference"

from psens.pss import instance_confidence, instance_pss, pss
from psens.variants import PROSA_STYLES, PROSA_TEMPLATE_IDS, render_variant

# %% [markdown]
# ## 1 · Twelve prompt variants in four styles (§3.1)
#
# ProSA writes 12 variants per dataset in four styles of three: simple inputs, role player, emotional support and output requirement. psens ships its own variants (`P01`–`P12`, `psens.variants`), written so that every mention of the options comes from the item's labels — ProSA's published CommonsenseQA prompts 10–12 say "A, B, C or D" for five-option items. The items are ARC-Challenge validation questions from the offline copy (`psens.datasets.load`).

# %%
N_ITEMS = 3 if PSENS_SIZE != "full" else 20
SHOTS = (0, 1, 3) if PSENS_SIZE != "full" else (0, 1, 3, 5, 7)
pool = psens.datasets.load("arc-challenge", split="validation", limit=N_ITEMS + max(SHOTS))
shot_pool, items = pool[: max(SHOTS)], pool[max(SHOTS) :]  # shots never tested
style_of = {tid: s for s, ids in PROSA_STYLES.items() for tid in ids}
item = items[0]
for tid in ("P01", "P05", "P08", "P10"):
    print(f"--- {tid} ({style_of[tid]}) ---")
    print(render_variant(item, tid))

# %% [markdown]
# **Few-shot (§3.4, app. F).** The k-shot prompt uses the *first* k examples of one fixed list, so every k shares its examples with every larger k; the instruction comes once, then the solved examples, then the question.

# %%
print(render_variant(item, "P02", shots=shot_pool, k=1))

# %% [markdown]
# ## 2 · PSS on a toy example: unordered pairs
#
# Four variants, three correct: 3 of the 6 unordered pairs differ, so $S_i = 0.5$. `psens.pss.instance_pss` computes the pair sum without forming pairs (sorted scores, $\sum_k (2k-m+1)\,y_{(k)}$), skips failed calls (NaN) and works on graded scores too.

# %%
from itertools import combinations

toy = np.array([[1, 1, 1, 0], [1, 1, 1, 1], [0.75, 0.5, 1.0, np.nan]], float)


def pairs_mean(r):
    r = r[~np.isnan(r)]
    return float(np.mean([abs(a - b) for a, b in combinations(r, 2)]))


by_pairs = [pairs_mean(r) for r in toy]
print("instance_pss:", instance_pss(toy), " by explicit pairs:", by_pairs)
print("dataset PSS:", pss(toy, return_counts=True))
assert np.allclose(instance_pss(toy), by_pairs)

# %% [markdown]
# ## 3 · Scores for every (model, item, shot, variant)
#
# **Live** (`PSENS_SIZE=full` or `PSENS_LIVE=1`): SmolLM2-135M-Instruct answers every variant with greedy decoding (as ProSA, §3.1) through `psens.models.LocalGenerator`; the binary score is option-letter extraction and exact match (`psens.eas.scoring.score_mcq`, robust to the article "A"). A graded score comes from the next-token distribution where the answer starts: the probability of the gold letter among the option letters. The same distribution gives the decoding confidence of §5.1 (eq. 3).
#
# **Tiny** (default): **synthetic** scores with the same layout for three made-up models, built so that a model's sensitivity falls with shots and with its confidence. They illustrate the computation, not ProSA's findings.

# %%
variants = list(PROSA_TEMPLATE_IDS)
dims = ("model", "sample", "shot", "variant")
coords = {
    "sample": [it.id for it in items],
    "shot": list(SHOTS),
    "variant": variants,
    "style": ("variant", [style_of[v] for v in variants]),
}

if PSENS_LIVE:
    from psens.eas.scoring import score_mcq

    scorer = psens.models.load("smollm2-135m-instruct")
    gen = psens.models.LocalGenerator(scorer, max_new_tokens=8, batch_size=8)
    labels = sorted({lab for it in items for lab, _ in it.options})
    option_ids = gen.label_token_ids(labels)
    shape = (1, len(items), len(SHOTS), len(variants))
    correct, graded = np.full(shape, np.nan), np.full(shape, np.nan)
    probs = []
    for s, k in enumerate(SHOTS):
        prompts = [render_variant(it, v, shots=shot_pool, k=k) for it in items for v in variants]
        texts = gen.generate(prompts)
        p = gen.next_token_probs(prompts)  # (items*variants, vocab)
        probs.append(p.reshape(len(items), len(variants), -1))
        for i, it in enumerate(items):
            ids = gen.label_token_ids([it.answer])
            for j in range(len(variants)):
                r = i * len(variants) + j
                correct[0, i, s, j] = score_mcq(texts[r], it.answer, list(it.options))
                graded[0, i, s, j] = p[r, ids].sum() / p[r, option_ids].sum()
    models = [scorer.name]
    next_probs = probs[0]  # zero-shot distributions for the confidence section
else:
    rng = np.random.default_rng(0)
    models = ["synthetic-small", "synthetic-medium", "synthetic-large"]
    n, m = len(items) * 8, len(variants)  # more synthetic items than live ones
    coords["sample"] = [f"item{i}" for i in range(n)]
    base = rng.uniform(0.3, 0.9, size=(len(models), n, 1, 1))
    noise = (
        np.array([0.35, 0.25, 0.12])[:, None, None, None]
        / (1 + np.array(SHOTS))[None, None, :, None] ** 0.5
    )
    graded = np.clip(base + noise * rng.normal(size=(len(models), n, len(SHOTS), m)), 0, 1)
    correct = (graded > 0.5).astype(float)
    # next-token distributions over a 40-token toy vocabulary, sharper when stable
    sharp = 1 + 6 * (1 - instance_pss(correct[:, :, 0]))[..., None, None]
    logits = rng.normal(size=(len(models), n, m, 40)) * sharp
    next_probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    option_ids = np.arange(4)

import xarray as xr

coords["model"] = models
scores = xr.Dataset({"correct": (dims, correct), "score": (dims, graded)}, coords=coords)
scores.attrs["synthetic"] = not PSENS_LIVE  # charts of synthetic scores say so in the title
scores

# %% [markdown]
# ## 4 · PSS per model, per variant, per style and per shot
#
# `psens.pss.pss` averages $S_i$ over instances and keeps the other dims (model, shot). The widget shows it per model (ProSA fig. 3/4), per **variant** — $D_p$, the mean gap between variant $p$ and the others, whose mean over the variants is exactly $S_i$, so it shows which prompts carry the sensitivity — per **style** (PSS within the three variants of each style) and per **shot** (fig. 5). The toggle switches between binary correctness and the graded score.

# %%
table = pss(scores["correct"], dim="variant", instance_dim="sample").to_pandas()
table.round(3)

# %%
w = pw.PSSByVariant(scores, view="shot")
w

# %%
w.view = "variant"  # the same widget, another view (the chart updates in place)
w.tables["variant"].groupby("style")["disagreement"].mean().round(3)

# %% [markdown]
# ProSA's few-shot claim, checked on these scores: PSS should fall as shots are added, most from 0 to 1 shot (§3.4). On the synthetic scores it does by construction; on a 135M model with three items, expect noise.

# %%
by_shot = w.tables["shot"].pivot(index="model", columns="shot", values="pss")
by_shot.round(3)

# %% [markdown]
# ## 5 · Decoding confidence (§5.1, eq. 3)
#
# $\mathcal C = \frac1{|P|}\sum_p P(t_{next}\mid p)$, the mean over prompts of the probability of the most likely next token. The paper does not say whether the maximum is over the full vocabulary or over the option tokens (§5.1); `psens.pss.instance_confidence` offers both. ProSA reports that instances with higher confidence have lower PSS (fig. 7) and that confidence values are not comparable across models.

# %%
probs_m = next_probs if next_probs.ndim == 4 else next_probs[None]
rows = []
for mi, model in enumerate(scores["model"].values):
    full = instance_confidence(probs_m[mi], over="full")
    opts = instance_confidence(probs_m[mi], over="options", option_ids=option_ids, renormalize=True)
    s_i = instance_pss(scores["correct"].sel(model=model, shot=SHOTS[0]).values)
    rows += [
        dict(model=str(model), confidence_full=f, confidence_options=o, S_i=s)
        for f, o, s in zip(full, opts, s_i, strict=True)
    ]
conf = pd.DataFrame(rows)
print(conf.groupby("model")[["confidence_full", "confidence_options", "S_i"]].mean().round(3))
alt.Chart(conf).mark_circle(opacity=0.6).encode(
    x=alt.X("confidence_full:Q", title="decoding confidence (full vocabulary)"),
    y=alt.Y("S_i:Q", title="instance sensitivity S_i"),
    color="model:N",
).properties(title="Confidence vs sensitivity (ProSA fig. 7)", width=360, height=240)

# %% [markdown]
# ## 6 · Subjective PSS (§4): three prompt versions and a judge
#
# For open-ended chat prompts ProSA rewrites each prompt twice with an LLM, has a judge score every response, and computes PSS over the three versions with graded scores (Arena Hard Auto's five verdicts map to 0, 0.25, 0.5, 0.75, 1). The published prompt versions are in `data/reference/prosa/` (provenance in its README); `psens.pss.load_prosa_versions` reads them. Scoring needs a judge — `psens.backends.HTTPJudge` on an OpenAI-compatible server, or `psens.backends.CallableJudge(psens.models.LocalGenerator(...), mode='graded')` locally — so this notebook only shows the versions and the label mapping.

# %%
from psens.pss import arena_label_score, load_prosa_versions

prosa_dir = REFERENCE / "prosa"
if (prosa_dir / "Arena_Hard_Auto_question_v1.jsonl").exists():
    versions = load_prosa_versions(prosa_dir, "arena")
    first = versions[versions.instance == versions.instance.iloc[0]]
    for _, r in first.iterrows():
        print(f"v{r.version}:", r.prompt[:160].replace(chr(10), " "), "...")
else:
    print("data/reference/prosa not found: skipping the published versions")
print({lab: arena_label_score(lab) for lab in ["A>>B", "A>B", "A=B", "B>A", "B>>A"]})
# three versions scored 1.0, 0.75, 0.75 by a judge -> S_i = (0.25 + 0.25 + 0) / 3
print("S_i =", instance_pss([[1.0, 0.75, 0.75]])[0])
