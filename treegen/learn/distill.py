"""Distillation: a single tree trained on what a teacher ensemble decides.

Model compression (Bucilă, Caruana & Niculescu-Mizil 2006) trains a small model on data labelled by
a large one; the data are the training rows plus pseudo-samples drawn around them (MUNGE). Here the
student is any treegen tree inducer (EFTI first), the teacher

``"rf"``            a 100-tree random forest of CART trees (``max_features='sqrt'``) trained inside the
                    student's ``fit`` on the same rows, seeded from the student's seed — so in
                    cross-validation the teacher never sees a test fold either;
a :class:`~treegen.core.model.Model`  any model with the same features (a treegen forest, an imported
                    XGBoost/LightGBM/scikit-learn model), applied to the raw inputs;

and the rows the student learns from are (:func:`distilled_rows`):

1. the training rows with their own labels (the teacher's labels there would only copy its
   training error back: a forest reproduces its training labels almost always), and
2. ``samples`` x n pseudo-samples, MUNGE-style: each row ``e`` with its nearest other row ``e'``
   (Euclidean, normalised features); every attribute, with probability ``swap``, is drawn from
   ``N(e'_a, |e_a - e'_a| / spread)`` (else it keeps ``e_a``), snapped to the Q15 grid the trees
   compare on; labelled by the teacher's vote.

The pseudo-samples fill the space between the rows with the ensemble's boundary, which a size-
penalised tree then approximates; hard labels, since every inducer's fitness counts correct rows.
Deterministic: a seed gives the same rows (numpy's PCG64 on the seed), hence the same tree on
every engine that trains on them.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.scaling import Q15_MAX, Q15_ONE

#: teacher names that are trained inside the student's fit
TEACHERS = ("rf",)
#: MUNGE: probability that an attribute is drawn around the neighbour's value, and the spread divisor
SWAP, SPREAD = 0.5, 1.0
#: rows of the distance matrix computed at once (memory bound of the nearest-neighbour search)
_CHUNK = 1024
#: the most pseudo-samples per training row
MAX_SAMPLES = 20.0
#: trees of the "rf" teacher
RF_TREES = 100


def check_teacher(teacher, samples) -> None:
    """One-line errors for a teacher or a pseudo-sample count that cannot be used."""
    from treegen.core.model import Model

    if not (teacher in TEACHERS or isinstance(teacher, Model)):
        raise TreegenError(f"teacher must be one of {', '.join(TEACHERS)} or a treegen Model, got {teacher!r}")
    try:
        ok = 0.0 <= float(samples) <= MAX_SAMPLES
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise TreegenError(f"teacher_samples must be a number in 0..{MAX_SAMPLES:g} (pseudo-samples per training "
                           f"row), got {samples!r}")


def nearest_other(Xn: np.ndarray) -> np.ndarray:
    """Index of each row's nearest other row (Euclidean; ties to the lowest index). One row: itself."""
    n = Xn.shape[0]
    if n < 2:
        return np.zeros(n, dtype=np.int64)
    sq = np.einsum("ij,ij->i", Xn, Xn)
    out = np.empty(n, dtype=np.int64)
    for a in range(0, n, _CHUNK):
        b = min(n, a + _CHUNK)
        d = sq[a:b, None] + sq[None, :] - 2.0 * (Xn[a:b] @ Xn.T)
        d[np.arange(b - a), np.arange(a, b)] = np.inf
        out[a:b] = np.argmin(d, axis=1)
    return out


def munge(Xn: np.ndarray, samples: float, seed: int, *, swap: float = SWAP, spread: float = SPREAD) -> np.ndarray:
    """``round(samples * n)`` MUNGE pseudo-samples around the normalised rows ``Xn`` (on the Q15 grid)."""
    n = Xn.shape[0]
    count = int(round(float(samples) * n))
    if count == 0 or n == 0:
        return np.empty((0, Xn.shape[1]))
    rng = np.random.Generator(np.random.PCG64(int(seed)))
    nn = nearest_other(Xn)
    base = np.arange(count) % n                       # every row in turn, then again
    e, f = Xn[base], Xn[nn[base]]
    drawn = rng.normal(f, np.abs(e - f) / spread)
    pseudo = np.where(rng.random(e.shape) < swap, drawn, e)
    return np.clip(np.rint(pseudo * Q15_ONE), 0, Q15_MAX) / Q15_ONE


def forest_votes(Xn: np.ndarray, y: np.ndarray, n_classes: int, rows: np.ndarray, *, seed: int,
                 n_trees: int = RF_TREES) -> np.ndarray:
    """The majority vote (ties: the lowest class) on ``rows`` of a random forest of CART trees trained on
    ``Xn, y`` — the forest of ``RFClassifier(n_trees, base='cart', max_features='sqrt')``, tree by tree
    (:func:`treegen.learn.forest.fit_one`). The forest is a function of its inputs: the last few trained
    are kept (:func:`teacher_forest`), so the students of a search (``tune``'s candidates on one fold,
    each distilled with other EFTI settings) share one teacher instead of training it again."""
    votes = np.zeros((rows.shape[0], n_classes), dtype=np.int64)
    for tree in teacher_forest(Xn, y, n_classes, seed=seed, n_trees=n_trees):
        votes[np.arange(rows.shape[0]), tree.predict_index(rows)] += 1
    return votes.argmax(axis=1).astype(np.int64)


#: how many teacher forests a process keeps (a forest of 100 trees on n rows: about 100 x 2n nodes)
KEEP_FORESTS = 2
_forests: "OrderedDict[tuple, list]" = OrderedDict()
_forests_lock = threading.Lock()


def teacher_forest(Xn: np.ndarray, y: np.ndarray, n_classes: int, *, seed: int, n_trees: int = RF_TREES) -> list:
    """The ``n_trees`` CART trees of the "rf" teacher on ``Xn, y`` (seeded), from the cache when the same
    rows, labels, classes, seed and size were seen last (keyed by a digest of the arrays' bytes)."""
    from treegen.learn import forest

    Xn, y = np.ascontiguousarray(Xn), np.ascontiguousarray(y)
    digest = hashlib.blake2b(Xn.tobytes(), digest_size=16)
    digest.update(y.tobytes())
    key = (digest.hexdigest(), Xn.shape, Xn.dtype.str, y.dtype.str, int(n_classes), int(seed), int(n_trees))
    with _forests_lock:
        if key in _forests:
            _forests.move_to_end(key)
            return _forests[key]
    k = forest.resolve_max_features("sqrt", Xn.shape[1])
    trees = [forest.fit_one(t, Xn, y, n_classes, seed=seed, base="cart",
                            base_params={"criterion": "gini", "max_depth": None, "min_samples_leaf": 1},
                            sample_fraction=1.0, bagging="split", k=k)[0] for t in range(n_trees)]
    with _forests_lock:
        _forests[key] = trees
        while len(_forests) > KEEP_FORESTS:
            _forests.popitem(last=False)
    return trees


def _teacher_votes(teacher, Xn, y, n_classes, pseudo, scaling, seed) -> np.ndarray:
    """The teacher's class index for each pseudo-sample."""
    if isinstance(teacher, str):          # "rf": trained here, on the student's rows only
        return forest_votes(Xn, y, n_classes, pseudo, seed=int(seed) ^ 0x5EED)
    if teacher.n_features != Xn.shape[1]:
        raise TreegenError(f"the teacher model has {teacher.n_features} features, the data {Xn.shape[1]}")
    if teacher.is_regression:
        raise TreegenError("a regression model cannot teach a classifier")
    raw = _raw(pseudo, scaling)
    labels = teacher.predict(raw)
    return np.asarray(labels, dtype=object)


def _key(label) -> str:
    """A label compared by value whatever its numpy type (classes_ holds numpy scalars, a model Python ones)."""
    return repr(label.item() if isinstance(label, np.generic) else label)


def _raw(Xn: np.ndarray, scaling) -> np.ndarray:
    """Normalised grid values -> raw inputs that scale back to them (constant features: the offset)."""
    scale = np.where(scaling.scale > 0, scaling.scale, 1.0)
    return np.where(scaling.scale > 0, scaling.offset + Xn / scale, scaling.offset)


def distilled_rows(Xn: np.ndarray, y: np.ndarray, n_classes: int, *, teacher, samples: float, seed: int,
                   scaling=None, classes=None) -> tuple[np.ndarray, np.ndarray, dict]:
    """The rows a student learns from: ``Xn`` with its labels ``y`` (class indices) and the teacher-labelled
    pseudo-samples; plus what to record (teacher, pseudo-sample count, the teacher's agreement with the
    labels on the training rows). ``scaling``/``classes``: the student's, needed for a Model teacher."""
    check_teacher(teacher, samples)
    pseudo = munge(Xn, samples, seed)
    info = {"teacher": teacher if isinstance(teacher, str) else f"model {teacher.hash()[:16]}",
            "teacher_samples": int(pseudo.shape[0])}
    if pseudo.shape[0] == 0:
        return Xn, y, info
    votes = _teacher_votes(teacher, Xn, y, n_classes, pseudo, scaling, seed)
    if not isinstance(teacher, str):         # a model's original labels -> the student's class indices
        index = {_key(c): i for i, c in enumerate(classes)}
        unknown = [v for v in votes.tolist() if _key(v) not in index]
        if unknown:
            raise TreegenError(f"the teacher predicts class {unknown[0]!r}, which the data's labels do not have")
        votes = np.array([index[_key(v)] for v in votes.tolist()], dtype=np.int64)
    return np.vstack([Xn, pseudo]), np.concatenate([y, votes]).astype(y.dtype), info
