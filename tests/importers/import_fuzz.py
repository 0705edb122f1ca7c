"""Fuzzing ``treegen import``: structure-aware mutations of real model files of each library, plus random
bytes (shared by ``tests/importers/test_import_fuzz.py`` and ``bench/fuzz_import.py``).

Every case is a file. Its verdict, in a worker process (so that a crash of treegen or of a library is
seen, never fatal to the caller):

1. ``treegen import FILE -o M.json --trust-pickle`` runs in the worker through the CLI's ``main``: exit
   2 with one line ``treegen: error: ...`` is a *refusal*; exit 0 an *acceptance*; anything else (another
   exit status, more lines, an exception escaping ``main``) a *traceback*. The verdict is sent to the
   parent before step 2.
2. An accepted file is loaded by its own library (xgboost, lightgbm, onnxruntime, scikit-learn) and both
   predict random float32 rows (NaN cells too where the model routes missing values): the margins / raw
   scores / values bit for bit and the classes must be equal, else the case is *different*. A library
   that refuses a file treegen accepted is *different* as well.

The worker dying during step 1 is a *crash* of treegen; during step 2 a crash of the library on a file
treegen accepted (counted as *different*: treegen must refuse what its library cannot run). A case
taking longer than ``CASE_TIMEOUT`` seconds is a *hang*.
"""

from __future__ import annotations

import copy
import io
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

FORMATS = ("xgboost-json", "xgboost-ubj", "lightgbm", "onnx", "pickle", "bytes")
CASE_TIMEOUT = 120.0
STARTUP_TIMEOUT = 900.0
HOSTILE_INTS = [-1, -3, 0, 1, 2, 7, 1 << 31, (1 << 31) - 1, -(1 << 31), 1 << 32, (1 << 63) - 1, -(1 << 63), 1 << 70,
                10 ** 9, 70_000, 65_536, 4097, 100_000]
HOSTILE_FLOATS = [float("nan"), float("inf"), -float("inf"), 1e308, -1e308, 1e39, 3.5e38, 2.7, 1.2, -0.5, 5e-324,
                  0.0, -0.0, 1e-45]
HOSTILE_TEXT = ["1e9", "-1", "0", "1e400", "abc", "", "2.7", "nan", "inf", "1180591620717411303424", " 4", "4 ",
                "[1e400]", "[0.5,0.5]", "[]", "0x10", "4" * 5000]


# ============================================================================================ seeds
def _data(rng, n=300, d=5):
    X = rng.normal(size=(n, d)).astype(np.float32).astype(np.float64)
    return X


def make_seeds(folder: Path) -> dict[str, list[Path]]:
    """Real model files of every format, written by the libraries themselves (deterministic)."""
    import joblib
    import lightgbm as lgb
    import xgboost as xgb
    from sklearn import ensemble as E
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(33)
    X = _data(rng)
    X[rng.random(X.shape) < 0.05] = np.nan
    Xf = np.where(np.isnan(X), 0.0, X)
    yb = (Xf[:, 0] + Xf[:, 1] > 0).astype(int)
    ym = np.digitize(Xf[:, 0], [-0.5, 0.5])
    yr = Xf[:, 0] * 2 + Xf[:, 2]
    out: dict[str, list[Path]] = {f: [] for f in FORMATS}
    xgbs = {"xb": xgb.XGBClassifier(n_estimators=3, max_depth=2, n_jobs=1, random_state=0).fit(X, yb),
            "xm": xgb.XGBClassifier(n_estimators=2, max_depth=2, n_jobs=1, random_state=0).fit(X, ym),
            "xr": xgb.XGBRegressor(n_estimators=3, max_depth=2, n_jobs=1, random_state=0).fit(X, yr)}
    for name, est in xgbs.items():
        est.get_booster().save_model(folder / f"{name}.json")
        est.get_booster().save_model(folder / f"{name}.ubj")
        out["xgboost-json"].append(folder / f"{name}.json")
        out["xgboost-ubj"].append(folder / f"{name}.ubj")
    lgbs = {"lb": lgb.LGBMClassifier(n_estimators=3, num_leaves=4, verbose=-1, n_jobs=1).fit(X, yb),
            "lm": lgb.LGBMClassifier(n_estimators=2, num_leaves=3, verbose=-1, n_jobs=1).fit(X, ym),
            "lr": lgb.LGBMRegressor(n_estimators=3, num_leaves=4, verbose=-1, n_jobs=1).fit(X, yr)}
    for name, est in lgbs.items():
        est.booster_.save_model(folder / f"{name}.txt")
        out["lightgbm"].append(folder / f"{name}.txt")
    import skl2onnx
    for name, est, y in (("ob", E.GradientBoostingClassifier(n_estimators=3, max_depth=2, random_state=0), yb),
                         ("om", E.GradientBoostingClassifier(n_estimators=2, max_depth=2, random_state=0), ym),
                         ("or", E.GradientBoostingRegressor(n_estimators=3, max_depth=2, random_state=0), yr)):
        est.fit(Xf, y)
        m = skl2onnx.to_onnx(est, Xf[:1].astype(np.float32),
                             options={"zipmap": False} if hasattr(est, "classes_") else None)
        (folder / f"{name}.onnx").write_bytes(m.SerializeToString())
        out["onnx"].append(folder / f"{name}.onnx")
    Xi = np.rint(Xf * 1000 + 16000)      # the classifiers' q15 route: integer data in 0..32767
    for name, est, y in (("pt", DecisionTreeClassifier(max_depth=3, random_state=0), yb),
                         ("pf", E.RandomForestClassifier(n_estimators=2, max_depth=2, random_state=0), ym),
                         ("pg", E.GradientBoostingRegressor(n_estimators=2, max_depth=2, random_state=0), yr),
                         ("pc", E.GradientBoostingClassifier(n_estimators=2, max_depth=2, random_state=0), ym),
                         ("pr", DecisionTreeRegressor(max_depth=3, random_state=0), yr),
                         ("ph", E.HistGradientBoostingRegressor(max_iter=2, max_depth=2, random_state=0), yr)):
        est.fit(Xi if name in ("pt", "pf") else Xf, y)
        joblib.dump(est, folder / f"{name}.joblib")
        out["pickle"].append(folder / f"{name}.joblib")
    out["bytes"] = [p for f in FORMATS[:-1] for p in out[f]]
    return out


# ============================================================================================ JSON docs
def _paths(obj, prefix=()):
    out, stack = [], [(prefix, obj)]
    while stack:
        path, value = stack.pop()
        out.append((path, value))
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for k, v in items:
            stack.append((path + (k,), v))
    return out


def _set(doc, path, value):
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value


def _delete(doc, path):
    node = doc
    for k in path[:-1]:
        node = node[k]
    del node[path[-1]]


def _hostile_value(old, rng: random.Random):
    r = rng.random()
    if isinstance(old, str):
        return rng.choice(HOSTILE_TEXT) if r < 0.7 else rng.choice([[], {}, None, 1, [old]])
    if isinstance(old, bool):
        return rng.choice([2, -1, None, "true"])
    if isinstance(old, int):
        if r < 0.5:
            return rng.choice(HOSTILE_INTS)
        if r < 0.75:
            return old + rng.choice([0.7, 0.2, -0.3])          # a float for an int (2.7, 1.2)
        return rng.choice([float(old), str(old), [old], None, {}])
    if isinstance(old, float):
        return rng.choice(HOSTILE_FLOATS) if r < 0.8 else rng.choice([str(old), [old], None, 10 ** 30])
    if isinstance(old, list):
        return rng.choice(["x", {}, None, 3, [old]])
    if isinstance(old, dict):
        return rng.choice([[], "x", None, [old]])
    return rng.choice(HOSTILE_INTS + HOSTILE_FLOATS)


def mutate_doc(doc, rng: random.Random, n_mut: int | None = None):
    """``doc`` with 1-3 structure-aware mutations: numbers (huge, negative, NaN, inf, float for int),
    strings, types, list lengths (cut, extended, emptied), keys deleted or renamed."""
    doc = copy.deepcopy(doc)
    for _ in range(n_mut or rng.choice((1, 1, 1, 2, 3))):
        paths = [p for p, _ in _paths(doc) if p]
        if not paths:
            break
        # prefer the fields the importers read: the trees' node arrays and the model parameters
        weighted = [p for p in paths if any(isinstance(k, str) and k in
                                            ("left_children", "right_children", "split_indices", "split_conditions",
                                             "default_left", "num_feature", "num_class", "base_score", "tree_info",
                                             "num_nodes", "parents", "split_type", "name", "num_trees")
                                            for k in p)]
        path = rng.choice(weighted if weighted and rng.random() < 0.7 else paths)
        node = doc
        for k in path[:-1]:
            node = node[k]
        old = node[path[-1]]
        kind = rng.random()
        if isinstance(old, list) and kind < 0.5:
            lst = list(old)
            op = rng.random()
            if op < 0.3 and lst:
                lst = lst[:-rng.randint(1, len(lst))]
            elif op < 0.6:
                lst = lst + [rng.choice(lst) if lst and rng.random() < 0.6 else rng.choice(HOSTILE_INTS)]
            elif op < 0.8 and lst:
                i = rng.randrange(len(lst))
                lst[i] = _hostile_value(lst[i], rng)
            else:
                lst = lst * 2
            _set(doc, path, lst)
        elif kind < 0.12 and isinstance(path[-1], str):
            _delete(doc, path)
        elif kind < 0.16 and isinstance(path[-1], str):
            _delete(doc, path)
            _set(doc, path[:-1] + (path[-1] + "_",), old)
        else:
            _set(doc, path, _hostile_value(old, rng))
    return doc


def dump_json(doc, rng: random.Random) -> bytes:
    text = json.dumps(doc, allow_nan=True)
    r = rng.random()
    if r < 0.05:      # deep nesting where a value belongs
        depth = rng.choice((100, 1000, 100_000))
        text = text.replace('"num_feature": ', '"num_feature": ' + "[" * depth, 1) \
            .replace('"num_target"', "]" * depth + ', "num_target"', 1) if '"num_feature": ' in text else text
    elif r < 0.08:    # a duplicated key (the last one wins in Python's json)
        text = text.replace('"split_indices": ', '"split_indices": [-3], "split_indices": ', 1)
    elif r < 0.10:
        text = text.replace('"num_feature": "', '"num_feature": "' + "9" * 5000, 1)
    return text.encode()


# ============================================================================================ UBJSON
def ubj_encode(value) -> bytes:
    """UBJSON as XGBoost writes it (keys with L lengths; lists of numbers as typed arrays when uniform)."""
    out = bytearray()

    def length(n):
        out.extend(b"L" + struct.pack(">q", n))

    def enc(v):
        if v is None:
            out.extend(b"Z")
        elif v is True:
            out.extend(b"T")
        elif v is False:
            out.extend(b"F")
        elif isinstance(v, int):
            if -(1 << 31) <= v < (1 << 31):
                out.extend(b"l" + struct.pack(">i", v))
            elif -(1 << 63) <= v < (1 << 63):
                out.extend(b"L" + struct.pack(">q", v))
            else:
                s = str(v).encode()
                out.extend(b"H")
                length(len(s))
                out.extend(s)
        elif isinstance(v, float):
            f32 = struct.unpack(">f", struct.pack(">f", v))[0] if abs(v) < 3.4e38 or v != v else None
            if f32 is not None and (f32 == v or v != v):
                out.extend(b"d" + struct.pack(">f", v))
            else:
                out.extend(b"D" + struct.pack(">d", v))
        elif isinstance(v, str):
            s = v.encode()
            out.extend(b"S")
            length(len(s))
            out.extend(s)
        elif isinstance(v, list):
            if v and all(type(x) is float for x in v) and all(x != x or abs(x) < 3.4e38 for x in v):
                out.extend(b"[$d#")
                length(len(v))
                out.extend(struct.pack(f">{len(v)}f", *v))
            elif v and all(type(x) is int and -(1 << 31) <= x < (1 << 31) for x in v):
                out.extend(b"[$l#")
                length(len(v))
                out.extend(struct.pack(f">{len(v)}i", *v))
            else:
                out.extend(b"[")
                for x in v:
                    enc(x)
                out.extend(b"]")
        elif isinstance(v, dict):
            out.extend(b"{")
            for k, x in v.items():
                s = str(k).encode()
                length(len(s))
                out.extend(s)
                enc(x)
            out.extend(b"}")
        else:
            raise TypeError(type(v))

    enc(value)
    return bytes(out)


# ============================================================================================ LightGBM
def mutate_lightgbm(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    head_end = next(i for i, l in enumerate(lines) if l.startswith("end of trees"))
    for _ in range(rng.choice((1, 1, 2, 3))):
        cand = [i for i in range(head_end) if "=" in lines[i]]
        i = rng.choice(cand)
        key, val = lines[i].split("=", 1)
        toks = val.split(" ")
        r = rng.random()
        if r < 0.55 and toks:
            j = rng.randrange(len(toks))
            old = toks[j]
            pool = ([str(x) for x in HOSTILE_INTS] + ["2.7", "1.2", "-0.5", "nan", "inf", "-inf", "1e400",
                                                        "1180591620717411303424", "abc", "1e9", "1e30"])
            if ":" in old:   # objective options: sigmoid:1, num_class:3
                toks[j] = old.split(":")[0] + ":" + rng.choice(["abc", "2", "nan", "1e400", ""])
            else:
                toks[j] = rng.choice(pool)
        elif r < 0.7 and toks:
            toks = toks[:-1]
        elif r < 0.8:
            toks = toks + [rng.choice(toks) if toks else "1"]
        elif r < 0.87:
            lines[i] = ""
            continue
        elif r < 0.93:
            lines.insert(i, lines[i])
            head_end += 1
            continue
        else:
            toks = [rng.choice(HOSTILE_TEXT)]
        lines[i] = key + "=" + " ".join(toks)
    text = "\n".join(lines)
    if rng.random() < 0.9:
        text = fix_tree_sizes(text)
    return text


def fix_tree_sizes(text: str) -> str:
    """Recompute the header's ``tree_sizes`` (what LightGBM uses to find the trees) after a mutation."""
    import re
    if "tree_sizes=" not in text or "end of trees" not in text:
        return text
    starts = [m.start() for m in re.finditer(r"^Tree=", text, re.M)]
    end = text.index("end of trees")
    sizes = [b - a for a, b in zip(starts, starts[1:] + [end])]
    return re.sub(r"^tree_sizes=.*$", "tree_sizes=" + " ".join(map(str, sizes)), text, count=1, flags=re.M)


# ============================================================================================ ONNX
def mutate_onnx(raw: bytes, rng: random.Random) -> bytes:
    import onnx
    m = onnx.load_model_from_string(raw)
    node = next(n for n in m.graph.node if n.op_type.startswith("TreeEnsemble"))
    for _ in range(rng.choice((1, 1, 2))):
        attrs = list(node.attribute)
        r = rng.random()
        if r < 0.06:
            dim = m.graph.input[0].type.tensor_type.shape.dim[1]
            dim.dim_value = rng.choice([1, 2, 10 ** 9, 65536, 3])
            continue
        a = rng.choice(attrs)
        if r < 0.12:
            node.attribute.remove(a)
            continue
        if a.type == onnx.AttributeProto.INTS and a.ints:
            vals = list(a.ints)
            op = rng.random()
            if op < 0.5:
                vals[rng.randrange(len(vals))] = rng.choice([x for x in HOSTILE_INTS if -(1 << 63) <= x < (1 << 63)])
            elif op < 0.7:
                vals = vals[:-1]
            elif op < 0.9:
                vals = vals + [rng.choice(vals)]
            else:
                del a.ints[:]
                a.type = onnx.AttributeProto.FLOATS
                a.floats.extend([float(x) + 0.5 for x in vals])
                continue
            del a.ints[:]
            a.ints.extend(vals)
        elif a.type == onnx.AttributeProto.FLOATS and a.floats:
            vals = list(a.floats)
            op = rng.random()
            if op < 0.6:
                vals[rng.randrange(len(vals))] = rng.choice(HOSTILE_FLOATS)
            elif op < 0.8:
                vals = vals[:-1]
            else:
                vals = vals + [rng.choice(vals)]
            del a.floats[:]
            a.floats.extend(vals)
        elif a.type == onnx.AttributeProto.STRINGS and a.strings:
            vals = list(a.strings)
            op = rng.random()
            if op < 0.5:
                vals[rng.randrange(len(vals))] = rng.choice([b"BRANCH_EQ", b"LEAF", b"BRANCH_LT", b"\xff", b""])
            elif op < 0.75:
                vals = vals[:-1]
            else:
                vals = vals + [rng.choice(vals)]
            del a.strings[:]
            a.strings.extend(vals)
        elif a.type == onnx.AttributeProto.STRING:
            a.s = rng.choice([b"SOFTMAX", b"LOGISTIC", b"NONE", b"PROBIT", b"AVERAGE", b"\xff"])
        elif a.type == onnx.AttributeProto.INT:
            a.i = rng.choice([0, 1, 2, -1, 1 << 40])
    return m.SerializeToString()


# ============================================================================================ pickles
def mutate_estimator(est, rng: random.Random):
    """A fitted scikit-learn estimator with one of its fitted attributes or tree node arrays broken."""
    est = copy.deepcopy(est)
    trees = []
    if hasattr(est, "tree_"):
        trees = [est]
    elif hasattr(est, "estimators_"):
        trees = list(np.asarray(est.estimators_, dtype=object).ravel())
    r = rng.random()
    if r < 0.55 and trees:
        t = rng.choice(trees)
        state = t.tree_.__getstate__()
        nodes = state["nodes"].copy()
        field = rng.choice(["left_child", "right_child", "feature", "threshold"])
        i = rng.randrange(len(nodes))
        if field == "threshold":
            nodes[field][i] = rng.choice(HOSTILE_FLOATS)
        else:
            nodes[field][i] = rng.choice([-3, -2, -1, 0, 1, len(nodes), len(nodes) - 1, 1 << 40, 10 ** 9, 5])
        state = dict(state, nodes=nodes)
        if rng.random() < 0.2:
            v = state["values"].copy()
            v.flat[rng.randrange(v.size)] = rng.choice(HOSTILE_FLOATS)
            state["values"] = v
        t.tree_.__setstate__(state)
    elif r < 0.65 and hasattr(est, "estimators_"):
        e = est.estimators_
        est.estimators_ = e[:0] if rng.random() < 0.6 else (e[:1] if isinstance(e, list) else e[:, :0])
    elif r < 0.75 and hasattr(est, "n_features_in_"):
        est.n_features_in_ = rng.choice([0, -1, 10 ** 9, 1, 2.5, "3", 70_000])
    elif r < 0.83 and hasattr(est, "classes_"):
        est.classes_ = rng.choice([np.array([]), np.arange(70_000), np.array([[0, 1]]), np.array([0, 0, 1])])
    elif r < 0.9 and hasattr(est, "learning_rate"):
        est.learning_rate = rng.choice(HOSTILE_FLOATS + ["x"])
    elif hasattr(est, "_predictors") and est._predictors:
        pred = rng.choice(rng.choice(est._predictors))
        nodes = pred.nodes.copy()
        field = rng.choice(["left", "right", "feature_idx", "num_threshold", "value"])
        i = rng.randrange(len(nodes))
        if field in ("num_threshold", "value"):
            nodes[field][i] = rng.choice(HOSTILE_FLOATS)
        else:
            nodes[field][i] = rng.choice([0, 1, len(nodes), 1000, 7])
        pred.nodes = nodes
    else:
        est.n_outputs_ = rng.choice([0, 2, -1])
    return est


class Raises:
    """A pickled object whose unpickling raises (a "trusted" pickle that fails)."""

    def __reduce__(self):
        return (int, ("not a number",))


# ============================================================================================ cases
def make_case(fmt: str, seeds: dict, rng: random.Random, folder: Path, index: int) -> Path:
    """One mutated file of format ``fmt`` (written into ``folder``)."""
    src = rng.choice(seeds[fmt])
    raw = src.read_bytes()
    suffix = src.suffix
    if fmt == "xgboost-json":
        data = dump_json(mutate_doc(json.loads(raw), rng), rng) if rng.random() < 0.9 else _flip(raw, rng)
    elif fmt == "xgboost-ubj":
        from treegen.importers.reader import loads_ubjson
        if rng.random() < 0.85:
            data = ubj_encode(mutate_doc(loads_ubjson(raw, "seed"), rng))
        else:
            data = _flip(raw, rng)
    elif fmt == "lightgbm":
        data = mutate_lightgbm(raw.decode(), rng).encode() if rng.random() < 0.92 else _flip(raw, rng)
    elif fmt == "onnx":
        data = mutate_onnx(raw, rng) if rng.random() < 0.85 else _flip(raw, rng)
    elif fmt == "pickle":
        import joblib
        r = rng.random()
        if r < 0.8:
            buf = io.BytesIO()
            joblib.dump(mutate_estimator(joblib.load(src), rng), buf)
            data = buf.getvalue()
        elif r < 0.85:
            import pickle
            data = pickle.dumps(Raises(), protocol=4)
        else:
            data = _flip(raw, rng, n=rng.choice((1, 2)))
    else:   # random bytes: pure noise, or a real file's first bytes (the format is detected) then noise
        n = rng.choice((0, 1, 7, 100, 4096, 5000))
        noise = bytes(rng.getrandbits(8) for _ in range(n))
        data = raw[:rng.choice((1, 2, 16, 64))] + noise if rng.random() < 0.6 else noise
        suffix = ".bin"
    path = folder / f"case{index:06d}_{fmt}{suffix}"
    path.write_bytes(data)
    return path


def _flip(raw: bytes, rng: random.Random, n: int | None = None) -> bytes:
    b = bytearray(raw)
    for _ in range(n or rng.choice((1, 2, 4, 16))):
        op = rng.random()
        i = rng.randrange(len(b)) if b else 0
        if op < 0.6 and b:
            b[i] = rng.getrandbits(8)
        elif op < 0.8 and b:
            del b[i:i + rng.randint(1, 64)]
        else:
            b[i:i] = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 16)))
    if rng.random() < 0.1:
        b = b[:rng.randrange(len(b) + 1)]
    return bytes(b)


# ============================================================================================ worker
def _rows(model, rng):
    Z = rng.normal(scale=2.0, size=(200, model.n_features)).astype(np.float32)
    if model.handles_missing:
        Z[:40][rng.random((40, model.n_features)) < 0.3] = np.nan
    return Z.astype(np.float64)


def _library_check(path: Path, model) -> str:
    """'same', or what differs between treegen's model and the library's reading of the file."""
    rng = np.random.default_rng(7)
    Z = _rows(model, rng)
    raw = path.read_bytes()
    head = raw.lstrip()[:1]
    if path.suffix in (".json", ".ubj") or (head == b"{" and path.suffix != ".txt"):
        import xgboost as xgb
        b = xgb.Booster(params={"nthread": 1})
        b.load_model(bytearray(raw))
        obj = json.loads(b.save_raw("json"))["learner"]["objective"]["name"]
        D = xgb.DMatrix(Z.astype(np.float32), missing=np.nan)
        margin = np.asarray(b.predict(D, output_margin=True), dtype=np.float32).reshape(len(Z), -1)
        out = np.asarray(b.predict(D))
        if model.task == "regression":
            mine = np.asarray(model.predict(Z), dtype=np.float32).reshape(margin.shape)
        else:
            mine = np.asarray(model.decision_function(Z), dtype=np.float32).reshape(margin.shape)
        if not np.array_equal(mine.view(np.int32), margin.view(np.int32)):
            return f"margins differ on {int(np.sum(mine.view(np.int32) != margin.view(np.int32)))} cells"
        if model.task == "classification":
            if obj.startswith("binary:"):
                cls = (out.reshape(-1) > 0.5).astype(np.int64)
            elif obj == "multi:softmax":
                cls = out.reshape(-1).astype(np.int64)
            else:
                cls = np.argmax(out.reshape(len(Z), -1), axis=1)
            mine_cls = np.asarray(model.predict_index(Z))
            if not np.array_equal(mine_cls, cls):
                return f"classes differ on {int(np.sum(mine_cls != cls))} rows"
        return "same"
    if raw.lstrip()[:4] == b"tree":
        import lightgbm as lgb
        b = lgb.Booster(model_str=raw.decode())
        ref = np.asarray(b.predict(Z, raw_score=True, num_threads=1), dtype=np.float64).reshape(len(Z), -1)
        mine = np.asarray(model.decision_function(Z) if model.task == "classification" else model.predict(Z),
                          dtype=np.float64).reshape(ref.shape)
        if not np.array_equal(mine.view(np.int64), ref.view(np.int64)):
            return f"raw scores differ on {int(np.sum(mine.view(np.int64) != ref.view(np.int64)))} cells"
        if model.task == "classification":
            p = np.asarray(b.predict(Z, num_threads=1)).reshape(len(Z), -1)
            cls = (p[:, 0] > 0.5).astype(np.int64) if p.shape[1] == 1 else np.argmax(p, axis=1)
            mine_cls = np.asarray(model.predict_index(Z))
            if not np.array_equal(mine_cls, cls):
                return f"classes differ on {int(np.sum(mine_cls != cls))} rows"
        return "same"
    if path.suffix == ".onnx":
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.log_severity_level = 4
        sess = ort.InferenceSession(raw, so, providers=["CPUExecutionProvider"])
        Zf = Z.astype(np.float32)
        if model.handles_missing is False:
            Zf = np.nan_to_num(Zf)
            Z = Zf.astype(np.float64)
        outs = sess.run(None, {sess.get_inputs()[0].name: Zf})
        if model.task == "regression":
            ref = np.asarray(outs[0], dtype=np.float32).reshape(-1)
            mine = np.asarray(model.predict(Z), dtype=np.float32).reshape(-1)
            if not np.array_equal(mine.view(np.int32), ref.view(np.int32)):
                return f"values differ on {int(np.sum(mine.view(np.int32) != ref.view(np.int32)))} rows"
        else:
            label = np.asarray(outs[0]).reshape(-1)
            mine = np.asarray(model.predict(Z)).reshape(-1)
            if not np.array_equal(mine.astype(label.dtype), label):
                return f"labels differ on {int(np.sum(mine.astype(label.dtype) != label))} rows"
        return "same"
    import joblib
    est = joblib.load(io.BytesIO(raw))
    Zs = Z if model.handles_missing else np.nan_to_num(Z)
    ref = np.asarray(est.predict(Zs))
    mine = np.asarray(model.predict(Zs))
    if ref.dtype.kind == "f":     # bit for bit, but +0.0 and -0.0 are one value (a sum from +0.0 loses the sign)
        m64, r64 = np.asarray(mine, dtype=np.float64) + 0.0, ref.astype(np.float64) + 0.0
        ok = np.array_equal(m64.view(np.int64), r64.view(np.int64))
    else:
        ok = np.array_equal(mine.astype(ref.dtype), ref)
    return "same" if ok else f"predictions differ on {int(np.sum(np.asarray(mine) != ref))} rows"


def worker() -> None:
    """Read case paths (one JSON line each) from stdin; answer two lines per case (see the module doc)."""
    import contextlib
    import warnings

    import faulthandler
    import signal

    warnings.simplefilter("ignore")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    faulthandler.register(signal.SIGUSR1, all_threads=True)     # the parent asks where a hang is
    from treegen.cli.main import main
    from treegen.core.model import load
    import xgboost, lightgbm, onnxruntime, sklearn, joblib  # noqa: F401,E401 - imported once, before any case

    # the answers go through a copy of stdout; the libraries' own C-level printing goes to /dev/null
    out = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stdout = io.StringIO()
    out.write(json.dumps({"ready": True}) + "\n")      # imports done: case timeouts start now
    out.flush()
    for line in sys.stdin:
        case = json.loads(line)
        path = Path(case["path"])
        target = path.with_suffix(path.suffix + ".model.json")
        err, so = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(so):
                code = main(["import", str(path), "-o", str(target), "--trust-pickle"])
            text = err.getvalue()
        except BaseException as exc:   # noqa: BLE001 - an exception escaping main is what the fuzzer hunts
            import traceback
            code, text = -1, "".join(traceback.format_exception(exc))
        lines = text.strip().splitlines()
        if code == 2 and len(lines) == 1 and lines[0].startswith("treegen: error: "):
            verdict = {"verdict": "refused", "message": lines[0]}
        elif code == 0:
            verdict = {"verdict": "accepted", "message": text[-500:]}
        else:
            verdict = {"verdict": "traceback", "message": f"exit {code}: {text[-3000:]}"}
        out.write(json.dumps(verdict) + "\n")
        out.flush()
        if verdict["verdict"] != "accepted":
            continue
        try:
            result = _library_check(path, load(target))
        except BaseException as exc:   # noqa: BLE001 - the library refuses the file (or treegen's model fails)
            result = f"library/model error {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        out.write(json.dumps({"check": result}) + "\n")
        out.flush()


class Runner:
    """The parent side: one worker process, restarted after a crash or a hang."""

    def __init__(self):
        self.proc = None

    def _start(self):
        env = dict(os.environ)
        here = str(Path(__file__).resolve().parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH", ""), here) if p)
        env["OMP_NUM_THREADS"] = "1"
        self.errfile = tempfile.TemporaryFile()
        self.buf = b""
        self.proc = subprocess.Popen([sys.executable, "-c", "import import_fuzz; import_fuzz.worker()"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errfile,
                                     text=True, env=env, bufsize=1)
        os.set_blocking(self.proc.stdout.fileno(), True)
        ready = self._read(STARTUP_TIMEOUT)      # the libraries' imports, not counted in a case's time
        if not isinstance(ready, dict) or not ready.get("ready"):
            raise RuntimeError(f"the fuzz worker did not start within {STARTUP_TIMEOUT:g} s ({ready!r})")

    def _read(self, timeout: float):
        """The worker's next answer line (None: the worker died; "hang": none within ``timeout``), read from
        the pipe's file descriptor with a buffer of our own (a text wrapper would hide buffered lines from
        select)."""
        import select
        import time
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return "hang"
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                return "hang"
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def _where(self) -> str:
        """The worker's stacks (faulthandler on SIGUSR1), for a hang."""
        import signal
        import time
        try:
            self.errfile.seek(0, 2)
            start = self.errfile.tell()
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(2)
            self.errfile.seek(start)
            return self.errfile.read().decode(errors="replace")[-1500:]
        except OSError:
            return ""

    def _restart(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def run(self, path: Path) -> dict:
        """{"outcome": refused | accepted-same | traceback | crash | hang | different, "detail": ...}."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write(json.dumps({"path": str(path)}) + "\n")
        self.proc.stdin.flush()
        v = self._read(CASE_TIMEOUT)
        if v is None:
            code = self.proc.wait()
            self._restart()
            return {"outcome": "crash", "detail": f"treegen's process died (status {code})"}
        if v == "hang":
            where = self._where()
            self._restart()
            return {"outcome": "hang", "detail": f"no verdict within {CASE_TIMEOUT:g} s: {where}"}
        if v["verdict"] != "accepted":
            return {"outcome": v["verdict"], "detail": v["message"]}
        c = self._read(CASE_TIMEOUT)
        if c is None:
            code = self.proc.wait()
            self._restart()
            return {"outcome": "different", "detail": f"treegen accepted a file its library crashes on ({code})"}
        if c == "hang":
            where = self._where()
            self._restart()
            return {"outcome": "different", "detail": f"no library verdict within {CASE_TIMEOUT:g} s: {where}"}
        if c["check"] != "same":
            return {"outcome": "different", "detail": c["check"]}
        return {"outcome": "accepted-same", "detail": ""}

    def close(self):
        if self.proc is not None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


def fuzz(formats, n_cases: int | None, seed: int, folder: Path, seconds: float | None = None, log=None):
    """Run ``n_cases`` cases per format (or until ``seconds`` have passed, formats in turn); returns
    {format: {outcome: count}} and the list of failing cases (traceback, crash, hang, different)."""
    import time
    seeds = make_seeds(folder / "seeds")
    counts = {f: {} for f in formats}
    bad = []
    runner = Runner()
    t0 = time.monotonic()
    index = 0
    try:
        rngs = {f: random.Random(f"{seed}-{f}") for f in formats}
        k = 0
        while True:
            if seconds is None and k >= n_cases:
                break
            if seconds is not None and time.monotonic() - t0 > seconds:
                break
            for f in formats:
                with tempfile.TemporaryDirectory(dir=folder) as d:
                    path = make_case(f, seeds, rngs[f], Path(d), index)
                    res = runner.run(path)
                    counts[f][res["outcome"]] = counts[f].get(res["outcome"], 0) + 1
                    if res["outcome"] not in ("refused", "accepted-same"):
                        keep = folder / "failures"
                        keep.mkdir(exist_ok=True)
                        kept = keep / path.name
                        kept.write_bytes(path.read_bytes())
                        bad.append({"format": f, "case": index, "file": str(kept), **res})
                        if log:
                            log(f"{f} case {index}: {res['outcome']}: {res['detail'][:300]}")
                index += 1
            k += 1
    finally:
        runner.close()
    return counts, bad
