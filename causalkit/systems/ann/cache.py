"""Artifact cache: replacing object ``i`` re-trains only objects ``i..8``.

Keys are tuples of the (frozen, hashable) configurations of an object and every object upstream
of it, so an artifact is reused exactly when nothing that produced it has changed. A cache is
bound to one base/training set (checked by shape and a checksum).
"""

from __future__ import annotations

import hashlib

import numpy as np


def _fingerprint(*arrays: np.ndarray) -> str:
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        h.update(str(a.shape).encode())
        step = max(1, a.shape[0] // 1024)
        h.update(np.ascontiguousarray(a[::step]).tobytes())
    return h.hexdigest()


class ArtifactCache:
    """Dictionary of trained artifacts keyed by upstream configuration."""

    def __init__(self):
        self._store: dict = {}
        self.fingerprint: str | None = None
        self.hits = 0
        self.misses = 0

    @classmethod
    def for_data(cls, cache: ArtifactCache | None, *arrays: np.ndarray) -> ArtifactCache:
        """``cache`` if it belongs to these arrays (binding a fresh one), else a new cache."""
        fp = _fingerprint(*arrays)
        if cache is None:
            cache = cls()
        if cache.fingerprint is None:
            cache.fingerprint = fp
        elif cache.fingerprint != fp:
            raise ValueError("cache: this ArtifactCache was filled from other vectors; "
                             "use a new cache per data set")
        return cache

    def get_or(self, key, compute):
        """The artifact stored under ``key``, computing and storing it on a miss."""
        if key in self._store:
            self.hits += 1
            return self._store[key]
        self.misses += 1
        value = compute()
        self._store[key] = value
        return value
