"""Synthetic chunk embeddings shaped like sentence embeddings, for index benchmarks at sizes no real
corpus here reaches.

Real chunk embeddings are neither uniform noise nor a few tight blobs: chunks of one document sit
near each other (adjacent chunks nearer still), documents of one topic share a direction, every
vector leans a little towards a common mean, and the variance decays over the dimensions (a few
directions carry most of it). So each vector is drawn as

    x = mean + topic + document + section + chunk noise,   then scaled to unit norm

where every term but the mean is a Gaussian with the same power-law spectrum (the i-th of `dim`
random orthonormal directions gets variance ~ i^-alpha), scaled by its share of the total variance.
Sections hold `chunks_per_section` chunks on average, documents `chunks_per_document`, topics
`documents_per_topic` documents (assignments are uniform at random, so sizes vary). The default
shares were fitted so that 3,221 synthetic chunks match, statistic by statistic, 3,221 real chunks
embedded with all-MiniLM-L6-v2 (`benchmarks/embedding_shape.py`, `records/embedding_shape.json`).
"""

from dataclasses import dataclass

import numpy as np

BLOCK = 65_536  # vectors generated at a time (bounds the temporary float32 buffers)


@dataclass(frozen=True)
class EmbeddingShape:
    alpha: float = 0.65  # spectrum: variance of the i-th direction ~ i^-alpha
    mean_norm: float = 0.08  # the common direction every vector leans towards
    topic_share: float = 0.05  # shares of the total variance (the chunk noise takes the rest)
    document_share: float = 0.38
    section_share: float = 0.18
    chunks_per_section: int = 4
    chunks_per_document: int = 32
    documents_per_topic: int = 25

    def __post_init__(self):
        rest = 1.0 - self.mean_norm ** 2 - self.topic_share - self.document_share - self.section_share
        if rest <= 0:
            raise ValueError(f"the shares leave {rest:.3f} for the chunk noise: they must sum below 1")

    @property
    def noise_share(self) -> float:
        return 1.0 - self.mean_norm ** 2 - self.topic_share - self.document_share - self.section_share


def _spectrum_basis(dim: int, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """(dim, dim) float32: standard normal rows @ basis have total variance 1 with the power-law spectrum."""
    rotation, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
    scale = np.arange(1, dim + 1, dtype=np.float64) ** (-alpha / 2)
    scale /= np.sqrt((scale ** 2).sum())
    return (rotation * scale).T.astype(np.float32)  # row i: direction i scaled by its std


def _gaussian(n: int, basis: np.ndarray, share: float, rng: np.random.Generator) -> np.ndarray:
    out = np.empty((n, basis.shape[0]), dtype=np.float32)
    for start in range(0, n, BLOCK):
        stop = min(n, start + BLOCK)
        out[start:stop] = rng.standard_normal((stop - start, basis.shape[0]), dtype=np.float32) @ basis
    out *= np.float32(np.sqrt(share))
    return out  # (n, dim)


def synthetic_embeddings(n: int, dim: int = 384, shape: EmbeddingShape = EmbeddingShape(),
                         seed: int = 0) -> np.ndarray:
    """(n, dim) float32, unit norm; the same (n, dim, shape, seed) give the same vectors."""
    rng = np.random.default_rng(seed)
    basis = _spectrum_basis(dim, shape.alpha, rng)
    mean = rng.standard_normal(dim).astype(np.float32)
    mean *= np.float32(shape.mean_norm / np.linalg.norm(mean))
    n_sections = max(1, n // shape.chunks_per_section)
    n_documents = max(1, n // shape.chunks_per_document)
    n_topics = max(1, n_documents // shape.documents_per_topic)
    topics = _gaussian(n_topics, basis, shape.topic_share, rng)
    documents = topics[rng.integers(0, n_topics, n_documents)]
    documents += _gaussian(n_documents, basis, shape.document_share, rng)
    sections = documents[rng.integers(0, n_documents, n_sections)]
    sections += _gaussian(n_sections, basis, shape.section_share, rng)
    del topics, documents
    out = _gaussian(n, basis, shape.noise_share, rng)  # (n, dim)
    section_of = rng.integers(0, n_sections, n)
    for start in range(0, n, BLOCK):
        stop = min(n, start + BLOCK)
        block = out[start:stop]
        block += sections[section_of[start:stop]]
        block += mean
        block /= np.linalg.norm(block, axis=1, keepdims=True)
    return out


def split_queries(vectors: np.ndarray, n_queries: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(database, queries): `n_queries` vectors drawn at random and held out of the database."""
    rng = np.random.default_rng(seed)
    held = np.zeros(len(vectors), dtype=bool)
    held[rng.choice(len(vectors), n_queries, replace=False)] = True
    return vectors[~held], vectors[held]


@dataclass(frozen=True)
class ShapeStats:
    """Statistics of a set of unit vectors that index difficulty depends on."""

    n: int
    mean_norm: float  # norm of the mean vector
    random_pair_cosine: float  # mean cosine of random pairs, and its standard deviation
    random_pair_cosine_sd: float
    top1_cosine: float  # mean cosine of each vector's nearest and 10th nearest other vector
    top10_cosine: float
    variance_top10: float  # share of the variance in the 10 / 50 / 100 leading principal directions
    variance_top50: float
    variance_top100: float
    participation_ratio: float  # effective number of dimensions: 1 / sum(share_i^2)


def shape_stats(vectors: np.ndarray, seed: int = 0) -> ShapeStats:
    """For a few thousand vectors (the neighbour statistics compare all pairs)."""
    rng = np.random.default_rng(seed)
    n = len(vectors)
    i, j = rng.integers(0, n, 20_000), rng.integers(0, n, 20_000)
    pairs = (vectors[i[i != j]] * vectors[j[i != j]]).sum(1)
    sims = vectors @ vectors.T  # (n, n)
    np.fill_diagonal(sims, -2.0)
    top = -np.sort(-sims, axis=1)[:, :10]
    centred = vectors - vectors.mean(0)
    share = np.linalg.eigvalsh(centred.T @ centred / n)[::-1]
    share = share / share.sum()
    return ShapeStats(n, float(np.linalg.norm(vectors.mean(0))), float(pairs.mean()), float(pairs.std()),
                      float(top[:, 0].mean()), float(top[:, 9].mean()), float(share[:10].sum()),
                      float(share[:50].sum()), float(share[:100].sum()), float(1.0 / (share ** 2).sum()))
