"""Served models against a fake server on 127.0.0.1 that runs a tiny local model.

The fake answers in the reply shapes of vLLM (``/v1/completions`` with ``prompt_logprobs``),
TGI (``/generate`` with ``decoder_input_details``) and llama-cpp-python (text prompts, top-k
``logprobs``), or as a chat-only API; it can fail its first requests. Values must equal the
local :class:`psens.models.Scorer` of the same model.
"""

from __future__ import annotations

import itertools
import json
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import psens
from psens import store
from psens.models.served import ServedModel, ServedScorer
from tests.support import EGG, write_tiny_dataset, write_tiny_model


class FakeLM:
    """The tiny model behind the fake server: log-softmax at every position."""

    def __init__(self, folder):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        self.lock = threading.Lock()

    def logprobs(self, ids):
        with self.lock, self.torch.inference_mode():
            out = self.model(self.torch.as_tensor([ids])).logits[0].double()
            return self.torch.log_softmax(out, -1).numpy()  # [pos, vocab]: next-token

    def greedy(self, ids, m):
        new, first = [], None
        for _ in range(m):
            lp = self.logprobs(ids + new)[-1]
            t = int(np.argmax(lp))
            first = float(lp[t]) if first is None else first
            if t == self.tok.eos_token_id:
                break
            new.append(t)
        return new, first


def _common_prefix(a, b) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class Server:
    """A fake inference server (kind: "vllm", "tgi", "llama-server", "llama-cpp-python" or
    "chat")."""

    def __init__(self, lm: FakeLM, kind: str, fail_first: int = 0, fail_status: int = 503):
        self.lm, self.kind = lm, kind
        self.fail_left, self.fail_status = fail_first, fail_status
        self.prompts: list[list[int]] = []  # scored prompts, in arrival order
        self.last: list[int] = []  # the llama-server slot's cached prompt
        self.requests = 0
        self.tamper = None  # tamper(path, body, reply) -> the reply sent instead
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests += 1
                if outer.fail_left > 0:
                    outer.fail_left -= 1
                    return self.reply(outer.fail_status, {"error": "overloaded"})
                status, data = outer.answer(self.path, body)
                if outer.tamper is not None:
                    data = outer.tamper(self.path, body, data)
                self.reply(status, data)

            def do_GET(self):
                self.reply(200, {"data": [{"id": "tiny"}]})

            def reply(self, status, data):
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    # ---------------------------------------------------------------- reply shapes

    def answer(self, path, body):
        tok = self.lm.tok
        if self.kind == "chat" or path.endswith("/chat/completions"):
            return 404, {"error": "not found"}
        if self.kind == "vllm" and path == "/v1/completions":
            ids = body["prompt"]
            if not isinstance(ids, list):
                ids = tok(ids)["input_ids"]
            if body.get("prompt_logprobs") is not None:
                self.prompts.append(ids)
                lp = self.lm.logprobs(ids)
                plp = [None]
                for pos in range(1, len(ids)):
                    row = lp[pos - 1]
                    best = int(np.argmax(row))
                    entry = {str(ids[pos]): {"logprob": float(row[ids[pos]]), "rank": 2}}
                    entry[str(best)] = {"logprob": float(row[best]), "rank": 1}
                    plp.append(entry)
                return 200, {"choices": [{"text": "x", "prompt_logprobs": plp}]}
            new, first = self.lm.greedy(ids, body.get("max_tokens", 16))
            lg = {"token_logprobs": [first] if new else [], "tokens": []}
            return 200, {"choices": [{"text": tok.decode(new), "logprobs": lg}]}
        if self.kind == "tgi" and path == "/generate":
            ids = tok(body["inputs"])["input_ids"]
            params = body.get("parameters", {})
            if params.get("decoder_input_details"):
                self.prompts.append(ids)
                lp = self.lm.logprobs(ids)
                prefill = [{"id": ids[0], "text": "", "logprob": None}] + [
                    {"id": t, "text": "", "logprob": float(lp[p - 1][t])}
                    for p, t in enumerate(ids)
                    if p > 0
                ]
                return 200, {"generated_text": "x", "details": {"prefill": prefill}}
            new, first = self.lm.greedy(ids, params.get("max_new_tokens", 16))
            toks = [{"id": t, "logprob": first if i == 0 else -1.0} for i, t in enumerate(new)]
            return 200, {"generated_text": tok.decode(new), "details": {"tokens": toks}}
        if self.kind == "llama-server" and path == "/completion":
            ids = body["prompt"]
            if body.get("n_predict") == 1:
                self.prompts.append(ids)
                row = self.lm.logprobs(ids)[-1]
                top = np.argsort(-row)[: body["n_probs"]]
                entries = [{"id": int(t), "token": "", "logprob": float(row[t])} for t in top]
                first = {"id": int(top[0]), "logprob": float(row[top[0]]), "top_logprobs": entries}
                # one cached prompt per slot: the common prefix with the last prompt is reused
                cached = min(_common_prefix(ids, self.last), len(ids) - 1)
                self.last = list(ids)
                timings = {"cache_n": cached, "prompt_n": len(ids) - cached}
                return 200, {
                    "content": "",
                    "completion_probabilities": [first],
                    "timings": timings,
                }
            new, first = self.lm.greedy(ids, body["n_predict"])
            probs = [{"id": t, "logprob": first if i == 0 else -1.0} for i, t in enumerate(new)]
            return 200, {"content": tok.decode(new), "completion_probabilities": probs}
        if self.kind == "llama-cpp-python" and path == "/v1/completions":
            if not isinstance(body["prompt"], str):
                return 422, {"detail": "prompt: Input should be a valid string"}
            ids = tok(body["prompt"])["input_ids"]
            usage = {"prompt_tokens": len(ids)}
            if body.get("max_tokens") == 1 and body.get("logprobs"):
                self.prompts.append(ids)
                row = self.lm.logprobs(ids)[-1]
                top = np.argsort(-row)[: body["logprobs"]]
                dist = {tok.decode([int(t)]): float(row[t]) for t in top}
                lg = {"token_logprobs": [float(row[top[0]])], "top_logprobs": [dist]}
                return 200, {"choices": [{"text": "", "logprobs": lg}], "usage": usage}
            new, first = self.lm.greedy(ids, body.get("max_tokens", 16))
            lg = {"token_logprobs": [first] if new else []}
            return 200, {"choices": [{"text": tok.decode(new), "logprobs": lg}], "usage": usage}
        return 404, {"detail": "Not Found"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("served")
    folder = write_tiny_model(d / "model")
    return {"model": folder, "lm": FakeLM(folder), "data": write_tiny_dataset(d / "data.jsonl")}


@pytest.fixture(scope="module")
def local(tiny):
    return psens.models.load(str(tiny["model"]), n_max=4, seed=0, progress=False)


@pytest.fixture
def server(tiny):
    made = []

    def make(kind, **kw):
        s = Server(tiny["lm"], kind, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def _entry(tiny, *servers, **extra):
    return {
        "name": "tiny-served",
        "base_url": servers[0].url,
        "model": "tiny",
        "tokenizer": str(tiny["model"]),
        "endpoints": [s.url for s in servers],
        **extra,
    }


def _check_equal(scorer, local, n=4):
    words = psens.prompts.variables(EGG, n_max=n, seed=0)
    masks = np.arange(1 << len(words))
    for template in ("ips1", "ips4"):
        got = scorer.value(EGG, template, masks, variables=words)
        want = local.value(EGG, template, masks, variables=words, method="naive")
        np.testing.assert_allclose(got, want, atol=1e-5)
    return words


@pytest.mark.parametrize(
    ("kind", "mode"),
    [("vllm", "prompt_logprobs"), ("tgi", "tgi"), ("llama-server", "native")],
)
def test_reply_shapes_give_the_local_scorers_values(tiny, local, server, kind, mode):
    srv = server(kind)
    scorer = ServedScorer(_entry(tiny, srv), n_max=4)
    assert scorer.mode == mode
    assert scorer.mask == local.mask
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _check_equal(scorer, local)
    assert any("no token ids" in str(w.message) for w in caught) == (kind == "tgi")
    # sent in prefix-tree order: sorted token rows (one template's 16 masks, then the next)
    sent = srv.prompts[1:] if kind == "llama-server" else srv.prompts  # after the probe's
    sent = [p for i, p in enumerate(sent) if i == 0 or p != sent[i - 1]]  # re-asked: whole vocab
    first = sent[:16]
    assert first == sorted(first) and len({tuple(p) for p in first}) == 16
    # predictions: option probabilities from the same requests, like the local scorer's
    got, want = scorer.predict(EGG, "ips1"), local.predict(EGG, "ips1")
    assert got.choice == want.choice and got.text == want.text
    assert got.p_target == pytest.approx(want.p_target, rel=1e-5)
    for label, p in want.option_probs.items():
        assert got.option_probs[label] == pytest.approx(p, rel=1e-5)
    if kind != "tgi":  # the top-1 of the answer position
        assert got.confidence == pytest.approx(want.confidence, rel=1e-5)
    assert np.isnan(got.hidden).all()


def test_prompt_cache_counts_show_what_the_order_saves(tiny, server):
    srv = server("llama-server")
    words = psens.prompts.variables(EGG, n_max=4, seed=0)
    masks = np.arange(1 << len(words))
    shuffled = np.random.default_rng(0).permutation(masks)
    stats = {}
    for order in ("tree", "random"):
        scorer = ServedScorer(_entry(tiny, srv), n_max=4)  # a fresh response cache
        scorer.probe()
        before = len(srv.prompts)
        if order == "tree":
            scorer.value(EGG, "ips1", masks, variables=words)
        else:
            scorer.value(EGG, "ips1", shuffled, variables=words, method="naive")
        sent = srv.prompts[before - 1 :]  # the slot holds the prompt before these
        want = sum(min(_common_prefix(a, b), len(b) - 1) for a, b in itertools.pairwise(sent))
        stats[order] = scorer.prompt_cache
        assert stats[order]["cached_tokens"] == want
        assert stats[order]["prompt_tokens"] == sum(len(p) for p in sent[1:])
        assert stats[order]["replies"] == len(sent) - 1
    assert stats["tree"]["hit_rate"] > stats["random"]["hit_rate"] > 0


def test_prompt_token_counts_of_each_reply_shape():
    from psens.models.served.replies import _prompt_token_counts

    assert _prompt_token_counts({"timings": {"prompt_n": 5, "cache_n": 70}}) == (75, 70)
    usage = {"prompt_tokens": 80, "prompt_tokens_details": {"cached_tokens": 64}}
    assert _prompt_token_counts({"usage": usage}) == (80, 64)
    assert _prompt_token_counts({"usage": {"prompt_tokens": 80}}) is None  # says nothing
    assert _prompt_token_counts({"timings": {"prompt_n": "5"}}) is None
    assert _prompt_token_counts([1, 2]) is None


def test_text_only_server_uses_top_logprobs(tiny, local, server):
    srv = server("llama-cpp-python")
    scorer = ServedScorer(_entry(tiny, srv, top_logprobs=3), n_max=4)
    assert scorer.mode == "next" and not scorer.probe()[0].ids
    with pytest.warns(UserWarning, match="sent as text"):
        _check_equal(scorer, local)
    # the answer is often outside the top 3: asked again over the whole vocabulary
    asked = [len(p) for p in srv.prompts]
    assert len(asked) > 2 * 16


def test_chat_only_server_is_refused(tiny, server):
    srv = server("chat")
    scorer = ServedScorer(_entry(tiny, srv), n_max=4)
    with pytest.raises(RuntimeError, match=r"prompt log-probabilities.*chat-only"):
        scorer.probe()


def test_retries_then_the_same_values(tiny, local, server):
    srv = server("vllm")
    scorer = ServedScorer(_entry(tiny, srv, max_retries=3), n_max=4)
    scorer.probe()
    srv.fail_left = 2  # the next two requests get HTTP 503
    _check_equal(scorer, local)
    assert scorer.n_requests >= srv.requests - 1  # the failures were asked again


def test_a_failed_request_raises_and_is_not_cached(tiny, server):
    srv = server("vllm")
    scorer = ServedScorer(_entry(tiny, srv, max_retries=1, timeout=5), n_max=4)
    scorer.probe()
    srv.fail_left = 10**6
    with pytest.raises(RuntimeError, match="HTTP 503"):
        scorer.value(EGG, "ips1", [0, 1])
    assert len(scorer.cache) == 0
    srv.fail_left = 0
    assert np.isfinite(scorer.value(EGG, "ips1", [0, 1])).all()


def test_two_endpoints_equal_one(tiny, local, server):
    a, b = server("vllm"), server("vllm")
    scorer = ServedScorer(_entry(tiny, a, b, concurrency=2), n_max=4)
    _check_equal(scorer, local)
    assert a.prompts and b.prompts  # both servers were used


def test_entry_is_checked_before_any_request(tiny):
    good = {"name": "x", "base_url": "http://127.0.0.1:9/v1", "model": "m", "tokenizer": "t"}
    ServedModel.from_entry(good)
    for bad, match in [
        ({**good, "tokenizer": None}, "'tokenizer'"),
        ({**good, "base_url": "127.0.0.1:8000"}, "not an http"),
        ({**good, "port": 1}, "unknown key"),
        ({**good, "endpoints": "http://a/v1"}, "endpoints"),
        ({**good, "concurrency": 0}, "concurrency"),
    ]:
        with pytest.raises(ValueError, match=match):
            ServedModel.from_entry(bad)


def _run_config(tiny, path, models, **extra):
    return {
        "store": str(path),
        "models": models,
        "dataset": "arc-challenge",
        "dataset_path": str(tiny["data"]),
        "samples": 2,
        "templates": ["ips1", "ips4"],
        "n_vars": 4,
        "solver": "exact",
        "threads": 1,
        "generate": False,
        **extra,
    }


def test_run_with_a_served_model_reads_like_a_local_run(tiny, server, tmp_path):
    srv = server("vllm")
    entry = _entry(tiny, srv)
    toml = tmp_path / "cfg.toml"
    toml.write_text(
        f'store = "{tmp_path / "served.zarr"}"\n'
        f'models = [{{name = "tiny-served", base_url = "{srv.url}", model = "tiny", '
        f'tokenizer = "{tiny["model"]}"}}]\n'
        f'dataset = "arc-challenge"\ndataset_path = "{tiny["data"]}"\nsamples = 2\n'
        'templates = ["ips1", "ips4"]\nn_vars = 4\nsolver = "exact"\nthreads = 1\n'
        "generate = false\n"
    )
    served = psens.run(toml, progress=False, quiet=True)
    local = psens.run(
        _run_config(tiny, tmp_path / "local.zarr", [str(tiny["model"])]), progress=False, quiet=True
    )
    assert list(served.model.values) == ["tiny-served"]
    assert (served.status.values == store.DONE).all()
    np.testing.assert_allclose(served.v.values, local.v.values, atol=1e-5)
    np.testing.assert_array_equal(served.prediction.values, local.prediction.values)
    ds = psens.open_run(tmp_path / "served.zarr", verify=True)
    fp = ds.attrs["fingerprints"]
    fp = json.loads(fp) if isinstance(fp, str) else fp
    rec = fp["models"]["tiny-served"]
    assert rec["kind"] == "served" and rec["base_url"] == srv.url and rec["files"]
    per_sample = psens.ips.ips(ds, tau=0.1)
    assert np.isfinite(per_sample.values).any()
    from psens.widgets import OrderIPS

    OrderIPS(ds)
    # a resume against a replica on another port is the same run (endpoints are not identity)
    other = server("vllm")
    moved = {**entry, "base_url": other.url, "endpoints": [other.url]}
    again = psens.run(
        _run_config(tiny, tmp_path / "served.zarr", [moved]), progress=False, quiet=True
    )
    np.testing.assert_array_equal(again.v.values, served.v.values)
    assert len(other.prompts) == 1  # the probe: no block was scored again


def test_failed_requests_make_failed_blocks(tiny, server, tmp_path):
    srv = server("vllm")
    entry = _entry(tiny, srv, max_retries=0, timeout=5)
    cfg = _run_config(tiny, tmp_path / "r.zarr", [entry])
    from psens.models import served as served_mod
    from psens.runner import _SCORERS

    _SCORERS.clear()
    run_cfg = psens.config.RunConfig.from_dict(cfg)
    scorer = psens.runner.run_scorer(run_cfg, run_cfg.model_specs[0])
    scorer.probe()
    srv.fail_left = 10**6
    ds = psens.run(cfg, progress=False, quiet=True)
    assert (ds.status.values == store.FAILED).all()
    assert "HTTP 503" in str(ds.error.values[0, 0])
    assert np.isnan(ds.v.values).all()
    srv.fail_left = 0
    ds = psens.run(cfg, progress=False, quiet=True)  # the next start retries them
    assert (ds.status.values == store.DONE).all()
    assert served_mod.ServedError.__mro__[1] is RuntimeError


def test_unreachable_server_is_refused_before_the_store(tiny, tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nobody listens there
    entry = {
        "name": "gone",
        "base_url": f"http://127.0.0.1:{port}/v1",
        "model": "m",
        "tokenizer": str(tiny["model"]),
    }
    cfg = _run_config(tiny, tmp_path / "gone.zarr", [entry])
    with pytest.raises(ValueError, match="does not answer"):
        psens.run(cfg, progress=False, quiet=True)
    assert not (tmp_path / "gone.zarr").exists()
    with pytest.raises(ValueError, match="'tokenizer'"):
        psens.run(_run_config(tiny, tmp_path / "x.zarr", [{**entry, "tokenizer": 3}]))


def test_every_ips_notebook_reads_a_served_run_like_a_local_one(tiny, server, tmp_path):
    """The served store equals the local store of the same run in every variable but the
    hidden-state metrics (a server returns no hidden states: NaN there), and every IPS
    notebook — IPS, orders, classes, factors, the widgets — runs on it without an error."""
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    from tests.test_notebooks import IPS_NOTEBOOKS, _errors, _execute

    srv = server("vllm")
    same = {"samples": 3, "templates": "ips5", "solver": "canonical"}
    served = psens.run(
        _run_config(tiny, tmp_path / "served.zarr", [_entry(tiny, srv)], **same),
        progress=False,
        quiet=True,
    )
    local = psens.run(
        _run_config(tiny, tmp_path / "local.zarr", [str(tiny["model"])], **same),
        progress=False,
        quiet=True,
    )
    assert set(served.data_vars) == set(local.data_vars)
    for name in local.data_vars:
        a, b = served[name].values, local[name].values
        if name.startswith("hidden_"):
            assert np.isnan(a).all() and np.isfinite(b).any(), name
        elif a.dtype.kind == "f":
            np.testing.assert_allclose(a, b, atol=1e-4, err_msg=name)
        else:
            np.testing.assert_array_equal(a, b, err_msg=name)
    nb = nbformat.v4.new_notebook()
    spans = []
    for path in IPS_NOTEBOOKS:
        setup = f"%reset -f\nimport os\nos.chdir({str(path.parent)!r})\n"
        setup += f"os.environ.update(PSENS_RUN={str(tmp_path / 'served.zarr')!r}, PSENS_SIZE='')"
        start = len(nb.cells)
        nb.cells += [nbformat.v4.new_code_cell(setup), *nbformat.read(path, 4).cells]
        spans.append((path.name, start, len(nb.cells)))
    _execute(nb, IPS_NOTEBOOKS[0], 600)
    for name, a, b in spans:
        assert not _errors(nb, nb.cells[a:b]), (name, _errors(nb, nb.cells[a:b]))
        shown = json.dumps([c.get("outputs", []) for c in nb.cells[a:b]])
        assert "tiny-served" in shown, f"{name} did not show the served run"


# ----------------------------------------------------------------------------- hostile replies

KINDS = ("vllm", "tgi", "llama-server", "llama-cpp-python")


def _every_float(data, value):
    """The reply with every float in it replaced by ``value`` (the log-probabilities)."""
    if isinstance(data, dict):
        return {k: _every_float(v, value) for k, v in data.items()}
    if isinstance(data, list):
        return [_every_float(v, value) for v in data]
    return value if isinstance(data, float) else data


def test_reply_numbers_are_checked():
    from psens.models.served import LOGPROB_TOL, ServedError
    from psens.models.served.replies import _checked

    assert _checked(-2.5, "m", "x") == -2.5
    assert _checked(LOGPROB_TOL / 2, "m", "x") == 0.0  # server rounding: clipped to 0
    assert _checked(0.5, "m", "x", kind="prob") == 0.5
    for bad in (3.0, 2 * LOGPROB_TOL, float("nan"), float("inf"), "-1", None, True):
        with pytest.raises(ServedError, match="not a log-probability"):
            _checked(bad, "m", "x")
    for bad in (1.5, -0.1, float("nan")):
        with pytest.raises(ServedError, match="not a probability"):
            _checked(bad, "m", "x", kind="prob")


@pytest.mark.parametrize("kind", KINDS)
def test_a_positive_logprob_is_a_failed_request_in_every_mode(tiny, server, kind):
    """log p = +3 (p = 20) is impossible: refused, never turned into v = 16.1."""
    from psens.models.served import ServedError

    srv = server(kind)
    scorer = ServedScorer(_entry(tiny, srv, top_logprobs=3), n_max=4)
    scorer.probe()
    srv.tamper = lambda path, body, data: _every_float(data, 3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # text prompts
        with pytest.raises(ServedError, match="not a log-probability"):
            scorer.value(EGG, "ips1", [0, 1])
        with pytest.raises(ServedError, match="not a log-probability"):
            scorer.predict(EGG, "ips1", generate=False)
    assert len(scorer.cache) == 0  # nothing wrong kept
    srv.tamper = lambda path, body, data: _every_float(data, float("nan"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ServedError):
            scorer.value(EGG, "ips1", [0, 1])


def test_a_positive_logprob_makes_failed_blocks_in_a_run(tiny, server, tmp_path):
    srv = server("vllm")
    entry = _entry(tiny, srv, max_retries=0, timeout=5)
    cfg = _run_config(tiny, tmp_path / "r.zarr", [entry])
    from psens.runner import _SCORERS

    _SCORERS.clear()
    srv.tamper = lambda path, body, data: (
        _every_float(data, 3.0) if body.get("prompt_logprobs") and len(body["prompt"]) > 8 else data
    )  # the probe's short prompt passes; every scored prompt gets log p = +3
    ds = psens.run(cfg, progress=False, quiet=True)
    assert (ds.status.values == store.FAILED).all()
    assert "not a log-probability" in str(ds.error.values[0, 0])
    assert np.isnan(ds.p_target.values).all()
    assert not store.verify(tmp_path / "r.zarr").ok or (ds.status.values != store.DONE).all()


@pytest.mark.parametrize("kind", ("vllm", "llama-server", "llama-cpp-python"))
def test_a_reply_naming_another_model_is_refused(tiny, server, kind):
    from psens.models.served import ServedError

    srv = server(kind)
    scorer = ServedScorer(_entry(tiny, srv), n_max=4)
    scorer.probe()
    srv.tamper = lambda path, body, data: {**data, "model": "another-model"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ServedError, match="answered as model 'another-model'"):
            scorer.value(EGG, "ips1", [0, 1])
    fresh = ServedScorer(_entry(tiny, srv), n_max=4)  # refused at the probe too
    with pytest.raises(ServedError, match="not the 'tiny' asked for"):
        fresh.probe()
    srv.tamper = lambda path, body, data: {**data, "model": "tiny"}  # the one asked: fine
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isfinite(ServedScorer(_entry(tiny, srv), n_max=4).value(EGG, "ips1", [0])).all()


def test_run_refuses_a_server_naming_another_model_before_the_store(tiny, server, tmp_path):
    from psens.cli import main
    from psens.runner import _SCORERS

    srv = server("vllm")
    srv.tamper = lambda path, body, data: {**data, "model": "another-model"}
    _SCORERS.clear()
    toml = tmp_path / "cfg.toml"
    toml.write_text(
        f'store = "{tmp_path / "m.zarr"}"\n'
        f'models = [{{name = "tiny-served", base_url = "{srv.url}", model = "tiny", '
        f'tokenizer = "{tiny["model"]}"}}]\n'
        f'dataset = "arc-challenge"\ndataset_path = "{tiny["data"]}"\nsamples = 1\n'
        'templates = ["ips1", "ips4"]\nn_vars = 4\nsolver = "exact"\ngenerate = false\n'
    )
    assert main(["run", str(toml), "--no-progress"]) == 2
    assert not (tmp_path / "m.zarr").exists()


@pytest.mark.parametrize(
    ("kind", "tamper"),
    [
        ("tgi", lambda data: {**data, "details": None}),
        ("llama-server", lambda data: {**data, "completion_probabilities": ["x"]}),
        ("llama-cpp-python", lambda data: {**data, "choices": [{"text": "", "logprobs": None}]}),
        ("vllm", lambda data: {**data, "choices": [{"prompt_logprobs": ["x"] * 99}]}),
    ],
)
def test_null_or_string_reply_parts_are_failed_requests(tiny, server, kind, tamper):
    """null where an object belongs, or a string entry: a ServedError (a failed block),
    never an AttributeError."""
    from psens.models.served import ServedError

    srv = server(kind)
    scorer = ServedScorer(_entry(tiny, srv), n_max=4)
    scorer.probe()
    srv.tamper = lambda path, body, data: tamper(data) if isinstance(data, dict) else data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ServedError, match="malformed reply"):
            scorer.value(EGG, "ips1", [0, 1])
        with pytest.raises(ServedError, match="malformed reply"):
            scorer.predict(EGG, "ips1")


def test_a_null_usage_is_no_crash(tiny, local, server):
    """``usage: null`` (a text-prompt server's token count missing) once raised
    AttributeError; it only leaves the count unchecked, as a reply without usage does."""
    srv = server("llama-cpp-python")
    srv.tamper = lambda path, body, data: {**data, "usage": None}
    scorer = ServedScorer(_entry(tiny, srv, top_logprobs=3), n_max=4)
    with pytest.warns(UserWarning, match="sent as text"):
        _check_equal(scorer, local)


@pytest.mark.parametrize(
    ("kind", "tamper"),
    [
        ("tgi", lambda data: {**data, "details": None}),
        ("llama-server", lambda data: {**data, "completion_probabilities": ["x"]}),
        ("llama-cpp-python", lambda data: {**data, "usage": None, "choices": [None]}),
    ],
)
def test_null_reply_parts_at_the_probe_are_a_refusal_not_a_traceback(tiny, server, kind, tamper):
    srv = server(kind)
    srv.tamper = lambda path, body, data: tamper(data) if isinstance(data, dict) else data
    scorer = ServedScorer(_entry(tiny, srv), n_max=4)
    with pytest.raises(RuntimeError, match="prompt log-probabilities"):
        scorer.probe()


@pytest.mark.parametrize("kind", ["vllm", "tgi", "llama-server"])
def test_cloze_option_loglikelihoods_equal_the_local_scorers(tiny, local, server, kind):
    """The cloze formulation through prompt log-probabilities: each option's continuation
    scored by the server equals the local one-pass reference."""
    scorer = ServedScorer(_entry(tiny, server(kind)), n_max=4)
    words = psens.prompts.variables(EGG, n_max=4, seed=0, options=False)
    masks = np.arange(1 << len(words))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tgi: "no token ids"
        got = scorer.choice_logprobs(EGG, "ips2", masks, variables=words)
        one = scorer.choice_logprobs(EGG, "cloze", variables=[])
    want = local.choice_logprobs(EGG, "ips2", masks, variables=words, method="naive")
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(one, local.choice_logprobs(EGG, "cloze", variables=[]), atol=1e-5)


def test_cloze_run_with_a_server_without_prompt_logprobs_is_refused(tiny, server, tmp_path):
    from psens.runner import _SCORERS

    _SCORERS.clear()
    entry = _entry(tiny, server("chat"))
    cfg = _run_config(tiny, tmp_path / "c.zarr", [entry], answer="cloze")
    with pytest.raises(ValueError, match="prompt log-probabilities"):
        psens.run(cfg, progress=False, quiet=True)
    assert not (tmp_path / "c.zarr").exists()
    _SCORERS.clear()
    srv = server("vllm")
    ok = psens.run(
        _run_config(tiny, tmp_path / "s.zarr", [_entry(tiny, srv)], answer="cloze", n_vars=2),
        progress=False,
        quiet=True,
    )
    local = psens.run(
        _run_config(tiny, tmp_path / "l.zarr", [str(tiny["model"])], answer="cloze", n_vars=2),
        progress=False,
        quiet=True,
    )
    assert (ok.status.values == store.DONE).all()
    np.testing.assert_allclose(ok.option_loglik.values, local.option_loglik.values, atol=1e-5)
    np.testing.assert_array_equal(ok.prediction.values, local.prediction.values)
