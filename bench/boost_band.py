"""Band rows for ``bench/boosted.py exactness``: binary boosted classifiers shifted so that a test row's raw
score lands in the band where the library's binary rule differs from ``raw > 0``, and on its edges.

For a binary model with decision threshold ``v`` (``boost.decision_threshold``), one number of the
*library's* model is moved, the last one added into the row's raw score: XGBoost, LightGBM and
GradientBoosting the value of the leaf the row reaches in the last tree (JSON / model text /
``tree_.value``), HistGradientBoosting that leaf in its last predictor, ONNX the base values
(onnxruntime adds them last). The raw score is monotone in that number; bisection over its ordered
floats with the library's own raw score finds, for each target ``t`` of ``0``, the smallest positive
float and ``v`` (each on another test row, those whose sum before the last tree is smallest first: there
the last addition resolves finest), the largest reachable raw score below ``t`` and the smallest at or
above it: rows on both sides of 0 and of ``v``, in the band where one exists. Each shifted library model
is imported again; its ``predict`` is compared with the treegen model's and with the class the host-
compiled C (``tg_m_predict``) returns. The table counts the landed rows, the rows strictly inside the
band, and the rows where ``raw > 0`` would have been wrong.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re

import numpy as np


def _ordinal(v: float, f32: bool) -> int:
    if f32:
        b = int(np.float32(v).view(np.uint32))
        return -(b & 0x7FFFFFFF) if b >= 0x80000000 else b
    b = int(np.float64(v).view(np.uint64))
    return -(b & 0x7FFFFFFFFFFFFFFF) if b >= 0x8000000000000000 else b


def _of_ordinal(o: int, f32: bool) -> float:
    if f32:
        b = o if o >= 0 else 0x80000000 | -o
        return float(np.uint32(b).view(np.float32))
    b = o if o >= 0 else 0x8000000000000000 | -o
    return float(np.uint64(b).view(np.float64))


def targets(value: float, f32: bool) -> list[float]:
    dt = np.float32 if f32 else np.float64
    return sorted({0.0, float(np.nextafter(dt(0), dt(1))), float(dt(value))})


class _Shift:
    """The last number added into row ``z``'s raw score, ``set(w)`` -> a library estimator using ``w``."""

    f32 = False

    def __init__(self, est, z, ens):
        self.est, self.z = est, z
        self.node = int(ens.trees[-1].leaves(z, ens.op)[0])     # the leaf reached in the last tree


class _XGB(_Shift):
    f32 = True

    def __init__(self, est, z, ens):
        super().__init__(est, z, ens)
        self.doc = json.loads(est.get_booster().save_raw("json"))
        self.tree = self.doc["learner"]["gradient_booster"]["model"]["trees"][-1]
        self.start = float(np.float32(self.tree["split_conditions"][self.node]))

    def set(self, w):
        import xgboost as xgb
        self.tree["split_conditions"][self.node] = w
        self.tree["base_weights"][self.node] = w
        e = xgb.XGBClassifier()
        e.load_model(bytearray(json.dumps(self.doc).encode()))
        return e


class _LGBM(_Shift):
    def __init__(self, est, z, ens):
        super().__init__(est, z, ens)
        self.text = re.sub(r"tree_sizes=[^\n]*\n", "", est.booster_.model_to_string())
        m = list(re.finditer(r"leaf_value=([^\n]*)", self.text))[-1]
        self.vals = m.group(1).split()
        self.span = m.span(1)
        self.leaf = self.node - (len(self.vals) - 1)           # importer: internal nodes first, then leaves
        self.start = float(self.vals[self.leaf])

    def set(self, w):
        import lightgbm as lgb
        vals = list(self.vals)
        vals[self.leaf] = repr(float(w))
        text = self.text[:self.span[0]] + " ".join(vals) + self.text[self.span[1]:]
        e = copy.copy(self.est)
        e._Booster = lgb.Booster(model_str=text)
        return e


class _GB(_Shift):
    def __init__(self, est, z, ens):
        super().__init__(est, z, ens)
        self.e = copy.deepcopy(est)
        self.value = self.e.estimators_[-1, 0].tree_.value
        self.start = float(self.value[self.node, 0, 0])

    def set(self, w):
        self.value[self.node, 0, 0] = w
        return self.e


class _HGB(_Shift):
    def __init__(self, est, z, ens):
        super().__init__(est, z, ens)
        self.e = copy.deepcopy(est)
        self.nodes = self.e._predictors[-1][0].nodes
        self.start = float(self.nodes["value"][self.node])

    def set(self, w):
        self.nodes["value"][self.node] = w
        return self.e


class _ONNX(_Shift):
    f32 = True

    def __init__(self, est, z, ens):
        from treegen.importers.onnx_ml import onnx_tree_node
        self.est, self.z = est, z
        self.e = copy.copy(est)
        self.e.onnx_model = copy.deepcopy(est.onnx_model)
        self.attr = next(a for a in onnx_tree_node(self.e.onnx_model).attribute if a.name == "base_values")
        self.start = float(self.attr.floats[-1])

    def set(self, w):
        for i in range(len(self.attr.floats)):
            self.attr.floats[i] = w
        return self.e


def shifter(est, z, ens):
    name = type(est).__name__
    if name == "OnnxOf":
        return _ONNX(est, z, ens)
    mod = type(est).__module__.split(".")[0]
    if mod == "xgboost":
        return _XGB(est, z, ens)
    if mod == "lightgbm":
        return _LGBM(est, z, ens)
    return _HGB(est, z, ens) if name.startswith("Hist") else _GB(est, z, ens)


def land(sh: _Shift, target: float, library_raw) -> list[tuple[float, float]]:
    """``(number, raw)`` for the largest raw score of ``sh.z`` reachable below ``target`` and the smallest at
    or above it, by bisection over the ordered floats of the shifted number."""
    def raw(o):
        return float(library_raw(sh.set(_of_ordinal(o, sh.f32)), sh.z)[0, 0])

    span = 1e3
    lo, hi = _ordinal(sh.start - span, sh.f32), _ordinal(sh.start + span, sh.f32)
    if not raw(lo) < target <= raw(hi):
        return []
    while hi - lo > 1:               # raw(lo) < target <= raw(hi)
        mid = (lo + hi) // 2
        if raw(mid) < target:
            lo = mid
        else:
            hi = mid
    return [(_of_ordinal(o, sh.f32), raw(o)) for o in (lo, hi)]


def band_check(est, model, ens, X_train, X_test, imp, library_raw, c_class, workdir) -> dict:
    """Land test rows in and around the band (module text) and compare the classes; ``c_class(model, Z,
    d)`` is the class index the host C returns."""
    value, rule = model.decision_threshold
    f32 = model.boost["sum_dtype"] == "float32"
    landed, inside, py_ok, c_ok, naive_wrong = 0, 0, 0, 0, 0
    k = 0
    # the rows whose raw score before the last tree is smallest: there the last addition resolves finest
    before = dataclasses.replace(ens, trees=ens.trees[:-1]).raw(X_test)[:, 0] if len(ens.trees) > 1 else \
        np.zeros(len(X_test))
    order = np.argsort(np.abs(before), kind="stable")
    for i, t in zip(order, targets(value, f32)):
        z = np.asarray(X_test[i:i + 1], dtype=np.float32).astype(np.float64)
        sh = shifter(est, z, ens)
        for w, r in land(sh, t, library_raw):
            k += 1
            est2 = sh.set(w)          # used before the next set(): some shifters change one model in place
            model2 = imp(est2, X=X_train)
            lib = est2.predict(z)
            labels = np.asarray(model2.classes, dtype=object)
            landed += 1
            inside += int((r > 0) != ((r >= value) if rule == ">=" else (r > value)))
            py_ok += int(model2.predict(z)[0] == lib[0])
            c_ok += int(labels[c_class(model2, z, workdir / f"band{k}")[0]] == lib[0])
            naive_wrong += int(labels[int(r > 0)] != lib[0])
    return {"band_landed": landed, "band_inside": inside, "band_py_class_ok": py_ok, "band_c_class_ok": c_ok,
            "band_raw_gt_0_wrong": naive_wrong}
