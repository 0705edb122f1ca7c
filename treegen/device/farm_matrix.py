"""A matrix of models x targets run on the places of a labgrid farm, in parallel.

::

    report = run_matrix(lab, [("m1.json", model1), ...], ["qemu-m4-a", "qemu-m4-b", "native-1"],
                        data=(X, labels), build_root="build/farm")

Each *cell* is one model on one target; the targets are those of the places (their ``target`` tag).
A worker per place takes the next waiting cell of its target, acquires the place (waiting up to
``place_timeout`` s while someone else holds it), starts the place's board with the cell's firmware
(:mod:`treegen.device.farm_board`) and runs the unchanged HIL (:func:`treegen.device.hil.run_hil`
with the board's URL as ``port``). While a cell runs, its place is watched: when the place's
exporter goes away (its resources vanish from the coordinator), the board is stopped, the place is
dropped from the matrix and the cell goes back to the queue, to run once more on another place of
its target (``attempts`` in the report says where and why). A cell runs at most twice and ends
with exactly one result: PASS, FAIL (the device answered differently from the host), or ERROR.
Firmware is built once per (model, target) before any place is acquired. A place is released by
its worker when no cell of its target is left, and on every way out (an interrupt stops the boards,
the workers end their cells, every place is released).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from treegen.core import targets as _targets
from treegen.core.errors import TreegenError
from treegen.device.farm import Coordinator, FarmError

MAX_ATTEMPTS = 2
REPORT_FORMAT = "treegen-farm"


@dataclass(eq=False)
class Cell:
    model_name: str
    model: object
    target: str
    index: int
    attempts: list = field(default_factory=list)
    result: str | None = None         # PASS, FAIL, ERROR
    report: dict | None = None
    error: str | None = None
    running_on: str | None = None

    def row(self) -> dict:
        r = self.report or {}
        checks = [{"name": c["name"], "ok": c["ok"], "message": c["message"]} for c in r.get("checks", [])]
        last = self.attempts[-1] if self.attempts else {}
        return {"model": self.model_name, "target": self.target, "place": last.get("place"),
                "exporter": last.get("exporter"), "result": self.result, "ok": self.result == "PASS",
                "retried": len(self.attempts) > 1, "attempts": list(self.attempts), "error": self.error,
                "rows": r.get("rows"), "mismatches": r.get("mismatches"), "accuracy": r.get("accuracy"),
                "float_agreement": r.get("float_agreement"), "model_hash": r.get("model_hash"),
                "insn_per_inference": r.get("insn_per_inference"), "counter_unit": r.get("counter_unit"),
                "checks": checks, "seconds": round(sum(a["seconds"] for a in self.attempts), 3)}


class _Matrix:
    def __init__(self, lab: Coordinator, cells: list[Cell], places: dict, firmwares: dict, data, build_root: Path,
                 hil_kw: dict, place_timeout: float, on_event):
        self.lab = lab
        self.cells = cells
        self.places = places                 # name -> target
        self.firmwares = firmwares           # (cell model index, target) -> Firmware or error text
        self.data = data
        self.build_root = build_root
        self.hil_kw = hil_kw
        self.place_timeout = place_timeout
        self.on_event = on_event or (lambda kind, **kw: None)
        self.lock = threading.Condition()
        self.queue: list[Cell] = list(cells)
        self.dead: set[str] = set()          # places whose exporter went away
        self.unusable: dict[str, str] = {}   # places that could not be acquired: why
        self.active: dict[str, Cell] = {}    # place -> cell running there
        self.boards: dict[str, object] = {}
        self.cancel = threading.Event()

    # -------------------------------------------------------------- scheduling
    def _usable(self, target: str) -> list[str]:
        return [p for p, t in self.places.items() if t == target and p not in self.dead and p not in self.unusable]

    def _take(self, place: str) -> Cell | None:
        """The next waiting cell for ``place`` (not one that already lost this place), or None when no
        cell is left for it."""
        target = self.places[place]
        with self.lock:
            while not self.cancel.is_set() and place not in self.dead:
                for cell in self.queue:
                    if cell.target == target and all(a["place"] != place for a in cell.attempts):
                        self.queue.remove(cell)
                        cell.running_on = place
                        self.active[place] = cell
                        return cell
                # a cell of this target running elsewhere may come back (its exporter went away)
                if not any(c.target == target for c in self.active.values()):
                    return None
                self.lock.wait(0.2)
            return None

    def _orphans(self) -> None:
        """Cells that no live place of their target can take any more end as ERROR."""
        with self.lock:
            for cell in list(self.queue):
                live = [p for p in self._usable(cell.target)
                        if all(a["place"] != p for a in cell.attempts)]
                if not live:
                    self.queue.remove(cell)
                    why = "; ".join(f"{p}: {w}" for p, w in sorted(self.unusable.items())
                                    if self.places[p] == cell.target)
                    if cell.attempts:
                        cell.error = (f"place {cell.attempts[-1]['place']} lost its exporter and no other place "
                                      f"of target {cell.target} is left")
                    else:
                        cell.error = f"no place of target {cell.target} could be used" + (f" ({why})" if why else "")
                    cell.result = "ERROR"
                    self.on_event("done", cell=cell)
            self.lock.notify_all()

    # -------------------------------------------------------------- one place
    def worker(self, place: str) -> None:
        acquired = False
        try:
            while not self.cancel.is_set():
                cell = self._take(place)
                if cell is None:
                    return
                if not acquired:
                    try:
                        self.lab.acquire(place, timeout=self.place_timeout, cancel=self.cancel,
                                         progress=lambda text: self.on_event("wait", place=place, text=text))
                        acquired = True
                    except FarmError as exc:
                        if not self.lab.connected():    # the coordinator itself went away: stop the matrix
                            self.cancel.set()
                        with self.lock:
                            self.unusable[place] = " ".join(str(exc).split())
                            self.active.pop(place, None)
                            cell.running_on = None
                            self.queue.insert(0, cell)
                        self.on_event("unusable", place=place, text=self.unusable[place])
                        return
                self._run_cell(place, cell)
                if place in self.dead:
                    return
        finally:
            if acquired:
                try:
                    self.lab.release(place)
                except FarmError as exc:
                    self.on_event("warning", place=place, text=str(exc))
            self._orphans()

    def _run_cell(self, place: str, cell: Cell) -> None:
        from treegen.device import hil
        from treegen.device.farm_board import place_board

        self.on_event("start", cell=cell, place=place)
        t0 = time.monotonic()
        attempt = {"place": place, "exporter": None, "result": None, "error": None, "seconds": 0.0}
        lost = threading.Event()
        stop_watch = threading.Event()
        retry = False
        try:
            fw = self.firmwares[(cell.model_name, cell.target)]
            if isinstance(fw, str):
                raise TreegenError(fw)
            exporters = self.lab.place(place).exporters      # from the acquired resources' paths
            attempt["exporter"] = exporters[0] if len(exporters) == 1 else None
            serial = self.lab.serial(place)
            attempt["exporter"] = serial.exporter
            from treegen.device.farm import HeldPlace

            held = HeldPlace(place, serial, {})
            with place_board(held, cell.target, fw) as board:
                with self.lock:
                    self.boards[place] = board
                watch = threading.Thread(target=self._watch, args=(place, board, lost, stop_watch), daemon=True)
                watch.start()
                try:
                    report = hil.run_hil(cell.model, cell.target, port=board.url, data=self.data,
                                         build_dir=fw.project, **self.hil_kw)
                finally:
                    stop_watch.set()
                    with self.lock:
                        self.boards.pop(place, None)
            cell.report = report
            attempt["result"] = "PASS" if report["ok"] else "FAIL"
            if not report["ok"]:
                attempt["error"] = hil.summary(report)
        except (TreegenError, OSError) as exc:
            rep = getattr(exc, "report", None)
            message = " ".join(str(exc).split())
            if not self.lab.connected():            # the coordinator itself: no place can be trusted now
                attempt["result"] = "ERROR"
                attempt["error"] = f"lost the labgrid coordinator at {self.lab.address}: {message}"
                self.cancel.set()
            elif lost.is_set() or not self.lab.alive(place):
                lost.set()
                attempt["result"] = "LOST"
                attempt["error"] = f"exporter {attempt['exporter'] or '?'} of place {place} went away: {message}"
                retry = True
            else:
                attempt["result"] = "ERROR"
                attempt["error"] = message
                cell.report = rep
        attempt["seconds"] = round(time.monotonic() - t0, 3)
        with self.lock:
            cell.attempts.append(attempt)
            self.active.pop(place, None)
            cell.running_on = None
            if retry:
                self.dead.add(place)
                if self.cancel.is_set():
                    cell.result, cell.error = "ERROR", "interrupted"
                elif len(cell.attempts) < MAX_ATTEMPTS:
                    self.queue.insert(0, cell)
                    self.on_event("retry", cell=cell, place=place, text=attempt["error"])
                else:
                    cell.result, cell.error = "ERROR", attempt["error"]
            else:
                cell.result = attempt["result"]
                cell.error = attempt["error"]
            self.lock.notify_all()
        if cell.result is not None:
            self.on_event("done", cell=cell)
        if retry:
            self.cancel_place(place)

    def cancel_place(self, place: str) -> None:
        """A place whose exporter went away takes no more cells (its worker ends)."""
        with self.lock:
            self.dead.add(place)

    def _watch(self, place: str, board, lost: threading.Event, done: threading.Event) -> None:
        while not done.wait(0.1):
            if not self.lab.alive(place):
                lost.set()
                board.stop()
                return

    def stop_boards(self) -> None:
        with self.lock:
            boards = list(self.boards.values())
        for b in boards:
            b.stop()


def build_all(models, targets, build_root: Path, *, layout: str | None, variant: str | None, on_event=None) -> dict:
    """Firmware for every (model, target) (native and emulated targets; boards: None, flashed beforehand);
    a failed build is kept as its one-line message (the cells of that pair end as ERROR)."""
    from treegen.device import hil

    out = {}
    for name, model in models:
        for t in targets:
            tgt = _targets.get(t)
            if tgt.kind == "board":
                out[(name, t)] = None
                continue
            stem = Path(name).name.removesuffix(".json")
            folder = build_root / f"{stem}-{t}"
            try:
                fw = hil.build_firmware(model, tgt, folder, layout=layout or "table", variant=variant or "auto")
                out[(name, t)] = fw
                if on_event:
                    on_event("built", text=f"{stem} for {t}: {fw.path}")
            except TreegenError as exc:
                out[(name, t)] = f"firmware build for {t} failed: {' '.join(str(exc).split())}"
    return out


def select_places(lab: Coordinator, names: list[str] | None, targets: list[str] | None = None) -> dict:
    """{place: target} for the places named (default: every place with a ``target`` tag), each with a
    ``target`` tag naming a known target."""
    places = lab.places()
    if names:
        chosen = {}
        for n in names:
            info = places.get(n)
            if info is None:
                raise FarmError(f"no place {n!r} at the labgrid coordinator {lab.address} "
                                f"(places: {', '.join(sorted(places)) or 'none'})")
            if not info.target:
                raise FarmError(f"place {n} has no target tag: labgrid-client -p {n} set-tags target=T")
            chosen[n] = info.target
    else:
        chosen = {n: p.target for n, p in places.items() if p.target}
        if not chosen:
            raise FarmError(f"no place at the labgrid coordinator {lab.address} has a target tag "
                            "(labgrid-client -p PLACE set-tags target=qemu-m4)")
    if targets:
        chosen = {p: t for p, t in chosen.items() if t in targets}
        missing = sorted(set(targets) - set(chosen.values()))
        if missing:
            raise FarmError(f"no place for target {', '.join(missing)}")
    for p, t in chosen.items():
        try:
            _targets.get(t)
        except TreegenError as exc:
            raise FarmError(f"place {p}: target tag: {exc}") from None
    return dict(sorted(chosen.items()))


def run_matrix(lab: Coordinator, models, places: dict, *, data, build_root, layout=None, variant=None,
               place_timeout: float = 0.0, hil_kw: dict | None = None, on_event=None, firmwares=None) -> dict:
    """Run every model of ``models`` ([(name, Model)]) on every target of ``places`` ({place: target});
    returns the report (``cells``: one row per cell). See the module docstring."""
    build_root = Path(build_root)
    targets = sorted(set(places.values()), key=lambda t: list(places.values()).index(t))
    t0 = time.monotonic()
    if firmwares is None:
        firmwares = build_all(models, targets, build_root, layout=layout, variant=variant, on_event=on_event)
    t_built = time.monotonic()
    cells = [Cell(name, model, t, i) for i, (name, model, t) in
             enumerate((name, model, t) for name, model in models for t in targets)]
    kw = dict(hil_kw or {})
    if layout is not None:
        kw.setdefault("layout", layout)
    m = _Matrix(lab, cells, places, firmwares, data, build_root, kw, place_timeout, on_event)
    threads = [threading.Thread(target=m.worker, args=(p,), name=f"place {p}", daemon=True) for p in places]
    for th in threads:
        th.start()
    try:
        for th in threads:
            while th.is_alive():
                th.join(0.2)
    except BaseException:
        m.cancel.set()
        m.stop_boards()
        for th in threads:
            th.join(30)
        raise
    m._orphans()
    lost = not lab.connected()
    for c in cells:                      # the matrix stopped early (the coordinator went away): not run
        if c.result is None:
            c.result = "ERROR"
            c.error = f"not run: lost the labgrid coordinator at {lab.address}" if lost else "not run"
        elif lost and c.result == "ERROR" and "lost the labgrid coordinator" not in (c.error or ""):
            # what the cell saw first (a place acquire cut off, an exporter seemingly gone) was the coordinator
            # going away: the session notices a killed coordinator a moment after the calls in flight fail
            c.error = f"lost the labgrid coordinator at {lab.address}: {c.error}"
    rows = [c.row() for c in cells]
    counts = {k: sum(r["result"] == k for r in rows) for k in ("PASS", "FAIL", "ERROR")}
    return {"format": REPORT_FORMAT, "coordinator": lab.address, "user": lab.user,
            "places": [{"name": p, "target": t, "lost_exporter": p in m.dead, "unusable": m.unusable.get(p)}
                       for p, t in places.items()],
            "models": [n for n, _ in models], "targets": targets, "cells": rows,
            "passed": counts["PASS"], "failed": counts["FAIL"], "errors": counts["ERROR"],
            "retried": sum(r["retried"] for r in rows), "ok": counts["PASS"] == len(rows),
            "coordinator_lost": not lab.connected(),
            "seconds": {"build": round(t_built - t0, 3), "matrix": round(time.monotonic() - t_built, 3)}}


def junit_xml(report: dict) -> str:
    """JUnit XML: one testcase per cell (classname the model, name the target), with the place it ran on
    and, for a retried cell, every attempt in its system-out."""
    rows = report["cells"]
    total = sum(r["seconds"] for r in rows)
    out = ['<?xml version="1.0" encoding="utf-8"?>',
           f'<testsuites><testsuite name="treegen farm" tests="{len(rows)}" failures="{report["failed"]}" '
           f'errors="{report["errors"]}" time="{total:.3f}">']
    for r in rows:
        out.append(f'<testcase classname={quoteattr(Path(r["model"]).name)} name={quoteattr(r["target"])} '
                   f'time="{r["seconds"]:.3f}">')
        out.append(f'<properties><property name="place" value={quoteattr(str(r["place"]))}/>'
                   f'<property name="retried" value="{str(r["retried"]).lower()}"/></properties>')
        if r["result"] == "FAIL":
            out.append(f'<failure message={quoteattr(r["error"] or "FAIL")}/>')
        elif r["result"] == "ERROR":
            out.append(f'<error message={quoteattr(r["error"] or "ERROR")}/>')
        lines = [f"attempt {i + 1}: place {a['place']} ({a['exporter']}): {a['result']}"
                 + (f" - {a['error']}" if a["error"] else "") for i, a in enumerate(r["attempts"])]
        out.append(f"<system-out>{escape(chr(10).join(lines))}</system-out>")
        out.append("</testcase>")
    out.append("</testsuite></testsuites>")
    return "\n".join(out) + "\n"
