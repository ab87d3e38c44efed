"""A tiny random-weight causal LM saved as a folder (loads in < 1 s) and a tiny MCQ dataset.

Used by the pipeline tests so that a full run (scoring, decomposition, store, resume,
dask) is exercised in the fast suite without any hub access.
"""

from __future__ import annotations

import json
from pathlib import Path

QUESTIONS = [
    ("q1", "Which one of these animals does NOT lay eggs?", ["chickens", "dogs", "frogs"], "B"),
    ("q2", "What makes plants green?", ["chlorophyll", "water", "sand"], "A"),
    ("q3", "Which planet is closest to the sun?", ["Venus", "Mars", "Mercury"], "C"),
    ("q4", "What do bees make?", ["milk", "honey", "silk"], "B"),
    ("q5", "Which tool measures temperature?", ["ruler", "scale", "thermometer"], "C"),
    ("q6", "What falls from clouds?", ["rain", "rocks", "leaves"], "A"),
]


def write_tiny_dataset(path: Path) -> Path:
    """A jsonl file in psens's own columns (question, options, answer, id)."""
    with open(path, "w") as f:
        for qid, q, opts, ans in QUESTIONS:
            f.write(json.dumps({"id": qid, "question": q, "options": opts, "answer": ans}) + "\n")
    return path


def tiny_llama(tok, *, hidden: int = 32, layers: int = 2, seed: int = 0, **config):
    """A random-weight Llama for tokenizer ``tok`` (a few MB, builds in well under 1 s)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    settings = {
        "vocab_size": len(tok),
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": 4 if hidden % 4 == 0 else 2,
        "num_key_value_heads": 2,
        "max_position_embeddings": 512,
        "initializer_range": 0.3,
    }
    cfg = LlamaConfig(**{**settings, **config})
    return LlamaForCausalLM(cfg).eval()


def write_tiny_model(folder: Path, seed: int = 0) -> Path:
    """A 2-layer Llama (hidden 32) with a byte-level BPE tokenizer, via save_pretrained."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers import models as tmodels
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tk = Tokenizer(tmodels.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus = [f"Question: {q} Answers: A. {o[0]} B. {o[1]} C. {o[2]}" for _, q, o, _ in QUESTIONS]
    tk.train_from_iterator(corpus * 3, trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        unk_token="<|endoftext|>",
        pad_token="<|im_end|>",
        eos_token="<|im_end|>",
    )
    model = tiny_llama(tok, seed=seed, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
