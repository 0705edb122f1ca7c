"""Models, rows and compiler helpers shared by the export tests (test_codegen_golden, test_export*).

Everything is deterministic: hand-built trees, or random trees from an explicit seed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np

from treegen.core.model import Model
from treegen.core.scaling import InputScaling
from treegen.core.tree import LEAF, Tree
from treegen.emit.export import STRICT_CFLAGS

DRIVER = Path(__file__).resolve().parent / "c" / "tg_driver.c"
Q15_MAX = 32767
ARM_CPUS = ("cortex-m0plus", "cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")
DSP_CPUS = ("cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")
MVE_CPUS = ("cortex-m55",)


# ---------------------------------------------------------------------- models
def make_model(trees: list, n_features: int, n_classes: int, *, classes=None, names=None,
               scaling: InputScaling | None = None, dataset: str = "demo.csv") -> Model:
    return Model(
        trees=trees,
        feature_names=names or [f"f{i}" for i in range(n_features)],
        classes=classes or list(range(n_classes)),
        scaling=scaling or InputScaling(np.zeros(n_features), np.full(n_features, 1.0 / 32768), "q15"),
        metadata={"dataset": dataset},
    )


def _tree(W, thr, left, right, leaf_class, n_classes) -> Tree:
    W = np.asarray(W, dtype=np.float64)
    return Tree(W, np.asarray(thr, dtype=np.float64), left, right, leaf_class,
                np.zeros((W.shape[0], n_classes), dtype=np.int64)).validate()


def small_axis_tree() -> Tree:
    """3 features, 3 classes: x0 <= 0.5 ? (-2*x2 <= -0.75 ? c2 : c0) : c1   (a flipped coefficient)."""
    W = np.zeros((5, 3))
    W[0, 0] = 1.0
    W[1, 2] = -2.0
    return _tree(W, [0.5, -0.75, 0, 0, 0], [1, 3, LEAF, LEAF, LEAF], [2, 4, LEAF, LEAF, LEAF],
                 [0, 0, 1, 2, 0], 3)


def small_oblique_tree() -> Tree:
    """3 features, 3 classes, EFTI-style exact coefficients (integers / 2^15, thresholds / 2^30)."""
    W = np.zeros((5, 3))
    W[0] = [12000 / 32768, -9000 / 32768, 3000 / 32768]
    W[1] = [0.0, 20000 / 32768, 15000 / 32768]
    thr = [123456789 / 2**30, 400000000 / 2**30, 0, 0, 0]
    return _tree(W, thr, [1, 3, LEAF, LEAF, LEAF], [2, 4, LEAF, LEAF, LEAF], [0, 0, 1, 2, 0], 3)


def small_forest() -> Model:
    """Two imported-style axis trees with raw (float32-source) thresholds and impure leaves, soft vote,
    min-max scaling on 3 features (the soft-vote / predict_proba golden case)."""
    trees = []
    for k, (t0, t1) in enumerate(((2.5, 0.3125), (1.75, 0.1))):
        W = np.zeros((5, 3))
        W[0, 0] = 1.0
        W[1, 2] = 1.0
        scaling = InputScaling(np.array([0.0, 0.0, -1.0]), np.array([0.25, 1.0, 0.5]) / 32768 * 32767 / 32768)
        grid = [(np.floor((t0 - 0.0) * scaling.scale[0] * 32768) + 0.5) / 32768,
                (np.floor((t1 + 1.0) * scaling.scale[2] * 32768) + 0.5) / 32768]
        counts = np.array([[9, 7, 4], [6, 3, 1], [3, 4, 3], [5, 1, 0], [1, 2, 1]]) + k
        counts[0] = counts[1] + counts[2]
        counts[1] = counts[3] + counts[4]
        trees.append(Tree(W, [grid[0], grid[1], 0, 0, 0], [1, 3, LEAF, LEAF, LEAF], [2, 4, LEAF, LEAF, LEAF],
                          counts.argmax(axis=1), counts, [t0, t1, 0, 0, 0]).validate())
    return Model(trees, ["sepal length", "width */ x", "petal"], ["setosa", 'quo"te', 7], scaling,
                 {"dataset": "demo.csv"}, vote="soft", input_contract="float32")


def small_models() -> dict:
    """The hand-built models of the golden files (3 features; labels that need escaping)."""
    classes = ["setosa", 'quo"te', 7]
    names = ["sepal length", "width */ x", "petal"]
    return {
        "axis": make_model([small_axis_tree()], 3, 3, classes=classes, names=names),
        "oblique": make_model([small_oblique_tree()], 3, 3, classes=classes, names=names),
        "ensemble": make_model([small_axis_tree(), small_oblique_tree(), small_oblique_tree().compact()],
                               3, 3, classes=classes, names=names),
        "forest": small_forest(),
    }


def _structure(rng, n_internal: int) -> tuple[list, list]:
    left, right, leaves = [LEAF], [LEAF], [0]
    for _ in range(n_internal):
        k = leaves.pop(int(rng.integers(len(leaves))))
        a = len(left)
        left += [LEAF, LEAF]
        right += [LEAF, LEAF]
        left[k], right[k] = a, a + 1
        leaves += [a, a + 1]
    return left, right


def random_tree(rng, n_features: int, n_classes: int, n_internal: int, mode: str) -> Tree:
    """A random valid tree. ``mode``:

    ``axis``       one coefficient per node (some negative / non-unit), thresholds on, between and
                   off the Q15 grid, some out of [0, 1) (-> clamped thresholds);
    ``efti``       oblique, EFTI-style exact coefficients (int/2^15, thresholds int/2^30), sparse;
    ``float``      oblique, arbitrary float coefficients and thresholds (inexact quantisation);
    ``pair``       oblique, two adjacent-or-not non-zero weights per node (int32 accumulator);
    ``dense``      oblique, every weight large (forces the int64 accumulator when n_features >= 3);
    ``mixed``      oblique with some one-term and all-zero nodes.
    """
    left, right = _structure(rng, n_internal)
    n = len(left)
    W = np.zeros((n, n_features))
    thr = np.zeros(n)
    for k in range(n):
        if left[k] == LEAF:
            continue
        x0 = rng.integers(0, Q15_MAX + 1, n_features)
        if mode == "axis":
            f = int(rng.integers(n_features))
            c = float(rng.choice([1.0, 1.0, 1.0, -1.0, 2.0, -0.5, 0.3712, -1.7]))
            t = float(rng.uniform(-0.05, 1.05))
            style = int(rng.integers(3))
            if style == 0:
                t = np.floor(t * 32768) / 32768
            elif style == 1:
                t = (np.floor(t * 32768) + 0.5) / 32768
            W[k, f] = c
            thr[k] = c * t
            continue
        if mode == "efti":
            mask = rng.random(n_features) < 0.6
            mask[int(rng.integers(n_features))] = True
            wi = rng.integers(-32767, 32768, n_features) * mask
            W[k] = wi / 32768
            thr[k] = (int(wi @ x0) + int(rng.integers(-3, 4))) / 2**30
        elif mode == "float":
            mask = rng.random(n_features) < 0.7
            mask[int(rng.integers(n_features))] = True
            W[k] = rng.normal(0, 1, n_features) * mask
            thr[k] = float(W[k] @ (x0 / 32768)) + float(rng.normal(0, 1e-6))
        elif mode == "pair":
            if rng.random() < 0.5:
                j, m = (int(v) for v in rng.choice(n_features, 2, replace=False))
            else:
                j = int(rng.integers(n_features - 1))
                m = j + 1
            wi = rng.integers(-32767, 32768, 2)
            W[k, j], W[k, m] = wi[0] / 32768, wi[1] / 32768
            thr[k] = float(W[k] @ (x0 / 32768))
        elif mode == "dense":
            wi = rng.integers(20000, 32768, n_features) * rng.choice([-1, 1], n_features)
            W[k] = wi / 32768
            thr[k] = (int(wi @ x0)) / 2**30
        elif mode == "mixed":
            r = rng.random()
            if r < 0.25:
                W[k, int(rng.integers(n_features))] = float(rng.choice([-1.0, 0.5]))
                thr[k] = float(rng.uniform(-0.2, 0.8))
            elif r < 0.4:
                thr[k] = float(rng.choice([-0.25, 0.0, 0.25]))  # all-zero weights: constant test
            else:
                wi = rng.integers(-32767, 32768, n_features)
                W[k] = wi / 32768
                thr[k] = int(wi @ x0) / 2**30
        else:
            raise ValueError(mode)
    leaf_class = rng.integers(0, n_classes, n)
    return _tree(W, thr, left, right, leaf_class, n_classes).compact()


# ---------------------------------------------------------------------- rows
def visits(qt, X: np.ndarray) -> np.ndarray:
    """Boolean (rows, n_internal): the internal nodes each row passes through (integer semantics)."""
    X = np.asarray(X, dtype=np.int64)
    seen = np.zeros((X.shape[0], qt.n_internal), dtype=bool)
    ref = np.full(X.shape[0], qt.root, dtype=np.int64)
    active = np.flatnonzero(ref >= 0)
    while active.size:
        node = ref[active]
        seen[active, node] = True
        if qt.kind == "axis":
            go = X[active, qt.feature[node]] <= qt.threshold[node]
        else:
            go = np.einsum("ij,ij->i", X[active], qt.weights[node]) <= qt.threshold[node]
        ref[active] = np.where(go, qt.left[node], qt.right[node])
        active = active[ref[active] >= 0]
    return seen


def threshold_hits(qt, X: np.ndarray) -> int:
    """Rows that meet a threshold exactly (x[f] == T, or acc == T) at a node on their path."""
    X = np.asarray(X, dtype=np.int64)
    seen = visits(qt, X)
    hit = np.zeros(X.shape[0], dtype=bool)
    for i in range(qt.n_internal):
        v = X[:, qt.feature[i]] if qt.kind == "axis" else X @ qt.weights[i]
        hit |= seen[:, i] & (v == qt.threshold[i])
    return int(hit.sum())


def _egcd(a: int, b: int) -> tuple[int, int, int]:
    x0, y0, x1, y1 = 1, 0, 0, 1
    while b:
        q, a, b = a // b, b, a % b
        x0, x1 = x1, x0 - q * x1
        y0, y1 = y1, y0 - q * y1
    return a, x0, y0


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def _hit(x: np.ndarray, w: np.ndarray, T: int, rng, tries: int = 8):
    """A copy of ``x`` changed in one or two features so that ``w . x == T`` exactly, or None."""
    nz = [int(j) for j in np.flatnonzero(w)]
    if not nz:
        return None
    delta = T - int(x.astype(np.int64) @ w)
    for _ in range(tries):
        j = nz[int(rng.integers(len(nz)))]
        wj = int(w[j])
        if delta % wj == 0 and 0 <= int(x[j]) + delta // wj <= Q15_MAX:
            y = x.copy()
            y[j] += delta // wj
            return y, j
        others = [k for k in nz if k != j]
        if not others:
            continue
        k = others[int(rng.integers(len(others)))]
        wk = int(w[k])
        g, u, v = _egcd(wj, wk)  # u*wj + v*wk = g (g may be negative: fine)
        if delta % g:
            continue
        a0, b0 = u * (delta // g), v * (delta // g)
        sa, sb = wk // g, -(wj // g)  # a = a0 + t*sa, b = b0 + t*sb keep wj*a + wk*b = delta
        lo, hi = -(1 << 80), 1 << 80
        for base, s in ((int(x[j]) + a0, sa), (int(x[k]) + b0, sb)):
            if s > 0:
                lo, hi = max(lo, _ceil_div(-base, s)), min(hi, (Q15_MAX - base) // s)
            else:
                lo, hi = max(lo, _ceil_div(Q15_MAX - base, s)), min(hi, (-base) // s)
        if lo <= hi:
            t = int(rng.integers(lo, hi + 1)) if hi - lo < (1 << 62) else lo
            y = x.copy()
            y[j] = int(x[j]) + a0 + t * sa
            y[k] = int(x[k]) + b0 + t * sb
            return y, j
    return None


def agreement_rows(qt_list: list, n_features: int, rng, n_random: int = 6000, per_node: int = 24) -> np.ndarray:
    """int16 rows: uniform random, extremes (all 0, all 32767, random 0/32767 mixes), and rows at and
    one LSB either side of every threshold of every tree (reaching that node where possible; for
    oblique nodes solved so that acc == threshold exactly where the integers allow it)."""
    base = rng.integers(0, Q15_MAX + 1, (n_random, n_features), dtype=np.int64)
    extremes = [np.zeros((1, n_features), np.int64), np.full((1, n_features), Q15_MAX, np.int64),
                rng.choice([0, Q15_MAX], (64, n_features)).astype(np.int64)]
    rows = [base, *extremes]
    for qt in qt_list:
        if qt.n_internal == 0:
            continue
        seen = visits(qt, base)
        for i in range(qt.n_internal):
            reach = np.flatnonzero(seen[:, i])
            pick = reach if reach.size else np.arange(base.shape[0])
            pick = rng.choice(pick, min(per_node, pick.size), replace=False)
            T = int(qt.threshold[i])
            out = []
            for r in pick:
                x = base[r].copy()
                if qt.kind == "axis":
                    f = int(qt.feature[i])
                    for d in (-1, 0, 1):
                        if 0 <= T + d <= Q15_MAX:
                            y = x.copy()
                            y[f] = T + d
                            out.append(y)
                    continue
                res = _hit(x, qt.weights[i], T, rng)
                if res is None:
                    continue
                y, j = res
                out.append(y)
                for d in (-1, 1):
                    if 0 <= int(y[j]) + d <= Q15_MAX:
                        z = y.copy()
                        z[j] += d
                        out.append(z)
            if out:
                rows.append(np.array(out, dtype=np.int64))
    X = np.concatenate(rows)
    assert X.min() >= 0 and X.max() <= Q15_MAX
    return X.astype(np.int16)


# ---------------------------------------------------------------------- compilers
def require(tool: str) -> str:
    """Path of ``tool``; a missing compiler FAILS the test (never a skip)."""
    path = shutil.which(tool)
    assert path is not None, f"{tool} not found on PATH: the export tests need it (see README)"
    return path


def run_cc(cmd: list) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"compile failed: {' '.join(map(str, cmd))}\n{proc.stderr}"
    assert proc.stderr.strip() == "", f"compiler printed diagnostics: {' '.join(map(str, cmd))}\n{proc.stderr}"
    return proc


def build_driver(out_dir: Path, name: str, *, float_input: bool = False, predict: str | None = None,
                 extra: tuple = ("-O2",)) -> Path:
    """Host-compile the test driver with the exported ``<name>.c`` (strict flags); returns the binary."""
    cc = require("gcc")
    fn = predict or (f"tg_{name}_predict_f32" if float_input else f"tg_{name}_predict_q15")
    exe = out_dir / "driver"
    cmd = [cc, *STRICT_CFLAGS, *extra, "-I", str(out_dir), "-include", f"{name}.h",
           f"-DTG_NF=TG_{name.upper()}_N_FEATURES", f"-DTG_PREDICT={fn}",
           *(["-DTG_INPUT_FLOAT"] if float_input else []), str(DRIVER), str(out_dir / f"{name}.c"), "-o", str(exe)]
    run_cc(cmd)
    return exe


def run_driver(exe: Path, X: np.ndarray, work: Path) -> np.ndarray:
    rows, out = work / "rows.bin", work / "classes.bin"
    X.tofile(rows)
    proc = subprocess.run([str(exe), str(rows), str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"driver failed ({proc.returncode}): {proc.stderr}"
    return np.fromfile(out, dtype=np.uint8).astype(np.int64)


SCALE_DRIVER = Path(__file__).resolve().parent / "c" / "tg_scale_driver.c"


def build_proba_driver(out_dir: Path, name: str, n_classes: int, *, float_input: bool) -> Path:
    """The test driver writing, per row, the class byte and the ``n_classes`` uint16_t probabilities of
    ``tg_<name>_predict_proba`` (raw float rows) or ``tg_<name>_predict_proba_q15`` (Q15 rows)."""
    sfx = "" if float_input else "_q15"
    pred = f"tg_{name}_predict" if float_input else f"tg_{name}_predict_q15"
    return build_driver(out_dir, name, float_input=float_input, predict=pred,
                        extra=("-O2", f"-DTG_PROBA=tg_{name}_predict_proba{sfx}", f"-DTG_NC={n_classes}"))


def run_proba_driver(exe: Path, X: np.ndarray, n_classes: int, work: Path) -> tuple:
    """(classes int64 (rows,), probabilities int64 (rows, n_classes)) from a proba driver."""
    rows, out = work / "rows.bin", work / "proba.bin"
    X.tofile(rows)
    proc = subprocess.run([str(exe), str(rows), str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"driver failed ({proc.returncode}): {proc.stderr}"
    rec = np.dtype([("c", np.uint8), ("p", "<u2", (n_classes,))])
    data = np.fromfile(out, dtype=rec)
    return data["c"].astype(np.int64), data["p"].astype(np.int64)


def build_scale_driver(out_dir: Path, name: str) -> Path:
    """A driver that includes the exported ``<name>.c`` and writes the Q15 rows its raw-input scaling
    (the static ``tg_<name>_scale_q15`` of the q15 export) computes from float rows."""
    cc = require("gcc")
    exe = out_dir / "scale_driver"
    run_cc([cc, *STRICT_CFLAGS, "-O2", "-I", str(out_dir), f"-DTG_SRC=\"{name}.c\"",
            f"-DTG_NF=TG_{name.upper()}_N_FEATURES", f"-DTG_SCALE=tg_{name}_scale_q15", str(SCALE_DRIVER),
            "-o", str(exe)])
    return exe


def run_scale_driver(exe: Path, X: np.ndarray, work: Path) -> np.ndarray:
    rows, out = work / "rows.bin", work / "q.bin"
    np.ascontiguousarray(X, dtype=np.float32).tofile(rows)
    proc = subprocess.run([str(exe), str(rows), str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"scale driver failed ({proc.returncode}): {proc.stderr}"
    return np.fromfile(out, dtype=np.int16).reshape(X.shape).astype(np.int64)
