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
   instructions, predictions identical to the fixed-point model, the device's accuracy). A chosen
   model that fails it (a mismatch, a device that stops answering, over the budget once linked and
   timed on every row) is recorded and the next best model within the budget is confirmed instead,
   at most :data:`MAX_CONFIRM` runs: the model returned is always one that passed on the device;
   when none of those passes, nothing is chosen (outcome ``confirmation failed``).

A candidate never ends the search: one refused by its inducer, one whose fit fails, whose firmware
does not build, whose device answers differently from the model or stops answering is recorded in
``failures`` (stage, layout, variant, a one-line reason) and the others go on; the front and every
measured point are returned whatever happened to single candidates. A device mismatch on an
emulated target is reported as a device mismatch with its first row, and the rows that differed are
run through the host build of the same C as evidence of where the fault lies
(:func:`treegen.device.tune_cost.failure_reason`).
"""

from __future__ import annotations

import contextlib
import time
from typing import Callable, Sequence

from treegen.core import interrupts
from treegen.core import targets as _targets
from treegen.core.errors import TreegenError
from treegen.core.limits import bytes_text
from treegen.core.model import Model
from treegen.device.tune_cost import (CostCache, CostMeter, failure_reason, fits, latency_us, leaf_model,
                                      model_symbol_bytes, spread_rows, variants_for)
from treegen.learn import compare as _cmp
from treegen.learn import tune as _search

LAYOUTS = ("table", "unrolled")
#: seconds per request of the confirming run (every row: slow UARTs such as the nRF51's, busy machines)
CONFIRM_TIMEOUT = 60.0
#: confirming HIL runs at most (the chosen model, then the next best when one fails)
MAX_CONFIRM = 3
BUDGET_KEYS = ("max_flash", "max_ram", "max_latency_us", "max_instructions")


def _fit_full(method: _cmp.Method, data: _cmp.CompareData, seed: int, feature_names=None) -> Model:
    est = method.factory()(seed)
    est.fit(data.X, data.y, feature_names=feature_names)
    return est.model_


def _fit_or_failure(method: _cmp.Method, data: _cmp.CompareData, seed: int, feature_names=None):
    """(model, None) or (None, the one-line reason it could not be fitted on all rows)."""
    try:
        return _fit_full(method, data, seed, feature_names), None
    except Exception as exc:        # a candidate's failure is its own: recorded, the search goes on
        return None, _reason(exc)


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if isinstance(exc, TreegenError) else (f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


def fit_finalists(client, methods, data: _cmp.CompareData, seed: int, feature_names=None) -> list[tuple]:
    """Each finalist fitted on all rows: ``(model, None)`` or ``(None, reason)``, in order. On the
    Dask ``client`` (None: here), results taken one by one as they finish; an interrupt cancels the
    rest (no ``gather``: its waiters, released under a Ctrl-C, printed asyncio tracebacks)."""
    if client is None:
        return [_fit_or_failure(m, data, seed, feature_names) for m in methods]
    from concurrent.futures import CancelledError

    import distributed

    futures = [client.submit(_fit_or_failure, m, data, seed, feature_names, pure=False,
                             key=f"treegen-tune-fit-{data.digest}-{m.name}-{seed}") for m in methods]
    index = {f.key: i for i, f in enumerate(futures)}
    out: list[tuple] = [(None, "not fitted")] * len(methods)
    try:
        for fut in distributed.as_completed(futures, loop=client.loop):
            try:
                out[index[fut.key]] = fut.result()
            except (distributed.KilledWorker, CancelledError, OSError, TimeoutError) as exc:
                out[index[fut.key]] = (None, _cmp.task_failure(exc))
    except BaseException:
        client.cancel(futures)
        raise
    return out


def _failure(m, stage: str, reason: str, layout: str | None = None, variant: str | None = None,
             accuracy: float | None = None) -> dict:
    return {"name": m.name, "algorithm": m.algorithm, "params": m.params, "stage": stage, "layout": layout,
            "variant": variant, "accuracy": accuracy, "reason": reason}


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
         feature_names: Sequence[str] | None = None, max_confirm: int = MAX_CONFIRM,
         on_progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Search models for ``target`` under the budget (bytes, µs, instructions; None = no limit).

    ``algos``: algorithms (default :data:`treegen.learn.tune.DEFAULT_ALGOS`); ``per_algo``: candidates
    per algorithm (its defaults + sampled settings); ``results``: the resumable task file (as
    compare's); ``costs``: the cost cache file (JSONL); ``scheduler``/``workers``: the Dask cluster
    (default: a local one); ``budget_minutes``: no new rung starts after that (a cut search is
    reported); ``confirm``: one HIL run of the chosen model on all rows (a chosen model that fails it
    gives way to the next best, at most ``max_confirm`` tries); ``feature_names``: the data's column
    names (kept in the models). ``on_progress(stage, done, total)``: stages ``"cv"`` (tasks),
    ``"cost"`` (measurements).

    A candidate that fails — refused by its inducer, a fit error, a firmware that does not build, a
    device mismatch, a device that stops answering — is recorded in ``failures`` with its stage and
    reason, and the search goes on.

    Returns ``{"target", "budget", "seed", "search": {"rungs", "cut_by_budget", "candidates",
    "refused_values"}, "points": [...], "front": [indices], "failures": [...], "chosen": point or None,
    "outcome", "message", "confirmation"}``; a point is a finalist's measured (layout, variant): name,
    algorithm, params, accuracy (CV mean), n_folds, leaves, flash_bytes, ram_bytes, instructions,
    latency_us, fits, model_hash (and ``model``, the fitted :class:`Model`, on the chosen one); a
    failure: name, algorithm, params, stage (``cv``, ``fit``, ``cost``, ``confirm``), layout, variant,
    accuracy, reason. ``outcome``: ``chosen``, ``nothing fits``, ``no candidate measured`` or
    ``confirmation failed``.
    """
    import numpy as np

    tgt = target if isinstance(target, _targets.Target) else _targets.get(str(target))
    budget = {"max_flash": max_flash, "max_ram": max_ram, "max_latency_us": max_latency_us,
              "max_instructions": max_instructions}
    if max_instructions is not None and tgt.kind == "host":
        raise TreegenError("native times inferences in nanoseconds, not instructions: use --max-latency-us "
                           "(or an emulated target)")
    algos = list(_search.DEFAULT_ALGOS if algos is None else algos)
    data = _cmp.CompareData(dataset, X, y)
    if feature_names is not None:
        feature_names = [str(n) for n in feature_names]
        if len(feature_names) != data.X.shape[1]:
            raise TreegenError(f"{len(feature_names)} feature names given for {data.X.shape[1]} features")
    refused: list[str] = []
    shape = _search.train_shape(data.X.shape[0], data.X.shape[1], len(np.unique(data.y.astype(str))))
    methods = _search.sample_methods(algos, per_algo, seed, shape=shape, refused=refused)
    store = _cmp.ResultsFile(results)
    meter = CostMeter(tgt, work_dir=work_dir, cache=CostCache(costs))
    t_start = time.monotonic()
    deadline = None if budget_minutes is None else t_start + 60.0 * budget_minutes
    progress = on_progress or (lambda stage, done, total: None)
    failures: list[dict] = []
    by_name = {m.name: m for m in methods}
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
                errors: dict[str, dict] = {}
                progress("cv", count[0], len(tasks))

                def got(rec):
                    store.add(rec)
                    count[0] += 1
                    progress("cv", count[0], len(tasks))

                def bad(task, reason):          # not written to the results file: tried again on a rerun
                    errors[task.key] = {"key": task.key, "method": task.method, "error": reason}
                    count[0] += 1
                    progress("cv", count[0], len(tasks))
                if pending:
                    _cmp.run_tasks(get_client(), pending, [data], on_result=got, on_error=bad)
                return [errors[t.key] if t.key in errors else {**store.records[t.key], "method": t.method}
                        for t in tasks]

            found = _search.successive_halving(data, methods, run, seed=seed, deadline=deadline)
            for name, f in found.failed.items():
                failures.append(_failure(by_name[name], "cv", f"rung {f['rung']}: {f['reason']}"))
            # the finalists fitted on all rows: on the cluster, or here when none runs
            fitted = fit_finalists(client[0] if client else None, found.finalists, data, seed, feature_names)
        models: dict[str, Model] = {}
        for m, (model, why) in zip(found.finalists, fitted):
            if model is None:
                failures.append(_failure(m, "fit", why, accuracy=found.final_scores[m.name]["accuracy"]))
            else:
                models[m.name] = model
        points = _measure(found, models, data, meter, tgt, budget, progress, failures)
        front = _search.pareto_front(points, (("accuracy", 1), ("flash_bytes", -1), ("latency_us", -1)))
        chosen, confirmation, outcome, message = _choose(points, models, data, tgt, budget, failures,
                                                         confirm=confirm, max_confirm=max_confirm,
                                                         work_dir=meter.work_dir)
    finally:
        meter.close()
    return {"target": tgt.name, "clock_hz": tgt.clock_hz, "budget": budget, "seed": seed, "algos": algos,
            "search": {"method": "successive halving, Pareto promotion (treegen.learn.tune)",
                       "rungs": found.rungs, "cut_by_budget": found.cut_by_budget,
                       "candidates": [{"name": m.name, "algorithm": m.algorithm, "params": m.params} for m in methods],
                       "refused_values": refused},
            "points": points, "front": front, "failures": failures, "chosen": chosen, "outcome": outcome,
            "message": message, "confirmation": confirmation, "hil_runs": meter.measured,
            "wall_seconds": round(time.monotonic() - t_start, 1)}


def _describe(p: dict, tgt) -> str:
    return (f"{p['name']} ({p['layout']}, {p['variant']}): CV accuracy {100 * p['accuracy']:.2f} %, "
            f"{bytes_text(p['flash_bytes'])} flash, {p['latency_us']:.3g} µs on {tgt.name}")


def _choose(points, models, data, tgt, budget, failures, *, confirm: bool, max_confirm: int, work_dir):
    """(chosen point or None, its confirmation, outcome, message). Points within the budget are taken
    most accurate first (ties: less flash, less time); with ``confirm`` the first whose confirming HIL
    run passes is chosen, one that fails is recorded in ``failures`` (stage ``confirm``) and gives
    way to the next, at most ``max_confirm`` runs."""
    fitting = sorted((i for i, p in enumerate(points) if p["fits"]),
                     key=lambda i: (-round(points[i]["accuracy"], 9), points[i]["flash_bytes"], points[i]["latency_us"],
                                    points[i]["name"], points[i]["layout"], points[i]["variant"]))
    if not fitting:
        if points:
            return None, None, "nothing fits", nothing_fits_message(points, budget)
        why = f" ({len(failures)} failed: {failures[0]['name']}: {failures[0]['reason']})" if failures else ""
        return None, None, "no candidate measured", f"no candidate model could be measured on {tgt.name}{why}"
    first_failed = None
    for i in fitting[:max(1, max_confirm) if confirm else 1]:
        cand = dict(points[i], index=i, model=models[points[i]["name"]])
        if not confirm:
            return cand, None, "chosen", _describe(cand, tgt)
        conf = confirm_on_device(cand, data, tgt, budget, work_dir=work_dir)
        if conf["ok"]:
            note = "" if first_failed is None else (f" (the more accurate {first_failed[0]['name']} "
                                                    f"({first_failed[0]['layout']}, {first_failed[0]['variant']}) "
                                                    "failed its confirming HIL run: see the failures)")
            return cand, conf, "chosen", _describe(cand, tgt) + note
        failures.append({k: cand[k] for k in ("name", "algorithm", "params", "layout", "variant", "accuracy")}
                        | {"stage": "confirm", "reason": conf["reason"]})
        if first_failed is None:
            first_failed = (cand, conf)
    cand, conf = first_failed
    tried = min(len(fitting), max(1, max_confirm))
    return None, conf, "confirmation failed", (f"{tried} model(s) within the budget failed their confirming HIL "
                                               f"run on {tgt.name}; the most accurate, {cand['name']} "
                                               f"({cand['layout']}, {cand['variant']}): {conf['reason']}")


def _measure(found, models, data, meter: CostMeter, tgt, budget: dict, progress, failures: list) -> list[dict]:
    names = [m.name for m in found.finalists if m.name in models]
    finalists = {m.name: m for m in found.finalists}
    order = sorted(names, key=lambda n: (-round(found.final_scores[n]["accuracy"], 9),
                                         found.final_scores[n]["leaves"], n))
    combos = [(layout, variant) for layout in LAYOUTS for variant in variants_for(tgt)]
    points: list[dict] = []
    measured: list[tuple[str, float, float]] = []     # (algorithm, accuracy, leaves) of measured finalists
    total = len(order) * len(combos)
    done = 0
    progress("cost", 0, total)
    for name in order:
        m, model = finalists[name], models[name]
        s = found.final_scores[name]
        leaves = float(sum(t.n_leaves for t in model.trees))
        dominated = any(a == m.algorithm and acc >= s["accuracy"] and lv <= leaves for a, acc, lv in measured)
        if dominated:
            done += len(combos)
            progress("cost", done, total)
            continue
        any_ok = False
        for layout, variant in combos:
            interrupts.check()         # a Ctrl-C Python dropped in a finalizer still stops the search
            try:
                cost = meter(model, data.X, layout, variant)
            except Exception as exc:       # build error, mismatch, a device that stops answering: recorded
                failures.append(_failure(m, "cost", _reason(exc), layout, variant, s["accuracy"]))
            else:
                any_ok = True
                point = {"name": m.name, "algorithm": m.algorithm, "params": m.params, "accuracy": s["accuracy"],
                         "n_folds": s["n_folds"], "leaves": int(leaves), "model_hash": model.hash(), **cost}
                point["fits"] = not fits(point, budget)
                points.append(point)
            done += 1
            progress("cost", done, total)
        if any_ok:       # a finalist that could not be measured hides none of its algorithm's others
            measured.append((m.algorithm, s["accuracy"], leaves))
    return points


def over_text(cost: dict, budget: dict, over: Sequence[str]) -> str:
    """The limits ``cost`` exceeds, with both figures (``latency 2.13 µs > 2 µs``)."""
    show = {"max_flash": ("flash_bytes", "flash", "B"), "max_ram": ("ram_bytes", "RAM", "B"),
            "max_latency_us": ("latency_us", "latency", "µs"),
            "max_instructions": ("instructions", "instructions", "")}
    parts = []
    for limit in over:
        field, what, unit = show[limit]
        value = cost.get(field)
        shown = "unknown" if value is None else (f"{value}" if isinstance(value, int) else f"{value:.4g}")
        unit = f" {unit}" if unit else ""
        parts.append(f"{what} {shown}{unit} > {budget[limit]:g}{unit}")
    return ", ".join(parts)


def confirm_on_device(chosen: dict, data: _cmp.CompareData, tgt, budget: dict, *, work_dir=None) -> dict:
    """One HIL run of the chosen model on every row (labels given): the firmware's linked sizes and
    BENCH instructions on the emulated core, checked against the budget (the model's share of the
    image: minus the one-leaf firmware's, as in :mod:`treegen.device.tune_cost`). ``ok`` False comes
    with ``reason`` (one line: a mismatch with its first row and where the fault lies, a device that
    stopped answering, a build error, the limits exceeded)."""
    import tempfile

    from treegen.device.hil import run_hil

    model = chosen["model"]
    empty = {"ok": False, "hil_ok": False, "over_budget": [], "rows": len(data.y), "mismatches": None,
             "device_accuracy": None, "image_flash_bytes": None, "image_ram_bytes": None, "insn_per_inference": None,
             "counter_unit": None, "flash_bytes": None, "ram_bytes": None, "instructions": None, "latency_us": None}
    with tempfile.TemporaryDirectory(prefix="treegen-tune-confirm-") as tmp:
        where = tmp if work_dir is None else work_dir
        tag = f"{tgt.name}-{chosen['layout']}-{chosen['variant']}"
        try:
            report = run_hil(model, tgt, build_dir=f"{where}/confirm-{tag}", data=(data.X, data.y),
                             layout=chosen["layout"], variant=chosen["variant"], timeout=CONFIRM_TIMEOUT)
            if not report["ok"]:
                reason = failure_reason(report, model, data.X, tgt, f"{where}/confirm-evidence")
                return {**empty, "error": reason, "reason": reason, "rows": report["rows"],
                        "mismatches": report.get("mismatches"), "mismatch_rows": report.get("mismatch_rows", [])}
            base = None
            if report.get("flash_bytes") is not None:
                rows = data.X[spread_rows(data.X.shape[0], 4)]
                base = run_hil(leaf_model(model), tgt, build_dir=f"{where}/confirm-base-{tag}", data=(rows, None),
                               layout=chosen["layout"], variant=chosen["variant"], bench_iters=0)
                own = model_symbol_bytes(base.get("firmware"), tgt)     # (the ELF is gone with tmp after the block)
                base = {"flash": base["flash_bytes"] - own[0], "ram": base["ram_bytes"] - own[1]}
        except Exception as exc:         # HilError (timeout, device gone, build failure), nm, ...
            reason = _reason(exc)
            return {**empty, "error": reason, "reason": reason}
    cost = {"flash_bytes": chosen["flash_bytes"] if base is None else report["flash_bytes"] - base["flash"],
            "ram_bytes": chosen["ram_bytes"] if base is None else report["ram_bytes"] - base["ram"],
            "instructions": report.get("insn_per_inference") if report.get("counter_unit") != "nanoseconds" else None,
            "latency_us": latency_us(report.get("insn_per_inference"), report.get("counter_unit"), tgt.clock_hz)}
    over = fits(cost, budget)
    out = {"ok": not over, "hil_ok": True, "over_budget": over, "error": None,
           "reason": None if not over else f"over budget when confirmed on every row: {over_text(cost, budget, over)}",
           "rows": report["rows"], "mismatches": report.get("mismatches"), "device_accuracy": report.get("accuracy"),
           "image_flash_bytes": report.get("flash_bytes"), "image_ram_bytes": report.get("ram_bytes"),
           "insn_per_inference": report.get("insn_per_inference"), "counter_unit": report.get("counter_unit"),
           **cost}
    return out
