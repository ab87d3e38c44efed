"""DBSA: distribution-based token sensitivity of black-box language models.

Implements Distribution-Based Sensitivity Analysis (Rauba, Wei and van der Schaar, 2025): every
token of a
prompt is swapped with its nearest neighbours, the model is sampled ``n`` times on the
original and ``m`` times on each perturbed prompt, responses are embedded, and the output
distributions are compared with the energy distance and a permutation test.

>>> from psens import dbsa
>>> ds = dbsa.dbsa(text, sampler, neighbours)      # doctest: +SKIP
>>> dbsa.top_k(ds, 5)                              # doctest: +SKIP
>>> dbsa.highlight(ds)                             # doctest: +SKIP

Modules: :mod:`~psens.dbsa.tokens`, :mod:`~psens.dbsa.neighbours`,
:mod:`~psens.dbsa.sampling`, :mod:`~psens.dbsa.embeddings`, :mod:`~psens.dbsa.distances`,
:mod:`~psens.dbsa.metric`, :mod:`~psens.dbsa.highlight`, :mod:`~psens.dbsa.ablations`,
:mod:`~psens.dbsa.charts` (altair, imported lazily), :mod:`~psens.dbsa.tables` (the
two-model comparison a UI shows: highlights, top-k table, chart). The response cache is the shared
:class:`psens.backends.ResponseCache` (re-exported here). Nothing here imports torch,
sentence-transformers or altair at import time.

References
----------
.. [1] Rauba, P., Wei, Q., and van der Schaar, M. "Visualizing token importance for black-box
   language models." Proceedings of the 28th International Conference on Artificial
   Intelligence and Statistics (AISTATS), PMLR 258, 2025. arXiv:2512.11573.
"""

import sys as _sys

from .distances import (
    cross_distances,
    energy_distance,
    null_statistics,
    p_value,
    pairwise_distances,
    permutation_indices,
    permutation_test,
    permutation_test_1d,
    permutation_test_from_distances,
    wasserstein_1d,
)
from .embeddings import Embedder, load_embedder
from .metric import analyse, collect, dbsa, resolve_neighbours, select_tokens, top_k
from .neighbours import (
    EmbeddingNeighbours,
    dictionary_neighbours,
    llm_neighbours,
    minilm_vocabulary,
    number_neighbours,
)
from .sampling import CachedSampler, ResponseCache, client_sampler, hf_sampler, sample_key
from .tables import available_statistics, check_results, dbsa_view, shading, table_html
from .tokens import Token, perturb, tokenize, unique_tokens

__all__ = [
    # sampling and embeddings
    "CachedSampler",
    "Embedder",
    "EmbeddingNeighbours",
    "ResponseCache",
    # tokens and neighbours
    "Token",
    # pipeline
    "analyse",
    "available_statistics",
    "check_results",
    # statistics
    "client_sampler",
    "collect",
    "cross_distances",
    "dbsa",
    "dbsa_view",
    "dictionary_neighbours",
    "energy_distance",
    "hf_sampler",
    "llm_neighbours",
    "load_embedder",
    "minilm_vocabulary",
    "null_statistics",
    "number_neighbours",
    "p_value",
    "pairwise_distances",
    "permutation_indices",
    "permutation_test",
    "permutation_test_1d",
    "permutation_test_from_distances",
    "perturb",
    "resolve_neighbours",
    "sample_key",
    "select_tokens",
    "shading",
    "table_html",
    "tokenize",
    "top_k",
    "unique_tokens",
    "wasserstein_1d",
]

# the names three modules had before they took the method layout's names (metric, tables,
# charts): ``import psens.dbsa.analysis`` keeps working
from . import charts as _charts
from . import metric as _metric
from . import tables as _tables

for _old, _module in (("analysis", _metric), ("plots", _charts), ("view", _tables)):
    _sys.modules[f"{__name__}.{_old}"] = _module
