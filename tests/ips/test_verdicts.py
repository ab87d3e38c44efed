"""One verdict per claim: findings, the few-shot confound, the sentence form."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import psens
from psens.ips.headline import headline, headline_lines
from psens.ips.verdicts import (
    FOLLOWS_EXAMPLES,
    answer_confound,
    claim_text,
    example_answers,
    findings,
    findings_models,
)
from tests.support import ROOT

ARC = ROOT / "data" / "runs" / "arc.nc"


@pytest.fixture(scope="module")
def arc():
    return psens.open_run(ARC).load()


def _run(pred: dict[int, list[str]], examples: dict[int, str]) -> xr.Dataset:
    """A one-model run: predictions per shot over items, prompts with the examples' letters."""
    shots = sorted(pred)
    n = len(pred[shots[0]])
    prompt = [
        ["".join(f"Q\nAnswer: {a}\n\n" for a in examples.get(k, "")) + "Q\nAnswer:"] * n
        for k in shots
    ]
    return xr.Dataset(
        {
            "prediction": (
                ("model", "shot", "sample"),
                np.array([[pred[k] for k in shots]], object),
            ),
            "prompt": (("shot", "sample"), np.array(prompt, object)),
        },
        coords={"model": ["m"], "shot": shots, "sample": [f"s{i}" for i in range(n)]},
    )


def test_example_answers_reads_each_examples_letter_not_the_cue():
    p = "Q1\nAnswer: C\n\nQ2\nANSWER:: (A)\n\nQ3\nAnswers:\nA.x\nB.y\nAnswer:"
    assert example_answers(p) == ["C", "A"]
    assert example_answers("Question: q\nAnswer:") == []


@pytest.mark.parametrize(
    ("zero", "k", "examples", "follows"),
    [
        (list("AAAAAAAAAB"), list("CCCCCCCCCA"), "C", True),  # the letter moved to the example
        (list("CCCCCCCCCA"), list("CCCCCCCCCC"), "C", False),  # C before and after: rise 0.1
        (list("ABCDABCDAB"), list("CCCCCCCCAB"), "C", True),  # C rose from 0.2 to 0.8
        (list("ABCDABCDAB"), list("DDDDDDDDAB"), "C", False),  # D is no example answer
        (list("ABCDABCDAB"), list("ABCDABCDAB"), "C", False),  # majority A, not an example
    ],
)
def test_answer_confound_flags_a_letter_that_follows_the_examples(zero, k, examples, follows):
    conf = answer_confound(_run({0: zero, 1: k}, {1: examples})).set_index("shot")
    assert bool(conf.loc[1, "follows_examples"]) is follows
    assert not conf.loc[0, "follows_examples"] and conf.loc[0, "examples"] == ""
    share = sum(a in examples for a in k) / len(k)  # literal: the examples' letters' share
    assert conf.loc[1, "examples_share"] == pytest.approx(share)
    assert conf.loc[1, "rise"] == pytest.approx(share - sum(a in examples for a in zero) / 10)


def test_on_the_shipped_run_smollm2_copies_the_examples_letter(arc):
    conf = answer_confound(arc).set_index(["model", "shot"])
    s = conf.loc["smollm2-135m-instruct"]
    assert s.loc[0, "majority_answer"] == "A" and not s.loc[0, "follows_examples"]
    assert s.loc[1, ["majority_answer", "examples"]].tolist() == ["C", "C"]
    assert s.loc[1, "majority_share"] == pytest.approx(39 / 40)
    assert s.loc[3, "examples"] == "CA" and bool(s.loc[3, "follows_examples"])
    assert not conf.loc["gemma3-270m", "follows_examples"].any()
    one = headline(arc, shot=1, n_boot=100)
    cav = one[one.order == "all"].set_index("model")["caveats"]
    assert f"{FOLLOWS_EXAMPLES} (C)" in cav["smollm2-135m-instruct"]
    assert FOLLOWS_EXAMPLES not in cav["gemma3-270m"]


def test_no_model_of_the_shipped_run_is_a_finding(arc):
    head = headline(arc, n_boot=100)
    why = findings(head)
    assert why["smollm2-135m-instruct"] == "majority answer A on 95 %; accuracy at or below chance"
    assert why["gemma3-270m"].startswith("not above the noise floor")
    # SmolLM2's margin over its floor is clear, yet it is no finding: the verdict says why
    s = head[(head.model == "smollm2-135m-instruct") & (head.order == "all")].iloc[0]
    assert s["diff_lo"] > 0
    lines = "\n".join(headline_lines(head))
    assert "verdict: not a finding — majority answer A on 95 %" in lines
    assert "above its noise floor, but then IPS measures its answer preference" in lines
    # Gemma's CI excludes 0 too, below it: the verdict says what that means
    assert "the CI of IPS − floor lies below 0: templates move it less than rounding" in lines
    every = findings_models(arc, [0, 1, 3], n_boot=100)
    assert "1-shot: majority answer C on 98 %" in every["smollm2-135m-instruct"]
    assert "answer follows the few-shot examples (CA)" in every["smollm2-135m-instruct"]


def test_headlines_are_each_shots_headline(arc):
    from psens.ips.headline import headlines

    heads = headlines(arc, n_boot=100)
    assert list(heads) == [0, 1, 3]
    for k, h in heads.items():
        pd.testing.assert_frame_equal(h, headline(arc, shot=k, n_boot=100))
    with pytest.raises(ValueError, match="shot = 2 is not in the run"):
        headlines(arc, shots=[0, 2])


def test_a_model_without_caveats_is_a_finding():
    head = pd.DataFrame(
        {"model": ["a", "a", "b"], "order": ["all", "low", "all"], "caveats": ["", "", "x"]}
    )
    assert findings(head) == {"a": "", "b": "x"}


def test_claim_text_has_three_outcomes():
    assert claim_text("r", True).endswith("the paper's claim holds here.")
    assert claim_text("r", False).endswith("the paper's claim does not hold here.")
    assert claim_text("r", None, synthetic=True) == (
        "This synthetic run: r — this run cannot test the claim."
    )


#: The notebooks that give verdicts on the paper's claims from an IPS run.
VERDICT_NOTEBOOKS = (
    "00_start_here",
    "02_case_studies",
    "04_orders",
    "05_factors",
    "07_perturbation_kinds",
    "12_solvers_and_noise",
)


@pytest.mark.parametrize("name", VERDICT_NOTEBOOKS)
def test_every_verdict_notebook_takes_its_models_from_the_one_rule(name):
    """Each notebook takes the models its verdicts use from findings_run / findings_models
    (one rule: a finding at every shot setting the verdict uses), says which shot settings
    those are, and has no rule of its own (a bare per-headline ``findings(``, its own floor
    test on ``above_floor``)."""
    import re

    from tests.support import notebook_cells

    code = "\n".join(notebook_cells(name))
    assert re.search(r"\b(findings_run|findings_models)\(", code), name
    assert "shots_text(" in code, f"{name} does not say which shot settings its verdicts use"
    assert not re.search(r"(?<![\w.])findings\(", code), name
    assert not re.search(r"\babove_floor\(", code), name


def test_findings_models_takes_headlines_already_computed():
    """``heads`` (one headline or headlines by shot) gives what computing them gives."""
    from psens.ips.headline import headlines

    ds = psens.open_run(ROOT / "data" / "runs" / "arc.nc").load()
    heads = headlines(ds)
    assert findings_models(ds, heads=heads[0]) == findings_models(ds)
    assert findings_models(ds, [0, 1, 3], heads=heads) == findings_models(ds, [0, 1, 3])
    assert findings_models(ds, heads=heads) == findings_models(ds, [0, 1, 3], heads=heads)
    with pytest.raises(ValueError, match="findings_models: no headline at shot 3"):
        findings_models(ds, [3], heads=heads[0])
