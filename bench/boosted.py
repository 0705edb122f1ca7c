"""Imported boosted and regression tree models (issue #25): exactness of the Python model and of the
float32 C against each source library, and the C on the emulated Cortex-M4 beside m2cgen and micromlgen.

Usage::

    pip install -e '.[import,peers]'
    python bench/boosted.py exactness [--datasets ...] [--random-rows 20000] [--trees 30] [--out ...]
    python bench/boosted.py peers [--trees 100] [--out ...]
    (also: python bench/import_exactness.py --boosted ..., python bench/codegen_vs_peers.py --boosted ...)

``exactness``: every family (XGBoost, LightGBM, scikit-learn GradientBoosting, HistGradientBoosting:
classifiers and regressors; scikit-learn Decision/RandomForest/ExtraTrees regressors; ONNX-ML: the
GradientBoosting models converted by skl2onnx, run by onnxruntime with one thread) on the
classification sets breast_cancer, wine, iris, digits, wide, pid and the regression sets diabetes,
friedman1, wide_reg (a stratified / plain 70/30 split, seed 0). Row sets (float32 values): ``test``;
``random`` (``--random-rows`` uniform in the training range, seed 1); ``threshold`` (for every split,
a test row with the split feature at every float32 from 64 ulps below to 64 ulps above the library's
threshold: 129 rows per split). For each model: the treegen model's raw score (``decision_function`` /
``predict_value``) bit-equal to the library's (XGBoost ``output_margin``, LightGBM ``raw_score``,
scikit-learn ``decision_function`` / ``_raw_predict`` / ``predict``), its class equal to the library's
``predict``; for vote-"sum" models the host-compiled f32 C (gcc -O2 -std=c99) the same; for one boosted
classifier and one regressor, the C on qemu-m4 (mps2-an386) on the test rows, raw scores as bits.

``peers``: a ``--trees``-tree XGBoost binary classifier (breast_cancer; ``base_score=0.5`` given,
which m2cgen 0.10 needs), a LightGBM binary classifier (breast_cancer), an XGBoost multiclass
classifier (wine, ``base_score=0.5`` too; micromlgen ports only multiclass XGBoost) and CatBoost binary
(breast_cancer) and multiclass (wine) classifiers (depth 4), each exported by treegen (f32), m2cgen
(double), micromlgen (float, XGBoost multiclass only), TL2cgen (XGBoost, LightGBM: C from the Treelite
model) and CatBoost's own C++ export (CatBoost models; needs libstdc++-arm-none-eabi-newlib): flash added to a linked image
(arm-none-eabi-gcc -Os, --gc-sections; library helpers included), instructions per inference on QEMU
mps2-an386 with -icount, agreement with the library's ``predict`` on test, random and threshold rows.

Writes ``OUT.md`` and ``OUT.json``. Measured, never asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench" / "qemu"))
sys.path.insert(0, str(REPO / "bench"))
import harness  # noqa: E402
from boost_band import band_check  # noqa: E402
from peer_measure import measure  # noqa: E402
from peers import c_literal, peer_c, tool_version  # noqa: E402

CLS_SETS = ("breast_cancer", "wine", "iris", "digits", "wide", "pid")
REG_SETS = ("diabetes", "friedman1", "wide_reg")
OPT = "-Os"
F32_MAX = float(np.finfo(np.float32).max)

RAW_DRIVER = r"""
#include <stdio.h>
#include "{n}.h"
int main(int argc, char **argv)
{{
    FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
    float x[TG_{N}_N_FEATURES];
    {T} raw[TG_{N}_N_OUTPUTS];
    (void)argc;
    if (in == NULL || out == NULL) return 2;
    while (fread(x, sizeof x, 1, in) == 1) {{
        tg_{n}_raw(x, raw);
        fwrite(raw, sizeof raw, 1, out);
    }}
    fclose(in);
    return fclose(out) != 0;
}}
"""

CLASS_DRIVER = r"""
#include <stdio.h>
#include "{n}.h"
int main(int argc, char **argv)
{{
    FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
    float x[TG_{N}_N_FEATURES];
    int c;
    (void)argc;
    if (in == NULL || out == NULL) return 2;
    while (fread(x, sizeof x, 1, in) == 1) {{
        c = tg_{n}_predict(x);
        fwrite(&c, sizeof c, 1, out);
    }}
    fclose(in);
    return fclose(out) != 0;
}}
"""

TARGET_DRIVER = r"""
/* qemu-m4: the raw scores of the test rows as bits (two 32-bit halves for a double) */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "{n}.h"
#include "bench_rows.h"
#include "tg_bench.h"
int main(void)
{{
    {T} raw[TG_{N}_N_OUTPUTS];
    tg_ticks_start();
    tg_bench_calibrate();
    for (uint32_t i = 0; i < TG_N_ROWS; i++) {{
        tg_{n}_raw(tg_rows[i], raw);
        for (uint32_t k = 0; k < TG_{N}_N_OUTPUTS; k++) {{
            uint32_t w[2] = {{0, 0}};
            memcpy(w, &raw[k], sizeof raw[k]);
            printf("tg_value r%lu_%lu_lo %lu\n", (unsigned long)i, (unsigned long)k, (unsigned long)w[0]);
            printf("tg_value r%lu_%lu_hi %lu\n", (unsigned long)i, (unsigned long)k, (unsigned long)w[1]);
        }}
    }}
    return 0;
}}
"""


# ---------------------------------------------------------------------------------------------- data
def load(name: str):
    from sklearn import datasets

    if name in ("breast_cancer", "wine", "iris", "digits"):
        X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
        return X.astype(np.float64), y
    if name in ("wide", "wide_reg"):
        X, y = datasets.load_wine(return_X_y=True)
        X = (X - X.mean(axis=0)) / X.std(axis=0)
        scales = np.logspace(-3, 3, X.shape[1])
        X = X * scales + 10 * scales
        if name == "wide_reg":       # a continuous target: alcohol from the other (scaled) features
            return X[:, 1:], X[:, 0]
        return X, y
    if name == "diabetes":
        return datasets.load_diabetes(return_X_y=True)
    if name == "friedman1":
        return datasets.make_friedman1(n_samples=1000, noise=1.0, random_state=0)
    data = np.loadtxt(REPO.parent / "shared" / "datasets" / f"{name}.csv.gz", delimiter=",", skiprows=1,
                      dtype=np.int64)
    return data[:, :-1].astype(np.float64), data[:, -1]


class OnnxOf:
    """A scikit-learn gradient-boosting model converted by skl2onnx and run by onnxruntime (one intra-op
    thread): ``predict`` is onnxruntime's label / value, ``raw`` its scores with ``post_transform``
    NONE (the raw score the importer reproduces)."""

    def __init__(self, est):
        self.est = est

    def fit(self, X, y):
        from skl2onnx import to_onnx
        self.est.fit(X, y)
        opts = {"zipmap": False} if hasattr(self.est, "classes_") else None
        self.onnx_model = to_onnx(self.est, X[:1].astype(np.float32), options=opts)
        if hasattr(self.est, "classes_"):
            self.classes_ = self.est.classes_
        return self

    def _session(self, raw: bool):
        import onnx
        import onnxruntime as ort

        from treegen.importers.onnx_ml import onnx_tree_node
        m = onnx.ModelProto()
        m.CopyFrom(self.onnx_model)
        if raw:
            for a in onnx_tree_node(m).attribute:
                if a.name == "post_transform":
                    a.s = b"NONE"
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])

    def run(self, Z, raw: bool):
        sess = self._session(raw)
        return sess.run(None, {sess.get_inputs()[0].name: np.asarray(Z, dtype=np.float32)})

    def predict(self, Z):
        out = self.run(Z, raw=False)[0]
        return out.reshape(-1) if hasattr(self, "classes_") else out.reshape(-1).astype(np.float32)

    def raw(self, Z, n_outputs: int):
        out = self.run(Z, raw=True)
        return out[0].reshape(len(Z), -1) if not hasattr(self, "classes_") else out[1][:, -n_outputs:]


def families(task: str, trees: int):
    import lightgbm as lgb
    import xgboost as xgb
    from sklearn import ensemble as E
    from sklearn.tree import DecisionTreeRegressor

    if task == "classification":
        return {
            "XGBClassifier": lambda: xgb.XGBClassifier(n_estimators=trees, max_depth=4, n_jobs=1, random_state=0),
            "LGBMClassifier": lambda: lgb.LGBMClassifier(n_estimators=trees, num_leaves=15, n_jobs=1, verbose=-1,
                                                         random_state=0),
            "GradientBoostingClassifier": lambda: E.GradientBoostingClassifier(n_estimators=trees, max_depth=3,
                                                                               random_state=0),
            "HistGradientBoostingClassifier": lambda: E.HistGradientBoostingClassifier(max_iter=trees,
                                                                                       random_state=0),
            "ONNX(GradientBoostingClassifier)": lambda: OnnxOf(E.GradientBoostingClassifier(
                n_estimators=trees, max_depth=3, random_state=0)),
        }
    return {
        "XGBRegressor": lambda: xgb.XGBRegressor(n_estimators=trees, max_depth=4, n_jobs=1, random_state=0),
        "LGBMRegressor": lambda: lgb.LGBMRegressor(n_estimators=trees, num_leaves=15, n_jobs=1, verbose=-1,
                                                   random_state=0),
        "GradientBoostingRegressor": lambda: E.GradientBoostingRegressor(n_estimators=trees, max_depth=3,
                                                                         random_state=0),
        "HistGradientBoostingRegressor": lambda: E.HistGradientBoostingRegressor(max_iter=trees, random_state=0),
        "ONNX(GradientBoostingRegressor)": lambda: OnnxOf(E.GradientBoostingRegressor(n_estimators=trees, max_depth=3,
                                                                                      random_state=0)),
        "DecisionTreeRegressor": lambda: DecisionTreeRegressor(max_depth=8, random_state=0),
        "RandomForestRegressor": lambda: E.RandomForestRegressor(n_estimators=10, max_depth=8, random_state=0),
        "ExtraTreesRegressor": lambda: E.ExtraTreesRegressor(n_estimators=10, max_depth=8, random_state=0),
    }


def importer(est):
    from treegen.importers import from_lightgbm, from_sklearn, from_xgboost
    from treegen.importers.lightgbm_text import parse_lightgbm
    from treegen.importers.sklearn_values import parse_sklearn_values
    from treegen.importers.xgboost_json import parse_xgboost

    if isinstance(est, OnnxOf):
        from treegen.importers.onnx_ml import from_onnx, parse_onnx
        return (lambda e, X=None: from_onnx(e.onnx_model, X=X)), (lambda e: parse_onnx(e.onnx_model))
    mod = type(est).__module__.split(".")[0]
    if mod == "xgboost":
        return from_xgboost, parse_xgboost
    if mod == "lightgbm":
        return from_lightgbm, parse_lightgbm
    if mod == "catboost":
        from treegen.importers.catboost_json import from_catboost, parse_catboost
        return from_catboost, parse_catboost
    return from_sklearn, parse_sklearn_values


def library_raw(est, Z: np.ndarray) -> np.ndarray:
    """The library's own raw score (n_rows, n_outputs), in its precision."""
    if isinstance(est, OnnxOf):
        n_out = len(est.classes_) if hasattr(est, "classes_") and len(est.classes_) > 2 else 1
        return est.raw(Z, n_out).astype(np.float32)
    mod = type(est).__module__.split(".")[0]
    if mod == "xgboost":
        import xgboost as xgb
        return est.get_booster().predict(xgb.DMatrix(Z), output_margin=True).reshape(len(Z), -1)
    if mod == "lightgbm":
        return np.asarray(est.booster_.predict(Z, raw_score=True)).reshape(len(Z), -1)
    if not hasattr(est, "classes_"):
        return np.asarray(est.predict(Z), dtype=np.float64).reshape(len(Z), -1)
    if type(est).__name__.startswith("Hist"):
        return est._raw_predict(Z)
    return est.decision_function(Z).reshape(len(Z), -1)


def row_sets(ens, X_train, X_test, n_random: int, ulps: int = 64) -> dict:
    rng = np.random.default_rng(1)
    R = rng.uniform(X_train.min(axis=0), X_train.max(axis=0), size=(n_random, X_train.shape[1]))
    from treegen.importers.ensemble import le_threshold
    from treegen.emit.lower_f32 import f32_of_ordinals, f32_ordinals
    blocks = []
    pts = list(dict.fromkeys((f, t) for f, t in ens.split_points() if abs(t) < F32_MAX))   # each test once
    base = X_test[rng.integers(0, X_test.shape[0], size=len(pts))]
    offs = np.arange(-ulps, ulps + 1, dtype=np.int64)
    for (f, t), b in zip(pts, base):
        x0 = np.float32(le_threshold(t, "<="))          # the last float32 on the left side
        vals = f32_of_ordinals(f32_ordinals(x0) + offs)  # its neighbours below and above in float32 order
        B = np.tile(b, (offs.size, 1))
        B[:, f] = vals
        blocks.append(B)
    sets = {"test": X_test, "random": R, "threshold": np.vstack(blocks) if blocks else X_test[:0]}
    out = {}
    for k, v in sets.items():
        v = v.astype(np.float32)
        out[k] = np.clip(np.where(np.isfinite(v), v, 0), -F32_MAX, F32_MAX).astype(np.float64)
    return out


def c_raw(model, name: str, Z: np.ndarray, d: Path) -> np.ndarray:
    import treegen
    treegen.export_model(model, d, target="cortex-m4", dtype="f32", name=name, measure=False, force=True)
    double = model.boost["sum_dtype"] == "float64"
    (d / "drv.c").write_text(RAW_DRIVER.format(n=name, N=name.upper(), T="double" if double else "float"))
    subprocess.run(["gcc", "-std=c99", "-O2", "-I", str(d), str(d / f"{name}.c"), str(d / "drv.c"), "-o",
                    str(d / "drv")], check=True, capture_output=True)
    Z.astype(np.float32).tofile(d / "in.bin")
    subprocess.run([str(d / "drv"), str(d / "in.bin"), str(d / "out.bin")], check=True, timeout=600)
    return np.fromfile(d / "out.bin", dtype=np.float64 if double else np.float32).reshape(len(Z), -1)


def target_raw(model, name: str, rows: np.ndarray, d: Path) -> np.ndarray:
    """The raw scores of ``rows`` computed by the f32 C on qemu-m4 (bits printed over semihosting)."""
    double = model.boost["sum_dtype"] == "float64"
    T = "double" if double else "float"
    (d / "target_main.c").write_text(TARGET_DRIVER.format(n=name, N=name.upper(), T=T))
    lines = [f"#define TG_N_ROWS {rows.shape[0]}u",
             f"static const float tg_rows[TG_N_ROWS][{rows.shape[1]}] = {{"]
    lines += ["    {" + ", ".join(c_literal(v, "float") for v in row) + "}," for row in rows]
    (d / "bench_rows.h").write_text("\n".join(lines + ["};"]) + "\n")
    elf = harness.build([d / "target_main.c", d / f"{name}.c"], d / "target.elf", opt=OPT, include_dirs=[d])
    res = harness.run(elf, timeout=600)
    k_out = model.n_outputs
    out = np.zeros((rows.shape[0], k_out), dtype=np.float64 if double else np.float32)
    for i in range(rows.shape[0]):
        for k in range(k_out):
            lo, hi = res.values[f"r{i}_{k}_lo"], res.values[f"r{i}_{k}_hi"]
            if double:
                out[i, k] = np.array([lo | (hi << 32)], dtype=np.uint64).view(np.float64)[0]
            else:
                out[i, k] = np.array([lo], dtype=np.uint32).view(np.float32)[0]
    return out


def c_class(model, Z: np.ndarray, d: Path) -> np.ndarray:
    """The class index ``tg_m_predict`` of the host-compiled f32 export returns for each row."""
    c_raw(model, "m", Z[:1], d)
    (d / "cls.c").write_text(CLASS_DRIVER.format(n="m", N="M"))
    subprocess.run(["gcc", "-std=c99", "-O2", "-I", str(d), str(d / "m.c"), str(d / "cls.c"), "-o", str(d / "cls")],
                   check=True, capture_output=True)
    Z.astype(np.float32).tofile(d / "in.bin")
    subprocess.run([str(d / "cls"), str(d / "in.bin"), str(d / "cls.bin")], check=True, timeout=600)
    return np.fromfile(d / "cls.bin", dtype=np.int32).astype(np.int64)


def bits_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise: the same IEEE bits in every output (both as the precision of ``b``)."""
    a = np.ascontiguousarray(np.asarray(a, dtype=b.dtype).reshape(b.shape))
    b = np.ascontiguousarray(b)
    w = np.int32 if b.dtype == np.float32 else np.int64
    return np.all(a.view(w) == b.view(w), axis=1)


# ---------------------------------------------------------------------------------------------- exactness
def run_exactness(args) -> int:
    import sklearn
    from sklearn.model_selection import train_test_split

    work_ctx = tempfile.TemporaryDirectory(prefix="tg-boost-") if args.keep is None else None
    work = Path(work_ctx.name if work_ctx else args.keep)
    t0 = time.time()
    report = {"command": "python bench/boosted.py " + " ".join(args.argv), "models": {},
              "versions": _versions(sklearn)}
    on_target = {}     # (task, sum precision) -> the first such model, run on qemu-m4
    for task, sets in (("classification", args.cls_sets), ("regression", args.reg_sets)):
        for ds in sets:
            X, y = load(ds)
            if task == "classification":       # labels 0..K-1 (XGBoost's requirement; the same for all)
                y = np.searchsorted(np.unique(y), y)
            strat = y if task == "classification" else None
            X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, random_state=0, stratify=strat)
            for fam, make in families(task, args.trees).items():
                if args.families and not any(f in fam for f in args.families.split(",")):
                    continue
                key = f"{ds}/{fam}"
                est = make().fit(X_tr, y_tr)
                imp, parse = importer(est)
                model = imp(est, X=X_tr)
                rs = row_sets(parse(est), X_tr, X_te, args.random_rows)
                r = {"trees": len(model.trees), "vote": model.vote, "task": task,
                     "sum": model.boost["sum_dtype"] if model.boost else "float64 / n"}
                for sname, Z in rs.items():
                    lib = library_raw(est, Z)
                    mine = (model.decision_function(Z) if task == "classification" else model.predict_value(Z))
                    r[f"{sname}_rows"] = int(len(Z))
                    r[f"{sname}_py_bit_equal_pct"] = 100.0 * float(np.mean(bits_equal(mine, lib)))
                    if task == "classification":
                        lib_cls = est.predict(Z)
                        r[f"{sname}_py_class_pct"] = 100.0 * float(np.mean(model.predict(Z) == lib_cls))
                        if hasattr(est, "predict_proba") and model.vote == "sum":
                            r[f"{sname}_proba_max_abs_diff"] = float(np.abs(
                                model.predict_proba(Z) - np.asarray(est.predict_proba(Z), dtype=np.float64)).max())
                        if model.vote == "sum":   # rows where raw > 0 / argmax(raw) is not the library's class
                            naive = np.asarray(model.classes, dtype=object)[
                                (lib[:, 0] > 0).astype(int) if lib.shape[1] == 1 else lib.argmax(axis=1)]
                            r[f"{sname}_band_rows"] = int(np.count_nonzero(naive != lib_cls))
                    if model.vote == "sum":
                        c = c_raw(model, "m", Z, work / key.replace("/", "_"))
                        r[f"{sname}_c_bit_equal_pct"] = 100.0 * float(np.mean(bits_equal(c, lib)))
                        if task == "classification":
                            cls = model.class_of_raw(c)   # the C's decision: the model's threshold
                            r[f"{sname}_c_class_pct"] = 100.0 * float(np.mean(
                                np.asarray(model.classes, dtype=object)[cls] == est.predict(Z)))
                if task == "classification" and model.vote == "sum" and model.n_outputs == 1:
                    r.update(band_check(est, model, parse(est), X_tr, X_te, imp, library_raw, c_class,
                                        work / (key.replace("/", "_") + "_band")))
                slot = f"{task}, {model.boost['sum_dtype'] if model.boost else ''} sums"
                if model.vote == "sum" and slot not in on_target and not args.no_target:
                    d = work / (key.replace("/", "_") + "_m4")
                    c_raw(model, "m", rs["test"][:1], d)
                    tr = target_raw(model, "m", rs["test"], d)
                    lib = library_raw(est, rs["test"])
                    on_target[slot] = key
                    r["qemu_m4_test_bit_equal_pct"] = 100.0 * float(np.mean(bits_equal(tr, lib)))
                report["models"][key] = r
                print(key, {k: v for k, v in r.items() if k.endswith("pct")}, flush=True)
    report["on_target"] = on_target
    report["seconds"] = round(time.time() - t0, 1)
    _write(args.out, report, render_exactness(report))
    return 0


def render_exactness(report: dict) -> str:
    lines = ["# Imported boosted and regression trees: exactness against the source library", "",
             f"`{report['command']}` ({report['seconds']} s). Versions: "
             + ", ".join(f"{k} {v}" for k, v in report["versions"].items()) + ".", "",
             "Bit-equal: the raw score (margin / decision function / regression output) has the library's "
             "IEEE bits; class: the library's `predict`. py = the treegen model (`decision_function` / "
             "`predict_value`), C = the f32 export compiled on the host (vote sum models; vote mean "
             "forests are exported by the regression export, not measured here). Rows: test / 20k random / "
             "+-64 float32 ulps around every threshold (129 rows per split).", "",
             "Band rows: rows where `raw > 0` / the first largest raw would not be the library's class "
             "(the binary decision thresholds and softmax ties of `boost.decision_threshold`); they are "
             "inside the class columns. Landed: binary models shifted (the last number added into a test "
             "row's raw score, in the library's model) so that the row's raw score is the nearest reachable "
             "value on each side of 0, of the smallest positive float and of the decision threshold "
             "(`bench/boost_band.py`); inside: strictly in the band where `raw > 0` differs from the "
             "library's rule; then on how many the library's `predict` and the treegen model / the host C "
             "(`tg_m_predict`) agree, and `raw > 0`. Proba max diff: the largest difference between "
             "`Model.predict_proba` (double link of the exact raw score) and the library's `predict_proba` "
             "over the three row sets.", "",
             "| model | trees | sum | test py / C | random py / C | threshold rows | threshold py / C | class "
             "(test, random, threshold) | band rows | proba max diff |", "|---|---|---|---|---|---|---|---|---|---|"]
    for key, r in report["models"].items():
        def pair(s):
            c = r.get(f"{s}_c_bit_equal_pct")
            return f"{r[f'{s}_py_bit_equal_pct']:.2f} / " + ("-" if c is None else f"{c:.2f}")
        cls = ", ".join(f"{r[f'{s}_py_class_pct']:.2f}" for s in ("test", "random", "threshold")) \
            if r["task"] == "classification" else "-"
        pmax = max((r[f"{s}_proba_max_abs_diff"] for s in ("test", "random", "threshold")
                    if f"{s}_proba_max_abs_diff" in r), default=None)
        proba = "-" if pmax is None else f"{pmax:.2g}"
        band = str(sum(r.get(f"{s}_band_rows", 0) for s in ("test", "random", "threshold")))
        if "band_landed" in r:
            band += (f"; landed {r['band_landed']} ({r['band_inside']} inside): py {r['band_py_class_ok']}, "
                     f"C {r['band_c_class_ok']} agree (raw > 0: {r['band_landed'] - r['band_raw_gt_0_wrong']})")
        lines.append(f"| {key} | {r['trees']} | {r['sum']} | {pair('test')} | {pair('random')} | "
                     f"{r['threshold_rows']} | {pair('threshold')} | {cls} | {band} | {proba} |")
    lines += ["", "On qemu-m4 (mps2-an386, the f32 C, raw scores of the test rows as bits): "
              + "; ".join(f"{t}: {k} {report['models'][k].get('qemu_m4_test_bit_equal_pct', '-')} % bit-equal"
                          for t, k in report["on_target"].items() if k)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- peers
def _mm_xgb(est, name: str, n_features: int, out: Path):
    from micromlgen import port
    code = port(est).replace("#include <cstdarg>", "#include <stdarg.h>")
    (out / "mm_model.cpp").write_text(
        "#include <stdint.h>\n" + code + "\nstatic Eloquent::ML::Port::XGBClassifier mm_clf;\n"
        'extern "C" int mm_predict(const float *x) { return mm_clf.predict(const_cast<float *>(x)); }\n')
    config = (f"#define TG_INPUT_T float\n#define TG_N_FEATURES {n_features}\n"
              "int mm_predict(const float *x);\n#define TG_PREDICT(x) mm_predict(x)\n")
    return [out / "mm_model.cpp"], config, ["-fno-exceptions", "-fno-rtti", "-w"]


def _tl2cgen(est, name: str, n_features: int, out: Path, n_classes: int):
    """TL2cgen 1.0 C of the Treelite model of ``est`` (XGBoost / LightGBM), behind the bench interface:
    ``predict(data, pred_margin=1, result)`` (no postprocessor: no expf), class = margin > 0 (binary) or
    the first largest margin; NaN -> ``missing = -1`` as TL2cgen's ``Entry`` expects."""
    import tl2cgen
    import treelite

    tm = (treelite.frontend.from_xgboost(est.get_booster()) if hasattr(est, "get_booster")
          else treelite.frontend.from_lightgbm(est.booster_))
    tl2cgen.generate_c_code(tm, dirpath=str(out), params={"parallel_comp": 0})
    import re
    header = (out / "header.h").read_text()
    m = re.search(r"void predict\(union Entry\* data, int pred_margin, (\w+)\* result\)", header)
    if m is None:
        raise RuntimeError("TL2cgen's header.h has no predict(union Entry*, int, T*) declaration")
    result_t = m.group(1)          # float or double: the model's leaf output type
    if n_classes == 2:
        decide = "    return r[0] > 0 ? 1 : 0;\n"
    else:
        decide = ("    int best = 0;\n"
                  f"    for (int k = 1; k < {n_classes}; k++)\n        if (r[k] > r[best])\n            best = k;\n"
                  "    return best;\n")
    (out / "tl_wrap.c").write_text(
        '#include "header.h"\n'
        "int tl_predict(const float *x)\n{\n"
        f"    union Entry e[{n_features}];\n    {result_t} r[MAX_N_CLASS > 0 ? MAX_N_CLASS : 1] = {{0}};\n"
        f"    for (int i = 0; i < {n_features}; i++) {{\n"
        "        if (x[i] != x[i]) e[i].missing = -1; else e[i].fvalue = x[i];\n    }\n"
        "    predict(e, 1, r);\n" + decide + "}\n")
    sources = sorted(p for p in out.glob("*.c") if p.name != "tl_wrap.c") + [out / "tl_wrap.c"]
    config = (f"#define TG_INPUT_T float\n#define TG_N_FEATURES {n_features}\n"
              "int tl_predict(const float *x);\n#define TG_PREDICT(x) tl_predict(x)\n")
    return sources, config, ["-w"]


def _catboost_cpp(est, name: str, n_features: int, out: Path, n_classes: int):
    """CatBoost's own C++ (``save_model(format="cpp")``: std::vector, std::string) behind the bench
    interface: class = raw > 0 (binary) or the first largest raw value."""
    est.save_model(str(out / "cb_model.cpp"), format="cpp")
    code = (out / "cb_model.cpp").read_text()
    if n_classes == 2:
        decide = "    return ApplyCatboostModel(f) > 0.0 ? 1 : 0;\n"
    else:
        decide = ("    std::vector<double> r = ApplyCatboostModelMulti(f);\n    int best = 0;\n"
                  "    for (int k = 1; k < (int)r.size(); k++)\n        if (r[k] > r[best])\n            best = k;\n"
                  "    return best;\n")
    # bare metal (the bench's startup runs no C++ constructors, -nostartfiles has no __dso_handle): the model's
    # static std::vector tables are constructed by running .init_array once, on the first call
    glue = ("#if defined(__arm__)\n"
            'extern "C" {\nvoid *__dso_handle = 0;\n'
            "extern void (*__init_array_start[])(void);\nextern void (*__init_array_end[])(void);\n}\n"
            "static int cb_ready;\n#endif\n")
    (out / "cb_model.cpp").write_text(
        code + "\n/* bench wrapper */\n" + glue +
        'extern "C" int cb_predict(const float *x)\n{\n'
        "#if defined(__arm__)\n    if (!cb_ready) {\n"
        "        for (void (**c)(void) = __init_array_start; c < __init_array_end; c++)\n            (*c)();\n"
        "        cb_ready = 1;\n    }\n#endif\n"
        f"    std::vector<float> f(x, x + {n_features});\n" + decide + "}\n")
    config = (f"#define TG_INPUT_T float\n#define TG_N_FEATURES {n_features}\n"
              "int cb_predict(const float *x);\n#define TG_PREDICT(x) cb_predict(x)\n")
    return [out / "cb_model.cpp"], config, ["-fno-exceptions", "-fno-rtti", "-w", "-lstdc++"]


PEER_KIND = {"treegen-table-f32": "float", "m2cgen-double": "double", "micromlgen-float": "float",
             "tl2cgen-float": "float", "catboost-cpp-double": "float"}


def run_peers(args) -> int:
    import catboost
    import lightgbm as lgb
    import sklearn
    import xgboost as xgb
    from sklearn.model_selection import train_test_split

    import treegen

    work_ctx = tempfile.TemporaryDirectory(prefix="tg-boost-peers-") if args.keep is None else None
    work = Path(work_ctx.name if work_ctx else args.keep)
    t0 = time.time()
    report = {"command": "python bench/boosted.py " + " ".join(args.argv), "models": {},
              "versions": _versions(sklearn),
              "board": f"qemu-system-arm -M {harness.BOARD} {' '.join(harness.QEMU_ICOUNT)}",
              "cflags": " ".join([*harness.CPU_FLAGS_M4, OPT, *harness.COMMON_FLAGS, "-Wl,--gc-sections"])}
    cases = [
        ("breast_cancer", "XGBClassifier", lambda: xgb.XGBClassifier(n_estimators=args.trees, max_depth=4,
                                                                     base_score=0.5, n_jobs=1, random_state=0),
         ["treegen-table-f32", "m2cgen-double", "tl2cgen-float"]),
        ("breast_cancer", "LGBMClassifier", lambda: lgb.LGBMClassifier(n_estimators=args.trees, num_leaves=15,
                                                                       n_jobs=1, verbose=-1, random_state=0),
         ["treegen-table-f32", "m2cgen-double", "tl2cgen-float"]),
        ("wine", "XGBClassifier-multiclass", lambda: xgb.XGBClassifier(n_estimators=args.trees, max_depth=4,
                                                                       base_score=0.5, n_jobs=1, random_state=0),
         ["treegen-table-f32", "m2cgen-double", "micromlgen-float", "tl2cgen-float"]),
        ("breast_cancer", "CatBoostClassifier", lambda: catboost.CatBoostClassifier(
            iterations=args.trees, depth=4, random_seed=0, thread_count=1, verbose=0, allow_writing_files=False),
         ["treegen-table-f32", "m2cgen-double", "catboost-cpp-double"]),
        ("wine", "CatBoostClassifier-multiclass", lambda: catboost.CatBoostClassifier(
            iterations=args.trees, depth=4, random_seed=0, thread_count=1, verbose=0, allow_writing_files=False,
            loss_function="MultiClass"),
         ["treegen-table-f32", "m2cgen-double", "catboost-cpp-double"]),
    ]
    for ds, fam, make, impls in cases:
        X, y = load(ds)
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
        est = make().fit(X_tr, y_tr)
        imp, parse = importer(est)
        model = imp(est, X=X_tr)
        rs = row_sets(parse(est), X_tr, X_te, args.random_rows, ulps=1)
        expect = {k: np.searchsorted(est.classes_, np.asarray(est.predict(v)).reshape(-1)) for k, v in rs.items()}
        key = f"{ds}/{fam}/{args.trees}"
        report["models"][key] = {"trees": len(model.trees), "rows": {k: int(len(v)) for k, v in rs.items()}}
        for impl in impls:
            d = work / key.replace("/", "_") / impl
            d.mkdir(parents=True, exist_ok=True)
            kind = PEER_KIND[impl]

            def generate(impl_, est_, model_, name, n_features, out, _impl=impl):
                if _impl.startswith("treegen"):
                    rep = treegen.export_model(model_, out, target="cortex-m4", dtype="f32", name=name,
                                               measure=False, force=True)
                    generate.last_report = rep
                    config = (f'#include "{name}.h"\n#define TG_INPUT_T float\n#define TG_N_FEATURES {n_features}\n'
                              f"#define TG_PREDICT(x) tg_{name}_predict(x)\n")
                    return [out / f"{name}.c"], config, []
                if _impl == "micromlgen-float":
                    return _mm_xgb(est_, name, n_features, out)
                if _impl == "tl2cgen-float":
                    return _tl2cgen(est_, name, n_features, out, len(est_.classes_))
                if _impl == "catboost-cpp-double":
                    return _catboost_cpp(est_, name, n_features, out, len(est_.classes_))
                return peer_c(_impl, est_, name, n_features, out)
            try:
                r = measure(impl, kind, est, model, "bm", rs, expect, d.parent, generate)
            except Exception as exc:   # a peer that cannot build or run this model: recorded, not hidden
                r = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"}
            report["models"][key][impl] = r
            print(key, impl, {k: v for k, v in r.items() if k != "library_helpers"}, flush=True)
    report["seconds"] = round(time.time() - t0, 1)
    _write(args.out, report, render_peers(report))
    return 0


def render_peers(report: dict) -> str:
    lines = ["# Boosted classifiers on Cortex-M4: treegen f32 vs m2cgen, micromlgen, TL2cgen and CatBoost's C++", "",
             f"`{report['command']}` ({report['seconds']} s). Board `{report['board']}`, `{report['cflags']}`. "
             "Versions: " + ", ".join(f"{k} {v}" for k, v in report["versions"].items()) + ".", "",
             "Flash: bytes the model adds to a linked image (library helpers such as soft-double included). "
             "Instructions: mean per inference over the test rows. Agreement with the library's `predict` "
             "(host-compiled C) on the test rows, 20k random rows and the float32 neighbours (+-1 ulp) of "
             "every threshold.", "",
             "Peers: m2cgen (double, class = argmax of its probabilities), micromlgen (XGBoost multiclass only), "
             "TL2cgen 1.0 (C from the Treelite model; `predict(pred_margin=1)`, class = margin > 0 or the first "
             "largest margin: no `expf`; Treelite adds the base score last, in double), CatBoost's own C++ "
             "(`save_model(format=\"cpp\")`: `std::vector` tables, built bare-metal with arm-none-eabi-g++ and "
             "libstdc++-arm-none-eabi-newlib, `-fno-exceptions -fno-rtti`, its static tables constructed by running "
             "`.init_array` on the first call; class = raw > 0 or the first largest raw; it compares NaN as "
             "`x > border` whatever the model's nan_mode). m2cgen 0.10 has no CatBoost support.", "",
             "| model | implementation | flash B | instructions | test % | random % | threshold % |",
             "|---|---|---|---|---|---|---|"]
    for key, m in report["models"].items():
        for impl, r in m.items():
            if not isinstance(r, dict) or impl == "rows":
                continue
            if "error" in r:
                lines.append(f"| {key} | {impl} | failed: {r['error']} | | | | |")
                continue
            lines.append(f"| {key} ({m['trees']} trees) | {impl} | {r.get('flash_bytes')} | "
                         f"{r.get('instructions_per_inference')} | {r['agree_test_pct']:.2f} | "
                         f"{r['agree_random_pct']:.2f} | {r['agree_threshold_pct']:.2f} |")
    if any("catboost-cpp-double" in m for m in report["models"].values()):
        lines += ["", "Where treegen is not the smallest or the fastest: CatBoost. treegen imports an oblivious tree of "
                  "depth d as a complete binary tree (2^d - 1 test nodes, each with its float32 threshold, feature "
                  "byte and 16-bit right-child distance, and 2^d double leaves) and a multiclass tree as one tree "
                  "per class (the wine model: 300 treegen trees for 100 CatBoost trees, each test stored three "
                  "times); CatBoost's C++ stores each tree as its d split indices and one leaf row of doubles, "
                  "binarises every feature once against all its borders and then only indexes, so its tables are "
                  "smaller (breast_cancer 27 KB vs 39 KB, wine 51 KB vs 109 KB) and, with several classes sharing "
                  "one binarisation and one leaf index, it runs fewer instructions on wine (30k vs 45k; treegen is "
                  "faster on the binary model, 14k vs 19k). Both sum doubles (software floating point on the M4F). "
                  "A leaf-index layout for oblivious trees in the f32 export would close that gap (not done). "
                  "CatBoost's C++ is not exact for NaN inputs of nan_mode Max models (it compares NaN as "
                  "`x > border`), and needs the C++ runtime (libstdc++, heap for its std::vector tables)."]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- common
def _versions(sklearn) -> dict:
    from importlib.metadata import version
    out = {"python": platform.python_version(), "scikit-learn": sklearn.__version__}
    for pkg in ("xgboost", "lightgbm", "catboost", "treelite", "tl2cgen", "m2cgen", "micromlgen"):
        try:
            out[pkg] = version(pkg)
        except Exception:   # noqa: BLE001 - not installed, or under another distribution name (xgboost-cpu)
            try:
                out[pkg] = str(__import__(pkg).__version__)
            except Exception:   # noqa: BLE001 - not installed
                out[pkg] = "not installed"
    out["gcc"] = tool_version(["gcc", "--version"])
    out["arm-none-eabi-gcc"] = tool_version([harness.CC, "--version"])
    out["treegen commit"] = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                           capture_output=True, text=True).stdout.strip()
    return out


def _write(out: str, report: dict, md: str) -> None:
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out + ".json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    Path(out + ".md").write_text(md)
    print(f"wrote {out}.md and {out}.json")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("exactness", "peers"))
    ap.add_argument("--datasets", default=None, help="comma-separated subset of the classification and regression sets")
    ap.add_argument("--random-rows", type=int, default=20000)
    ap.add_argument("--trees", type=int, default=None, help="trees per model (exactness 30, peers 100)")
    ap.add_argument("--no-target", action="store_true", help="exactness: skip the qemu-m4 runs")
    ap.add_argument("--families", default=None, help="exactness: comma-separated substrings of family names")
    ap.add_argument("--out", default=None)
    ap.add_argument("--keep", default=None, help="keep the generated C and ELF files in this directory")
    args = ap.parse_args(argv)
    args.argv = argv
    chosen = args.datasets.split(",") if args.datasets else None
    args.cls_sets = [d for d in CLS_SETS if chosen is None or d in chosen]
    args.reg_sets = [d for d in REG_SETS if chosen is None or d in chosen]
    if args.what == "exactness":
        args.trees = args.trees or 30
        args.out = args.out or str(REPO / "bench" / "results" / "boosted_exactness")
        return run_exactness(args)
    harness.require_tools()
    args.trees = args.trees or 100
    args.out = args.out or str(REPO / "bench" / "results" / "boosted_vs_peers")
    return run_peers(args)


if __name__ == "__main__":
    sys.exit(main())
