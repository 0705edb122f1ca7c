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

from pathlib import Path

from treegen.core.errors import TreegenError
from treegen.importers.reader import MAX_IMPORT_BYTES, read_source  # noqa: F401 - MAX_IMPORT_BYTES: its old home

__all__ = ["import_model", "sniff_format"]

FORMATS = ("xgboost-json", "xgboost-ubj", "catboost-json", "catboost-cbm", "treelite", "lightgbm", "onnx", "pickle")


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

    The file is read once into a bounded buffer (:func:`~treegen.importers.reader.read_source`: a
    pipe or ``/dev/stdin`` works, an endless stream is cut at the bound); the format is detected on
    those bytes and the same bytes are parsed.

    ``X``: data the model will see (fits the input scaling of the q15 export; optional)."""
    path = Path(path)
    raw = read_source(path)
    name = str(path)
    fmt = sniff_format(raw[:4096])
    if fmt == "treelite":
        from treegen.importers.treelite_json import TreeliteBytes, from_treelite
        return from_treelite(TreeliteBytes(raw, name), X=X, feature_names=feature_names)
    if fmt == "catboost-json":
        from treegen.importers.catboost_json import from_catboost
        from treegen.importers.reader import loads_json
        doc = loads_json(raw, name)
        if not isinstance(doc, dict):
            raise TreegenError(f"{name}: not a CatBoost JSON model (the top level is not an object)")
        return from_catboost(doc, X=X, feature_names=feature_names)
    if fmt == "catboost-cbm":
        from treegen.importers.catboost_json import cbm_to_json, from_catboost
        return from_catboost(cbm_to_json(raw, name), X=X, feature_names=feature_names)
    if fmt in ("xgboost-json", "xgboost-ubj"):
        from treegen.importers.xgboost_json import XGBoostBytes, from_xgboost
        return from_xgboost(XGBoostBytes(raw, name), X=X, feature_names=feature_names)
    if fmt == "lightgbm":
        from treegen.importers.lightgbm_text import LightGBMBytes, from_lightgbm
        return from_lightgbm(LightGBMBytes(raw, name), X=X, feature_names=feature_names)
    if fmt == "onnx":
        from treegen.importers.onnx_ml import OnnxBytes, from_onnx
        return from_onnx(OnnxBytes(raw, name), X=X, feature_names=feature_names)
    if fmt == "pickle":
        if not trust_pickle:
            raise TreegenError(f"{path} is a pickle/joblib file: loading it runs code from the file; pass "
                               "--trust-pickle (Python: trust_pickle=True) only for a file you trust")
        return _import_pickle_isolated(raw, name, X, feature_names)
    raise TreegenError(f"{path}: not a model file treegen can import (XGBoost JSON/UBJSON, CatBoost .cbm/JSON, "
                       "Treelite checkpoint, LightGBM model text, ONNX, or with --trust-pickle a pickled "
                       "scikit-learn/XGBoost/LightGBM estimator)")


def _pickle_to_json(raw: bytes, name: str, X, feature_names) -> tuple[str, str]:
    """In the child process: ("ok", the model's JSON) or ("error", the one-line refusal)."""
    try:
        return "ok", _from_estimator(_unpickle(raw, name), X, feature_names, name).to_json()
    except TreegenError as exc:
        return "error", str(exc)


def _pickle_context():
    """Where trusted pickles are read: fork-server children (each a fresh fork of one clean server process
    that has imported the readers once), so the second and later pickles of a process cost a fork, not
    a new interpreter importing numpy, joblib and scikit-learn (~1.5 s of CPU each)."""
    import multiprocessing

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["treegen.importers.files", "joblib", "sklearn.ensemble", "sklearn.tree"])
    return ctx


def _import_pickle_isolated(raw: bytes, name: str, X, feature_names):
    """A trusted pickle is loaded in a child process: what its code or a damaged numpy/joblib payload does
    (joblib's array reader can end the interpreter with SIGSEGV on a corrupt header) ends that process,
    not treegen's; the model comes back as its JSON (load(save(m)) is exact), a refusal as one line."""
    import concurrent.futures
    import json

    from treegen.core.model import Model

    ctx = _pickle_context()
    try:
        with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
            kind, text = pool.submit(_pickle_to_json, raw, name, X, feature_names).result()
    except concurrent.futures.process.BrokenProcessPool:
        raise TreegenError(f"{name}: loading the pickle ended the process that read it (a damaged or hostile "
                           "file: its own code, or joblib/numpy on a corrupt array)") from None
    if kind == "error":
        raise TreegenError(text)
    return Model.from_dict(json.loads(text))


def _unpickle(raw: bytes, name: str):
    """The object of a trusted pickle / joblib dump: whatever its code raises is one line."""
    import io

    import joblib
    try:
        return joblib.load(io.BytesIO(raw))
    except Exception as exc:   # noqa: BLE001 - a trusted pickle runs arbitrary code: any exception
        text = " ".join(str(exc).split())[:200]
        raise TreegenError(f"{name}: cannot unpickle ({type(exc).__name__}{': ' + text if text else ''})") from None


def _from_estimator(est, X, feature_names, name: str = "the pickle"):
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
        try:
            return from_sklearn(est, X=X, feature_names=feature_names, source_name=name)
        except TreegenError:
            raise
        except (AttributeError, TypeError, ValueError, IndexError, KeyError) as exc:
            # the object was built by the pickle's own code: its methods (get_params, predict) fail on
            # attributes the pickle broke, which the checks of sklearn_checks do not reach
            text = " ".join(str(exc).split())[:200]
            raise TreegenError(f"{name}: the {type(est).__name__} in the pickle is malformed "
                               f"({type(exc).__name__}: {text})") from None
    raise TreegenError(f"{name}: the pickle holds a {type(est).__name__}, not a scikit-learn, XGBoost or LightGBM "
                       "model")
