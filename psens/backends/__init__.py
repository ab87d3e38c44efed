"""Black-box generation backends and judges for output-level sensitivity (PSS, EAS).

:mod:`psens.backends.client` holds the HTTP client and the response cache,
:mod:`psens.backends.judges` the judges.

:class:`OpenAIClient` talks to any OpenAI-compatible HTTP server — OpenAI, vLLM, Ollama
(``/v1``), llama.cpp / llama-cpp-python servers — through ``/chat/completions`` and
``/completions``, with

* retries with exponential backoff (connection errors, timeouts, HTTP 408/409/429/5xx; other
  4xx fail at once), honouring ``Retry-After`` up to ``backoff_max`` (a longer wait asked
  for fails the request at once, saying so: a re-run asks again);
* a per-read ``timeout`` and a total ``deadline`` per HTTP request (connecting, sending,
  waiting and reading the whole body), so a server that trickles its reply byte by byte
  cannot hold a call forever;
* a bound on the size of a reply (``max_response_bytes``): a larger body is refused after
  reading at most that much (at once when ``Content-Length`` announces it);
* a concurrency limit (a thread pool of ``concurrency`` workers);
* an on-disk response cache (:class:`ResponseCache`, one JSON file per key, atomic writes;
  the one cache of psens, also behind DBSA's sampler) keyed by a SHA-256 of (server, endpoint
  kind, model, prompt or messages, params, seed); the server is the normalised base URL, so
  two servers that serve a model under the same name never share answers.

A reply is only accepted if it has the OpenAI shape: a JSON object whose ``choices[0]`` holds
a string ``message.content`` (chat) or ``text`` (completions). Anything else (no or empty
``choices``, ``null`` entries, a number or a list as content, ...) is a failed call whose
error names what was wrong; it never becomes an answer.

A call that still fails after its retries is returned as a :class:`Response` with
``status="failed"`` and the error text — never as an empty string or a made-up answer — and it
is *not* written to the cache, so re-running the same batch retries exactly the failures while
every success is served from disk without a request.

Judges (:class:`Judge`) turn (question, reference, response) into a :class:`Verdict` (binary
``correct`` or graded ``score``, the judge's raw text, a status). :class:`CallableJudge` wraps
any ``generate(prompts) -> list[str]`` callable (e.g. the local HF model layer);
:class:`HTTPJudge` uses an :class:`OpenAIClient`.
"""

from psens.backends.client import (
    MAX_RESPONSE_BYTES,
    RETRY_STATUS,
    OpenAIClient,
    Response,
    ResponseCache,
    cache_key,
    normalise_server,
)
from psens.backends.judges import (
    DEFAULT_JUDGE_TEMPLATE,
    GRADED_JUDGE_TEMPLATE,
    CallableJudge,
    HTTPJudge,
    Judge,
    Verdict,
    instruction_text,
    parse_verdict,
    reread_verdicts,
)

__all__ = [
    "DEFAULT_JUDGE_TEMPLATE",
    "GRADED_JUDGE_TEMPLATE",
    "MAX_RESPONSE_BYTES",
    "RETRY_STATUS",
    "CallableJudge",
    "HTTPJudge",
    "Judge",
    "OpenAIClient",
    "Response",
    "ResponseCache",
    "Verdict",
    "cache_key",
    "instruction_text",
    "normalise_server",
    "parse_verdict",
    "reread_verdicts",
]
