"""Heuristic scorers: robust defaults, published EAS compat mode."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from psens.eas.scoring import (
    eas_normalize,
    extract_option_label,
    extract_yes_no,
    heuristic_score,
    heuristic_scores,
    option_labels,
    score_boolean,
    score_mcq,
    squad_f1,
    squad_normalize,
    token_f1,
)

ABCD = [("A", "exothermic"), ("B", "endothermic"), ("C", "suspension"), ("D", "vaporization")]
PUBLISHED = ["A) exothermic.", "B) endothermic.", "C) suspension.", "D) vaporization."]
NUM = [
    ("1", "the arrival of an air mass"),
    ("2", "an earthquake"),
    ("3", "a tide"),
    ("4", "eclipse"),
]


# ------------------------------------------------------------------------------ option labels


def test_option_labels_accepts_pairs_published_strings_and_json():
    assert option_labels(ABCD) == ["A", "B", "C", "D"]
    assert option_labels(PUBLISHED) == ["A", "B", "C", "D"]
    assert option_labels('["1) x", "2) y", "3) z"]') == ["1", "2", "3"]
    assert option_labels({"A": "x", "B": "y"}) == ["A", "B"]


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("B", "B"),
        ("B) endothermic.", "B"),
        ("(B)", "B"),
        ("The answer is (C)", "C"),
        ("The answer is C.", "C"),
        ("Answer: D", "D"),
        ("I think the correct option is B because it absorbs heat.", "B"),
        ("A chemical reaction that absorbs heat is endothermic, so the answer is B", "B"),
        ("A reaction producing cold is called endothermic (B).", "B"),
        ("A", "A"),
        ("A is correct.", "A"),
        ("A) exothermic", "A"),
        ("It is endothermic.", "B"),  # option text, only one option named
        ("Either A or B", None),  # ambiguous
        ("A reaction that gets cold.", None),  # only the article
        ("", None),
        ("answer: b", None),  # lower-case letters are never labels
    ],
)
def test_extract_option_label_letters(response, expected):
    assert extract_option_label(response, ABCD) == expected


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("1", "1"),
        ("2) an earthquake", "2"),
        ("The answer is 3.", "3"),
        ("This is evidence they were once 2) joined.", "2"),
        ("It happened in 1990", None),  # a year is not label 1
    ],
)
def test_extract_option_label_numeric(response, expected):
    assert extract_option_label(response, NUM) == expected


def test_extract_option_label_three_and_five_options():
    three = ABCD[:3]
    assert extract_option_label("D", three) is None  # D is not an option here
    assert extract_option_label("The answer is C", three) == "C"
    five = [*ABCD, ("E", "bed")]
    assert extract_option_label("E) bed", five) == "E"
    assert extract_option_label("The answer is E", ABCD) is None


def test_score_mcq_default_vs_eas_compat_on_the_article_bug():
    response = "A reaction that absorbs heat is endothermic: B"
    assert score_mcq(response, "B", ABCD) == 1.0
    # published extractor: the upper-cased article "A" is a valid option letter -> answer A
    assert score_mcq(response, "B", PUBLISHED, compat="eas") == 0.0
    assert score_mcq(response, "A", PUBLISHED, compat="eas") == 1.0


def test_score_mcq_compat_fallbacks():
    # no valid letter: the first single capital letter, else the first character
    assert score_mcq("I pick 3", "I", ["1) x", "2) y"], compat="eas") == 1.0
    assert score_mcq("3rd one", "3", ["1) x", "2) y"], compat="eas") == 1.0
    assert score_mcq("", "A", PUBLISHED, compat="eas") == 0.0
    assert score_mcq(None, "A", PUBLISHED, compat="eas") == 0.0


def test_failed_call_is_nan_not_wrong_by_default():
    assert math.isnan(score_mcq(None, "A", ABCD))
    assert math.isnan(score_mcq(float("nan"), "A", ABCD))
    assert math.isnan(score_boolean(None, "yes"))
    assert math.isnan(squad_f1(None, ["x"]))
    # an empty answer from a successful call is a wrong answer
    assert score_mcq("", "A", ABCD) == 0.0


# ------------------------------------------------------------------------------------ yes/no


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("Yes.", "yes"),
        ("No, it is not.", "no"),
        ("I do not know", None),  # "not", "know" are not "no"
        ("Nobody knows; yes it is", "yes"),
        ("True", "yes"),
        ("false", "no"),
        ("The passage says yes but later no", "yes"),
    ],
)
def test_extract_yes_no_is_word_level(response, expected):
    assert extract_yes_no(response) == expected


def test_score_boolean_default_and_compat_substring_bug():
    assert score_boolean("I do not know.", "no") == 0.0
    # published: no word yes/no -> substring "no" found inside "not"/"know"
    assert score_boolean("I do not know.", "no", compat="eas") == 1.0
    assert score_boolean("Yes", True) == 1.0
    assert score_boolean("no", False) == 1.0
    assert score_boolean("Maybe", "no", compat="eas") == 0.0  # first word "maybe"


# ---------------------------------------------------------------------------------------- F1


def test_squad_normalize_official():
    assert squad_normalize("The  Annual, Conference!") == "annual conference"
    assert squad_normalize("an apple a day") == "apple day"
    assert eas_normalize("The  Annual, Conference!") == "the annual conference"


def test_token_f1_known_values():
    assert token_f1("their Annual Conference", "Annual Conference") == pytest.approx(0.8)
    assert token_f1("the cat", "a cat") == 1.0  # articles dropped
    assert token_f1("", "") == 1.0
    assert token_f1("", "x") == 0.0
    assert token_f1("paris", "london") == 0.0


def test_token_f1_multiset_vs_published_set_based():
    # pred has "new" twice; reference once. multiset overlap = 2 tokens ("new", "york")
    pred, ref = "new new york", "new york"
    p, r = 2 / 3, 2 / 2
    assert token_f1(pred, ref) == pytest.approx(2 * p * r / (p + r))
    # set-based overlap also 2 here; differ when the reference repeats a token
    pred, ref = "new york", "new new york"
    assert token_f1(pred, ref) == pytest.approx(2 * 1 * (2 / 3) / (1 + 2 / 3))
    # published: articles kept, set overlap {"the", "cat"} over len(pred)=3, len(ref)=2
    assert squad_f1("the the cat", ["the cat"], compat="eas") == pytest.approx(
        2 * (2 / 3) * 1 / (2 / 3 + 1)
    )
    assert squad_f1("the the cat", ["the cat"]) == 1.0


def test_squad_f1_max_over_references():
    assert squad_f1("Denver Broncos", ["Broncos", "Denver Broncos"]) == 1.0
    assert squad_f1("Broncos", '["Denver Broncos", "the Broncos"]') == 1.0
    with pytest.raises(ValueError, match="no reference answers"):
        squad_f1("x", [])


# -------------------------------------------------------------------------------------- rows


def test_heuristic_scores_dispatch_and_unknown_task():
    rows = pd.DataFrame(
        [
            {"task_type": "mcq", "gold_answer": "B", "options": PUBLISHED, "raw_response": "B"},
            {"task_type": "boolean", "gold_answer": "no", "raw_response": "No."},
            {
                "task_type": "open_ended",
                "gold_answer": "x",
                "all_gold_answers": ["Annual Conference", "x"],
                "raw_response": "their Annual Conference",
            },
            {"task_type": "open_ended", "gold_answer": "Paris", "raw_response": None},
        ]
    )
    s = heuristic_scores(rows)
    assert s.iloc[:3].tolist() == [1.0, 1.0, pytest.approx(0.8)]
    assert math.isnan(s.iloc[3])
    assert heuristic_scores(rows, compat="eas").iloc[3] == 0.0
    with pytest.raises(ValueError, match="task_type='essay' has no heuristic"):
        heuristic_score({"task_type": "essay", "gold_answer": "x", "raw_response": "y"})
    with pytest.raises(ValueError, match="compat='prosa' is not known"):
        heuristic_scores(rows, compat="prosa")
