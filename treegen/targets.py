"""Targets are data: one TOML file per target in ``targets/`` (shipped inside the package).

Required keys: ``name``, ``description``, ``kind`` ("host" | "mcu" | "emulated" | "board"), ``core``,
``fpu`` (bool), ``dsp`` (bool: ARMv7E-M DSP extension), ``flash_kb``, ``ram_kb``, ``clock_hz``,
``cc`` (C compiler), ``cflags`` (list). Later stages add sections (PlatformIO environment, emulator);
unknown keys are kept in ``extra``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .errors import TreegenError
from .resources import targets_dir

_REQUIRED = {"name": str, "description": str, "kind": str, "core": str, "fpu": bool, "dsp": bool,
             "flash_kb": int, "ram_kb": int, "clock_hz": int, "cc": str, "cflags": list}


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    kind: str
    core: str
    fpu: bool
    dsp: bool
    flash_kb: int
    ram_kb: int
    clock_hz: int
    cc: str
    cflags: tuple
    extra: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def flash_bytes(self) -> int:
        return self.flash_kb * 1024

    @property
    def ram_bytes(self) -> int:
        return self.ram_kb * 1024


def _parse(path: Path) -> Target:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TreegenError(f"target file {path.name}: {exc}") from None
    for key, typ in _REQUIRED.items():
        if key not in data:
            raise TreegenError(f"target file {path.name}: missing key {key!r}")
        if not isinstance(data[key], typ) or (typ is int and isinstance(data[key], bool)):
            raise TreegenError(f"target file {path.name}: key {key!r} must be {typ.__name__}")
    if data["name"] != path.stem:
        raise TreegenError(f"target file {path.name}: name {data['name']!r} does not match the file name")
    extra = {k: v for k, v in data.items() if k not in _REQUIRED}
    return Target(**{k: data[k] for k in _REQUIRED if k != "cflags"}, cflags=tuple(data["cflags"]), extra=extra)


def available() -> list[str]:
    return sorted(p.stem for p in targets_dir().glob("*.toml"))


def get(name: str) -> Target:
    path = targets_dir() / f"{name}.toml"
    if not path.is_file():
        raise TreegenError(f"unknown target {name!r} (available: {', '.join(available())})")
    return _parse(path)


def all_targets() -> list[Target]:
    return [get(n) for n in available()]
