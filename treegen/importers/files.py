"""Import a model *file* of another library (what ``treegen import FILE`` reads), recognised by its content:

=====================  ===============================================================  =================
content                format                                                          importer
=====================  ===============================================================  =================
JSON with ``learner``  XGBoost JSON model (``Booster.save_model("m.json")``)            :func:`from_xgboost`
UBJSON ``{`` + marker  XGBoost UBJSON model (``.ubj``; read with xgboost)               :func:`from_xgboost`
JSON ``features_info``  CatBoost JSON model (``save_model("m.json", format="json")``)  :func:`from_catboost`
``CBM1``               CatBoost binary model (``.cbm``; converted to JSON by catboost)  :func:`from_catboost`
int32 4, minor, patch   Treelite 4.x checkpoint (``Model.serialize``; read with treelite) :func:`from_treelite`
``tree`` + ``version``  LightGBM model text (``Booster.save_model("m.txt")``)           :func:`from_lightgbm`
protobuf ``08`` ...    ONNX model with an ONNX-ML tree ensemble (skl2onnx, onnxmltools) :func:`from_onnx`
pickle / joblib        a fitted scikit-learn / XGBoost / LightGBM estimator: only with  by its type
                       ``trust_pickle=True`` (unpickling runs code from the file)
=====================  ===============================================================  =================
"""

from __future__ import annotations

import zlib
from pathlib import Path

from treegen.core.errors import TreegenError
from treegen.core.limits import MAX_MODEL_BYTES

__all__ = ["import_model", "sniff_format"]

FORMATS = ("xgboost-json", "xgboost-ubj", "catboost-json", "catboost-cbm", "treelite", "lightgbm", "onnx", "pickle")
MAX_IMPORT_BYTES = max(MAX_MODEL_BYTES, 256 << 20)


def sniff_format(head: bytes) -> str | None:
    """The format of a model file from its first bytes (None: not recognised)."""
    stripped = head.lstrip()
    if head[:4] == b"CBM1":
        return "catboost-cbm"
    if stripped[:1] == b"{":
        if b'"oblivious_trees"' in head or b'"features_info"' in head:
            return "catboost-json"
        if stripped[1:2] in (b"L", b"U", b"i", b"l", b"$", b"#"):   # UBJSON: a type marker follows
            return "xgboost-ubj"
        return "xgboost-json" if b'"learner"' in head or b'"version"' in head else None
    if stripped.startswith(b"tree\n") or stripped.startswith(b"tree\r\n"):
        return "lightgbm"
    if head[:1] == b"\x80" and head[1:2] in bytes(range(2, 6)):    # pickle protocol 2..5
        return "pickle"
    if head[:1] == b"\x08" and len(head) > 2 and 1 <= head[1] <= 32 and head[2] in b"\x12\x1a\x22\x2a\x32\x3a\x42":
        return "onnx"      # ModelProto: ir_version (field 1, a small varint), then another length-delimited field
    from treegen.importers.treelite_json import looks_like_treelite
    if looks_like_treelite(head):
        return "treelite"
    if head[:2] in (b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda") or head[:3] == b"\x1f\x8b\x08":
        return "pickle"     # a compressed joblib dump
    return None


def import_model(path, *, trust_pickle: bool = False, X=None, feature_names=None):
    """Read a model file of another library (see the module documentation) into a treegen ``Model``.

    ``X``: data the model will see (fits the input scaling of the q15 export; optional)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except FileNotFoundError:
        raise TreegenError(f"{path}: model file not found") from None
    except OSError as exc:
        raise TreegenError(f"cannot read {path}: {exc.strerror or exc}") from None
    if path.is_dir():
        raise TreegenError(f"{path} is a folder, not a model file")
    if size > MAX_IMPORT_BYTES:
        raise TreegenError(f"{path}: {size} bytes is too large for a model file")
    fmt = sniff_format(head)
    if fmt == "treelite":
        from treegen.importers.treelite_json import from_treelite
        return from_treelite(path, X=X, feature_names=feature_names)
    if fmt in ("catboost-json", "catboost-cbm"):
        from treegen.importers.catboost_json import from_catboost
        return from_catboost(path, X=X, feature_names=feature_names)
    if fmt in ("xgboost-json", "xgboost-ubj"):
        from treegen.importers.xgboost_json import from_xgboost
        return from_xgboost(path, X=X, feature_names=feature_names)
    if fmt == "lightgbm":
        from treegen.importers.lightgbm_text import from_lightgbm
        return from_lightgbm(path, X=X, feature_names=feature_names)
    if fmt == "onnx":
        from treegen.importers.onnx_ml import from_onnx
        return from_onnx(path, X=X, feature_names=feature_names)
    if fmt == "pickle":
        if not trust_pickle:
            raise TreegenError(f"{path} is a pickle/joblib file: loading it runs code from the file; pass "
                               "--trust-pickle (Python: trust_pickle=True) only for a file you trust")
        return _from_estimator(_unpickle(path), X, feature_names)
    raise TreegenError(f"{path}: not a model file treegen can import (XGBoost JSON/UBJSON, CatBoost .cbm/JSON, "
                       "Treelite checkpoint, LightGBM model text, ONNX, or with --trust-pickle a pickled scikit-learn/XGBoost/LightGBM estimator)")


def _unpickle(path: Path):
    try:
        import joblib
        return joblib.load(path)
    except (EOFError, ValueError, TypeError, AttributeError, ImportError, IndexError, KeyError, zlib.error,
            __import__("pickle").UnpicklingError) as exc:
        raise TreegenError(f"{path}: cannot unpickle ({type(exc).__name__}: {exc})") from None


def _from_estimator(est, X, feature_names):
    module = type(est).__module__.split(".")[0]
    if module == "xgboost":
        from treegen.importers.xgboost_json import from_xgboost
        return from_xgboost(est, X=X, feature_names=feature_names)
    if module == "catboost":
        from treegen.importers.catboost_json import from_catboost
        return from_catboost(est, X=X, feature_names=feature_names)
    if module == "lightgbm":
        from treegen.importers.lightgbm_text import from_lightgbm
        return from_lightgbm(est, X=X, feature_names=feature_names)
    if module == "sklearn":
        from treegen.importers.sklearn import from_sklearn
        return from_sklearn(est, X=X, feature_names=feature_names)
    raise TreegenError(f"the pickle holds a {type(est).__name__}, not a scikit-learn, XGBoost or LightGBM model")
