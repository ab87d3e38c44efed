"""The numbers notebooks 00–14 quote in their Markdown are the ones psens computes.

A notebook's Markdown either prints nothing run-specific ("the cell above prints …") or quotes
a number this file recomputes with the function that computes it, from the shipped run in
``data/runs/``: a quote fails here when the run, the function or the text drifts. Every other
decimal or percentage in the Markdown is registered in :data:`NOT_FROM_A_RUN` with what it is
(a paper's number, a method setting, a closed form), so a new run-derived quote cannot slip
in unchecked; and a quantity quoted in several places (a notebook, the README,
``data/runs/README.md``) is checked to read the same in each.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.support import ROOT

RUNS = ROOT / "data" / "runs"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


@cache
def markdown(stem: str) -> str:
    """The Markdown cells of notebook ``stem``, whitespace collapsed to single spaces."""
    import jupytext

    nb = jupytext.read(ROOT / "notebooks" / f"{stem}.py", fmt="py:percent")
    text = " ".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return " ".join(text.split())


def flat(path: Path) -> str:
    return " ".join(path.read_text(encoding="utf-8").split())


def quoted(stem: str, quote: str) -> None:
    assert quote in markdown(stem), f"notebook {stem} no longer says {quote!r}"


@cache
def run(name: str):
    from psens import open_run

    return open_run(RUNS / f"{name}.nc")


#: Decimals and percentages the notebooks' Markdown quotes that no run computes: the papers'
#: published numbers, method settings and closed forms (the reason says which). A number
#: that is not here must be checked by a test below (and added to CHECKED).
NOT_FROM_A_RUN: dict[str, dict[str, str]] = {
    "00_start_here": {"95 %": "the bootstrap CI level"},
    "01_interactions_faithfulness": {
        "3.1": "theorem number",
        "3.2": "section number",
        "100 %": "slider end",
        "3 %": "the paper's top share",
        "5 %": "the paper's top share",
    },
    "02_case_studies": {
        "0.5": "the class rule's ratio",
        "2.7": "the paper's fig. 3b",
        "6.8": "the paper's fig. 3b",
        "42.6": "the paper's fig. 3b",
        "47.4": "the paper's fig. 3b",
        "6.8 %": "the paper's fig. 3b",
        "47.4 %": "the paper's fig. 3b",
        "50 %": "the paper's fig. 3b",
        "80 %": "the paper's fig. 3b",
    },
    "03_ips_across_models": {
        "0.05": "the paper's τ range",
        "0.20": "the paper's τ range",
        "1.268": "the paper's fig. 4a",
        "1.752": "the paper's fig. 4a",
    },
    "05_factors": {
        **dict.fromkeys(
            ["1.483", "1.568", "1.580", "1.606", "1.632", "1.642", "1.665", "1.714"],
            "the paper's table (dense vs MoE)",
        ),
        "4.3": "section number",
        "95 %": "the bootstrap CI level",
    },
    "06_threshold_robustness": {
        **dict.fromkeys(["0.01", "0.05", "0.1", "0.15", "0.20"], "the thresholds τ"),
        "0.9": "the notebook's holding rule for Spearman ρ",
        **dict.fromkeys(["0.9465", "0.9905", "0.9957", "1.72", "96.7", "96.7 %"], "paper tab. 2"),
    },
    "08_open_ended": {"0.05": "the test level", "95 %": "the bootstrap CI level"},
    "09_prosa_pss": {
        "0.05": "the test level",
        "0.1": "ProSA's rule of thumb",
        **dict.fromkeys(["0.249", "0.266", "0.275"], "ProSA tab. 2"),
        **dict.fromkeys(["0.25", "0.5", "0.75"], "ProSA's arena label scores"),
        "0.375": "chance_pss(1/4), closed form (checked below)",
        "0.32": "chance_pss(1/5), closed form (checked below)",
        "5 %": "the share of 95 % intervals excluding 0 by chance",
        "95 %": "the bootstrap CI level",
    },
    "10_eas": {"95 %": "the bootstrap CI level"},
    "11_dbsa": {
        **dict.fromkeys(["0.06", "0.08", "0.11", "0.07", "0.44"], "the DBSA paper's tables"),
        "0.05": "the test level",
        "3.5": "the DBSA paper's model name (GPT-3.5)",
        "5 %": "the test level",
    },
    "14_format_space": {
        **dict.fromkeys(
            ["0.04", "0.05", "0.06", "0.09", "0.13", "0.15", "0.33", "0.36", "90 %"],
            "psens's reading of Mind Your Format's published table "
            "(tests/formats/test_published.py recomputes it)",
        ),
        "0.25": "4-option chance (checked below)",
        "2.0": "licence name (Apache-2.0)",
        "30 %": "the search budget (checked below)",
    },
}


def _numbers(text: str) -> set[str]:
    decimals = re.findall(r"(?<![\w.§])\d+\.\d+(?![\w.]\d)", text)
    percents = re.findall(r"(?<![\w.])\d+(?:\.\d+)? ?%", text)
    return set(decimals) | {p.replace("%", " %").replace("  ", " ") for p in percents}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_quoted_number_is_registered_or_checked(path):
    """A decimal or percentage in a notebook's Markdown is a registered non-run number
    (:data:`NOT_FROM_A_RUN`) or one this file recomputes: a new quote fails until it is."""
    found = _numbers(markdown(path.stem))
    known = set(NOT_FROM_A_RUN.get(path.stem, {}))
    assert found <= known, (
        f"{path.stem} quotes {sorted(found - known)}: print it from a code cell, or check it "
        "here and register it in NOT_FROM_A_RUN"
    )


# --------------------------------------------------------------- the quotes of the runs


def test_00_the_majority_caveat_it_quotes_is_the_shipped_runs():
    """Notebook 00's example caveat is SmolLM2's on the shipped ARC run (0 shots), as the
    README and data/runs/README.md quote it."""
    from psens.ips.headline import headline
    from psens.ips.verdicts import findings

    caveat = "majority answer A on 95 %"
    quoted("00_start_here", f'("{caveat}")')
    why = findings(headline(run("arc"), shot=0))
    assert caveat in why["smollm2-135m-instruct"]
    for doc in (ROOT / "README.md", RUNS / "README.md"):
        assert caveat in flat(doc), doc


def test_08_the_item_count_behind_the_smallest_p_value():
    quoted("08_open_ended", "($n \\le 5$; the shipped run has 4 items)")
    n = run("appendix_l").sizes["sample"]
    assert n == 4
    # the sign-flip test's smallest p-value over n items is 2 / 2^n, below 0.05 from n = 6
    assert max(k for k in range(1, 10) if 2 / 2**k >= 0.05) == 5
    assert "with 4 items the smallest possible paired p is 0.125" in flat(RUNS / "README.md")
    assert 2 / 2**n == 0.125


def test_09_the_shipped_pss_runs_sizes():
    quoted(
        "09_prosa_pss",
        "on 10 ARC-Challenge and 10 CommonsenseQA validation items × ProSA's 12 published "
        "prompts × 0/1/3 shots) and the subjective run `pss-alpaca.nc` (12 AlpacaEval "
        "instructions × ProSA's three published versions",
    )
    quoted("09_prosa_pss", "10 items per dataset")
    for name in ("pss-arc", "pss-csqa"):
        ds = run(name)
        assert ds.sizes["sample"] == 10 and ds.sizes["template"] == 12, name
        assert [int(s) for s in ds["shot"].values] == [0, 1, 3], name
    alpaca = run("pss-alpaca")
    assert alpaca.sizes["sample"] == 12 and alpaca.sizes["version"] == 3
    quoted("09_prosa_pss", "(≤ 64 tokens)")
    quoted("09_prosa_pss", "(cut to 300 characters)")
    assert alpaca.attrs["max_new_tokens"] == 64 and alpaca.attrs["max_reference_chars"] == 300


def test_09_chance_pss_quotes_are_the_closed_form():
    from psens.pss import chance_pss

    quoted("09_prosa_pss", "0.375 for four options, 0.32 for five")
    assert chance_pss(1 / 4) == 0.375 and round(chance_pss(1 / 5), 2) == 0.32


def test_10_the_shipped_eas_runs_sizes():
    quoted(
        "10_eas", "answering 6 items each of ARC-Challenge, BoolQ and SQuAD under the 8 templates"
    )
    quoted("10_eas", "a greedy answer of at most 12 tokens from each model")
    quoted("10_eas", "with 6 items per task")
    ds = run("eas")
    assert json.loads(ds.attrs["datasets"]) == ["arc-challenge", "boolq", "squad"]
    assert ds.attrs["samples"] == 6 and ds.sizes["sample"] == 3 * 6
    assert ds.sizes["template"] == 8 and ds.attrs["max_new_tokens"] == 12


def test_11_the_shipped_dbsa_runs_settings():
    quoted(
        "11_dbsa", "(the shipped run: $n = m = 6$ answers of at most 16 tokens, $k = 1$ neighbour"
    )
    attrs = run("dbsa").attrs
    assert (attrs["n"], attrs["m"], attrs["max_tokens"], attrs["k"]) == (6, 6, 16, 1)


def test_14_the_shipped_format_runs_reading():
    """Notebook 14's reading of its shipped runs: the cloze oracle ``cloze-formats.nc`` (one
    model, 570 ARC-Easy items, 16 formats) has a spread above noise; the letter run
    ``formats-acc.nc`` (150 items, 16 formats) has both spreads within noise, near the 4-option
    chance; the search's 30 % budget is the one the notebook runs; ``formats.nc`` has 6 items.
    data/runs/README.md quotes the same runs."""
    from psens.formats.analysis import accuracy_spread
    from psens.store.labels import model_names

    quoted(
        "14_format_space",
        "On the shipped cloze oracle (SmolLM2-135M-Instruct, 570 ARC-Easy items, 16 cloze "
        "formats) the accuracy spread over the formats is above the spread of formats that do "
        "not matter",
    )
    quoted(
        "14_format_space",
        "On the letter run, 150 items, the two models' accuracy spreads over the 16 formats are "
        "inside the spread of formats that do not matter (`within_noise`)",
    )
    quoted("14_format_space", "SmolLM2-135M-Instruct on all 570 ARC-Easy validation items")
    quoted("14_format_space", "near the 4-option chance of 0.25")
    quoted("14_format_space", "no search finds them reliably from 30 % of the calls")
    quoted("14_format_space", "Sections 4–5 rest on 6 items")
    quoted("14_format_space", "`data/runs/formats.nc`: the letter formats on 6 items")
    cloze = run("cloze-formats")
    assert cloze.sizes["sample"] == 570 and cloze.sizes["template"] == 16
    assert cloze.attrs["answer"] == "cloze" and cloze.attrs["dataset"] == "arc-easy"
    assert model_names(cloze) == ["smollm2-135m-instruct"]
    assert not accuracy_spread(cloze, n_boot=500, n_perm=500)["within_noise"].any()
    acc = run("formats-acc")
    assert acc.sizes["sample"] == 150 and acc.sizes["template"] == 16
    assert run("formats").sizes["sample"] == 6 and run("formats").sizes["template"] == 16
    spread = accuracy_spread(acc, n_boot=500, n_perm=500)
    assert spread["within_noise"].all(), spread
    assert (spread["best_accuracy"] < 0.35).all()  # near the chance of 0.25
    code = (ROOT / "notebooks" / "14_format_space.py").read_text()
    assert "fraction=0.3," in code
    assert "Accuracy over 150 items (4-option chance 0.25)" in flat(RUNS / "README.md")


def test_a_quantity_has_one_number_everywhere():
    """SmolLM2's 0-shot IPS on the shipped ARC run reads the same (to the precision quoted)
    wherever it is quoted, and each quote says what it pools (0-shot, the run's pairs)."""
    from psens.ips.headline import headline

    head = headline(run("arc"), shot=0)
    row = head[(head["model"] == "smollm2-135m-instruct") & (head["order"] == "all")].iloc[0]
    ips = float(row["ips"])
    readme = flat(ROOT / "README.md")
    assert f"SmolLM2 has IPS {ips:.2f}" in readme and "on 0-shot, 5 templates (10 pairs)" in readme
    table = flat(RUNS / "README.md")
    assert f"| smollm2-135m-instruct | 0 | {ips:.3f} |" in table
    for stem in (p.stem for p in NOTEBOOKS):  # a notebook prints it, never types it
        assert f"{ips:.3f}" not in markdown(stem) and f"IPS {ips:.2f}" not in markdown(stem)
    assert np.isfinite(ips)


# ------------------------------------------------- the papers' claims on the cloze runs


def _m(x: float, fmt: str) -> str:
    """A number as the README's prose writes it: a true minus sign."""
    return format(float(x), fmt).replace("-", "−")


@cache
def _cloze_claims():
    """The tables of data/runs/README.md's cloze claims section, by the functions' defaults."""
    from psens.ips import claims
    from psens.pss import confidence_relation

    ds = run("cloze-arc-easy")
    return [
        ("cloze-arc-easy", claims.order_claim(ds)),
        ("cloze-arc-easy", claims.same_answer_claim(ds).query("group == 'same answer'")),
        ("cloze-arc-easy", claims.accuracy_relation(ds, across="items")),
        ("cloze-arc-easy", claims.accuracy_relation(ds, across="templates")),
        ("cloze-arc-easy", confidence_relation(ds)),
        ("cloze-formats", confidence_relation(run("cloze-formats"))),
    ]


def test_the_runs_readme_cloze_claims_table_is_the_functions_rows():
    """Every row of the cloze claims table is a claim function's printed row (the paper's
    claim, this run's measurement with its CI and p, the verdict), in order, and nothing
    else: a changed number, verdict or claim fails here."""
    text = (RUNS / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- cloze claims -->")[1].split("<!-- /cloze claims -->")[0]
    rows = [ln for ln in block.splitlines() if ln.startswith("| ") and "---" not in ln][1:]
    want = [
        f"| `{name}.nc` | {r.model} | {r.claim} | {r.measured} | {r.verdict} |"
        for name, table in _cloze_claims()
        for r in table.itertuples()
    ]
    assert rows == want
    for _, table in _cloze_claims():  # what each pools, in the paragraph under the table
        assert table.attrs["pools"], table


def test_the_runs_readme_cloze_claims_prose_is_the_functions_numbers():
    """The sentences around the cloze claims table quote the same tables."""
    from psens.ips.headline import MAJORITY_SHARE, headline
    from psens.ips.verdicts import findings

    text = flat(RUNS / "README.md")
    order, same, items, templates, pss_ips, pss_fmt = (t for _, t in _cloze_claims())
    o = order.set_index(["model", "contrast"])
    smol, gemma = "smollm2-135m-instruct", "gemma3-270m"
    # fig. 9: Gemma both bands, SmolLM2 only mid (at the edge)
    assert o.loc[(gemma, "high − low"), "holds"] and o.loc[(gemma, "mid − low"), "holds"]
    assert o.loc[(smol, "mid − low"), "holds"] and not o.loc[(smol, "high − low"), "holds"]
    assert f"at the edge (p = {o.loc[(smol, 'mid − low'), 'p_value']:.3g})" in text
    # the smallest p of 2,000 sign flips / permutations
    assert min(order["p_value"].min(), pss_ips["p_value"].min()) == pytest.approx(1 / 2001)
    assert "(2,000 sign flips or permutations, so 0.0005 is the smallest p there is)" in text
    assert f"{1 / 2001:.1g}" == "0.0005"
    # IPS vs accuracy: nothing across items nor templates
    r = items.set_index("model")["r"]
    assert f"(r {_m(r[smol], '+.2f')} and {_m(r[gemma], '+.2f')}, CIs containing 0)" in text
    assert not items["holds"].any() and not templates["holds"].any()
    assert (items["lo"] < 0).all() and (items["hi"] > 0).all()
    assert "no p falls below 2/4! ≈ 0.083" in text and f"{2 / 24:.3f}" == "0.083"
    assert (templates["p_value"] > 2 / 24).all() and (templates["n"] == 4).all()
    # PSS vs confidence: negative, as ProSA reports, in every row
    assert pss_ips["holds"].all() and pss_fmt["holds"].all()
    f = pss_fmt.iloc[0]
    assert f"(r {_m(f.r, '.2f')} [{_m(f.lo, '.2f')}, {_m(f.hi, '.2f')}])" in text
    assert f.n == 570 and "16 formats" in pss_fmt.attrs["pools"]
    # no model is left out: both findings, above chance, no caveat on their answers
    head = headline(run("cloze-arc-easy"))
    assert not any(findings(head).values())
    acc = head[head["order"] == "all"].set_index("model")
    assert (
        f"with accuracy {acc.loc[smol, 'accuracy']:.2f} and {acc.loc[gemma, 'accuracy']:.2f} "
        f"against chance {acc.loc[smol, 'chance']:.2f}"
    ) in text
    assert (pss_ips["caveats"] == "").all() and (pss_fmt["caveats"] == "").all()
    assert f"one answer on more than {100 * MAJORITY_SHARE:.0f} % of the prompts" in text
    assert same["holds"].all()


def test_the_runs_readme_cloze_formats_figures_are_the_summary():
    """The cloze format run's figures are psens summary's (the PSS lines and the accuracy
    spread with the settings summary uses) and chance_pss at its accuracy."""
    from psens.ips.headline import chance_level
    from psens.pss import chance_pss, instance_table
    from psens.runner import summarize

    ds = run("cloze-formats")
    t = instance_table(ds)
    summary = " ".join(summarize(ds).split())
    pss, acc, conf = t["S_i"].mean(), t["accuracy"].mean(), t["confidence"].mean()
    assert f"0-shot PSS {pss:.3f} (accuracy {acc:.2f}, confidence {conf:.2f})" in summary
    from psens.formats.analysis import accuracy_spread

    s = accuracy_spread(ds, n_boot=500, n_perm=500).iloc[0]  # what psens summary prints
    tail = (
        f"spread {s.spread:.2f} [{s.lo:.2f}, {s.hi:.2f}] (n = {s.n_items} items; "
        f"formats-do-not-matter spread {s.null_spread:.2f}, p = {s.p_value:.3f})"
    )
    assert tail in summary and not s.within_noise
    text = flat(RUNS / "README.md")
    quoted = (
        f"PSS {pss:.3f} over the {s.n_templates} formats (ProSA eq. 1–2), accuracy {acc:.2f} "
        f"(chance {chance_level(ds):.2f}), confidence {conf:.2f} (the chosen option's "
        f"probability); accuracy {s.worst_accuracy:.2f} under the worst format to "
        f"{s.best_accuracy:.2f} under the best, spread {s.spread:.2f} [{s.lo:.2f}, {s.hi:.2f}] "
        "(95 % bootstrap CI over items), against a formats-do-not-matter spread of "
        f"{s.null_spread:.2f} (each item's correctness permuted across the formats), "
        f"p = {s.p_value:.3f}"
    )
    assert quoted in text
    assert f"far below the {chance_pss(acc):.2f} that answers right independently" in text
    assert f"× all {s.n_items} ARC-Easy validation items" in text


def test_the_runs_readme_pss_confidence_exclusions_are_the_functions():
    """The PSS section's count of "cannot test" rows, their permutation p and the one row
    left, from confidence_relation on the two lettered PSS runs."""
    from psens.ips.headline import chance_level
    from psens.pss import confidence_relation

    rel = {name: confidence_relation(run(name)) for name in ("pss-arc", "pss-csqa")}
    both = pd.concat(rel.values(), ignore_index=True)
    blocked = both["verdict"].str.startswith("cannot test")
    text = flat(RUNS / "README.md")
    assert f'{int(blocked.sum())} of its {len(both)} rows read "cannot test"' in text
    excl = both[(both["lo"] > 0) | (both["hi"] < 0)]
    assert blocked[excl.index].all()
    ps = " and ".join(f"{p:.3f}" for p in excl["p_value"])
    assert f"(their permutation p {ps})" in text
    left = rel["pss-csqa"][~rel["pss-csqa"]["verdict"].str.startswith("cannot test")]
    assert len(left) == 1 and both[~blocked].shape[0] == 1
    row = left.iloc[0]
    assert (row.model, row.shot, row.within_noise) == ("smollm2-135m-instruct", 3, True)
    chance = chance_level(run("pss-csqa"))
    assert f"at 3 shots (accuracy {row.accuracy:.2f} against chance {chance:.2f})" in text


def test_the_cloze_format_oracles_row_is_the_shipped_file():
    """data/runs/README.md's row of ``cloze-formats.nc``: its model, all 570 ARC-Easy
    validation items, 16 formats, answers only, 9,120 prompts."""
    from psens.datasets import load
    from psens.store.labels import model_names

    row = next(ln for ln in (RUNS / "README.md").read_text().splitlines() if "`cloze-formats" in ln)
    ds = run("cloze-formats")
    assert model_names(ds) == ["smollm2-135m-instruct"]
    assert "SmolLM2-135M-Instruct (Gemma-3-270M's half is pending)" in row
    n, k = ds.sizes["sample"], ds.sizes["template"]
    assert n == len(load("arc-easy", "validation")) == 570 and ds.attrs["dataset"] == "arc-easy"
    assert f"all {n} ARC-Easy validation items" in row and f"| {k} formats" in row
    assert ds.sizes["var"] == 0 and "`n_vars = 0`" in row
    assert f"{n * k:,} prompts" in row


#: data/runs/README.md's names of the shipped PSS runs and their models
PSS_RUNS = {"ARC-Challenge": "pss-arc", "CommonsenseQA": "pss-csqa"}
PSS_MODELS = {"SmolLM2-135M-Instruct": "smollm2-135m-instruct", "Gemma-3-270M": "gemma3-270m"}


def test_the_runs_readme_pss_table_and_few_shot_changes_are_the_shipped_runs():
    """Each row of data/runs/README.md's PSS table (PSS with its CI per shot, accuracy and
    confidence per shot) and its few-shot sentence are psens.pss's on the shipped runs."""
    from psens.pss import instance_table, pss_by_shot

    text = (RUNS / "README.md").read_text()
    changes = []
    for dataset, name in PSS_RUNS.items():
        ds = run(name)
        by_shot = pss_by_shot(ds).set_index(["model", "shot"])
        means = instance_table(ds).groupby(["model", "shot"])[["accuracy", "confidence"]].mean()
        for label, model in PSS_MODELS.items():
            shots = [int(k) for k in ds["shot"].values]
            pss = [by_shot.loc[(model, k)] for k in shots]
            cells = [f"{r['pss']:.3f} ({r['lo']:.3f}–{r['hi']:.3f})" for r in pss]
            for col in ("accuracy", "confidence"):
                cells.append(" / ".join(f"{means.loc[(model, k), col]:.2f}" for k in shots))
            row = f"| {dataset} | {label} | " + " | ".join(cells) + " |"
            assert row in text, row
            changes += [(dataset, label, k, by_shot.loc[(model, k)]) for k in shots if k]
    flat_text = flat(RUNS / "README.md")
    within = sum(bool(r["diff_lo"] <= 0 <= r["diff_hi"]) for *_, r in changes)
    assert f"Of the {len(changes)} changes against 0 shots, {within} have" in flat_text

    def signed(x: float) -> str:
        return f"{x:+.3f}".replace("-", "−")

    picked = {(d, m, k): r for d, m, k, r in changes}
    rise = picked[("CommonsenseQA", "SmolLM2-135M-Instruct", 3)]
    assert (
        f"({signed(rise['diff'])}, CI {signed(rise['diff_lo'])} … {signed(rise['diff_hi'])}) "
        f"but its sign-flip p is {rise['p_value']:.2f}: not a finding" in flat_text
    )
    assert rise["within_noise"] and rise["diff_lo"] > 0
    drop = picked[("CommonsenseQA", "Gemma-3-270M", 1)]
    assert (
        f"({signed(drop['diff'])}, CI {signed(drop['diff_lo'])} … {signed(drop['diff_hi'])}, "
        f"p = {drop['p_value']:.2f}) is within noise" in flat_text
    )
    assert drop["within_noise"]


def test_the_runs_readme_format_spreads_are_the_shipped_runs():
    """data/runs/README.md's accuracy spreads of ``formats.nc`` and ``formats-acc.nc`` (range,
    spread with its CI, the null spread and p, PSS across the formats) are
    ``accuracy_spread`` and ``format_pss`` with their defaults, and both are within noise."""
    from psens.formats.analysis import accuracy_spread, format_pss

    text = flat(RUNS / "README.md")
    for name, d in (("formats", 2), ("formats-acc", 3)):
        ds = run(name)
        s = accuracy_spread(ds).set_index("model")
        pss = format_pss(ds)
        assert s["within_noise"].all(), name
        parts = []
        for model, r in s.iterrows():
            rng = f"{r.worst_accuracy:.2f}–{r.best_accuracy:.2f}"
            parts.append(
                (rng, f"{r.spread:.{d}f}", f"{r.lo:.{d}f}–{r.hi:.{d}f}", f"{pss[model]:.{d}f}")
            )
        (a_rng, a_sp, a_ci, a_pss), (b_rng, b_sp, b_ci, b_pss) = parts
        a, b = s.iloc[0], s.iloc[1]
        spread = f"SmolLM2 {a_rng} (spread {a_sp}, 95 % bootstrap CI {a_ci}), Gemma-3-270M"
        assert spread in text, spread
        assert f"Gemma-3-270M {b_rng} ({b_sp}, {b_ci})" in text, (name, b_rng, b_sp, b_ci)
        null = f"permutation mean {a.null_spread:.{d}f} and {b.null_spread:.{d}f}"
        assert f"{null}, p = {a.p_value:.2f} and {b.p_value:.2f}" in text, (name, null)
        assert f"PSS across the formats{':' if name == 'formats' else ''} {a_pss} and {b_pss}" in (
            text
        )


def test_the_runs_readme_says_how_little_masking_moves_gemma():
    """data/runs/README.md: the within-game std of v (mean over the run's games) of Gemma and
    SmolLM2, and the median change bfloat16 scoring makes to Gemma's v."""
    ds = run("arc").load()
    std = ds["v"].std("subset").mean(["sample", "shot", "template"])
    moved = abs(ds["v"] - ds["v_floor"]).sel(model="gemma3-270m").median()
    quote = (
        f"within-game std of v {float(std.sel(model='gemma3-270m')):.2f}, against "
        f"{float(std.sel(model='smollm2-135m-instruct')):.2f} for SmolLM2; mean over the run's "
        f"games, all shot settings) and bfloat16 rounding moves them by {float(moved):.2f} "
        "(median over its masked prompts)"
    )
    assert quote in flat(RUNS / "README.md"), quote


def test_the_runs_readme_appendix_l_figures_are_the_shipped_run():
    """data/runs/README.md's appendix L sentence: notebook 08's rewrite comparisons (all
    higher, their p range) and the headline's jitter floor test, under the headline's rule."""
    import psens.ips.factors as F
    from psens.ips.headline import headline

    ds = run("appendix_l")
    text = flat(RUNS / "README.md")
    ps = []
    for rewrite in ("paraphrase", "reorder"):
        tab = F.ips_by_perturbation(ds, kinds=("altering", rewrite), n_boot=1000, n_perm=2000)
        assert (tab["difference"] > 0).all() and (tab["p_value"] >= 0.05).all(), rewrite
        ps += list(tab["p_value"])
    assert f"the paired p-values are {min(ps):.2f}–{max(ps):.2f}: inside the noise" in text
    head = headline(ds).query("order == 'all'").set_index("model")
    a, b = head.loc["smollm2-135m-instruct"], head.loc["gemma3-270m"]
    assert (head["floor_kind"] == "jitter").all() and not head["above_floor"].any()
    assert (head["diff_lo"] > 0).all()
    assert (
        f"(SmolLM2 {a.floor:.2f}, Gemma {b.floor:.2f}) both models' IPS ({a.ips:.2f}, "
        f"{b.ips:.2f}) is higher, with a CI of IPS − floor above 0, but p = {a.p_value:.2f} and "
        f"{b.p_value:.2f}: neither is above its floor by the headline's rule" in text
    )


def test_the_runs_readme_ips_by_format_dimension_is_the_shipped_run():
    """data/runs/README.md's IPS by format dimension on ``formats.nc``: SmolLM2's dimensions
    above its jitter floor with their IPS, the others within it; Gemma's all within."""
    from psens.formats.analysis import dimension_sensitivity

    words = {"space": "spacing", "case": "case", "sep": "separator", "enum": "enumeration"}
    words["opt_name"] = "options name"
    t = dimension_sensitivity(run("formats")).query("order == 'all'")
    smol = t[t["model"] == "smollm2-135m-instruct"].sort_values("ips", ascending=False)
    above = smol[~smol["within_noise"]]
    assert set(above["dimension"]) == set(words) and smol["within_noise"].sum() == 4
    listed = [f"{words[r.dimension]} ({r.ips:.2f})" for r in above.itertuples()]
    quote = (
        f"SmolLM2 above its jitter floor ({smol['floor'].iloc[0]:.2f}) for "
        + ", ".join(listed[:-1])
        + f" and {listed[-1]}"
    )
    text = flat(RUNS / "README.md")
    assert quote in text, quote
    gemma = t[t["model"] == "gemma3-270m"]
    assert gemma["within_noise"].all()
    assert f"Gemma-3-270M: every dimension within its floor ({gemma['floor'].iloc[0]:.2f})" in text


def test_the_runs_readme_pss_confidence_sentence_is_the_shipped_runs():
    """data/runs/README.md's decoding-confidence sentence: psens.pss.confidence_relation per
    model, dataset and shot; the two intervals that exclude 0; and the count of the 20
    intervals (8 few-shot changes, 12 correlations) that exclude 0, with its binomial P."""
    import pandas as pd
    from scipy.stats import binom

    from psens.pss import confidence_relation, pss_by_shot

    text = flat(RUNS / "README.md")
    corr = {d: confidence_relation(run(n)) for d, n in PSS_RUNS.items()}
    n_corr = sum(len(t) for t in corr.values())

    def excludes_zero(t):  # the CI of the correlation leaves out 0
        return (t["lo"] > 0) | (t["hi"] < 0)

    n_excl = sum(int(excludes_zero(t).sum()) for t in corr.values())
    assert f"Of the {n_corr} Spearman correlations" in text
    assert f"{n_corr - n_excl} have a CI containing 0" in text

    def signed(x: float) -> str:
        return f"{x:+.2f}".replace("-", "−")

    arc = corr["ARC-Challenge"].set_index(["model", "shot"]).loc[("gemma3-270m", 0)]
    assert f"(ρ = {signed(arc.r)}, CI {signed(arc.lo)} … {signed(arc.hi)})" in text
    csqa = corr["CommonsenseQA"].set_index(["model", "shot"]).loc[("gemma3-270m", 1)]
    assert f"(ρ = {signed(csqa.r)}, {signed(csqa.lo)} … {signed(csqa.hi)})" in text
    assert n_excl == 2 and (arc.lo > 0 or arc.hi < 0) and (csqa.lo > 0 or csqa.hi < 0)
    changes = pd.concat([pss_by_shot(run(n)) for n in PSS_RUNS.values()]).query("shot > 0")
    excl = n_excl + int(((changes["diff_lo"] > 0) | (changes["diff_hi"] < 0)).sum())
    total = n_corr + len(changes)
    p = 1 - binom.cdf(excl - 1, total, 0.05)
    assert f"{excl} of the {total} intervals exclude 0" in text
    assert f"(binomial P = {p:.2f} of at least {excl}" in text


def test_the_runs_readme_pss_majority_answer_is_the_shipped_runs():
    """data/runs/README.md: both models answer "A" under 69–74 % of the (item, shot, prompt)
    cells of both PSS runs, while 1 of the 10 gold answers is "A" in each draw."""
    shares, gold = [], []
    for name in PSS_RUNS.values():
        ds = run(name)
        a = ds["prediction"].astype(str).str.strip() == "A"
        shares += [float(x) for x in a.mean(["sample", "shot", "template"]).values]
        gold.append(int((ds["target"].astype(str).str.strip() == "A").sum()))
        assert ds.sizes["sample"] == 10
    lo, hi = (round(100 * x) for x in (min(shares), max(shares)))
    text = flat(RUNS / "README.md")
    assert f'Both models answer "A" under {lo}–{hi} % of the (item, shot, prompt)' in text
    assert set(gold) == {1} and '1 of the 10 gold answers is "A" in each draw' in text


def test_the_runs_readme_subjective_pss_is_the_shipped_run():
    """data/runs/README.md's subjective PSS sentence is psens.pss.subjective.model_table's
    on ``pss-alpaca.nc`` (PSS with CI, instructions, unparsed, share of "yes", the
    between-instance PSS and its p)."""
    from psens.pss.subjective import model_table

    t = model_table(run("pss-alpaca")).set_index("model")
    a, b = t.loc["smollm2-135m-instruct"], t.loc["gemma3-270m"]
    n = int(a.ok + a.unparsed + a.failed)
    text = flat(RUNS / "README.md")
    assert (
        f"SmolLM2-135M-Instruct PSS {a.pss:.3f} ({a.lo:.3f}–{a.hi:.3f}) over the {a.instances:.0f} "
        f"instructions with two or more readable verdicts, {a.unparsed:.0f} of {n} verdicts "
        f'unparsed, "yes" for {100 * a.mean_score:.0f} % of the scored responses; '
        f"Gemma-3-270M {b.pss:.3f} ({b.lo:.3f}–{b.hi:.3f}) over {b.instances:.0f}, "
        f'{b.unparsed:.0f} unparsed, {100 * b.mean_score:.0f} % "yes"' in text
    )
    assert (
        f"is {a.between_instance_pss:.3f} (p = {a.p_value:.2f}) and "
        f"{b.between_instance_pss:.3f} (p = {b.p_value:.2f})" in text
    )


def test_the_runs_readme_dbsa_sentence_is_notebook_11s_reading(monkeypatch, capsys):
    """data/runs/README.md's DBSA sentence is what notebook 11's own reading cell prints on
    the shipped run: words at p < 0.05 per model with the chance count and P, the verdicts,
    the rank correlation and the band unrelated rankings reach."""
    from tests.support import run_notebook_cells

    monkeypatch.chdir(ROOT / "notebooks")  # the notebook finds data/ from its folder
    run_notebook_cells(
        "11_dbsa",
        {"PSENS_RUN": "", "PSENS_SIZE": ""},
        "from psens.dbsa import run as dbsa_run",
        "TREE = psens.open_run(RUN_FILE)",
        "results = dbsa_run.results(TREE)",
        "p_hits = float(binom.sf",
    )
    out = capsys.readouterr().out
    hits = dict(re.findall(r"clinical (\S+)\s+(\d+ of \d+ words at p < 0\.05 .*)", out))
    smol, gemma = hits["smollm2-135m-instruct"], hits["gemma3-270m"]
    assert smol.startswith("0 of 40 words") and "(chance: 2.0;" in smol
    assert smol.endswith("within chance: not a finding")
    assert gemma.startswith("5 of 40 words") and "P(>= 5 by chance) = 0.05)" in gemma
    assert gemma.endswith("borderline (words are not independent tests): not a finding")
    rho, band = re.search(
        r"= (-?\d\.\d+) over 40 words; unrelated rankings reach \|rho\| <= (\d\.\d+) -> inside", out
    ).groups()
    text = flat(RUNS / "README.md")
    assert (
        "DBSA (clinical note, 40 words): SmolLM2 has no word at p < 0.05 (2 expected by chance); "
        "Gemma-3-270M has 5 (P = 0.05 of at least 5 by chance, the words not being independent "
        "tests: borderline, not a finding)" in text
    )
    rho_text = f"{float(rho):.2f}".replace("-", "−")
    assert (
        f"(Spearman ρ = {rho_text}, inside the ±{band} that unrelated rankings of 40 words" in text
    )


def test_the_runs_readme_format_search_hit_rates_are_the_shipped_runs():
    """data/runs/README.md's budgeted-search figures on formats-acc.nc: the hits of
    ``paired_search`` and ``thompson_search`` over 10 seeds at 30 % of the calls, the range
    of the paired search's mean posterior probabilities, and the pool's correct counts at
    the extremes (the bench replays the same stored answers)."""
    from psens.formats.analysis import correctness
    from psens.formats.search import hit_rates, paired_search, thompson_search

    text = flat(RUNS / "README.md")
    pools = correctness(run("formats-acc"))
    h = {
        (m, name): hit_rates(x, fraction=0.3, seeds=10, search=search)
        for m, x in pools.items()
        for name, search in (("paired", paired_search), ("thompson", thompson_search))
    }
    smol, gemma = "smollm2-135m-instruct", "gemma3-270m"
    first = h[(smol, "paired")]
    assert f"30 % = {first['budget']} of the {first['all_calls']:,} calls per model" in text

    def pair(name: str, key: str) -> str:
        return f"{h[(smol, name)][key]}/10 and {h[(gemma, name)][key]}/10"

    paired = f"`paired_search` finds the best in {h[(smol, 'paired')]['best_hits']}/10 (SmolLM2)"
    assert f"{paired} and {h[(gemma, 'paired')]['best_hits']}/10 (Gemma)" in text
    assert f"the worst in {pair('paired', 'worst_hits')}" in text
    thompson = f"Thompson sampling {h[(smol, 'thompson')]['best_hits']}/10 and "
    assert f"{thompson}{h[(gemma, 'thompson')]['best_hits']}/10 (best)" in text
    assert f"{pair('thompson', 'worst_hits')} (worst)" in text
    posts = [h[(m, "paired")][k] for m in (smol, gemma) for k in ("p_best", "p_worst")]
    assert f"mean posterior probability of its answers {min(posts):.3f}–{max(posts):.2f}" in text
    for m, x in pools.items():  # the pool's extremes, in correct answers of the 150 items
        counts = sorted(x.sum(axis=0).astype(int).tolist(), reverse=True)
        name = "SmolLM2" if m == smol else "Gemma"
        assert f"{name} best {counts[0]} vs {counts[1]}" in text, (m, counts)
