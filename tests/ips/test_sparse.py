"""IPS from sparse interactions, query logs and resume (psens.ips.sparse)."""

import numpy as np
import pytest

from psens.datasets import Item
from psens.interactions import and_or, mobius_and
from psens.interactions.sparse import SparseAndOr, SparseInteractions
from psens.ips import interaction_classes, ips
from psens.ips import sparse as S
from tests.support import ips_ref


def games(n=5, templates=3, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.laplace(size=2**n)
    return base + 0.4 * rng.normal(size=(templates, 2**n))


@pytest.mark.parametrize("order", [None, "low", "mid", "high"])
@pytest.mark.parametrize("tau", [0.05, 0.1, 0.3])
def test_and_only_on_the_complete_support_equals_exact_ips(order, tau):
    v = games(seed=int(tau * 100))
    I = mobius_and(v)
    sparse = [SparseInteractions.from_dense(row) for row in I]
    want = ips(I, np.zeros_like(I), tau=tau, order=order)
    assert S.sparse_ips(sparse, tau, order) == pytest.approx(float(want), nan_ok=True)
    assert float(want) == pytest.approx(ips_ref(I, np.zeros_like(I), tau, order), nan_ok=True)


@pytest.mark.parametrize("order", [None, "low", "high"])
def test_and_or_on_the_complete_support_equals_exact_ips(order):
    v = games(n=4, seed=3)
    res = and_or(v, "canonical")
    sparse = [
        SparseAndOr(SparseInteractions.from_dense(a, "and"), SparseInteractions.from_dense(o, "or"))
        for a, o in zip(res.I_and, res.I_or, strict=True)
    ]
    want = ips_ref(res.I_and, res.I_or, 0.1, order)  # min over all 2(2^n - 1): complete
    assert S.sparse_ips(sparse, 0.1, order) == pytest.approx(want, nan_ok=True)
    got = S.sparse_classes(sparse, 0.1, order)
    ref = interaction_classes(res.I_and, res.I_or, 0.1, order=order)["counts"]
    assert np.array_equal(got, ref)


def test_unlisted_subsets_are_zero_and_min_is_zero():
    n = 4
    a = SparseInteractions(n, [0, 1, 3], [9.0, 2.0, 1.0])
    b = SparseInteractions(n, [0, 1, 4], [9.0, 2.0, -1.0])
    # normalised: a {0}:1 {0,1}:0.5; b {0}:1 {2}:-0.5 -> union {0},{0,1},{2}
    # terms: 0, |0.5-0|/0.25 = 2, |0+0.5|/0.25 = 2 -> mean 4/3
    assert S.sparse_ips([a, b], 0.1) == pytest.approx(4 / 3)
    dense = np.stack([a.to_dense(), b.to_dense()])
    assert S.sparse_ips([a, b], 0.1) == pytest.approx(float(ips(dense, np.zeros_like(dense))))
    assert S.sparse_classes([a, b]).tolist() == [[0, 2, 1]]


def test_bad_inputs_are_refused():
    a = SparseInteractions(4, [0, 1], [1.0, 2.0])
    with pytest.raises(ValueError, match="only 1 template game"):
        S.sparse_ips([a])
    with pytest.raises(ValueError, match="different n"):
        S.sparse_ips([a, SparseInteractions(5, [0, 1], [1.0, 2.0])])
    with pytest.raises(ValueError, match="order='middle' is unknown"):
        S.sparse_ips([a, a], order="middle")
    with pytest.raises(ValueError, match="tau"):
        S.sparse_ips([a, a], tau=1.5)


def test_recall_at_k():
    exact = SparseInteractions(6, [0, 1, 2, 4, 8], [5.0, 4.0, -3.0, 2.0, 0.1])
    approx = SparseInteractions(6, [0, 1, 2, 16], [5.0, 4.0, -3.0, 2.5])
    assert S.recall_at_k(exact, approx, 3) == pytest.approx(2 / 3)
    assert S.recall_at_k(exact, exact, 4) == 1.0


class FakeScorer:
    """v(T) of a planted sparse game over the item's words; counts the masks it scores."""

    name = "fake"

    def __init__(self, truth_by_template):
        self.truth = truth_by_template
        self.scored = 0

    def encode(self, item, template, shots=(), variables=None):
        if template not in self.truth:
            raise ValueError(f"unknown template {template!r}")

    def value(self, item, template, masks, *, shots=(), variables=None, progress=None):
        masks = np.asarray(masks)
        assert masks.dtype == bool and masks.shape[1] == len(variables)
        self.scored += len(masks)
        return self.truth[template](masks)


LONG = Item(
    "long",
    "Explain why the bright summer moon seems larger near the horizon than high overhead, "
    "and describe two simple experiments that test this famous optical illusion at home "
    "using a cardboard tube, a ruler, a camera and a notebook for careful measurements.",
)


def test_content_words_keeps_every_content_word():
    words = S.content_words(LONG)
    text = [str(w) for w in words]
    assert "moon" in text and "illusion" in text and "the" not in text and "and" not in text
    assert len(words) > 16  # beyond the exact decomposition's cap
    with pytest.raises(ValueError, match="more than 5 content words"):
        S.content_words(LONG, max_words=5)


def test_sparse_sample_logs_resumes_and_ips(tmp_path):
    words = S.content_words(LONG)
    n = len(words)
    keys = np.array([0, 1, 2 | 4, 1 << (n - 1)], np.uint64)
    truth = {
        "ips1": SparseInteractions(n, keys, [1.0, 2.0, -1.5, 1.0]),
        "ips2": SparseInteractions(n, keys, [1.0, 2.0, 1.5, 1.2]),
    }
    scorer = FakeScorer(truth)
    store = tmp_path / "logs"
    kw = dict(budget=120, words=words, store=store, degree=2, batch=50)
    first = S.sparse_sample(scorer, LONG, ["ips1", "ips2"], **kw)
    assert scorer.scored == 240 and first.attrs["approximate"] and first.attrs["scored"] == 240
    for t in ("ips1", "ips2"):
        got = first.games[t]
        assert np.allclose(got(first.recoveries[t].masks), truth[t](first.recoveries[t].masks))
    exact = S.sparse_ips([truth["ips1"], truth["ips2"]])
    assert first.ips() == pytest.approx(exact, abs=1e-8)
    log = S.open_log(store / "long__ips1.nc")
    assert log.attrs["approximate"] == 1 and log.attrs["method"] == "lasso"
    assert log.attrs["budget"] == 120 and log.sizes["query"] == 120 and log.sizes["var"] == n
    assert log["mask"].dtype == bool and [str(w) for w in log["word"].values] == list(words)
    again = S.sparse_sample(scorer, LONG, ["ips1", "ips2"], **kw)  # resume: no new scoring
    assert scorer.scored == 240 and again.attrs["scored"] == 0
    assert again.ips() == pytest.approx(first.ips())
    table = first.top("ips1", 3)
    assert table.iloc[0]["value"] == pytest.approx(2.0) and table.iloc[0]["size"] == 1
    assert (table["size"] > 0).all() and len(table) <= 3  # the bias I(∅) is no interaction


def test_sparse_sample_refuses_before_scoring(tmp_path):
    scorer = FakeScorer({"ips1": SparseInteractions(20, [0], [0.0])})
    words = S.content_words(LONG)[:6]
    with pytest.raises(ValueError, match="more than the 2\\*\\*6 = 64 masks"):
        S.sparse_sample(scorer, LONG, ["ips1"], budget=100, words=words)
    with pytest.raises(ValueError, match="unknown template"):
        S.sparse_sample(scorer, LONG, ["ips1", "nope"], budget=20, words=words)
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        S.sparse_sample(scorer, LONG, ["ips1"], budget=20, words=words, store=tmp_path / "f")
    assert scorer.scored == 0


def test_a_log_of_another_item_is_refused(tmp_path):
    words = S.content_words(LONG)[:8]
    truth = {"ips1": SparseInteractions(8, [0, 1], [0.0, 1.0])}
    S.sparse_sample(FakeScorer(truth), LONG, ["ips1"], budget=20, words=words, store=tmp_path)
    with pytest.raises(ValueError, match="belongs to another item, template, model or words"):
        S.sparse_sample(
            FakeScorer(truth), LONG, ["ips1"], budget=20, words=words[::-1], store=tmp_path
        )


# ------------------------------------------------------------------- what a query log is keyed by

SHOT = Item("shot", "Which gas do plants take in?", [("A", "oxygen"), ("B", "carbon dioxide")], "B")
MCQ = Item(
    "mcq",
    "Which planet is known as the red planet in our solar system?",
    [("A", "Venus"), ("B", "Mars"), ("C", "Jupiter")],
    "B",
)


def _logged(scorer, item, tmp_path, shots=()):
    words = S.content_words(item)[:6]
    S.sparse_sample(scorer, item, ["ips1"], budget=16, words=words, store=tmp_path, shots=shots)
    return words


@pytest.mark.parametrize(
    "change",
    ["shots", "options", "answer"],
)
def test_a_log_is_not_reused_when_what_the_values_depend_on_changed(tmp_path, change):
    """Same item id, template, scorer name, n and words, but other shots, options or
    answer: the old values would be returned with 0 prompts scored; refused instead."""
    truth = {"ips1": SparseInteractions(6, [0, 1], [0.0, 1.0])}
    words = _logged(FakeScorer(truth), MCQ, tmp_path)
    kw = dict(budget=16, words=words, store=tmp_path)
    if change == "shots":
        kw["shots"] = [SHOT]
        item = MCQ
    elif change == "options":
        item = Item(MCQ.id, MCQ.question, [*MCQ.options[:2], ("C", "Saturn")], MCQ.answer)
    else:
        item = Item(MCQ.id, MCQ.question, MCQ.options, "C")
    scorer = FakeScorer(truth)
    with pytest.raises(ValueError, match="written for other inputs: the prompt"):
        S.sparse_sample(scorer, item, ["ips1"], **kw)
    assert scorer.scored == 0
    again = FakeScorer(truth)  # the unchanged call still reuses its log
    S.sparse_sample(again, MCQ, ["ips1"], budget=16, words=words, store=tmp_path)
    assert again.scored == 0


@pytest.mark.filterwarnings("ignore:.*cross-validated R")  # 16 queries of a random model
def test_a_log_is_not_reused_for_another_model_of_the_same_name(tmp_path):
    pytest.importorskip("torch")
    import psens
    from tests.support import write_tiny_model

    a = write_tiny_model(tmp_path / "one" / "tiny", seed=0)
    b = write_tiny_model(tmp_path / "two" / "tiny", seed=1)  # same basename, other weights
    first = psens.models.load(str(a), progress=False)
    second = psens.models.load(str(b), progress=False)
    assert first.name == second.name
    words = _logged(first, MCQ, tmp_path / "logs")
    with pytest.raises(ValueError, match="written for other inputs: the model"):
        S.sparse_sample(second, MCQ, ["ips1"], budget=16, words=words, store=tmp_path / "logs")
    S.sparse_sample(first, MCQ, ["ips1"], budget=16, words=words, store=tmp_path / "logs")
    half = psens.models.load(str(a), progress=False, dtype="bfloat16")  # same files, other dtype
    with pytest.raises(ValueError, match="the scoring"):
        S.sparse_sample(half, MCQ, ["ips1"], budget=16, words=words, store=tmp_path / "logs")
    masked = psens.models.load(str(a), progress=False, mask_token="<|endoftext|>")
    if masked.mask.id != first.mask.id:
        with pytest.raises(ValueError, match="the scoring"):
            S.sparse_sample(masked, MCQ, ["ips1"], budget=16, words=words, store=tmp_path / "logs")


@pytest.mark.parametrize("order", [None, "low", "high"])
@pytest.mark.parametrize("tau", [0.05, 0.3])
def test_the_paper_normalisation_on_the_complete_support_equals_exact_ips(order, tau):
    # normalization = "all": min-max over all 2^(n+1) effects, the empty set included (and
    # salient like the rest when no order band is asked for), as the dense metric does
    v = games(n=4, seed=5)
    res = and_or(v, "canonical")
    # a large bias: it sets the max, so "all" differs from "nonempty"
    res.I_and[:, 0] = 1.5 * np.abs(np.concatenate([res.I_and[:, 1:], res.I_or[:, 1:]], 1)).max()
    sparse = [
        SparseAndOr(SparseInteractions.from_dense(a, "and"), SparseInteractions.from_dense(o, "or"))
        for a, o in zip(res.I_and, res.I_or, strict=True)
    ]
    want = ips_ref(res.I_and, res.I_or, tau, order, empty=True)
    got = S.sparse_ips(sparse, tau, order, normalization="all")
    assert got == pytest.approx(want, nan_ok=True)
    dense = ips(res.I_and, res.I_or, tau, order, normalization="all")
    assert got == pytest.approx(
        float(np.nanmean(dense)) if np.isfinite(dense).any() else np.nan, nan_ok=True
    )
    default = S.sparse_ips(sparse, tau, order)
    assert default == pytest.approx(ips_ref(res.I_and, res.I_or, tau, order), nan_ok=True)
    if order is None:
        assert got != pytest.approx(default)
    with pytest.raises(ValueError, match="normalization='literal' is unknown"):
        S.sparse_ips(sparse, tau, normalization="literal")
