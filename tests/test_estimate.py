"""Time estimates: rough before the run, timed on this machine after its first block."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import psens.pipeline
import psens.runner as runner
from psens.config import RunConfig
from tests.test_runner import _config as _runner_config
from tests.test_runner import assets  # noqa: F401  (the tiny model and dataset)

#: seconds per masked prompt of the fake slow scorer (large enough that the sleep, not the
#: store writes, dominates a block's time on a loaded machine)
SLOW = 0.015


def _config(assets, store_path, **extra):  # noqa: F811
    """The runner tests' tiny run, on three items of 6-7 words: blocks of 2**6 and 2**7."""
    base = {"samples": ["q3", "q4", "q5"], "templates": ["ips1", "ips2"], "n_vars": 7}
    return _runner_config(assets, store_path, **{**base, **extra})


def test_block_weights_and_recalibration_by_hand(assets, tmp_path):  # noqa: F811
    plan = runner.Plan(RunConfig.from_dict(_config(assets, tmp_path / "r.zarr")))
    assert [runner.block_prompts(plan, s) for s in range(3)] == [2 * 64, 2 * 128, 2 * 128]
    assert sum(runner.block_prompts(plan, s) for s in range(3)) == plan.forward_passes()
    spec = plan.cfg.model_specs[0]
    w = [runner.block_work(plan, s, spec) for s in range(3)]
    # first block in 4 s: the other two take 4 s x their share of the work
    est = runner.recalibrate(plan, [(0, 1), (0, 2)], {0: (0, 4.0)})
    assert est["rate"] == 32.0 and est["seconds_left"] == pytest.approx(4.0 * (w[1] + w[2]) / w[0])
    # a second model of the same size, not timed yet: the first one's rate, and its load
    plan.cfg.models.append(plan.cfg.models[0])
    est = runner.recalibrate(plan, [(0, 1), (1, 0)], {0: (0, 4.0)}, load_seconds=3.0)
    assert est["seconds_left"] == pytest.approx(4.0 * (w[1] + w[0]) / w[0] + 3.0)
    # once timed (twice as slow), its own rate
    est = runner.recalibrate(plan, [(1, 1), (1, 2)], {0: (0, 4.0), 1: (0, 8.0)})
    assert est["seconds_left"] == pytest.approx(8.0 * (w[1] + w[2]) / w[0])


def test_prompt_work_literal(assets, tmp_path):  # noqa: F811
    """The prefix tree's tokens: the part before the first variable once, the part between
    variables j and j + 1 once per distinct prefix (2**j), a prediction the whole prompt."""
    from psens import prompts
    from psens.models.hardware import CHARS_PER_TOKEN

    plan = runner.Plan(RunConfig.from_dict(_config(assets, tmp_path / "r.zarr", shots=[0, 1])))
    tree, full = runner.prompt_work(plan)
    assert tree.shape == full.shape == (3, 2, 2)
    for s in range(3):
        for h, k in enumerate(plan.shot_keys):
            r = prompts.render_spans(plan.items[s], "ips2", shots=plan.shots[k])
            starts = sorted(a for a, _ in prompts.prompt_spans(r, plan.variables[s]))
            cuts = [*starts, len(r.text)]
            literal = cuts[0]
            for j in range(1, len(cuts)):
                literal += 2**j * (cuts[j] - cuts[j - 1])
            assert tree[s, h, 1] * CHARS_PER_TOKEN == pytest.approx(literal)
            assert full[s, h, 1] * CHARS_PER_TOKEN == len(r.text) == len(plan.prompts[s, h, 1])
            # sharing: fewer tokens than 2**n whole prompts, more than one
            assert len(r.text) < literal < 2 ** len(starts) * len(r.text)
    # a shot's example is a shared prefix: it adds its tokens once, not 2**n times
    np.testing.assert_allclose(tree[:, 1] - tree[:, 0], full[:, 1] - full[:, 0])


def test_estimate_follows_the_measured_time(assets, tmp_path, monkeypatch, capsys):  # noqa: F811
    """A fake slow scorer (SLOW s per masked prompt): the estimate printed after the first
    block matches the time the other blocks then take, not the reference rate."""
    cfg = _config(assets, tmp_path / "run.zarr")
    plan = runner.Plan(RunConfig.from_dict(cfg))
    scorer = runner.run_scorer(plan.cfg, plan.cfg.model_specs[0])
    blocks = {s: runner.compute_block(scorer, plan, s) for s in range(3)}  # computed up front
    took: dict[int, float] = {}

    spec = plan.cfg.model_specs[0]
    per_token = SLOW * runner.block_prompts(plan, 0) / runner.block_work(plan, 0, spec)

    def slow(scorer, plan, sample):  # as slow as its work
        time.sleep(per_token * runner.block_work(plan, sample, spec))
        return dict(blocks[sample])

    real_block = runner._run_block

    def timed(scorer, plan, m, s, *rest):  # a block as the runner times it
        t0 = time.perf_counter()
        ok = real_block(scorer, plan, m, s, *rest)
        took[s] = time.perf_counter() - t0
        return ok

    said: list[dict] = []
    real = runner.recalibrate

    def spy(*args, **kwargs):
        said.append(real(*args, **kwargs))
        return said[-1]

    bars = []
    import tqdm.auto

    class Bar(tqdm.auto.tqdm):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            bars.append(self)

    monkeypatch.setattr(runner, "compute_block", slow)
    monkeypatch.setattr(runner, "_run_block", timed)
    monkeypatch.setattr(runner, "recalibrate", spy)
    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    t_start = time.perf_counter()
    psens.pipeline.run(cfg, progress=True)
    err = capsys.readouterr().err
    assert "roughly" in err and "timed on this machine after the first block" in err
    assert "first block took" in err and "left" in err
    assert len(said) == 1
    left = said[0]["seconds_left"]
    actual = took[1] + took[2]  # the blocks after the first, as they ran
    # weighted by work: the two larger blocks left take ~4x the first one's time
    assert left == pytest.approx(actual, rel=0.35)
    work = [runner.block_work(plan, s, spec) for s in range(3)]
    assert left == pytest.approx(took[0] * (work[1] + work[2]) / work[0], rel=0.05)
    assert said[0]["rate"] == pytest.approx(128 / took[0], rel=0.05)
    rough = runner.estimate(plan)["seconds"]  # the reference-rate estimate it replaces
    assert abs(left - actual) < abs(rough - actual) / 2
    (bar,) = bars  # one bar counting masked prompts, complete
    assert bar.total == bar.n == plan.forward_passes() == 640
    assert bar.unit == "prompt"
    assert time.perf_counter() - t_start < 60
