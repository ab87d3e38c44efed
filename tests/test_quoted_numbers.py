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
