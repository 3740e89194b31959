"""Embedding models made in a test, from what is installed: nothing is downloaded."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from govindex.adapters.embedders.wordllama import WordLlamaEmbedder

CORPUS = [
    "the payments team refunds invoices and settles card payments",
    "invoice refunds are approved by the payments team",
    "card payments settle overnight and refunds follow invoices",
    "the database replica fails over when the primary database is down",
    "promote the replica and rebuild the database primary after a failover",
    "database backups restore the replica and the primary",
    "rotate the credentials of the database every ninety days",
    "the search cluster keeps shards and replicas of every index",
]
M2V_DIMS = 32  # fewer than the corpus has words: PCA gives that many components


def build_model2vec(directory: Path, *, seed: int | None = None) -> Path:
    """A real model2vec model, made here: a WordLevel tokenizer trained on CORPUS, and per
    token WordLlama's vector projected to M2V_DIMS by PCA (random ones with `seed`)."""
    from model2vec import StaticModel
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(
        CORPUS, trainers.WordLevelTrainer(special_tokens=["[UNK]", "[PAD]"])
    )
    vocabulary = [token for token, _ in sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])]
    if seed is not None:
        vectors = np.random.default_rng(seed).normal(size=(len(vocabulary), M2V_DIMS))
    else:
        words = np.stack(
            [np.frombuffer(v, dtype="<f4") for v in WordLlamaEmbedder().embed(vocabulary)]
        ).astype(np.float64)
        centred = words - words.mean(axis=0)
        _, _, components = np.linalg.svd(centred, full_matrices=False)
        vectors = centred @ components[:M2V_DIMS].T
    vectors[[tokenizer.token_to_id("[UNK]"), tokenizer.token_to_id("[PAD]")]] = 0
    StaticModel(vectors=vectors.astype(np.float32), tokenizer=tokenizer).save_pretrained(directory)
    return directory
