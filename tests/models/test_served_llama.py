"""Served SmolLM2 behind a real llama-cpp-python server (``make test-integration``).

v from the server must equal llama-cpp-python run in this process on the same token ids
(|Δv| <= 1e-4), through llama-cpp-python's server (prompts as text) and through llama.cpp's
own ``llama-server`` (token ids, ``/completion``); two servers must give what one gives.
The IPS between the server's v (the 4-bit GGUF in llama.cpp) and the local transformers
scorer's v (the same weights dequantised to float32) is printed: a precision noise floor,
not a bug.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import psens
from psens.models.scorer import _log_odds
from psens.models.served import ServedScorer
from tests.test_llama_server import _gguf, llama_server, llama_server_process  # noqa: F401

pytestmark = pytest.mark.integration

N = 6
TEMPLATES = ("ips1", "ips4")


def _entry(*urls: str) -> dict:
    return {
        "name": "smollm2-served",
        "base_url": urls[0],
        "model": "smollm2",
        "tokenizer": "smollm2-135m-instruct",
        "endpoints": list(urls),
        "timeout": 300,
    }


@pytest.fixture(scope="module")
def items():
    return psens.datasets.load("arc-challenge", split="validation")[:2]


def _in_process_v(llm, rows: np.ndarray, target: int) -> np.ndarray:
    out = np.empty(len(rows))
    for i, row in enumerate(rows):
        llm.reset()
        llm.eval([int(x) for x in row])
        z = np.asarray(llm.scores[len(row) - 1], dtype=np.float64)
        lp = z - z.max() - np.log(np.exp(z - z.max()).sum())
        out[i] = _log_odds(np.asarray([lp[target]]))[0]
    return out


def test_server_v_equals_llama_cpp_in_process(llama_server, items):  # noqa: F811
    from llama_cpp import Llama

    scorer = ServedScorer(_entry(llama_server), n_max=N)
    assert scorer.mode == "next" and not scorer.probe()[0].ids  # text prompts
    llm = Llama(str(_gguf()), logits_all=True, n_ctx=2048, verbose=False)
    local = psens.models.load("smollm2-135m-instruct", n_max=N, progress=False)
    served_v, local_v, worst = [], [], 0.0
    for item in items:
        words = psens.prompts.variables(item, n_max=N, seed=0)
        masks = np.arange(1 << len(words))
        for t in TEMPLATES:
            v = scorer.value(item, t, masks, variables=words)
            enc = scorer.encode(item, t, variables=words)
            ref = _in_process_v(llm, scorer.masked_ids(enc, masks), enc.target_id)
            worst = max(worst, float(np.max(np.abs(v - ref))))
            served_v.append(v)
            local_v.append(local.value(item, t, masks, variables=words))
    print(f"\nmax |v(server) - v(llama-cpp-python in process)| = {worst:.2e}")
    assert worst <= 1e-4
    a = np.stack(served_v).reshape(len(items), len(TEMPLATES), -1)
    b = np.stack(local_v).reshape(a.shape)
    floor = psens.ips.floor.floor_between(a, b)  # [sample, template]
    print(
        f"|v(server) - v(transformers float32)|: mean {np.mean(np.abs(a - b)):.3f}, "
        f"max {np.max(np.abs(a - b)):.3f}; IPS(server, transformers) per sample and template "
        f"{np.round(floor, 3).tolist()} (mean {np.nanmean(floor):.3f}): the 4-bit noise floor"
    )
    assert np.isfinite(floor).any()
    pred = scorer.predict(items[0], "ips1")
    want = local.predict(items[0], "ips1")
    print(f"predict: server {pred.choice} {pred.option_probs}, local {want.choice}")
    assert set(pred.option_probs) == set(want.option_probs)
    assert abs(sum(pred.option_probs.values()) - 1) < 1e-9


@pytest.fixture(scope="module")
def native_server(tmp_path_factory):
    log = tmp_path_factory.mktemp("llama-native") / "server.log"
    # flash attention off: llama-server's default ("auto") turns it on, and its kernel
    # moves v by up to 0.7 here; off, the server computes what llama-cpp-python computes
    with llama_server_process(log, "-np", "1", "-fa", "off", native=True) as base:
        yield base


def _in_process_v_float32_sum(llm, rows: np.ndarray, target: int) -> np.ndarray:
    """v as llama-server reports it, from this process: the softmax normalised by a float32
    running sum in token-id order, as the server's probabilities are (tail probabilities
    below half a float32 ulp of the sum are lost: log p is ~2e-4 too high here)."""
    out = np.empty(len(rows))
    for i, row in enumerate(rows):
        llm.reset()
        llm.eval([int(x) for x in row])
        z = np.asarray(llm.scores[len(row) - 1], dtype=np.float32)
        e = np.exp(z - z.max())
        p = np.float32(e[target] / np.cumsum(e, dtype=np.float32)[-1])
        out[i] = _log_odds(np.asarray([np.log(np.float64(p))]))[0]
    return out


def test_llama_server_takes_token_ids_and_equals_llama_cpp_in_process(native_server, items):
    from llama_cpp import Llama

    scorer = ServedScorer(_entry(native_server), n_max=N)
    assert scorer.mode == "native" and scorer.probe()[0].ids  # token ids, no text round trip
    llm = Llama(str(_gguf()), logits_all=True, n_ctx=2048, verbose=False)
    worst = worst32 = 0.0
    for item in items:
        words = psens.prompts.variables(item, n_max=N, seed=0)
        masks = np.arange(1 << len(words))
        for t in TEMPLATES:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # token ids: no "sent as text" warning
                v = scorer.value(item, t, masks, variables=words)
            enc = scorer.encode(item, t, variables=words)
            rows = scorer.masked_ids(enc, masks)
            worst = max(worst, float(np.max(np.abs(v - _in_process_v(llm, rows, enc.target_id)))))
            ref32 = _in_process_v_float32_sum(llm, rows, enc.target_id)
            worst32 = max(worst32, float(np.max(np.abs(v - ref32))))
    cache = scorer.prompt_cache
    print(
        f"\nllama-server: max |v(server) - v(llama-cpp-python in process)| = {worst:.2e} "
        f"({worst32:.2e} against the server's float32-sum softmax); prompt cache hit rate "
        f"{cache['hit_rate']:.2f} ({cache['cached_tokens']} of {cache['prompt_tokens']} tokens)"
    )
    assert worst32 <= 1e-4  # the same model output
    assert worst <= 1e-3  # ... but for the server's float32 normaliser
    # the server's own count: sent in prefix-tree order, most prompt tokens come from its cache
    assert cache["replies"] >= len(items) * len(TEMPLATES) * (1 << N)
    assert cache["hit_rate"] > 0.45  # 0.52 measured at n = 6
    pred = scorer.predict(items[0], "ips1")
    assert abs(sum(pred.option_probs.values()) - 1) < 1e-9


def test_two_servers_give_what_one_gives(llama_server, items, tmp_path):  # noqa: F811
    one = ServedScorer(_entry(llama_server), n_max=N)
    with llama_server_process(tmp_path / "second.log") as second:
        two = ServedScorer(_entry(llama_server, second), n_max=N)
        item = items[0]
        words = psens.prompts.variables(item, n_max=N, seed=0)
        masks = np.arange(1 << len(words))
        a = one.value(item, "ips1", masks, variables=words)
        b = two.value(item, "ips1", masks, variables=words)
        assert two._endpoints[1].n_requests > 0
        # a run through the config on both servers
        cfg = {
            "store": str(tmp_path / "served.zarr"),
            "models": [_entry(llama_server, second)],
            "dataset": "arc-challenge",
            "split": "validation",
            "samples": [item.id],
            "templates": list(TEMPLATES),
            "n_vars": 4,
        }
        ds = psens.run(cfg, progress=False, quiet=True)
    print(f"\nmax |v(two servers) - v(one server)| = {np.max(np.abs(a - b)):.2e}")
    np.testing.assert_allclose(a, b, atol=1e-4)
    assert (ds.status.values == psens.store.DONE).all()
    assert np.isfinite(psens.ips.ips(ds).values).all()
