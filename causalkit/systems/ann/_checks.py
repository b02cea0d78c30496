"""Input checks for the ANN driver: vector sets, ``k`` and training sizes.

These extend :mod:`causalkit._validation` (which they call) with the checks that only vector
search needs: a fixed dimension shared by base, training and query sets, ``k <= n``, and
faiss's rule of at least ``min_points_per_centroid`` (39) training points per centroid.
"""

from __future__ import annotations

import numpy as np

from causalkit._validation import check_array, check_positive_int

#: faiss's ``ClusteringParameters.min_points_per_centroid``: below this faiss warns.
MIN_POINTS_PER_CENTROID = 39


def check_vectors(x, name: str, *, d: int | None = None, min_rows: int = 1) -> np.ndarray:
    """Validate a set of vectors and return it as C-contiguous float32.

    Parameters
    ----------
    x : array-like of shape (n, d)
    name : str
        Argument name used in error messages.
    d : int, optional
        Required dimension (raises ``ValueError`` on a mismatch).
    min_rows : int
        Minimum number of vectors.
    """
    arr = check_array(x, name, min_rows=min_rows)
    if d is not None and arr.shape[1] != d:
        raise ValueError(f"{name} has dimension {arr.shape[1]}, but the index was built for "
                         f"dimension {d}")
    return np.ascontiguousarray(arr, dtype=np.float32)


def check_k(k, n: int, name: str = "k") -> int:
    """``k`` must be a positive integer not larger than the number of base vectors ``n``."""
    k = check_positive_int(k, name)
    if k > n:
        raise ValueError(f"{name}={k} is larger than the number of base vectors ({n})")
    return k


def check_training_points(n_train: int, n_centroids: int, what: str) -> None:
    """Raise when fewer than 39 training points per centroid are available.

    Parameters
    ----------
    n_train : int
        Number of training vectors.
    n_centroids : int
        Number of centroids (``nlist`` for the coarse quantizer, ``2**nbits`` for PQ).
    what : str
        Name of the quantizer, used in the message.
    """
    need = MIN_POINTS_PER_CENTROID * n_centroids
    if n_train < need:
        raise ValueError(
            f"too few training points for {what}: {n_train} vectors for {n_centroids} centroids "
            f"(need at least {MIN_POINTS_PER_CENTROID} per centroid, i.e. {need}); use fewer "
            "centroids or more training data")


def check_ground_truth(ground_truth, nq: int, k: int) -> np.ndarray:
    """Validate an (nq, >=k) integer array of true neighbour ids."""
    gt = np.asarray(ground_truth)
    if gt.ndim != 2 or gt.shape[0] != nq:
        raise ValueError(f"ground_truth must have shape ({nq}, >= {k}); got {gt.shape}")
    if gt.shape[1] < k:
        raise ValueError(f"ground_truth has {gt.shape[1]} neighbours per query; need >= k={k}")
    if not np.issubdtype(gt.dtype, np.integer):
        raise TypeError(f"ground_truth must hold integer ids; got dtype {gt.dtype}")
    return gt.astype(np.int64, copy=False)
