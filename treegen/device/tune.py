"""``treegen tune`` as a Python call: the most accurate model that fits a target's budget.

::

    result = tune(X, y, "qemu-m4", max_flash=1024, max_latency_us=2.0, seed=0)
    result["chosen"]["model"]          # a treegen Model (None when nothing fits: result["message"])

Steps (each in its own module):

1. the search (:mod:`treegen.learn.tune`): successive halving with Pareto promotion over a seeded
   sample of every algorithm's size knobs; every rung is a set of ``compare`` tasks
   (:mod:`treegen.learn.compare`) run on one Dask cluster (local, or ``scheduler``), kept in the
   resumable results file;
2. the finalists are fitted on all rows (Dask tasks, estimator seed = ``seed``);
3. the costs (:mod:`treegen.device.tune_cost`): one HIL run per (model, layout, variant) on the
   emulated target, cached by model hash. Lean: finalists are measured in order of accuracy, and a
   finalist is not measured when one of the same algorithm already measured is at least as
   accurate with no more leaves (it could not be on the front); variants are the target's
   (scalar, DSP, MVE), layouts ``table`` and ``unrolled``;
4. the Pareto front of (accuracy up, flash down, latency down) over the measured points, and the
   chosen point: the most accurate within the budget (ties: less flash, then less latency);
5. one confirming HIL run of the chosen model on all rows (the firmware's linked sizes and
   instructions, predictions identical to the fixed-point model, the device's accuracy).
"""

from __future__ import annotations

import contextlib
import time
from typing import Callable, Sequence

from treegen.core import targets as _targets
from treegen.core.errors import TreegenError
from treegen.core.limits import bytes_text
from treegen.core.model import Model
from treegen.device.tune_cost import (CostCache, CostMeter, fits, latency_us, leaf_model, model_symbol_bytes,
                                      spread_rows, variants_for)
from treegen.learn import compare as _cmp
from treegen.learn import tune as _search

LAYOUTS = ("table", "unrolled")
#: seconds per request of the confirming run (every row: slow UARTs such as the nRF51's, busy machines)
CONFIRM_TIMEOUT = 60.0
BUDGET_KEYS = ("max_flash", "max_ram", "max_latency_us", "max_instructions")


def _fit_full(method: _cmp.Method, data: _cmp.CompareData, seed: int) -> Model:
    est = method.factory()(seed)
    est.fit(data.X, data.y)
    return est.model_


def nothing_fits_message(points: Sequence[dict], budget: dict) -> str:
    """One line saying what the smallest (fastest) measured model needs against the budget."""
    if not points:
        return "no candidate model could be measured on the target"
    show = {"max_flash": ("flash_bytes", "flash", bytes_text), "max_ram": ("ram_bytes", "RAM", bytes_text),
            "max_latency_us": ("latency_us", "latency", lambda v: f"{v:.2f} µs"),
            "max_instructions": ("instructions", "instructions", lambda v: f"{v:.0f} instructions")}
    alone = []
    for limit in BUDGET_KEYS:
        if budget.get(limit) is None:
            continue
        field, what, fmt = show[limit]
        best = min(p[field] for p in points if p.get(field) is not None)
        if best > budget[limit]:
            alone.append(f"the smallest model needs {fmt(best)} of {what}, budget {fmt(budget[limit])}"
                         if what in ("flash", "RAM") else
                         f"the fastest model needs {fmt(best)}, budget {fmt(budget[limit])}")
    if alone:
        return "; ".join(alone)
    return ("no model meets every limit at once (each limit alone is met by some model: "
            + ", ".join(f"{k.replace('max_', '').replace('_', ' ')} {budget[k]:g}" for k in BUDGET_KEYS
                        if budget.get(k) is not None) + ")")


def tune(X, y, target, *, max_flash: int | None = None, max_ram: int | None = None,
         max_latency_us: float | None = None, max_instructions: int | None = None,
         algos: Sequence[str] | None = None, per_algo: int = 6, seed: int = 0,
         budget_minutes: float | None = None, results=None, costs=None, scheduler: str | None = None,
         workers: int | None = None, work_dir=None, dataset: str = "data", confirm: bool = True,
         on_progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Search models for ``target`` under the budget (bytes, µs, instructions; None = no limit).

    ``algos``: algorithms (default :data:`treegen.learn.tune.DEFAULT_ALGOS`); ``per_algo``: candidates
    per algorithm (its defaults + sampled settings); ``results``: the resumable task file (as
    compare's); ``costs``: the cost cache file (JSONL); ``scheduler``/``workers``: the Dask cluster
    (default: a local one); ``budget_minutes``: no new rung starts after that (a cut search is
    reported); ``confirm``: one HIL run of the chosen model on all rows.
    ``on_progress(stage, done, total)``: stages ``"cv"`` (tasks), ``"cost"`` (measurements).

    Returns ``{"target", "budget", "seed", "search": {"rungs", "cut_by_budget", "candidates"},
    "points": [...], "front": [indices], "chosen": point or None, "message", "confirmation"}``;
    a point is a finalist's measured (layout, variant): name, algorithm, params, accuracy (CV mean),
    n_folds, leaves, flash_bytes, ram_bytes, instructions, latency_us, fits, model_hash (and
    ``model``, the fitted :class:`Model`, on the chosen one).
    """
    tgt = target if isinstance(target, _targets.Target) else _targets.get(str(target))
    budget = {"max_flash": max_flash, "max_ram": max_ram, "max_latency_us": max_latency_us,
              "max_instructions": max_instructions}
    if max_instructions is not None and tgt.kind == "host":
        raise TreegenError("native times inferences in nanoseconds, not instructions: use --max-latency-us "
                           "(or an emulated target)")
    algos = list(algos or _search.DEFAULT_ALGOS)
    data = _cmp.CompareData(dataset, X, y)
    methods = _search.sample_methods(algos, per_algo, seed)
    store = _cmp.ResultsFile(results)
    meter = CostMeter(tgt, work_dir=work_dir, cache=CostCache(costs))
    t_start = time.monotonic()
    deadline = None if budget_minutes is None else t_start + 60.0 * budget_minutes
    progress = on_progress or (lambda stage, done, total: None)
    try:
        # the cluster starts only when a task must run (a rerun finished in the results file starts none)
        with contextlib.ExitStack() as stack:
            client = []

            def get_client():
                if not client:
                    client.append(stack.enter_context(_cmp.dask_client(scheduler, workers)))
                return client[0]

            def run(tasks):
                done = store.done(tasks)
                pending = [t for t in tasks if t.key not in done]
                count = [len(tasks) - len(pending)]
                progress("cv", count[0], len(tasks))

                def got(rec):
                    store.add(rec)
                    count[0] += 1
                    progress("cv", count[0], len(tasks))
                if pending:
                    _cmp.run_tasks(get_client(), pending, [data], on_result=got)
                return [{**store.records[t.key], "method": t.method} for t in tasks]

            found = _search.successive_halving(data, methods, run, seed=seed, deadline=deadline)
            if client:          # the finalists fitted on all rows: on the cluster, or here when none runs
                futures = [client[0].submit(_fit_full, m, data, seed, pure=False,
                                            key=f"treegen-tune-fit-{data.digest}-{m.name}-{seed}")
                           for m in found.finalists]
                models = client[0].gather(futures)
            else:
                models = [_fit_full(m, data, seed) for m in found.finalists]
        points = _measure(found, models, data, meter, tgt, budget, progress)
    finally:
        meter.close()
    front = _search.pareto_front(points, (("accuracy", 1), ("flash_bytes", -1), ("latency_us", -1)))
    fitting = [i for i, p in enumerate(points) if p["fits"]]
    chosen = None
    message = ""
    if fitting:
        best = min(fitting, key=lambda i: (-round(points[i]["accuracy"], 9), points[i]["flash_bytes"],
                                           points[i]["latency_us"], points[i]["name"], points[i]["layout"],
                                           points[i]["variant"]))
        chosen = dict(points[best], index=best, model=models[[m.name for m in found.finalists].index(points[best]["name"])])
        message = (f"{chosen['name']} ({chosen['layout']}, {chosen['variant']}): CV accuracy "
                   f"{100 * chosen['accuracy']:.2f} %, {bytes_text(chosen['flash_bytes'])} flash, "
                   f"{chosen['latency_us']:.3g} µs on {tgt.name}")
    else:
        message = nothing_fits_message(points, budget)
    confirmation = None
    if chosen is not None and confirm:
        confirmation = confirm_on_device(chosen, data, tgt, budget, work_dir=work_dir)
    return {"target": tgt.name, "clock_hz": tgt.clock_hz, "budget": budget, "seed": seed, "algos": algos,
            "search": {"method": "successive halving, Pareto promotion (treegen.learn.tune)",
                       "rungs": found.rungs, "cut_by_budget": found.cut_by_budget,
                       "candidates": [{"name": m.name, "algorithm": m.algorithm, "params": m.params} for m in methods]},
            "points": points, "front": front, "chosen": chosen, "message": message,
            "confirmation": confirmation, "hil_runs": meter.measured,
            "wall_seconds": round(time.monotonic() - t_start, 1)}


def _measure(found, models, data, meter: CostMeter, tgt, budget: dict, progress) -> list[dict]:
    order = sorted(range(len(found.finalists)),
                   key=lambda i: (-round(found.final_scores[found.finalists[i].name]["accuracy"], 9),
                                  found.final_scores[found.finalists[i].name]["leaves"], found.finalists[i].name))
    combos = [(layout, variant) for layout in LAYOUTS for variant in variants_for(tgt)]
    points: list[dict] = []
    measured: list[tuple[str, float, float]] = []     # (algorithm, accuracy, leaves) of measured finalists
    total = len(order) * len(combos)
    done = 0
    progress("cost", 0, total)
    for i in order:
        m, model = found.finalists[i], models[i]
        s = found.final_scores[m.name]
        leaves = float(sum(t.n_leaves for t in model.trees))
        dominated = any(a == m.algorithm and acc >= s["accuracy"] and lv <= leaves for a, acc, lv in measured)
        if dominated:
            done += len(combos)
            progress("cost", done, total)
            continue
        measured.append((m.algorithm, s["accuracy"], leaves))
        for layout, variant in combos:
            cost = meter(model, data.X, layout, variant)
            point = {"name": m.name, "algorithm": m.algorithm, "params": m.params, "accuracy": s["accuracy"],
                     "n_folds": s["n_folds"], "leaves": int(leaves), "model_hash": model.hash(), **cost}
            point["fits"] = not fits(point, budget)
            points.append(point)
            done += 1
            progress("cost", done, total)
    return points


def confirm_on_device(chosen: dict, data: _cmp.CompareData, tgt, budget: dict, *, work_dir=None) -> dict:
    """One HIL run of the chosen model on every row (labels given): the firmware's linked sizes and
    BENCH instructions on the emulated core, checked against the budget (the model's share of the
    image: minus the one-leaf firmware's, as in :mod:`treegen.device.tune_cost`)."""
    import tempfile

    from treegen.device.hil import HilError, run_hil

    model = chosen["model"]
    with tempfile.TemporaryDirectory(prefix="treegen-tune-confirm-") as tmp:
        where = tmp if work_dir is None else work_dir
        try:
            report = run_hil(model, tgt, build_dir=f"{where}/confirm-{tgt.name}", data=(data.X, data.y),
                             layout=chosen["layout"], variant=chosen["variant"], timeout=CONFIRM_TIMEOUT)
        except HilError as exc:
            return {"ok": False, "hil_ok": False, "error": str(exc), "over_budget": [], "rows": len(data.y),
                    "mismatches": None, "device_accuracy": None, "image_flash_bytes": None, "image_ram_bytes": None,
                    "insn_per_inference": None, "counter_unit": None, "flash_bytes": None, "ram_bytes": None,
                    "instructions": None, "latency_us": None}
        base = None
        if report.get("flash_bytes") is not None:
            rows = data.X[spread_rows(data.X.shape[0], 4)]
            base = run_hil(leaf_model(model), tgt, build_dir=f"{where}/confirm-base-{tgt.name}", data=(rows, None),
                           layout=chosen["layout"], variant=chosen["variant"], bench_iters=0)
            own = model_symbol_bytes(base.get("firmware"), tgt)     # (the ELF is gone with tmp after the block)
            base = {"flash": base["flash_bytes"] - own[0], "ram": base["ram_bytes"] - own[1]}
    cost = {"flash_bytes": chosen["flash_bytes"] if base is None else report["flash_bytes"] - base["flash"],
            "ram_bytes": chosen["ram_bytes"] if base is None else report["ram_bytes"] - base["ram"],
            "instructions": report.get("insn_per_inference") if report.get("counter_unit") != "nanoseconds" else None,
            "latency_us": latency_us(report.get("insn_per_inference"), report.get("counter_unit"), tgt.clock_hz)}
    over = fits(cost, budget)
    return {"ok": bool(report["ok"]) and not over, "hil_ok": bool(report["ok"]), "over_budget": over,
            "rows": report["rows"], "mismatches": report.get("mismatches"), "device_accuracy": report.get("accuracy"),
            "image_flash_bytes": report.get("flash_bytes"), "image_ram_bytes": report.get("ram_bytes"),
            "insn_per_inference": report.get("insn_per_inference"), "counter_unit": report.get("counter_unit"),
            **cost}
