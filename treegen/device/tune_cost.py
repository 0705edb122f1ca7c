"""What a model costs on a target, measured: the ``cost`` side of ``treegen tune``.

One HIL run (:func:`treegen.device.hil.run_hil`) per (model, layout, variant) on the emulated target:
its firmware is built by the one build path (:mod:`treegen.device.build`) and linked, so flash and
RAM are the linked image's; BENCH gives the instructions per inference counted by the emulated core
(``-icount``: one instruction per clock), converted to microseconds by the target's ``clock_hz``.

The model's share of the image is what it adds over the same firmware carrying a one-leaf model
with the same features, classes and input scaling (built the same way, layout and variant), plus
that one-leaf model's own symbols (``tg_model_*``, read from its ELF with ``nm``): the harness, the
UART port and the start-up code are not the model's; library routines the model pulls in (soft
float ...) are. It is the model as the firmware links it (inference on Q15 rows); the raw-input
wrapper and the class-label strings of an exported library are not in it. Instructions are
BENCH's figure as measured (it includes the benchmark loop's few instructions per call: a
conservative count). On ``native`` (the host harness) flash and RAM are those of the model's
compiled object (:mod:`treegen.emit.size`) and the time is BENCH's nanoseconds.

Costs are cached by key (model hash, target, layout, variant, treegen version): in memory and, given
a path, in a JSONL file read back on a rerun (so a candidate is never rebuilt).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np

from treegen.core import targets as _targets
from treegen.core.errors import TreegenError
from treegen.core.model import Model
from treegen.core.tree import Tree
from treegen.core.version import __version__

#: rows streamed (and benched) per cost measurement, spread over the data
COST_ROWS = 24
#: calls per BENCH row when costing (the confirmation run uses the HIL default)
COST_BENCH_ITERS = 300
#: seconds per request of a cost run (QEMU's UART feed slows down on a machine shared by many jobs)
COST_TIMEOUT = 30.0
COST_FIELDS = {"key": str, "model_hash": str, "target": str, "layout": str, "variant": str}


def variants_for(target: _targets.Target) -> list[str]:
    """The code variants worth measuring on ``target``: scalar, and DSP / MVE where the core has them."""
    out = ["scalar"]
    if target.dsp:
        out.append("dsp")
    if target.mve:
        out.append("mve")
    return out


def leaf_model(model: Model) -> Model:
    """The one-leaf model with ``model``'s features, classes and scaling (the harness baseline)."""
    return Model([Tree.leaf_only(model.n_features, model.n_classes)], list(model.feature_names),
                 list(model.classes), model.scaling, metadata={"treegen_tune": "baseline"})


def cost_key(model_hash: str, target: str, layout: str, variant: str) -> str:
    ident = {"model": model_hash, "target": target, "layout": layout, "variant": variant, "version": __version__}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:24]


def latency_us(value: float | None, unit: str | None, clock_hz: int) -> float | None:
    """Microseconds of one inference from a BENCH figure in ``unit`` (instructions and cycles: by the
    clock, one per cycle; nanoseconds: divided by 1000)."""
    if value is None or unit is None:
        return None
    if unit == "nanoseconds":
        return float(value) / 1000.0
    return float(value) * 1e6 / float(clock_hz)


def spread_rows(n: int, k: int) -> np.ndarray:
    return np.unique(np.linspace(0, n - 1, num=min(k, n)).round().astype(np.int64))


class CostCache:
    """Measured costs by key, optionally kept in a JSONL file (one record per line, appended)."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = None if path is None else Path(path)
        self.records: dict[str, dict] = {}
        if self.path is not None and self.path.exists():
            try:
                text = self.path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise TreegenError(f"cannot read cost cache {self.path}: {exc}") from None
            for number, line in enumerate(text.split("\n"), start=1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    if not text.endswith("\n") and number == len(text.split("\n")):
                        continue          # a line cut short by a killed run: measured again
                    raise TreegenError(f"cost cache {self.path} line {number}: not valid JSON (delete the line)") \
                        from None
                if not isinstance(rec, dict) or any(not isinstance(rec.get(k), t) for k, t in COST_FIELDS.items()):
                    raise TreegenError(f"cost cache {self.path} line {number}: not a cost record (delete the line)")
                if rec["key"] != cost_key(rec["model_hash"], rec["target"], rec["layout"], rec["variant"]):
                    continue          # another treegen version's measurement: measured again
                self.records[rec["key"]] = rec

    def get(self, key: str) -> dict | None:
        return self.records.get(key)

    def add(self, rec: dict) -> None:
        self.records[rec["key"]] = rec
        if self.path is None:
            return
        try:
            with open(self.path, "ab+") as fh:
                size = fh.seek(0, os.SEEK_END)
                if size:
                    fh.seek(size - 1)
                    if fh.read(1) != b"\n":
                        fh.write(b"\n")
                fh.write((json.dumps(rec, allow_nan=False) + "\n").encode("utf-8"))
        except OSError as exc:
            raise TreegenError(f"cannot write cost cache {self.path}: {exc.strerror or exc}") from None


class CostMeter:
    """``meter(model, X, layout, variant) -> cost`` on ``target``; builds under ``work_dir`` (a
    temporary folder when None). A cost: ``flash_bytes``/``ram_bytes`` (the model's share),
    ``image_flash_bytes``/``image_ram_bytes`` (the whole firmware), ``instructions`` (per inference,
    None on the host), ``latency_us``, ``counter_unit``, ``cached``."""

    def __init__(self, target, *, work_dir=None, cache: CostCache | None = None):
        self.target = target if isinstance(target, _targets.Target) else _targets.get(str(target))
        if self.target.kind not in ("host", "emulated"):
            from treegen.device.platformio import emulated_stand_in

            twin = emulated_stand_in(self.target)    # from the target files: the emulator of its image / size
            use = f"use its emulated stand-in --target {twin}" if twin else "use an emulated target or native"
            raise TreegenError(f"tune measures costs on an emulated target or native; {self.target.name!r} is a "
                               f"{self.target.kind} ({use})")
        self.cache = cache or CostCache()
        self._tmp = None
        if work_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="treegen-tune-")
            work_dir = self._tmp.name
        self.work_dir = Path(work_dir)
        self.measured = 0           # HIL runs made (not from the cache)

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def _raw(self, model: Model, X: np.ndarray, layout: str, variant: str) -> dict:
        from treegen.device.hil import run_hil

        key = cost_key(model.hash(), self.target.name, layout, variant)
        rec = self.cache.get(key)
        if rec is not None:
            return rec
        rows = X[spread_rows(X.shape[0], COST_ROWS)]
        build_dir = self.work_dir / f"{self.target.name}-{layout}-{variant}"
        report = run_hil(model, self.target, build_dir=build_dir, data=(rows, None), layout=layout,
                         variant=variant, bench_iters=COST_BENCH_ITERS, timeout=COST_TIMEOUT)
        if not report["ok"]:
            raise TreegenError(failure_reason(report, model, rows, self.target, self.work_dir / "evidence"))
        flash, ram = report.get("flash_bytes"), report.get("ram_bytes")
        own = model_symbol_bytes(report.get("firmware"), self.target) if flash is not None else (None, None)
        if flash is None:         # the host: the model's compiled object
            from treegen.emit.export import export_model

            with tempfile.TemporaryDirectory(prefix="treegen-tune-size-") as tmp:
                exp = export_model(model, tmp, target=self.target, layout=layout, dtype="q15", variant=variant,
                                   data=(rows,), measure=True)
            flash, ram = exp.flash_bytes, exp.ram_bytes
        rec = {"key": key, "model_hash": model.hash(), "target": self.target.name, "layout": layout,
               "variant": variant, "flash_bytes": flash, "ram_bytes": ram, "own_flash_bytes": own[0],
               "own_ram_bytes": own[1],
               "bench": report.get("insn_per_inference"), "counter_unit": report.get("counter_unit"),
               "host": self.target.kind == "host"}
        self.measured += 1
        self.cache.add(rec)
        return rec

    def __call__(self, model: Model, X: np.ndarray, layout: str = "table", variant: str = "scalar") -> dict:
        X = np.asarray(X, dtype=np.float64)
        rec = self._raw(model, X, layout, variant)
        if rec["host"]:
            flash, ram = rec["flash_bytes"], rec["ram_bytes"]
            base = None
        else:
            base = self._raw(leaf_model(model), X, layout, variant)
            flash = rec["flash_bytes"] - base["flash_bytes"] + base["own_flash_bytes"]
            ram = rec["ram_bytes"] - base["ram_bytes"] + base["own_ram_bytes"]
        unit = rec["counter_unit"]
        insn = rec["bench"] if unit in ("instructions", "cycles") else None
        return {"layout": layout, "variant": variant, "flash_bytes": flash, "ram_bytes": ram,
                "image_flash_bytes": None if base is None else rec["flash_bytes"],
                "image_ram_bytes": None if base is None else rec["ram_bytes"],
                "baseline_flash_bytes": None if base is None else base["flash_bytes"],
                "instructions": insn, "counter_unit": unit,
                "latency_us": latency_us(rec["bench"], unit, self.target.clock_hz)}


def failure_reason(report: dict, model: Model, rows: np.ndarray, target: _targets.Target, work_dir) -> str:
    """One line: why a HIL run of ``model`` on ``target`` (``rows`` streamed) did not pass.

    A prediction mismatch is told as what it is, with its first row, and with the evidence of where
    the fault lies: on an emulated target, the rows that differed are run again through the host build
    of the same C (the native harness): agreeing there, the emulated device (emulator or cross
    compiler) is at fault, not the model; differing there too, treegen's C differs from its model."""
    if not report.get("mismatches"):
        failed = [f"{c['name']}: {c['message']}" for c in report.get("checks", []) if c.get("ok") is False]
        return report.get("error") or "; ".join(failed) or "the HIL run did not pass"
    first = report["mismatch_rows"][0]
    what = "value" if "device_label" not in first else "class"
    seen = (f"{report['mismatches']} of {report['rows']} rows differ on {target.name} (first: row {first['row']}, "
            f"device {what} {first['device']}, fixed-point model {first['fixed_point']})")
    if target.kind == "host":
        return f"host C differs from the fixed-point model: {seen}"
    from treegen.device.hil import HilError, run_hil

    bad = np.asarray([m["row"] for m in report["mismatch_rows"]], dtype=np.int64)
    try:
        host = run_hil(model, _targets.get("native"), build_dir=Path(work_dir) / f"native-{report.get('layout')}",
                       data=(rows[bad], None), layout=report.get("layout") or "table", bench_iters=0)
    except (HilError, TreegenError, OSError) as exc:
        return (f"device mismatch on the emulated {target.name}: {seen}; the host check of these rows could not run "
                f"({exc})")
    if host.get("mismatches"):
        return (f"code defect: {seen}, and the host build of the same C differs from the model on these rows too "
                "(treegen's C is not its model)")
    return (f"device mismatch on the emulated {target.name}: {seen}; the host build of the same C agrees with the "
            f"model on these rows (the emulator or the cross compiler is at fault, not the model)")


def model_symbol_bytes(elf, target: _targets.Target, prefix: str = "tg_model_") -> tuple[int, int]:
    """(flash, RAM) bytes of the model's symbols (``tg_model_*``) in a linked firmware ELF (``nm -S``)."""
    import shutil
    import subprocess

    from treegen.device.platformio import toolchain_prefix

    tool = shutil.which(toolchain_prefix(target) + "nm")
    if elf is None or tool is None:
        raise TreegenError(f"cannot read the model's symbols: {toolchain_prefix(target)}nm or the firmware is missing")
    proc = subprocess.run([tool, "-S", str(elf)], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise TreegenError(f"nm {elf}: {' '.join(proc.stderr.split()) or 'failed'}")
    flash = ram = 0
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) != 4 or not parts[3].startswith(prefix):
            continue
        size, kind = int(parts[1], 16), parts[2].lower()
        if kind in "trd":
            flash += size
        if kind in "db":
            ram += size
    return flash, ram


def fits(cost: dict, budget: dict) -> list[str]:
    """The budget limits ``cost`` exceeds (empty: it fits). ``budget``: max_flash, max_ram (bytes),
    max_latency_us, max_instructions (None = no limit)."""
    out = []
    for field, limit in (("flash_bytes", "max_flash"), ("ram_bytes", "max_ram"),
                         ("latency_us", "max_latency_us"), ("instructions", "max_instructions")):
        if budget.get(limit) is None:
            continue
        value = cost.get(field)
        if value is None or (isinstance(value, float) and not math.isfinite(value)) or value > budget[limit]:
            out.append(limit)
    return out
