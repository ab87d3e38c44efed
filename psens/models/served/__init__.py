"""The IPS value function of a model behind an HTTP server (llama.cpp, vLLM, TGI, ...).

A served model is a run's model entry of the form::

    {"name": "smollm2-q4", "base_url": "http://127.0.0.1:8000/v1", "model": "smollm2",
     "tokenizer": "smollm2-135m-instruct"}

(a TOML inline table in ``models = [...]``). :class:`ServedScorer` has the interface of
:class:`psens.models.Scorer` (``value``, ``predict``, ``info``): it renders and tokenises
every prompt locally exactly as the local scorer does (same templates, same words, same mask
token, same answer token; the tokenizer is a packaged name, a folder, a GGUF file or a hub
id), and asks the server only for log-probabilities. For a masked prompt ``x_T`` (token ids)
and the answer's first token ``y*``

.. math::  v(x_T) = \\log \\frac{p}{1 - p}, \\qquad p = \\exp \\log p(y^* \\mid x_T),

with ``p`` clamped to ``[1e-7, 1 - 1e-7]`` as in :mod:`psens.models.scorer`; ``log p`` is
the server's full-vocabulary log-softmax at the answer position.

How the server is asked (probed once per endpoint, :meth:`ServedScorer.probe`)
------------------------------------------------------------------------------
``prompt_logprobs`` (vLLM)
    ``POST /completions`` with the token ids of ``x_T + y*`` and ``prompt_logprobs``: the
    log-probability of every prompt token given the tokens before it (by token id).
``native`` (llama.cpp ``llama-server``)
    ``POST /completion`` (beside ``/v1``) with token ids, ``n_predict = 1``, ``n_probs``
    and ``cache_prompt``: the next-token distribution after ``x_T`` (by token id).
``tgi`` (text-generation-inference)
    ``POST /generate`` with ``decoder_input_details``: prompt log-probabilities by token
    id. TGI takes text, not ids: the prompt is decoded and the ids the server reports are
    compared with the local ones; a request the server tokenised differently fails.
``echo`` (OpenAI-style completions that take ids)
    ``echo`` + ``logprobs``: used only when the echoed log-probability of a token equals
    the one the server gives when it generates that token (llama-cpp-python's echo is one
    position off for models without a BOS token, so it is not used there).
``next`` (llama-cpp-python and other OpenAI-style completions)
    ``max_tokens = 1`` with ``logprobs = k``: the top-k next-token distribution after
    ``x_T``, keyed by token text; asked again with the whole vocabulary when ``y*`` is not
    among the top k. End-of-text tokens get a logit bias so that generation does not stop
    before the first token (the bias acts on sampling, not on the reported
    log-probabilities). llama-cpp-python takes no token ids: prompts are sent as text
    (see *Text prompts*).

A server that answers none of these (a chat-only API) is refused: IPS needs the
log-probability of a given token after a given prompt.

Text prompts
------------
When a server takes no token ids, the masked ids are decoded to text and the server
tokenises them again. psens checks that the local tokenizer gives the same ids back (a
prompt that does not survive the round trip fails its request), and that the server counts
as many prompt tokens (``usage.prompt_tokens``) as psens sent; what may still differ is a
server tokenizer that splits the same number of tokens differently. A warning says so once
per scorer.

Reliability
-----------
Every request goes through :class:`psens.backends.OpenAIClient`'s plumbing: a total deadline,
retries with backoff, a bound on the reply size. Answers are kept in a
:class:`psens.backends.ResponseCache` (in memory, or on disk with ``cache_dir``) keyed by
(server, model, token ids, what was asked), so a resumed run asks nothing twice. A request
that still fails raises :class:`ServedError`: the runner records the block as failed, never
a wrong number.

Speed
-----
The unique masked prompts of one (item, template) are sent in the local scorer's
prefix-tree order (sorted token rows: neighbours share the longest prefixes), so a server
that keeps its last prompt's key/value cache (llama.cpp ``cache_prompt``, llama-cpp-python)
recomputes only the tokens after the first difference. ``concurrency`` requests per endpoint
are in flight at once; with several ``endpoints`` (replicas of one model) the prompts are
split into contiguous runs of that order, one per endpoint. The values do not depend on the
split: each is a function of its own token ids.

References
----------
R. Qin, Q. Wang, T. Wang, Z. Wei, W. Shen. *Evaluating and Explaining Prompt Sensitivity of
LLMs Using Interactions.* ICML 2026 (PMLR 306). arXiv:2608.18539 (§3.1, appendix E).
"""

from psens.models.served.entry import (
    ENTRY_KEYS,
    IDENTITY_KEYS,
    MODES,
    NATIVE_TOP_K,
    TOP_K,
    WHERE,
    ServedError,
    ServedModel,
    check_reachable,
    load_tokenizer,
)
from psens.models.served.replies import LOGPROB_TOL
from psens.models.served.scorer import ServedScorer

__all__ = [
    "ENTRY_KEYS",
    "IDENTITY_KEYS",
    "LOGPROB_TOL",
    "MODES",
    "NATIVE_TOP_K",
    "TOP_K",
    "WHERE",
    "ServedError",
    "ServedModel",
    "ServedScorer",
    "check_reachable",
    "load_tokenizer",
]
