# %% [markdown]
# # 09 · ProSA: PromptSensiScore (PSS) and decoding confidence
#
# ProSA (Zhuo et al., "ProSA: Assessing and Understanding the Prompt Sensitivity of LLMs", Findings of EMNLP 2024) measures prompt sensitivity **per instance**: the same question is asked with several prompt variants and the scores are compared within the question, so a model that is right under one wording and wrong under another counts as sensitive even when the dataset average does not move (§2.1, fig. 2). For an instance $i$ with prompt variants $P$ and scores $Y(p)\in[0,1]$:
#
# $$S_i = \frac{\sum_{p<q} |Y(p) - Y(q)|}{\binom{|P|}{2}} \quad\text{(eq. 1)}\qquad \mathrm{PSS} = \frac1N \sum_i S_i \quad\text{(eq. 2)}\qquad \mathcal C_i = \frac1{|P|}\sum_{p} \max_t P(t\mid p) \quad\text{(eq. 3)}$$
#
# over **unordered** pairs (for binary correctness, $S_i$ is the share of variant pairs whose correctness differs). **What the paper reports** (author-reported, plotted rather than tabulated): Llama3-70B-Instruct is the most robust model overall (§3.3); few-shot examples lower PSS for all four Qwen1.5 models, most from 0 to 1 shot (§3.4, fig. 5); higher top-token confidence goes with lower PSS on CommonsenseQA (§5.2, fig. 7); subjective PSS on Arena Hard Auto is 0.249–0.266 for the five chat models against 0.275 for the reference row (tab. 2). PSS < 0.1 is the paper's rule of thumb for "robust" (§2.2), without justification.
#
# **How to run.** Top to bottom. By default the notebook opens the **real PSS runs** shipped
# in `data/runs/` (`make shipped-run` recomputes them from the configs next to them):
# `pss-arc.nc` and `pss-csqa.nc` (SmolLM2-135M-Instruct and Gemma-3-270M base on 10
# ARC-Challenge and 10 CommonsenseQA validation items × ProSA's 12 published prompts ×
# 0/1/3 shots) and the subjective run `pss-alpaca.nc` (12 AlpacaEval instructions × ProSA's
# three published versions, judged by SmolLM2-135M-Instruct: **a 135M judge is an
# illustration, not a finding**). It says so when a file is missing in this checkout (and
# shows a synthetic run in its place). `PSENS_RUN=path` opens another PSS run (a `psens run`
# with `n_vars = 0`); `PSENS_SIZE=tiny` opens **synthetic** runs instead (every table and
# chart then says so); `PSENS_LIVE=1` (or `PSENS_SIZE=full`) adds a live SmolLM2 section on
# psens's own variants. Charts are widgets: change a control and the chart updates in place.
#

# %% tags=["parameters"]
import os

# A PSS run to open (a .zarr store or .nc export made with n_vars = 0); "" = the shipped runs.
PSENS_RUN = os.environ.get("PSENS_RUN", "")
# "": the shipped real runs; "tiny": a synthetic run of the same layout; "full": + live section.
PSENS_SIZE = os.environ.get("PSENS_SIZE", "")
# Live SmolLM2 generation on psens's own variants (the first model conversion takes 20-60 s).
PSENS_LIVE = os.environ.get("PSENS_LIVE", "") == "1" or PSENS_SIZE == "full"


# %%
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd
import xarray as xr

import psens
import psens.widgets as pw
from psens.store.labels import model_names

pd.set_option("display.precision", 3)
pd.set_option("display.width", 160)

ROOT = Path.cwd().parent if Path.cwd().name == "notebooks" else Path.cwd()
# published data shipped with the repository (data/reference, provenance in its README)
REFERENCE = ROOT / "data" / "reference"

from psens.pss import (
    chance_pss,
    change_verdict,
    confidence_relation,
    instance_pss,
    instance_table,
    pss,
    pss_by_shot,
    published_groups,
    register_published,
)
from psens.variants import PROSA_STYLES, render_variant

# %% [markdown]
# ## 1 · ProSA's twelve published prompts (§3.1)
#
# ProSA writes 12 prompts per dataset, starting from four styles (simple inputs, role player, emotional support, output requirement). psens ships the authors' published prompt strings verbatim (`data/reference/prosa/objective_prompts.json`, provenance and licence in its README) and turns them into templates: `templates = "prosa"` in a run config runs the twelve prompts of the run's dataset (`prosa-arc-01` … `prosa-arc-12`, `prosa-csqa-01` …). The repository groups them in four blank-line groups of three; the paper does not say which group is which style, so psens keeps the group numbers only. The published strings keep their quirks: CommonsenseQA prompts 10–12 ask for "A, B, C or D" for five-option items. A prompt file whose prompt lost a placeholder is refused when it is read.

# %%
names = register_published("arc-challenge")
groups = published_groups("arc-challenge")
pool = [it for it in psens.datasets.load("arc-challenge", split="validation", limit=8)]
item = next(it for it in pool if len(it.options) == 4)
for name in ("prosa-arc-01", "prosa-arc-04", "prosa-arc-07", "prosa-arc-10"):
    print(f"--- {name} (group {groups[name]}) ---")
    print(psens.prompts.render(item, name))

# %% [markdown]
# psens's own twelve variants (`P01`–`P12`, `psens.variants.render_variant`, written so that the option list always matches the item, in the four named styles) stay available, e.g. for the live section below:

# %%
style_of = {tid: s for s, ids in PROSA_STYLES.items() for tid in ids}
print(f"--- P05 ({style_of['P05']}) ---")
print(render_variant(item, "P05"))

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
# ## 3 · The runs
#
# A PSS run is a `psens run` with `n_vars = 0`: no masked prompts, only each prompt's answer. For every (model, item, shot, prompt) the store holds the answer — the option whose label token is most probable right after the prompt, so even a model that ignores the output format answers every prompt — its correctness, and the decoding confidence (top next-token probability over the full vocabulary at the end of the prompt). Few-shot examples (the first k of one fixed draw, shared by every k) repeat the same prompt with "Answer: <label>".

# %%
from psens.synthetic import synthetic_pss_run

SHIPPED = {
    "ARC-Challenge": ROOT / "data" / "runs" / "pss-arc.nc",
    "CommonsenseQA": ROOT / "data" / "runs" / "pss-csqa.nc",
}
if PSENS_RUN:
    runs = {Path(PSENS_RUN).stem: psens.open_run(PSENS_RUN)}
elif PSENS_SIZE != "tiny" and all(p.exists() for p in SHIPPED.values()):
    runs = {name: psens.open_run(path) for name, path in SHIPPED.items()}
else:
    if PSENS_SIZE != "tiny":
        print("data/runs/pss-*.nc not found: showing a synthetic run")
    runs = {"synthetic": synthetic_pss_run()}
SYNTHETIC = any(bool(ds.attrs.get("synthetic", False)) for ds in runs.values())
NOTE = " · synthetic data" if SYNTHETIC else ""
for name, ds in runs.items():
    assert psens.pss.is_pss_run(ds), f"{name} is not a PSS run (made with n_vars = 0)"
    print(
        f"{name}{NOTE}: models {model_names(ds)}, {ds.sizes['sample']} items, "
        f"{ds.sizes['template']} prompts, shots {list(map(int, ds['shot'].values))}, "
        f"blocks done {int((ds['status'] == 1).sum())} of {ds['status'].size}"
    )
    print(psens.runner.summarize(ds))

# %% [markdown]
# ## 4 · PSS per model, per prompt and per shot
#
# Per dataset and model: accuracy, PSS (eq. 2) with a 95 % bootstrap CI over items, and two references. **Chance**: the accuracy of a uniform guess among the options, and the PSS of answers that are right independently under each prompt with that probability, $2a(1-a)$ (`psens.pss.chance_pss`: 0.375 for four options, 0.32 for five). A PSS near it means the answers carry no stable preference. A PSS near 0 is not robustness by itself either: a model that always answers "A" has PSS 0.

# %%
rows = []
for name, ds in runs.items():
    # options per item: ProSA's ARC-Challenge prompts show four, CommonsenseQA five
    dataset = str(ds.attrs.get("dataset", ""))
    n_opt = {"arc-challenge": 4, "commonsenseqa": 5}.get(dataset, 4)
    table = instance_table(ds)
    by_shot = pss_by_shot(ds).set_index(["model", "shot"])
    for (model, shot), g in table.groupby(["model", "shot"]):
        r = by_shot.loc[(model, shot)]
        rows.append(
            {
                "dataset": name,
                "model": model,
                "shot": shot,
                "items": int(r["n"]),
                "accuracy": g["accuracy"].mean(),
                "chance accuracy": 1 / n_opt,
                "PSS": r["pss"],
                "PSS 95% CI": f"[{r['lo']:.3f}, {r['hi']:.3f}]",
                "chance PSS": chance_pss(1 / n_opt),
                "confidence": g["confidence"].mean(),
            }
        )
overview = pd.DataFrame(rows)
overview.attrs["synthetic"] = SYNTHETIC
print("PSS per dataset, model and shot" + NOTE)
overview.round(3)

# %% [markdown]
# **Which letter do the models answer?** A model that answers the same letter under most prompts has a low PSS whatever the prompts do, and its accuracy is the share of items whose answer is that letter. The answer shares per model, against the shares of the gold answers:

# %%
share_rows = []
for name, ds in runs.items():
    pred = ds["prediction"].values.astype(str)
    if not (pred != "").any():  # a synthetic run stores no answers
        continue
    gold = np.char.strip(ds["target"].values.astype(str))
    for m, model in enumerate(model_names(ds)):
        answered = pd.Series(pred[m].ravel()).value_counts(normalize=True)
        share_rows.append(
            {"dataset": name, "model": model, **{f"answers {k}": v for k, v in answered.items()}}
        )
    gold_share = pd.Series(gold).value_counts(normalize=True)
    share_rows.append(
        {"dataset": name, "model": "(gold)", **{f"answers {k}": v for k, v in gold_share.items()}}
    )
answer_shares = pd.DataFrame(share_rows).fillna(0.0)
if len(answer_shares):
    answer_shares = answer_shares[["dataset", "model", *sorted(answer_shares.columns[2:])]]
answer_shares.round(2)

# %% [markdown]
# The widget shows the same scores per model, per **prompt** ($D_p$, the mean gap between prompt $p$ and the others; its mean over prompts is exactly $S_i$, so it shows which prompts carry the sensitivity) and per **shot** (fig. 5), for the first dataset.


# %%
def as_scores(ds: xr.Dataset) -> xr.Dataset:
    """The run's correctness as model × sample × shot × variant (blocks not done are NaN)."""
    y = ds["correct"].where(ds["status"] == 1).load()
    y = y.reset_coords(drop=True).rename(template="variant")
    return xr.Dataset({"correct": y}, attrs={"synthetic": SYNTHETIC})


first = next(iter(runs))
w = pw.PSSByVariant(as_scores(runs[first]), view="shot")
w

# %%
w.view = "variant"  # the same widget, another view (the chart updates in place)
w.tables["variant"].pivot(index="variant", columns="model", values="disagreement").round(3)

# %% [markdown]
# ## 5 · Few-shot examples (§3.4)
#
# **The paper's claim**: few-shot examples lower PSS for all four Qwen1.5 models (7B–110B), the biggest drop from 0 to 1 shot. Here: each shot count against 0 shots on the same items — the paired difference of $S_i$, its 95 % bootstrap CI and the sign-flip p-value (`psens.pss.pss_by_shot`). A change whose CI contains 0, or whose paired test does not reject (p ≥ 0.05), is **within noise** and is not a finding: the `verdict` and `within_noise` columns come from one rule (`psens.pss.is_finding`).

# %%
shot_rows = []
for name, ds in runs.items():
    t = pss_by_shot(ds)
    t.insert(0, "dataset", name)
    shot_rows.append(t)
shots_table = pd.concat(shot_rows, ignore_index=True)
shots_table.attrs["synthetic"] = SYNTHETIC
print("PSS by shot count, change against 0 shots" + NOTE)
shots_table.round(3)

# %%
shots_base = alt.Chart(shots_table).encode(x=alt.X("shot:O", title="shots"), color="model:N")
alt.layer(
    shots_base.mark_line(point=True).encode(y=alt.Y("pss:Q", title="PSS")),
    shots_base.mark_errorbar().encode(y="lo:Q", y2="hi:Q"),
).properties(width=220, height=200).facet(column=alt.Column("dataset:N", title=None)).properties(
    title="PSS by shot count, 95% bootstrap CIs over items (ProSA fig. 5)" + NOTE
)

# %% [markdown]
# ## 6 · Decoding confidence (§5)
#
# **The paper's claim**: on CommonsenseQA, instances with higher decoding confidence have lower PSS (fig. 7, bars, no numbers), and confidence values are not comparable across models. Here: the Spearman correlation between $S_i$ and $\mathcal C_i$ over the items, per model and shot, with a 95 % bootstrap CI over items (`psens.pss.confidence_relation`). ProSA's claim predicts a negative correlation; a CI that contains 0 means this run cannot tell. The paper does not say whether the maximum in eq. 3 is over the full vocabulary or the option tokens; the runs store the full-vocabulary one, which at the end of a prompt without an answer slot (prompts 4, 5, 7–9) is often the probability of a line break, not of an answer.

# %%
rel_rows = []
for name, ds in runs.items():
    t = confidence_relation(ds)
    t.insert(0, "dataset", name)
    rel_rows.append(t)
relation = pd.concat(rel_rows, ignore_index=True)
relation.attrs["synthetic"] = SYNTHETIC
print("Spearman correlation of S_i with decoding confidence, 95% bootstrap CI" + NOTE)
relation.round(3)

# %%
points = pd.concat(
    [instance_table(ds).assign(dataset=name) for name, ds in runs.items()], ignore_index=True
)
alt.Chart(points[points["shot"] == 0]).mark_circle(opacity=0.6, size=60).encode(
    x=alt.X("confidence:Q", title="decoding confidence C_i (full vocabulary, 0 shots)"),
    y=alt.Y("S_i:Q", title="instance sensitivity S_i"),
    color="model:N",
    column=alt.Column("dataset:N", title=None),
).properties(
    title="Confidence vs sensitivity per item (ProSA fig. 7)" + NOTE, width=240, height=200
)

# %% [markdown]
# ## 7 · What the runs show, against what the paper claims
#
# Computed from the tables above (nothing here is typed in by hand). **Caveats**: two tiny models (135M instruct, 270M base) far below the paper's 7B–110B models; 10 items per dataset, so the CIs are wide; accuracies near or below chance, and both models answer one letter under most prompts (the answer shares above), so PSS mostly says how often an item's prompts move the answer off that letter, not how the model reads the question; one base and one instruct model, not a matched pair, so the two are not compared as a factor. A difference inside its CI, or one the paired test does not reject, is reported as within noise, never as a finding (`psens.pss.change_verdict`, the rule of the tables' `within_noise`); and among many intervals about 5 % exclude 0 by chance alone — the last line counts them against that.


# %%
import math

lines = []
for (name, model), g in shots_table.groupby(["dataset", "model"], sort=False):
    g = g.set_index("shot")
    for shot in [s for s in g.index if s != g.index[0]]:
        r = g.loc[shot]
        lines.append(
            f"{name} · {model}: PSS {g.iloc[0]['pss']:.3f} at 0 shots, {r['pss']:.3f} at {shot} "
            f"shots; change {r['diff']:+.3f} [{r['diff_lo']:+.3f}, {r['diff_hi']:+.3f}], "
            f"sign-flip p = {r['p_value']:.3f}: "
            + change_verdict(
                r["diff_lo"],
                r["diff_hi"],
                r["p_value"],
                words=("PSS rose", "PSS fell, as ProSA reports"),
            )
        )
for _, r in relation.iterrows():
    lines.append(
        f"{r['dataset']} · {r['model']} · {r['shot']} shots: Spearman(S_i, C_i) {r['r']:+.2f} "
        f"[{r['lo']:+.2f}, {r['hi']:+.2f}]: "
        + change_verdict(
            r["lo"],
            r["hi"],
            words=("positive, against ProSA's claim", "negative, as ProSA reports"),
        )
    )
n_tests = int(shots_table["diff"].notna().sum() + len(relation))
# intervals that exclude 0, whatever the paired test says
n_excl = int(((shots_table["diff_lo"] > 0) | (shots_table["diff_hi"] < 0)).sum())
n_excl += int(((relation["lo"] > 0) | (relation["hi"] < 0)).sum())
# P(at least n_excl of n_tests independent 95% intervals exclude 0 by chance): binomial tail
p_chance = sum(
    math.comb(n_tests, k) * 0.05**k * 0.95 ** (n_tests - k) for k in range(n_excl, n_tests + 1)
)
lines.append(
    f"{n_excl} of {n_tests} intervals exclude 0; about {0.05 * n_tests:.1f} would by chance "
    f"alone at 95 % (P = {p_chance:.2f} of at least {n_excl}, the intervals not being "
    "independent): a count like this is not a finding, and the directions above say whether "
    "they even agree with each other"
)
print(
    ("SYNTHETIC DATA: these lines illustrate the computation, not a result\n" if SYNTHETIC else "")
    + "\n".join(lines)
)

# %% [markdown]
# ## Live: psens's own variants on SmolLM2 (`PSENS_LIVE=1`)
#
# SmolLM2-135M-Instruct answers psens's own variants `P01`–`P12` on three ARC-Challenge items with greedy decoding through `psens.models.LocalGenerator`; the binary score is option-letter extraction and exact match (`psens.eas.scoring.score_mcq`). Skipped unless `PSENS_LIVE=1` or `PSENS_SIZE=full`.

# %%
variants = list(psens.variants.PROSA_TEMPLATE_IDS)
SHOTS = (0, 1, 3)
items = pool[max(SHOTS) : max(SHOTS) + 3]
shot_pool = pool[: max(SHOTS)]
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
    import xarray as xr

    dims = ("model", "sample", "shot", "variant")
    live_scores = xr.Dataset(
        {"correct": (dims, correct), "score": (dims, graded)},
        coords={
            "model": models,
            "sample": [it.id for it in items],
            "shot": list(SHOTS),
            "variant": variants,
        },
    )
    print(pss(live_scores["correct"], dim="variant", instance_dim="sample").to_pandas().round(3))
else:
    print("live section skipped (set PSENS_LIVE=1)")

# %% [markdown]
# ## MATH and HumanEval answer checking (§3.1)
#
# ProSA's other two objective benchmarks have loaders too (`psens.datasets.load("math", path=...)`, `("humaneval", path=...)`: the data is not installable offline, pass a local copy). A MATH answer is the content of the last `\boxed{...}` (nested braces kept), compared by exact match; a HumanEval completion passes when the benchmark's tests run to their end on it and every call returns what the canonical solution returns (type included, decided in this process), run in a **separate, sandboxed Python process** (bubblewrap: no network, its own PID and user namespaces, a read-only interpreter; a time limit, capped output, file writes refused) — never in this notebook's process. Without bubblewrap only an audit-hook guard runs, and psens warns that it is not a security boundary; a run config executes generated code only with `allow_code_execution = true`. A toy item (made up here, not from HumanEval):

# %%
from psens.pss.answers import boxed_answer, math_correct, run_humaneval

print(
    boxed_answer(r"so the ratio is $\boxed{\frac{3}{4}}$."),
    math_correct(r"\boxed{0.75}", r"\frac{3}{4}"),
)
toy_prompt = 'def double(x: int) -> int:\n    """Twice x."""\n'
toy_test = "def check(candidate):\n    assert candidate(2) == 4\n"
toy_solution = "    return 2 * x\n"
for completion in ("    return x + x\n", "    return x\n", "    while True:\n        pass\n"):
    got = run_humaneval(
        completion, toy_prompt, toy_test, "double", canonical=toy_solution, timeout=2
    )
    print(repr(completion), got)

# %% [markdown]
# ## 8 · Subjective PSS (§4): three prompt versions and a judge
#
# For open-ended chat prompts ProSA rewrites each prompt twice with an LLM, has a judge (GPT-4-1106-preview) score every response against the benchmark's reference answer, and computes PSS over the three versions with graded scores (AlpacaEval gives a preference in [0, 1]; Arena Hard Auto's five verdicts map to 0, 0.25, 0.5, 0.75, 1). **The paper's claim** (tab. 2): subjective PSS of 0.249–0.266 on Arena Hard Auto for its five 8B–72B chat models, against 0.275 for the table's reference row; the text calls Arena Hard more sensitive than AlpacaEval although the caption says the two cannot be compared directly.
#
# The shipped run `data/runs/pss-alpaca.nc` (config `pss-alpaca.toml`, module `psens.pss.subjective`): 12 AlpacaEval instructions in ProSA's three published versions (`data/reference/prosa/`), a greedy response of both models to each (≤ 64 tokens), each judged by **SmolLM2-135M-Instruct** against AlpacaEval's GPT-4-1106-preview baseline answer (cut to 300 characters): "is the response as good as the reference answer? yes or no" — $Y(p) = 1$ for yes, 0 for no, AlpacaEval's win indicator (`judge_mode = "preference"`; a 0–10 rating, `judge_mode = "graded"`, left most replies of this judge unreadable in an earlier run of this config; `data/runs/README.md` gives the count). The judge runs in this process through the same OpenAI chat interface (`psens.backends.HTTPJudge`) that `judge_url = "http://…/v1"` sends to a server. One verdict per response in one position — not AlpacaEval's preference probability, nor Arena Hard's position-swapped five-way verdicts (Arena Hard's baseline answers are not installable offline; `benchmark = "arena"` with `references = FILE` runs it). A reply without a readable yes or no is recorded as `unparsed`, a failed call as `failed`: neither becomes a score. **A 135M judge is an illustration, not a finding.**
#
# The reference for the PSS is the **between-instance PSS**: the PSS of the same scores with each version's column shuffled over the instructions (`psens.pss.subjective.between_instance_null`, with a one-sided permutation p-value). A PSS not below it says the judge's scores do not tell one instruction's responses from another's: the PSS then measures the judge's noise, not the model's prompt sensitivity.

# %%
from psens import method_runs
from psens.pss import arena_label_score, load_prosa_versions
from psens.pss import subjective as subj

SUBJECTIVE = ROOT / "data" / "runs" / "pss-alpaca.nc"
if PSENS_SIZE != "tiny" and SUBJECTIVE.exists():
    sub = psens.open_run(SUBJECTIVE)
else:
    if PSENS_SIZE != "tiny":
        print("data/runs/pss-alpaca.nc not found: showing a synthetic run")
    sub = subj.synthetic_run()
SUB_SYNTHETIC = bool(sub.attrs.get("synthetic", False))
SUB_NOTE = (" · synthetic data" if SUB_SYNTHETIC else "") + (
    f" · {subj.JUDGE_NOTE}" if sub.attrs.get("judge_note") else ""
)
print(method_runs.summarize(sub))
sub_table = subj.model_table(sub)
sub_table.attrs["synthetic"] = SUB_SYNTHETIC
print("Subjective PSS per model, 95% bootstrap CI over instructions" + SUB_NOTE)
sub_table.round(3)

# %%
sub_points = sub["S_i"].to_dataframe().reset_index()[["model", "sample", "S_i"]]
sub_points["model"] = sub_points["model"].astype(str)
marks = sub_table.melt(
    id_vars="model", value_vars=["pss", "between_instance_pss"], var_name="what", value_name="x"
)
base = alt.Chart(sub_points).encode(y=alt.Y("model:N", title=None))
alt.layer(
    base.mark_circle(size=50, opacity=0.5).encode(
        x=alt.X("S_i:Q", title="S_i over the three versions"), tooltip=["sample", "S_i"]
    ),
    alt.Chart(sub_table).mark_rule(strokeWidth=3).encode(y="model:N", x="lo:Q", x2="hi:Q"),
    alt.Chart(marks)
    .mark_tick(thickness=3, size=22)
    .encode(y="model:N", x="x:Q", color=alt.Color("what:N", title=None)),
).properties(
    title=[
        "Subjective PSS per instruction, PSS with its 95% CI and the between-instance PSS",
        SUB_NOTE.strip(" ·"),
    ],
    width=420,
    height=90,
)

# %% [markdown]
# One instruction in its three versions, each model's response and the judge's reply (score 1 for yes, 0 for no; `unparsed` replies have none):

# %%
first_sub = str(sub["sample"].values[0])
cell = sub.sel(sample=first_sub)
rows_sub = []
for model in model_names(sub):
    for v in map(int, sub["version"].values):
        c = cell.sel(model=model, version=v)
        rows_sub.append(
            {
                "model": model,
                "version": v,
                "prompt": str(cell["prompt"].sel(version=v).values)[:70],
                "response": str(c["response"].values)[:70].replace("\n", " "),
                "judge reply": str(c["judge_raw"].values)[:30].replace("\n", " "),
                "status": str(c["judge_status"].values),
                "score": float(c["score"].values),
            }
        )
print(f"{first_sub}{SUB_NOTE}")
pd.DataFrame(rows_sub)

# %% [markdown]
# **What the subjective run shows, against what the paper claims** (computed from the table above):

# %%
sub_lines = []
for r in sub_table.itertuples():
    used = r.ok / max(1, r.ok + r.unparsed + r.failed)
    below = np.isfinite(r.p_value) and r.p_value < 0.05
    sub_lines.append(
        f"{r.model}: PSS {r.pss:.3f} [{r.lo:.3f}, {r.hi:.3f}] over {r.instances} instructions, "
        f"{used:.0%} of the verdicts usable; between-instance PSS {r.between_instance_pss:.3f} "
        + ("(p < 0.001): " if r.p_value < 0.001 else f"(p = {r.p_value:.3f}): ")
        + (
            "below it: the scores separate instructions — as they would, too, if the judge read "
            "only the instruction and the reference, which its three verdicts share"
            if below
            else "not below it: the scores carry no per-instruction signal, so this PSS is "
            "the judge's noise, not the model's sensitivity"
        )
    )
sub_lines.append(
    "ProSA's 0.249-0.266 (tab. 2) come from a GPT-4 judge on 8B-72B chat models with graded "
    "pairwise verdicts: the numbers here (judge, scale, models) are not comparable with them"
    + (f"; {subj.JUDGE_NOTE}" if sub.attrs.get("judge_note") else "")
)
print(
    (
        "SYNTHETIC DATA: these lines illustrate the computation, not a result\n"
        if SUB_SYNTHETIC
        else ""
    )
    + "\n".join(sub_lines)
)

# %% [markdown]
# The published versions of Arena Hard Auto (`psens.pss.load_prosa_versions`) and ProSA's mapping of its five verdicts to scores:

# %%
prosa_dir = REFERENCE / "prosa"
if (prosa_dir / "Arena_Hard_Auto_question_v1.jsonl").exists():
    versions = load_prosa_versions(prosa_dir, "arena")
    first_arena = versions[versions.instance == versions.instance.iloc[0]]
    for _, r in first_arena.iterrows():
        print(f"v{r.version}:", r.prompt[:160].replace(chr(10), " "), "...")
else:
    print("data/reference/prosa not found: skipping the published versions")
print({lab: arena_label_score(lab) for lab in ["A>>B", "A>B", "A=B", "B>A", "B>>A"]})
# three versions scored 1.0, 0.75, 0.75 by a judge -> S_i = (0.25 + 0.25 + 0) / 3
print("S_i =", instance_pss([[1.0, 0.75, 0.75]])[0])
