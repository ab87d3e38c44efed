"""OpenAI-compatible client and judges against a tiny fake server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pandas as pd
import pytest

from psens.backends import (
    DEFAULT_JUDGE_TEMPLATE,
    GRADED_JUDGE_TEMPLATE,
    CallableJudge,
    HTTPJudge,
    OpenAIClient,
    ResponseCache,
    Verdict,
    cache_key,
    instruction_text,
    parse_verdict,
    reread_verdicts,
)
from psens.eas import build_rows, generate_responses, instance_metrics, judge_responses


class FakeServer:
    """Scriptable OpenAI-style server: ``behave(body, n)`` returns (status, text),
    ("sleep", seconds, text), ("json", payload) (a 200 whose body is any JSON value) or
    ("raw", pieces, delay) (the whole HTTP reply, status line included, written piece by piece
    with ``delay`` seconds before each piece; the write stops when the client hangs up, and
    ``bytes_written`` counts what was sent); ``n`` counts requests with the same prompt so
    far. Everything is bounded: the server never waits or writes forever."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.seen: dict[str, int] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self.bytes_written = 0
        self.lock = threading.Lock()
        self.behave = lambda body, n: (200, "ok")
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_GET(self):
                self._send(200, {"data": [{"id": "fake-model"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = json.dumps(body.get("messages") or body.get("prompt"))
                with server.lock:
                    server.requests.append(body)
                    n = server.seen[prompt] = server.seen.get(prompt, 0) + 1
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    action = server.behave(body, n)
                    if action[0] == "sleep":
                        time.sleep(action[1])
                        action = (200, action[2])
                finally:
                    # done before the reply is written: once the client has the reply it may
                    # send its next request, which must not count as overlapping this one
                    with server.lock:
                        server.in_flight -= 1
                if action[0] == "raw":
                    self._raw(action[1], action[2])
                    return
                if action[0] == "json":
                    self._send(200, action[1])
                    return
                status, text = action
                if status != 200:
                    self._send(status, {"error": text})
                elif self.path.endswith("/chat/completions"):
                    msg = {"role": "assistant", "content": text}
                    self._send(200, {"choices": [{"message": msg, "finish_reason": "stop"}]})
                else:
                    self._send(200, {"choices": [{"text": text, "finish_reason": "stop"}]})

            def _raw(self, pieces, delay):
                self.close_connection = True
                try:
                    for piece in pieces:
                        if delay:
                            time.sleep(delay)
                        self.wfile.write(piece)
                        with server.lock:
                            server.bytes_written += len(piece)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client hung up: what these tests want

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = FakeServer()
    yield s
    s.close()


def client(server, tmp_path, **kw):
    kw = {"backoff": 0.0, "max_retries": 2, "timeout": 5.0, "cache_dir": tmp_path / "c", **kw}
    return OpenAIClient(server.url, "fake-model", **kw)


def chat(text):
    return [{"role": "user", "content": text}]


# ------------------------------------------------------------------------------ retries


def test_500_then_200_is_retried(server, tmp_path):
    server.behave = lambda body, n: (500, "boom") if n == 1 else (200, "fine")
    with client(server, tmp_path) as c:
        r = c.chat(chat("hi"))
    assert r.ok and r.text == "fine" and r.attempts == 2 and not r.cached
    assert len(server.requests) == 2


def test_persistent_500_is_a_recorded_failure_not_cached(server, tmp_path):
    server.behave = lambda body, n: (503, "overloaded")
    with client(server, tmp_path) as c:
        r = c.complete("hi")
        assert r.status == "failed" and r.text is None
        assert "HTTP 503" in r.error and "after 3 attempts" in r.error
        assert r.attempts == 3 and len(server.requests) == 3
        assert r.key not in c.cache and len(c.cache) == 0


def test_client_error_is_not_retried(server, tmp_path):
    server.behave = lambda body, n: (400, "bad request")
    with client(server, tmp_path) as c:
        r = c.chat(chat("hi"))
    assert r.status == "failed" and r.attempts == 1 and "HTTP 400" in r.error


def test_timeout_is_a_failure_then_recovers(server, tmp_path):
    server.behave = lambda body, n: ("sleep", 1.5, "late") if n <= 2 else (200, "on time")
    with client(server, tmp_path, timeout=0.3, max_retries=1) as c:
        t0 = time.perf_counter()
        r = c.chat(chat("slow"))
        assert time.perf_counter() - t0 < 1.4
        assert r.status == "failed" and "timeout" in r.error
        r2 = c.chat(chat("slow"))  # re-run: not cached, asked again
    assert r2.ok and r2.text == "on time"


def test_retry_after_and_backoff_are_capped(server, tmp_path):
    server.behave = lambda body, n: (429, "slow down") if n == 1 else (200, "ok")
    with client(server, tmp_path, backoff=0.05, backoff_max=0.1) as c:
        t0 = time.perf_counter()
        r = c.chat(chat("x"))
    assert r.ok and 0.04 < time.perf_counter() - t0 < 1.0


def test_a_retry_after_beyond_the_cap_fails_at_once_with_a_word(server, tmp_path):
    body = json.dumps({"error": "rate limited"}).encode()
    reply = (
        b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3600\r\n"
        b"Content-Type: application/json\r\nConnection: close\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    server.behave = lambda body, n: ("raw", [reply], 0) if n == 1 else (200, "ok")
    with client(server, tmp_path, backoff=0.01, backoff_max=8.0, max_retries=3) as c:
        t0 = time.perf_counter()
        r = c.chat(chat("x"))
        assert time.perf_counter() - t0 < 5  # not a silent 8 s sleep, nor an hour's
        assert r.status == "failed" and "asked to wait 3600 s" in r.error
        assert "backoff_max = 8 s" in r.error and r.attempts == 1
        assert c.chat(chat("x")).ok  # a re-run asks again


def test_unreachable_server_fails_cleanly(tmp_path):
    c = OpenAIClient("http://127.0.0.1:9/v1", "m", max_retries=1, backoff=0, timeout=1)
    r = c.complete("x")
    assert r.status == "failed" and "connection error" in r.error


# ------------------------------------------------------------------- malformed 200 replies


def message(content):
    return {"choices": [{"message": {"role": "assistant", "content": content}}]}


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ({"choices": [None]}, "choices[0] is null, not an object"),
        ({"choices": [{"message": "str"}]}, "choices[0].message is a string, not an object"),
        ({"choices": []}, "'choices' is empty"),
        ({"choices": "abc"}, "'choices' is a string, not an array"),
        ({"id": "x"}, "no 'choices'"),
        ([1, 2], "the reply is an array, not an object"),
        ({"choices": [{"finish_reason": "stop"}]}, "choices[0] has no 'message'"),
        (message(None), "choices[0].message has no 'content'"),
        (message(42), "choices[0].message.content is a number, not a string"),
        (message(["a", "b"]), "choices[0].message.content is an array, not a string"),
        (message({"text": "a"}), "choices[0].message.content is an object, not a string"),
    ],
)
def test_malformed_chat_reply_is_a_failure(server, tmp_path, payload, problem):
    server.behave = lambda body, n: ("json", payload)
    with client(server, tmp_path) as c:
        r = c.chat(chat("q"))
        assert r.status == "failed" and r.text is None and len(c.cache) == 0
    assert r.error.startswith("malformed reply: ") and problem in r.error
    assert r.attempts == 1  # a malformed reply is not retried at once (a re-run asks again)


@pytest.mark.parametrize(
    ("choice", "problem"),
    [
        ({"finish_reason": "stop"}, "choices[0] has no 'text'"),
        ({"text": None}, "choices[0] has no 'text'"),
        ({"text": 7}, "choices[0].text is a number, not a string"),
        ({"text": ["x"]}, "choices[0].text is an array, not a string"),
    ],
)
def test_malformed_completion_reply_is_a_failure(server, tmp_path, choice, problem):
    server.behave = lambda body, n: ("json", {"choices": [choice]})
    with client(server, tmp_path) as c:
        r = c.complete("q")
    assert r.status == "failed" and problem in r.error


def test_malformed_reply_fails_its_item_only(server, tmp_path):
    bad = {
        "p1": {"choices": [None]},
        "p3": {"choices": [{"message": "str"}]},
        "p4": message(3.5),
    }

    def behave(body, n):
        content = body["messages"][0]["content"]
        return ("json", bad[content]) if content in bad else (200, f"answer {content}")

    server.behave = behave
    prompts = [f"p{i}" for i in range(6)]
    with client(server, tmp_path, concurrency=3) as c:
        res = c.chat_many([chat(p) for p in prompts])
        assert len(c.cache) == 3
        assert c.generate(prompts) == ["answer p0", None, "answer p2", None, None, "answer p5"]
    assert [r.status for r in res] == ["ok", "failed", "ok", "failed", "failed", "ok"]
    assert [r.text for r in res if r.ok] == ["answer p0", "answer p2", "answer p5"]
    assert "choices[0] is null" in res[1].error and "a string, not an object" in res[3].error
    assert "content is a number, not a string" in res[4].error


def chat_reply(text: str) -> bytes:
    """The JSON body of a chat completion answering ``text``."""
    msg = {"role": "assistant", "content": text}
    return json.dumps({"choices": [{"message": msg, "finish_reason": "stop"}]}).encode()


def http_head(length: int | None) -> bytes:
    """Status line and headers of a 200 (close-delimited body when ``length`` is None)."""
    head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
    if length is not None:
        head += f"Content-Length: {length}\r\n"
    return (head + "\r\n").encode()


def pieces(data: bytes, size: int):
    """``data`` in slices of ``size`` bytes (without copying it)."""
    view = memoryview(data)
    return (view[i : i + size] for i in range(0, len(data), size))


# ------------------------------------------------------------------------ total deadline


def test_trickling_body_hits_the_deadline(server, tmp_path):
    """Each byte arrives well within ``timeout``, the whole reply would take ~3 s."""
    body = chat_reply("slow answer").ljust(60)  # JSON padded with spaces: 60 pieces
    server.behave = lambda b, n: ("raw", [http_head(len(body)), *pieces(body, 1)], 0.05)
    with client(server, tmp_path, timeout=0.5, deadline=1.0, max_retries=0) as c:
        t0 = time.perf_counter()
        r = c.chat(chat("trickle"))
        elapsed = time.perf_counter() - t0
        assert r.status == "failed" and r.text is None and len(c.cache) == 0
    assert "deadline" in r.error and "1 s" in r.error
    assert 0.9 < elapsed < 1.6


def test_trickling_headers_hit_the_deadline(server, tmp_path):
    body = chat_reply("slow answer")
    head = http_head(len(body))[:-2] + b"X-Pad: " + b"p" * 60 + b"\r\n\r\n"
    server.behave = lambda b, n: ("raw", [*pieces(head, 1), body], 0.03)
    with client(server, tmp_path, timeout=0.5, deadline=1.0, max_retries=1) as c:
        t0 = time.perf_counter()
        r = c.chat(chat("trickle"))
        elapsed = time.perf_counter() - t0
    assert r.status == "failed" and "deadline" in r.error and r.attempts == 2
    assert 1.9 < elapsed < 2.7  # a fresh deadline per attempt, no backoff here


def test_deadline_fails_only_the_slow_item(server, tmp_path):
    body = chat_reply("slow").ljust(60)

    def behave(b, n):
        if b["messages"][0]["content"] == "slow":
            return ("raw", [http_head(len(body)), *pieces(body, 1)], 0.05)
        return (200, "fast")

    server.behave = behave
    with client(server, tmp_path, timeout=0.5, deadline=1.0, max_retries=0, concurrency=3) as c:
        res = c.chat_many([chat(p) for p in ("a", "slow", "b", "c")])
        assert c.models() == ["fake-model"]  # the client is still usable
    assert [r.text for r in res] == ["fast", None, "fast", "fast"]
    assert "deadline" in res[1].error


def test_deadline_and_size_limit_arguments():
    c = OpenAIClient("http://127.0.0.1:9/v1", "m", timeout=10)
    assert c.deadline == 30.0 and c.max_response_bytes == 8 * 2**20
    assert OpenAIClient("http://127.0.0.1:9/v1", "m", deadline=2.5).deadline == 2.5
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match=r"OpenAIClient: deadline=.*Pass a positive"):
            OpenAIClient("http://127.0.0.1:9/v1", "m", deadline=bad)
    for bad in (0, -5):
        with pytest.raises(ValueError, match=r"OpenAIClient: max_response_bytes=.* is below 1"):
            OpenAIClient("http://127.0.0.1:9/v1", "m", max_response_bytes=bad)
    with pytest.raises(TypeError, match="max_response_bytes"):
        OpenAIClient("http://127.0.0.1:9/v1", "m", max_response_bytes=1.5)


# --------------------------------------------------------------------- bounded responses


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "close-delimited"])
def test_oversized_body_is_refused_without_reading_it(server, tmp_path, declared):
    body = chat_reply("big").ljust(32 * 2**20)  # valid JSON: 32 MiB of trailing spaces
    head = http_head(len(body) if declared else None)
    server.behave = lambda b, n: ("raw", [head, *pieces(body, 2**16)], 0)
    with client(server, tmp_path, max_response_bytes=2**20, max_retries=0) as c:
        r = c.chat(chat("big"))
        assert r.status == "failed" and r.text is None and len(c.cache) == 0
    assert "larger than" in r.error and "max_response_bytes=1048576" in r.error
    time.sleep(0.2)  # let the server notice the hang-up
    assert server.bytes_written < len(body) // 2


def test_body_within_the_size_limit_is_read(server, tmp_path):
    body = chat_reply("fits").ljust(2**20)
    server.behave = lambda b, n: ("raw", [http_head(None), *pieces(body, 2**16)], 0)
    with client(server, tmp_path, max_response_bytes=2**20) as c:
        r = c.chat(chat("fits"))
    assert r.ok and r.text == "fits"


def test_reply_that_is_not_json_is_a_failure(server, tmp_path):
    nested = b"[" * 200_000  # valid JSON prefix, too deep for any parser
    server.behave = lambda b, n: ("raw", [http_head(len(nested)), nested], 0)
    with client(server, tmp_path, max_retries=0) as c:
        r = c.chat(chat("deep"))
    assert r.status == "failed" and "not JSON" in r.error


# -------------------------------------------------------------------------- cache, resume


def test_cache_hit_makes_no_request(server, tmp_path):
    server.behave = lambda body, n: (200, f"answer {n}")
    with client(server, tmp_path) as c:
        a = c.chat(chat("q"), max_tokens=8, seed=1)
        b = c.chat(chat("q"), seed=1, max_tokens=8)  # same params, other order
        d = c.chat(chat("q"), max_tokens=8, seed=2)  # the seed is part of the key
    assert a.text == b.text == "answer 1" and b.cached and b.attempts == 0
    assert d.text == "answer 2"
    assert len(server.requests) == 2
    # a fresh client on the same folder also hits the cache
    with client(server, tmp_path) as c2:
        assert c2.chat(chat("q"), max_tokens=8, seed=1).cached
    assert len(server.requests) == 2


def test_rerun_retries_only_failures(server, tmp_path):
    broken = {"p2", "p4"}
    server.behave = lambda body, n: (500, "x") if body["prompt"] in broken else (200, "ok")
    prompts = [f"p{i}" for i in range(6)]
    with client(server, tmp_path, max_retries=0, concurrency=3) as c:
        first = c.complete_many(prompts)
        assert [r.status for r in first] == ["ok", "ok", "failed", "ok", "failed", "ok"]
        n_before = len(server.requests)
        broken.clear()
        second = c.complete_many(prompts)
    assert all(r.ok for r in second)
    sent = [b["prompt"] for b in server.requests[n_before:]]
    assert sorted(sent) == ["p2", "p4"]
    assert [r.cached for r in second] == [True, True, False, True, False, True]


def test_concurrency_limit(server, tmp_path):
    server.behave = lambda body, n: ("sleep", 0.15, "ok")
    with client(server, tmp_path, concurrency=2, cache_dir=None) as c:
        res = c.complete_many([f"p{i}" for i in range(6)])
    assert all(r.ok for r in res) and [r.text for r in res] == ["ok"] * 6
    assert server.max_in_flight == 2


def test_cache_is_per_server(tmp_path):
    """Two servers serving a model of the same name do not share answers."""
    a, b = FakeServer(), FakeServer()
    try:
        a.behave = lambda body, n: (200, "from A")
        b.behave = lambda body, n: (200, "from B")
        cache_dir = tmp_path / "shared"
        with OpenAIClient(a.url, "same-name", cache_dir=cache_dir) as ca:
            assert ca.chat(chat("q")).text == "from A"
        with OpenAIClient(b.url, "same-name", cache_dir=cache_dir) as cb:
            rb = cb.chat(chat("q"))
        assert rb.text == "from B" and not rb.cached and len(b.requests) == 1
        # the same server spelt with a trailing slash is the same server
        with OpenAIClient(a.url + "/", "same-name", cache_dir=cache_dir) as ca2:
            ra = ca2.chat(chat("q"))
        assert ra.text == "from A" and ra.cached and len(a.requests) == 1
        record = json.loads(ResponseCache(cache_dir).path(rb.key).read_text())
        assert record["server"] == b.url
    finally:
        a.close()
        b.close()


def test_cache_key_normalises_the_server():
    args = ("chat", "m", chat("a"), {"temperature": 0, "max_tokens": 5}, 1)
    k = cache_key(*args, server="http://example.com/v1")
    assert k == cache_key(*args, server="HTTP://Example.COM:80/v1/")
    assert k == cache_key(*args, server="http://user:secret@example.com/v1")
    assert k != cache_key(*args, server="https://example.com/v1")
    assert k != cache_key(*args, server="http://example.com:8000/v1")
    assert k != cache_key(*args, server="http://example.com/v2")
    assert k != cache_key(*args, server="http://other.example.com/v1")
    assert cache_key(*args, server="https://[::1]:443/v1") == cache_key(
        *args, server="https://[::1]/v1"
    )
    # without a server (local models) the key is the one psens always wrote
    assert cache_key(*args) == "01ca4ab2792ff6cfaf77f2485343f6255fa8801b98e17eca7c2863bc75be261a"
    assert cache_key(*args) != k


def test_cache_key_and_atomic_files(tmp_path):
    k1 = cache_key("chat", "m", chat("a"), {"temperature": 0, "max_tokens": 5}, 1)
    assert k1 == cache_key("chat", "m", chat("a"), {"max_tokens": 5, "temperature": 0}, 1)
    assert k1 != cache_key("chat", "m", chat("a"), {"max_tokens": 5, "temperature": 0}, 2)
    assert k1 != cache_key("completions", "m", chat("a"), {"max_tokens": 5, "temperature": 0}, 1)
    assert k1 != cache_key("chat", "m2", chat("a"), {"max_tokens": 5, "temperature": 0}, 1)
    cache = ResponseCache(tmp_path)
    cache.put(k1, {"status": "ok", "text": "x"})
    assert cache.get(k1)["text"] == "x" and len(cache) == 1
    assert not list(tmp_path.rglob(".tmp-*"))
    cache.path(k1).write_text("{truncated")  # a torn file reads as a miss, not a crash
    assert cache.get(k1) is None


def test_cache_in_memory():
    cache = ResponseCache()
    record = {"status": "ok", "text": "x", "params": {"stop": ("a",)}}
    cache.put("ab12", record)
    record["text"] = "changed"  # the cache holds a copy, as a file would
    got = cache.get("ab12")
    assert got == {"status": "ok", "text": "x", "params": {"stop": ["a"]}}
    assert "ab12" in cache and len(cache) == 1 and cache.get("cd34") is None
    with pytest.raises(ValueError, match="in memory"):
        cache.path("ab12")


def test_bad_arguments_are_explained(tmp_path):
    with pytest.raises(ValueError, match="base_url"):
        OpenAIClient("localhost:8000", "m")
    c = OpenAIClient("http://127.0.0.1:9/v1", "m")
    with pytest.raises(TypeError, match="non-empty list"):
        c.chat("hello")


# ---------------------------------------------------------------------------------- judges


UNPARSED = "unparsed"
PREFERENCE = "Is the response as good as the reference answer? Reply with one word: yes or no."

#: (reply, mode, verdict): binary verdicts True/False, graded ones the score, or UNPARSED.
#: The first rows are the replies the lenient parser misread (as 0.5, 0.1, 1.0, 0.0 and yes).
VERDICTS = [
    ("-5", "graded", UNPARSED),
    ("1e5", "graded", UNPARSED),
    ("15 out of 10", "graded", UNPARSED),
    ("On a scale from 0 to 10, I give it 8.", "graded", 0.8),
    ("I would not say yes", "binary", UNPARSED),
    (PREFERENCE, "binary", UNPARSED),
    # graded: one plain number in [0, 10], the scale's own numbers left out
    ("8", "graded", 0.8),
    ("0", "graded", 0.0),
    ("10", "graded", 1.0),
    ("7.5", "graded", 0.75),
    ("Score: 7/10", "graded", 0.7),
    ("8/10", "graded", 0.8),
    ("8 out of 10", "graded", 0.8),
    ("**9**", "graded", 0.9),
    ("Rating:6.", "graded", 0.6),
    ("I rate it 3 (on a 0-10 scale).", "graded", 0.3),
    ("42", "graded", UNPARSED),
    ("11", "graded", UNPARSED),
    ("+5", "graded", UNPARSED),
    ("−3", "graded", UNPARSED),
    ("5e-1", "graded", UNPARSED),
    ("80%", "graded", UNPARSED),
    ("7,5", "graded", UNPARSED),
    ("7 or 8", "graded", UNPARSED),
    ("4/5", "graded", UNPARSED),
    ("1. The answer deserves 6", "graded", UNPARSED),
    ("eight", "graded", UNPARSED),
    ("I would not give it 8", "graded", UNPARSED),
    ("from 0 (wrong or useless) to 10 (fully correct)", "graded", UNPARSED),
    ("", "graded", UNPARSED),
    ("8th", "graded", UNPARSED),
    # binary: the verdict words of one polarity, no negation or hedge before them
    ("correct", "binary", True),
    ("Incorrect.", "binary", False),
    ("Yes.", "binary", True),
    ("No, it is worse.", "binary", False),
    ("YES", "binary", True),
    ("Yes, correct", "binary", True),
    ("wrong", "binary", False),
    ("Answer: yes", "binary", True),
    ("The response is not correct", "binary", UNPARSED),
    ("It isn't correct", "binary", UNPARSED),
    ("yes or no", "binary", UNPARSED),
    ("No, I would say yes", "binary", UNPARSED),
    ("No, it is correct", "binary", UNPARSED),
    ("Never. Yes.", "binary", UNPARSED),
    ("partially correct", "binary", UNPARSED),
    ("hmm", "binary", UNPARSED),
    ("Let me think about it.", "binary", UNPARSED),
    ("Reply with one word: yes", "binary", UNPARSED),
]


@pytest.mark.parametrize(("text", "mode", "want"), VERDICTS)
def test_parse_verdict_reads_only_unambiguous_replies(text, mode, want):
    instruction = PREFERENCE if mode == "binary" else instruction_text(GRADED_JUDGE_TEMPLATE)
    v = parse_verdict(text, mode=mode, instruction=instruction)
    assert v.raw_text == text
    if want == UNPARSED:
        assert v.status == "unparsed" and v.correct is None and v.score is None
        assert np.isnan(v.value)
    elif mode == "binary":
        assert v.status == "ok" and v.correct is want and v.value == float(want)
    else:
        assert v.status == "ok" and v.score == pytest.approx(want) and v.value == v.score


def test_verdict_table_is_large_enough():
    assert len(VERDICTS) >= 34
    assert len({(t, m) for t, m, _ in VERDICTS}) == len(VERDICTS)


def test_a_judge_refuses_an_echo_of_its_own_instruction():
    """A reply repeating a clause of the judge's instruction (its template without the
    question, reference and response) is unparsed; a few of its words are not an echo."""
    assert "Reply with the number only." in instruction_text(GRADED_JUDGE_TEMPLATE)
    assert "{response}" not in instruction_text(DEFAULT_JUDGE_TEMPLATE)
    assert "to 10 (fully correct)" in instruction_text(GRADED_JUDGE_TEMPLATE, 10.0)
    echo = "Rate how well the response answers the question compared with the reference, 8"
    replies = iter([echo, "8"])
    judge = CallableJudge(lambda ps: [next(replies) for _ in ps], mode="graded", batch_size=1)
    out = judge.judge_many([("q", "r", "a"), ("q", "r", "a")])
    assert [v.status for v in out] == ["unparsed", "ok"] and out[1].score == 0.8
    yes = CallableJudge(lambda ps: ["Does the response give the same answer? Yes"] * len(ps))
    assert yes.judge("q", "r", "a").correct is True  # not a whole sentence of the template
    echo_binary = "Reply with exactly one word: correct"
    assert CallableJudge(lambda ps: [echo_binary] * len(ps)).judge("q", "r", "a").status == (
        "unparsed"
    )


def test_reread_verdicts_is_the_judges_parse_of_each_stored_reply():
    """Stored replies read again: each is what a CallableJudge with the same template, mode
    and scale gives that reply now; a stored failure stays failed (its text is an error)."""
    replies = [
        "correct",
        "The answer is correct but incorrect.",
        "Reply with exactly one word: correct",
        "judge call failed: timeout",
        "",
    ]
    statuses = ["ok", "ok", "ok", "failed", "unparsed"]
    it = iter(replies)
    judge = CallableJudge(lambda ps: [next(it) for _ in ps], batch_size=1)
    live = judge.judge_many([("q", "r", "a")] * len(replies))
    again = reread_verdicts(replies, statuses)
    assert [v.status for v in again] == ["ok", "unparsed", "unparsed", "failed", "unparsed"]
    assert again[0].correct is True and again[3].error == "judge call failed: timeout"
    for a, b, s in zip(again, live, statuses, strict=True):
        if s != "failed":
            assert a == b
    graded = reread_verdicts(["8", "8 out of 10", "7 or 8"], ["unparsed"] * 3, mode="graded")
    assert [v.value for v in graded[:2]] == [0.8, 0.8] and graded[2].status == "unparsed"
    with pytest.raises(ValueError, match="one status per stored reply"):
        reread_verdicts(["correct"], [])


def test_parse_verdict_without_text_or_with_a_bad_mode():
    assert parse_verdict(None).status == "failed"
    with pytest.raises(ValueError, match="mode"):
        parse_verdict("8", mode="stars")


def test_callable_judge_records_failures():
    calls = []

    def gen(prompts):
        calls.append(prompts)
        return ["correct" if "Paris" in p else "incorrect" for p in prompts]

    j = CallableJudge(gen, batch_size=2)
    out = j.judge_many(
        [("Capital?", "Paris", "Paris"), ("Capital?", "Paris", "Rome"), ("Capital?", "Paris", None)]
    )
    assert [v.status for v in out] == ["ok", "ok", "failed"]
    assert out[0].correct is True and out[0].value == 1.0
    assert "no response" in out[2].error and np.isnan(out[2].value)
    assert len(calls) == 1 and len(calls[0]) == 2  # the failed response is not sent

    def broken(prompts):
        raise RuntimeError("CUDA out of memory")

    v = CallableJudge(broken).judge("q", "r", "a")
    assert v == Verdict("failed", error="judge call failed: RuntimeError: CUDA out of memory")
    graded = CallableJudge(lambda ps: ["9"] * len(ps), mode="graded")
    assert graded.judge("q", "r", "a").score == 0.9
    assert "from 0 (wrong or useless) to 10" in graded.prompt("q", "r", "a")


def test_http_judge_and_eas_pipeline_with_failures(server, tmp_path):
    """Generation + judging end to end: failures recorded, re-run retries only them."""
    fail_prompts = {"down": True}

    def behave(body, n):
        if "messages" in body:
            content = body["messages"][0]["content"]
            if content.startswith("You are grading"):
                return (200, "correct" if "Response to grade: B" in content else "incorrect")
            # the role + format templates (T110, T111) fail while the server is "down"
            if (
                fail_prompts["down"]
                and content.startswith("You are a careful")
                and ("Respond" in content)
            ):
                return (500, "down")
            return (200, "B" if "Respond" in content else "I think A is right")
        return (200, "?")

    server.behave = behave
    items = [
        {
            "id": f"q{i}",
            "question": f"Question {i}?",
            "answer": "B",
            "options": [("A", "x"), ("B", "y"), ("C", "z"), ("D", "w")],
        }
        for i in range(3)
    ]
    rows = build_rows(items, dataset="arc_challenge", model_name="fake-model")
    with client(server, tmp_path, max_retries=0) as c:
        judge = HTTPJudge(client(server, tmp_path / "j", max_retries=0))
        got = generate_responses(rows, c, max_tokens=8)
        failed = got.status.eq("failed")
        assert failed.sum() == 6  # T110, T111 for 3 items
        assert got.loc[failed, "raw_response"].isna().all()
        assert got.loc[failed, "error"].str.contains("HTTP 500").all()
        judged = judge_responses(got, judge)
        assert (judged.loc[failed, "judge_status"] == "failed").all()
        assert judged.loc[failed, "judge_correct"].isna().all()
        # metrics exclude the failures instead of counting them wrong
        m = instance_metrics(judged)
        assert (m.mean_heuristic == 1 / 3).all() and (m.mean_judge == 1 / 3).all()
        # resume: only the 6 failed generations are sent again
        fail_prompts["down"] = False
        n0 = len(server.requests)
        again = generate_responses(got, c, max_tokens=8)
        assert len(server.requests) - n0 == 6 and again.status.eq("ok").all()
        judged2 = judge_responses(
            judged.assign(**{k: again[k] for k in ("raw_response", "status", "error")}), judge
        )
        m2 = instance_metrics(judged2)
    assert (m2.mean_heuristic == 0.5).all() and (m2.mean_judge == 0.5).all()
    assert set(m2.columns) >= {"sens_heuristic", "sens_judge", "eas", "trizone"}
    assert isinstance(judged2, pd.DataFrame)
