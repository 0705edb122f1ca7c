"""On-device training, checked against the host: the device evolves a tree with the C EFTI engine
(``treegen.device.train_firmware``) and the result must be *bit-identical* to the host's.

:class:`TrainingClient` speaks the training requests of the serial protocol (``docs/protocol.md``:
TRAIN_INFO, TRAIN_DATA, TRAIN, TREE_GET, PREDICT_TRAINED) over a :class:`~treegen.device.protocol.DeviceClient`.
It validates nothing the device validates itself, so a bad request is answered by the device's
ERROR frame (:class:`~treegen.device.protocol.DeviceError`).

:func:`run_train_hil` is the end-to-end check::

    data (Q15 rows, labels) --TRAIN_DATA pages--> device RAM buffer
    TRAIN(seed, n_iter) on the device           -> integer fitness F, hits, counter total
    TREE_GET pages -> treegen Tree                  == treegen.learn.engine.induce (host C, same seed)
                                                    == treegen.learn.inducers.efti.induce (Python/numpy)
    PREDICT_TRAINED on every row                    == treegen.emit.quantize.predict_q15 of that tree

Equality is exact everywhere: the tree (``Tree.equals``: structure, weights, thresholds, leaf
classes, class counts), the integer fitness ``F`` and the hits. The Python EFTI's fitness is a
float, ``F / (n * 2**32)``; it is compared with the device's ``F / (n * 2**32)`` with tolerance 0
(``float_fitness`` in the report): both sides compute the same integer, so there is nothing to
tolerate.
"""

from __future__ import annotations

import struct
import time
from dataclasses import asdict, dataclass, replace
from typing import Callable

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.tree import LEAF, Tree
from treegen.device.protocol import CAP_TRAIN, CounterUnit, DeviceClient, MsgType, ProtocolError
from treegen.learn.inducers.efti import EFTIParams

W_ONE = 1 << 15
T_ONE = 1 << 30
SOURCES = {"ram": 0, "flash": 1}
#: TRAIN response timeout: this much per iteration on top of the client's timeout (QEMU runs a
#: veh-sized iteration in well under a millisecond; real boards at 16+ MHz are slower)
SECONDS_PER_ITERATION = 0.05
#: how reports name the training engine's dot-product variants
VARIANT_NAMES = {"scalar": "scalar", "dsp": "DSP (SMLALD)", "mve": "MVE (VMLALDAVA)"}
#: phases of an iteration in TRAIN_PROFILE (templates/efti/tg_efti.h: TG_EFTI_PROF_PHASES)
PROFILE_PHASES = ("switch", "mutate", "reclassify", "fitness", "select")
FITNESS_TOLERANCE = 0          # device vs Python float fitness: exactly equal (see module docstring)


@dataclass(frozen=True)
class TrainInfo:
    """The TRAIN_INFO response: what the device's engine was generated for, and what it holds."""
    max_rows: int
    buffer_rows: int
    max_attr: int
    max_classes: int
    max_depth: int
    flags: int
    flash_rows: int
    flash_attr: int
    flash_classes: int
    stored_rows: int
    stored_attr: int
    stored_classes: int
    ram_bytes: int
    params_digest: str

    SIZE = 42

    @property
    def partial(self) -> bool:
        return bool(self.flags & 1)

    @property
    def dsp(self) -> bool:
        return bool(self.flags & 2)

    @property
    def mve(self) -> bool:
        return bool(self.flags & 8)

    @property
    def variant(self) -> str:
        """The engine's dot-product variant: ``mve``, ``dsp`` or ``scalar``."""
        return "mve" if self.mve else ("dsp" if self.dsp else "scalar")

    @property
    def has_flash_data(self) -> bool:
        return bool(self.flags & 4)

    @property
    def vicinal(self) -> bool:
        """The engine rates trees by the vicinal risk (flag bit 4)."""
        return bool(self.flags & 16)

    @property
    def risk(self) -> str:
        return "vicinal" if self.vicinal else "empirical"

    @classmethod
    def from_payload(cls, p: bytes) -> "TrainInfo":
        if len(p) != cls.SIZE:
            raise ProtocolError(f"TRAIN_INFO response has {len(p)} bytes, expected {cls.SIZE}")
        v = struct.unpack("<IIHHBBIHHIHHI8s", p)
        return cls(*v[:13], v[13].hex())


@dataclass(frozen=True)
class TrainResult:
    """The TRAIN response."""
    fitness: int            # integer F of the best tree
    hits: int
    iterations: int
    counter_total: int      # counter ticks over the iterations (unit below), init excluded
    unit: int
    n_nodes: int
    n_leaves: int
    depth: int
    init_counter: int       # ticks of tg_efti_init (first full evaluation)

    SIZE = 38

    @property
    def unit_name(self) -> str:
        try:
            return CounterUnit(self.unit).name.lower()
        except ValueError:
            return f"unit {self.unit}"

    @property
    def per_iteration(self) -> float:
        return self.counter_total / max(1, self.iterations)

    @classmethod
    def from_payload(cls, p: bytes) -> "TrainResult":
        if len(p) != cls.SIZE:
            raise ProtocolError(f"TRAIN response has {len(p)} bytes, expected {cls.SIZE}")
        return cls(*struct.unpack("<QIIQBHHBQ", p))


def _q15_rows(X) -> np.ndarray:
    """Q15 integer rows (accepts integers 0..32767 or floats on the Q15 grid in [0, 1))."""
    a = np.asarray(X)
    if a.ndim != 2:
        raise TreegenError(f"training rows must be a 2-D array, got shape {a.shape}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        f = a.astype(np.float64)
        if not np.all(np.isfinite(f)):
            raise TreegenError("training rows contain NaN or infinite values")
        if f.max() < 1.0 and f.min() >= 0.0 and np.array_equal(np.rint(f * W_ONE) / W_ONE, f):
            f = np.rint(f * W_ONE)
        if not np.array_equal(f, np.rint(f)):
            raise TreegenError("training rows must be Q15 integers 0..32767 (or features on the Q15 grid)")
        a = f
    a = a.astype(np.int64)
    if a.size and (a.min() < 0 or a.max() > 32767):
        raise TreegenError("training rows must be Q15 values 0..32767")
    return a


class TrainingClient:
    """Training requests over a :class:`DeviceClient` (which keeps owning the port)."""

    def __init__(self, client: DeviceClient):
        self.client = client

    @property
    def name(self) -> str:
        return self.client.name

    def check_capability(self) -> None:
        info = self.client.info()
        if not info.capabilities & CAP_TRAIN:
            raise TreegenError(f"{self.name}: the device has no on-device training (INFO capability bit 2, TRAIN, "
                               f"is off): build its firmware with training (treegen.device.firmware.write_harness(..., "
                               f"train=...))")

    def info(self, *, timeout: float | None = None) -> TrainInfo:
        return TrainInfo.from_payload(self.client.request(MsgType.TRAIN_INFO, timeout=timeout))

    def store(self, offset: int, rows, labels, n_classes: int, *, timeout: float | None = None) -> int:
        """One TRAIN_DATA page: rows (n, A) Q15 ints and their labels at row ``offset``; returns the
        rows stored on the device."""
        a = np.asarray(rows, dtype=np.int64)
        y = np.asarray(labels, dtype=np.int64)
        n, A = a.shape
        payload = struct.pack("<IHHH", int(offset), n, A, int(n_classes)) + a.astype("<i2").tobytes() + \
            y.astype(np.uint8).tobytes()
        resp = self.client.request(MsgType.TRAIN_DATA, payload, timeout=timeout)
        if len(resp) != 4:
            raise ProtocolError(f"{self.name}: TRAIN_DATA response has {len(resp)} bytes, expected 4")
        return struct.unpack("<I", resp)[0]

    def rows_per_page(self, n_attr: int) -> int:
        mp = self.client.info().max_payload
        return max(1, min(0xFFFF, (mp - 10) // (2 * n_attr + 1)))

    def send_data(self, X, y, n_classes: int, *, timeout: float | None = None,
                  progress: Callable[[int, int], None] | None = None) -> int:
        """Stream all rows in TRAIN_DATA pages (a new data set: the first page has offset 0)."""
        a = _q15_rows(X)
        y = np.asarray(y, dtype=np.int64)
        n, A = a.shape
        page = self.rows_per_page(A)
        stored = 0
        for start in range(0, max(n, 1), page):
            stored = self.store(start, a[start:start + page], y[start:start + page], n_classes, timeout=timeout)
            if progress:
                progress(min(n, start + page), n)
        if stored != n:
            raise ProtocolError(f"{self.name}: the device holds {stored} rows after TRAIN_DATA, {n} were sent")
        return stored

    def train(self, seed: int, n_iter: int, n_rows: int, *, source: str = "ram",
              timeout: float | None = None) -> TrainResult:
        """TRAIN: ``n_iter`` iterations on the first ``n_rows`` rows of ``source`` (``ram`` | ``flash``)."""
        if source not in SOURCES:
            raise TreegenError(f"unknown training data source {source!r} (ram or flash)")
        if timeout is None:
            timeout = self.client.timeout + SECONDS_PER_ITERATION * max(0, int(n_iter))
        payload = struct.pack("<QIIB", int(seed) & ((1 << 64) - 1), int(n_iter) & 0xFFFFFFFF,
                              int(n_rows) & 0xFFFFFFFF, SOURCES[source])
        return TrainResult.from_payload(self.client.request(MsgType.TRAIN, payload, timeout=timeout))

    def profile(self, *, timeout: float | None = None) -> dict | None:
        """TRAIN_PROFILE: counter totals of the last TRAIN by phase (:data:`PROFILE_PHASES`), or None
        when the firmware was not built with profiling (``TrainSpec(profile=True)``)."""
        p = self.client.request(MsgType.TRAIN_PROFILE, timeout=timeout)
        if len(p) != 2 + 8 * len(PROFILE_PHASES):
            raise ProtocolError(f"{self.name}: TRAIN_PROFILE response has {len(p)} bytes")
        if not p[0]:
            return None
        totals = struct.unpack_from(f"<{len(PROFILE_PHASES)}Q", p, 2)
        try:
            unit = CounterUnit(p[1]).name.lower()
        except ValueError:
            unit = f"unit {p[1]}"
        return {"unit": unit, **dict(zip(PROFILE_PHASES, totals))}

    def tree(self, n_classes: int, *, timeout: float | None = None) -> Tree:
        """The device's best tree (TREE_GET pages) as a treegen Tree (exact float weights
        ``w / 2**15`` and thresholds ``t / 2**30``; class counts zero: see :func:`device_tree`)."""
        nodes = []
        total = None
        n_attr = None
        first = 0
        while total is None or first < total:
            resp = self.client.request(MsgType.TREE_GET, struct.pack("<HH", first, 0xFFFF), timeout=timeout)
            if len(resp) < 8:
                raise ProtocolError(f"{self.name}: TREE_GET response has {len(resp)} bytes")
            total, got_first, count, n_attr = struct.unpack_from("<HHHH", resp)
            rec = 13 + 2 * n_attr
            if got_first != first or len(resp) != 8 + count * rec or (count == 0 and first < total):
                raise ProtocolError(f"{self.name}: malformed TREE_GET response (first {got_first}, count {count}, "
                                    f"{len(resp)} bytes)")
            for j in range(count):
                off = 8 + j * rec
                left, right, cls, t = struct.unpack_from("<hhBq", resp, off)
                w = np.frombuffer(resp, dtype="<i2", count=n_attr, offset=off + 13).astype(np.int64)
                nodes.append((left, right, cls, t, w))
            first += count
        return _tree_from_nodes(nodes, n_attr or 0, n_classes, self.name)

    def predict(self, rows, *, timeout: float | None = None) -> np.ndarray:
        """PREDICT_TRAINED: class of every row (the trained data's attribute count) by the device's tree."""
        a = _q15_rows(rows)
        n, A = a.shape
        mp = self.client.info().max_payload
        batch = max(1, min(0xFFFF, (mp - 2) // (2 * A), mp - 2))
        out = np.empty(n, dtype=np.int64)
        for start in range(0, n, batch):
            part = a[start:start + batch]
            m = part.shape[0]
            resp = self.client.request(MsgType.PREDICT_TRAINED, struct.pack("<H", m) + part.astype("<i2").tobytes(),
                                       timeout=timeout)
            if len(resp) != 2 + m or struct.unpack_from("<H", resp)[0] != m:
                raise ProtocolError(f"{self.name}: PREDICT_TRAINED response of {len(resp)} bytes does not hold "
                                    f"{m} classes")
            out[start:start + m] = np.frombuffer(resp, dtype=np.uint8, offset=2, count=m)
        return out


def _tree_from_nodes(nodes: list, n_attr: int, n_classes: int, name: str) -> Tree:
    m = len(nodes)
    if m == 0:
        raise ProtocolError(f"{name}: the device's tree has no nodes")
    W = np.zeros((m, n_attr))
    T = np.zeros(m)
    left = np.full(m, LEAF, dtype=np.int32)
    right = np.full(m, LEAF, dtype=np.int32)
    cls = np.zeros(m, dtype=np.int32)
    for j, (lft, rgt, c, t, w) in enumerate(nodes):
        if lft < 0:
            cls[j] = c
        else:
            left[j], right[j] = lft, rgt
            W[j] = w / W_ONE
            T[j] = t / T_ONE
    if cls.max() >= n_classes:
        raise ProtocolError(f"{name}: the device's tree predicts class {int(cls.max())}, the data have {n_classes}")
    try:
        return Tree(W, T, left, right, cls, np.zeros((m, n_classes), dtype=np.int64)).validate()
    except TreegenError as exc:
        raise ProtocolError(f"{name}: the device's tree is not a valid tree: {exc}") from None


def device_tree(tree: Tree, X01: np.ndarray, y: np.ndarray) -> Tree:
    """Class counts of the training rows, as the host engines fill them (leaf classes kept)."""
    return tree.refit_counts(X01, y, relabel=False).validate()


def device_training_setup(device_client: DeviceClient, params: EFTIParams, n_rows: int,
                          n_attr: int) -> tuple[EFTIParams, str]:
    """For a device reached at a port: the parameters its engine was generated with (``params`` with the
    device's max_depth when that is lower: the depth was derived from its RAM) and the data source
    (``flash`` when its firmware holds rows of this shape, else ``ram``)."""
    tc = TrainingClient(device_client)
    tc.check_capability()
    ti = tc.info()
    if ti.max_depth < params.max_depth:
        params = replace(params, max_depth=ti.max_depth)
    source = "flash" if ti.has_flash_data and (ti.flash_rows, ti.flash_attr) == (n_rows, n_attr) else "ram"
    return params, source


# ---------------------------------------------------------------------- the end-to-end check
def _data(data, n_classes: int | None):
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise TreegenError("training data must be a pair (rows, labels)")
    Xq = _q15_rows(data[0])
    y = np.asarray(data[1])
    if y.ndim != 1 or y.shape[0] != Xq.shape[0]:
        raise TreegenError(f"{Xq.shape[0]} rows but {y.shape} labels")
    if not np.issubdtype(y.dtype, np.integer) or (y.size and y.min() < 0):
        raise TreegenError("labels must be class indices 0..n_classes-1")
    y = y.astype(np.int64)
    C = int(n_classes) if n_classes is not None else int(y.max()) + 1
    if y.size and y.max() >= C:
        raise TreegenError(f"label {int(y.max())} is not below n_classes {C}")
    if np.unique(y).size < 2:
        raise TreegenError("EFTI needs at least two classes in the training data")
    return Xq, y, C


def _check_limits(ti: TrainInfo, n: int, A: int, C: int, source: str, name: str) -> None:
    where = (f"{name} was generated for at most {ti.max_rows} rows, {ti.max_attr} attributes, "
             f"{ti.max_classes} classes")
    if A > ti.max_attr:
        raise TreegenError(f"data have {A} attributes, more than the device's engine holds ({where})")
    if C > ti.max_classes:
        raise TreegenError(f"data have {C} classes, more than the device's engine holds ({where})")
    if source == "ram":
        if ti.buffer_rows == 0:
            raise TreegenError(f"{name} has no RAM row buffer (its firmware trains on data in flash only)")
        if n > ti.buffer_rows:
            raise TreegenError(f"data have {n} rows, more than the device's RAM buffer holds ({ti.buffer_rows}; "
                               f"{where})")


def run_train_hil(model_params: EFTIParams | None, data, device_client: DeviceClient, seed: int, n_iter: int, *,
                  n_classes: int | None = None, source: str = "ram", stream: bool = True,
                  python_reference: bool = True, check_predict: bool = True, timeout: float | None = None,
                  log: Callable[[str], None] | None = None, risk: str = "empirical",
                  vicinity_sigma2: float | None = None) -> dict:
    """Train on the device and on the host with the same seed, parameters and data; compare.

    ``model_params``: the :class:`EFTIParams` the device's engine was generated with (checked
    against the device's parameter digest; ``max_iter`` is replaced by ``n_iter``). ``data``:
    ``(rows, labels)``, rows Q15 integers (n, A) (or features on the Q15 grid), labels class
    indices. ``source``: ``ram`` streams the rows (TRAIN_DATA) first; ``flash`` trains on the rows
    compiled into the firmware (``data`` must be those rows). ``stream=False``: the rows are already
    in the device's RAM buffer (an earlier call with the same data; TRAIN_INFO must show as many rows,
    attributes and classes). Raises :class:`TreegenError` (one
    line) when the device cannot be reached, the link drops, or the device rejects the data;
    returns the report otherwise — ``report["train"]["identical"]`` and ``report["ok"]`` say
    whether everything matched. ``risk='vicinal'`` (with the ``vicinity_sigma2`` the firmware was
    generated with): the device's engine must rate trees by the vicinal risk (TRAIN_INFO flag bit 4,
    widths of its flash rows), the host engines run with the same risk; the integer fitness is then
    the summed Q16 correct mass times the size and missing-class factors (``F / (n * 2**48)``).
    """
    from treegen.emit.quantize import predict_q15, quantize_tree
    from treegen.learn import engine
    from treegen.learn import vicinal as vicinal_risk
    from treegen.learn.inducers import efti

    params = (model_params or EFTIParams()).validate()
    vicinal = vicinal_risk.check_risk(risk) == "vicinal"
    sigma2 = float(vicinal_risk.DEFAULT_SIGMA2 if vicinity_sigma2 is None else vicinity_sigma2) if vicinal else 0.0
    risk_kw = {"risk": "vicinal", "vicinity_sigma2": sigma2} if vicinal else {}
    if int(n_iter) < 1:
        raise TreegenError(f"n_iter must be at least 1, got {n_iter}")
    if source not in SOURCES:
        raise TreegenError(f"unknown training data source {source!r} (ram or flash)")
    Xq, y, C = _data(data, n_classes)
    n, A = Xq.shape
    X01 = Xq / float(W_ONE)
    say = log or (lambda s: None)
    run_params = replace(params, max_iter=int(n_iter))
    tc = TrainingClient(device_client)
    timings = {}

    t0 = time.perf_counter()
    tc.check_capability()
    ti = tc.info(timeout=timeout)
    from treegen.device.train_firmware import params_digest
    if ti.vicinal != vicinal:
        raise TreegenError(f"{tc.name}: the device's engine trains with the {ti.risk} risk, {risk} was asked for "
                           f"(build the training firmware with the same risk)")
    if vicinal and source != "flash":
        raise TreegenError(f"{tc.name}: vicinal-risk training on the device uses the rows in its flash (source flash)")
    want = params_digest(params, risk=risk, vicinity_sigma2=sigma2).hex()
    if ti.params_digest != want:
        raise TreegenError(f"{tc.name}: the device's engine was generated for other EFTI parameters (digest "
                           f"{ti.params_digest}, these parameters give {want})")
    if params.max_depth != ti.max_depth:
        raise TreegenError(f"{tc.name}: the device's engine has max_depth {ti.max_depth}, the parameters {params.max_depth}")
    _check_limits(ti, n, A, C, source, tc.name)
    if source == "flash":
        if not ti.has_flash_data:
            raise TreegenError(f"{tc.name}: the firmware has no training data in flash")
        if (ti.flash_rows, ti.flash_attr) != (n, A):
            raise TreegenError(f"{tc.name}: the flash data are {ti.flash_rows} x {ti.flash_attr}, the host data "
                               f"{n} x {A}")
    if source == "ram" and not stream:
        if (ti.stored_rows, ti.stored_attr, ti.stored_classes) != (n, A, C):
            raise TreegenError(f"{tc.name} holds {ti.stored_rows} rows x {ti.stored_attr} attributes "
                               f"({ti.stored_classes} classes), not the {n} x {A} ({C} classes) given: stream them")
    elif source == "ram":
        say(f"streaming {n} rows x {A} attributes ({C} classes) to {tc.name}")
        t1 = time.perf_counter()
        tc.send_data(Xq, y, C, timeout=timeout)
        timings["stream_s"] = round(time.perf_counter() - t1, 3)
    say(f"training on the device: seed {seed}, {n_iter} iterations")
    t1 = time.perf_counter()
    res = tc.train(seed, n_iter, n, source=source, timeout=timeout)
    timings["device_train_s"] = round(time.perf_counter() - t1, 3)
    t1 = time.perf_counter()
    t_dev = device_tree(tc.tree(C, timeout=timeout), X01, y)
    timings["tree_get_s"] = round(time.perf_counter() - t1, 3)

    say("training on the host (native C engine)")
    t1 = time.perf_counter()
    t_host, i_host = engine.induce(X01, y, C, run_params, seed=seed, **risk_kw)
    timings["host_native_s"] = round(time.perf_counter() - t1, 3)
    py = None
    if python_reference:
        say("training on the host (Python EFTI)")
        t1 = time.perf_counter()
        t_py, i_py = efti.induce(X01, y, C, run_params, seed=seed, **risk_kw)
        timings["host_python_s"] = round(time.perf_counter() - t1, 3)
        py = {"tree_equal": bool(t_dev.equals(t_py)), "fitness_int": int(i_py["fitness_int"]),
              "fitness": float(i_py["fitness"])}

    dev_fraction = res.fitness / (n * float(1 << (48 if vicinal else 32)))
    tree_host = bool(t_dev.equals(t_host))
    fit_host = res.fitness == int(i_host["fitness_int"])
    iters_ok = res.iterations == int(n_iter) == int(i_host["iterations"])
    hits_ok = res.hits == int(np.sum(t_dev.class_counts[t_dev.left == LEAF].max(axis=1)))
    identical = tree_host and fit_host and iters_ok and hits_ok
    if py is not None:
        identical = identical and py["tree_equal"] and py["fitness_int"] == res.fitness and \
            abs(py["fitness"] - dev_fraction) <= FITNESS_TOLERANCE

    predict = None
    if check_predict:
        say(f"PREDICT_TRAINED on {n} rows")
        t1 = time.perf_counter()
        got = tc.predict(Xq, timeout=timeout)
        expected = predict_q15(quantize_tree(t_dev), Xq)
        timings["predict_s"] = round(time.perf_counter() - t1, 3)
        bad = np.flatnonzero(got != expected)
        predict = {"rows": int(n), "agree": int(n - bad.size), "identical": bool(bad.size == 0),
                   "first_mismatches": bad[:5].tolist()}
    timings["total_s"] = round(time.perf_counter() - t0, 3)

    unit = res.unit_name
    per_it = res.per_iteration
    train = {
        "identical": bool(identical),
        "device_fitness": int(res.fitness),
        "host_fitness": int(i_host["fitness_int"]),
        "float_fitness": py["fitness"] if py else None,
        "fitness_fraction": dev_fraction,
        "fitness_tolerance": FITNESS_TOLERANCE,
        "python_fitness": py["fitness_int"] if py else None,
        "tree_equal_host": tree_host,
        "tree_equal_python": py["tree_equal"] if py else None,
        "insn_per_iteration": round(per_it, 1) if res.unit == CounterUnit.INSTRUCTIONS else None,
        "counter_per_iteration": round(per_it, 1),
        "counter_unit": unit,
        "counter_total": int(res.counter_total),
        "init_counter": int(res.init_counter),
        "iterations": int(res.iterations),
        "ram_bytes": int(ti.ram_bytes),
        "hits": int(res.hits),
        "n_nodes": int(res.n_nodes),
        "n_leaves": int(res.n_leaves),
        "depth": int(res.depth),
        "seed": int(seed),
        "rows": int(n),
        "attributes": int(A),
        "classes": int(C),
        "source": source,
        "risk": risk,
        **({"vicinity_sigma2": sigma2} if vicinal else {}),
        "engine": {"partial": ti.partial, "dsp": ti.dsp, "mve": ti.mve, "variant": ti.variant, "max_rows": ti.max_rows, "max_attr": ti.max_attr,
                   "max_classes": ti.max_classes, "max_depth": ti.max_depth, "params_digest": ti.params_digest},
    }
    ok = identical and (predict is None or predict["identical"])
    return {"ok": bool(ok), "train": train, "predict_trained": predict, "timings": timings,
            "device": device_client.name, "params": asdict(run_params)}


def fitness_text(t: dict) -> str:
    """The fitness of a ``hil --train`` report's ``train`` part in plain words: a fraction (accuracy
    with the size penalty, 1 = best) on the device and the host, and the exact integer they compare."""
    vicinal = t.get("risk") == "vicinal"
    scale = t["rows"] * float(1 << (48 if vicinal else 32))
    what = "1 - vicinal risk" if vicinal else "accuracy"
    if t["device_fitness"] == t["host_fitness"]:
        return (f"fitness {t['device_fitness'] / scale:.6f} on the device and the host ({what} with the "
                f"size penalty; the exact integer {t['device_fitness']} on both)")
    return (f"fitness {t['device_fitness'] / scale:.6f} on the device, {t['host_fitness'] / scale:.6f} on the host "
            f"(exact integers {t['device_fitness']} and {t['host_fitness']})")


def summary_lines(report: dict) -> list[str]:
    """Human-readable lines of a :func:`run_train_hil` report."""
    t = report["train"]
    python = "" if t["float_fitness"] is None else f"; Python reference {t['float_fitness']:.6f}"
    lines = [
        f"train           {'IDENTICAL' if t['identical'] else 'DIFFERENT'} trees: {fitness_text(t)}{python}",
        f"tree            {t['n_nodes']} nodes, {t['n_leaves']} leaves, depth {t['depth']}, hits "
        f"{t['hits']}/{t['rows']} (seed {t['seed']}, {t['iterations']} iterations)",
    ]
    if t["insn_per_iteration"] is not None:
        lines.append(f"speed           {t['insn_per_iteration']:.0f} instructions per iteration "
                     f"(engine: {'partial reclassification' if t['engine']['partial'] else 'lean'}, depth "
                     f"{t['engine']['max_depth']}, rows in {t['source']}, "
                     f"{VARIANT_NAMES[t['engine']['variant']]} dot product"
                     f"{', vicinal risk' if t.get('risk') == 'vicinal' else ''})")
    else:
        lines.append(f"speed           {t['counter_per_iteration']:.0f} {t['counter_unit']} per iteration")
    lines.append(f"RAM             {t['ram_bytes']} bytes (engine + row buffer, static)")
    p = report.get("predict_trained")
    if p is not None:
        lines.append(f"PREDICT_TRAINED {p['agree']}/{p['rows']} rows equal predict_q15 of the evolved tree")
    return lines


# ---------------------------------------------------------------------- building a training firmware
@dataclass(frozen=True)
class TrainFirmware:
    """A built training firmware: ``path`` is the host executable (native) or the ELF (emulated)."""
    target: str
    path: object
    project: object
    spec: object                 # the TrainSpec after the RAM check
    flash_bytes: int | None
    ram_bytes: int | None        # static RAM of the whole firmware (data + bss, stack reserve included)
    build_seconds: float


def build_train_firmware(model, target, build_dir, spec, *, layout: str = "table", variant: str = "auto",
                         sanitize: bool = False) -> TrainFirmware:
    """Generate and build the harness with on-device training (``spec``: a TrainSpec from
    :func:`treegen.device.train_firmware.make_train_spec`) for the native target (host compiler) or an
    emulated board (offline PlatformIO). The RAM check runs before anything is compiled."""
    from treegen.core import targets as _targets
    from treegen.device.build import build
    from treegen.device.firmware import plan_train

    tgt = target if isinstance(target, _targets.Target) else _targets.get(str(target))
    spec, _ = plan_train(model, tgt, spec, None)
    if tgt.kind not in ("host", "emulated"):
        raise TreegenError(f"target {tgt.name!r} ({tgt.kind}) is not built here: flash the training firmware with "
                           f"'treegen flash MODEL --target {tgt.name} --train --data CSV --port PORT', then pass "
                           f"--port PORT")
    b = build(model, tgt, build_dir, layout=layout, variant=variant, train=spec, sanitize=sanitize)
    return TrainFirmware(b.target.name, b.path, b.project, spec, b.flash_bytes, b.ram_bytes, b.seconds)


# ---------------------------------------------------------------------- treegen hil --train
def junit_xml(report: dict, target: str, error: str | None) -> str:
    """JUnit XML of a ``hil --train`` report: testcases ``train`` and ``predict_trained`` (failed when
    ``error`` is set)."""
    from xml.sax.saxutils import escape, quoteattr

    cases = []
    t = report.get("train") or {}
    p = report.get("predict_trained")
    cases.append(("train", t.get("identical") if not error else False,
                  error or (fitness_text(t) if t else "not run")))
    cases.append(("predict_trained", (p or {}).get("identical") if not error else False,
                  error or (f"{p['agree']}/{p['rows']} rows" if p else "not run")))
    fails = sum(1 for _, ok, _ in cases if not ok)
    lines = ['<?xml version="1.0" encoding="utf-8"?>',
             f'<testsuites><testsuite name="treegen.hil.train" tests="{len(cases)}" failures="{fails}">']
    for name, ok, msg in cases:
        lines.append(f'<testcase classname={quoteattr("treegen.hil.train." + target)} name={quoteattr(name)}>')
        if not ok:
            lines.append(f"<failure message={quoteattr(msg)}>{escape(msg)}</failure>")
        lines.append("</testcase>")
    lines.append("</testsuite></testsuites>")
    return "\n".join(lines) + "\n"
