"""The latency axis of the tune picture names what BENCH counted: CPU cycles on simavr-uno (and boards),
instructions under QEMU -icount (written against the label that said "instructions" for simavr's cycles)."""

from __future__ import annotations

import pytest

from treegen.emit.plot_tune import plot_tune


def _result(target: str, unit: str) -> dict:
    point = {"name": "cart-1", "accuracy": 0.9, "flash_bytes": 300, "latency_us": 12.5, "counter_unit": unit}
    return {"target": target, "seed": 1, "clock_hz": 16_000_000, "points": [point], "front": [0], "chosen": point,
            "budget": {"max_flash": None, "max_latency_us": None}}


@pytest.mark.parametrize("target,unit,label", [("simavr-uno", "cycles", "CPU cycles at 16 MHz"),
                                               ("qemu-m4", "instructions", "instructions at 16 MHz")])
def test_latency_axis_names_the_counted_unit(tmp_path, target, unit, label):
    svg = plot_tune(_result(target, unit), tmp_path / "t.svg").read_text()
    assert label in svg and ("instructions" in svg) == (unit == "instructions")
