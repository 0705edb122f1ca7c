"""An emulated labgrid farm on this machine, for trying the farm out, the tests and the benchmark: a real
``labgrid-coordinator``, one ``labgrid-exporter`` per "host", and places whose boards are emulated.

::

    python -m treegen.device.farm_lab up LAB qemu-m4@hostA native@hostB ...   # prints LG_COORDINATOR=...
    python -m treegen.device.farm_lab down LAB

Each ``TARGET@HOST`` becomes a place ``<target>-<n>`` (tag ``target=TARGET``) on exporter ``HOST``:

- an emulated target: a ``NetworkSerialPort`` (``protocol: raw``) naming a free TCP port of 127.0.0.1,
  where the holder of the place starts QEMU with its image (:mod:`treegen.device.farm_board`);
- ``native``: a ``RawSerialPort`` at ``/dev/shm/treegen-farm-*/<place>`` (labgrid serves only paths
  under /dev), a link the holder points at its native harness's pseudo-terminal; the exporter serves it
  through ser2net over RFC 2217.

Everything listens on 127.0.0.1 on free ports; the processes run in their own process groups, their
ids kept in ``LAB/lab.json`` so that ``down`` (or :meth:`EmulatedLab.stop`) ends them all, with the
ser2net processes the exporters started.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from treegen.core.errors import TreegenError
from treegen.device.farm import Coordinator

HOST = "127.0.0.1"


@dataclass(frozen=True)
class PlaceSpec:
    name: str
    target: str
    exporter: str


def specs(items) -> list[PlaceSpec]:
    """``["qemu-m4@hostA", "native@hostB", "qemu-m4@hostB"]`` -> places qemu-m4-1, native-1, qemu-m4-2."""
    count: dict[str, int] = {}
    out = []
    for item in items:
        target, sep, host = item.partition("@")
        if not sep or not target or not host:
            raise TreegenError(f"{item!r}: expected TARGET@HOST")
        count[target] = count.get(target, 0) + 1
        out.append(PlaceSpec(f"{target}-{count[target]}", target, host))
    return out


_RNG = random.Random()
_USED_PORTS: set[int] = set()
_PORT_LOCKS: dict[int, int] = {}    # port -> the descriptor of its lock file, open while this process lives


def _reserve(port: int) -> bool:
    """An exclusive lock on ``port`` among this machine's treegen processes (a ``flock`` on
    ``<tmp>/treegen-ports/<port>.lock``, held while this process or a lab process it hands the lock to
    lives, :meth:`EmulatedLab._spawn`): two labs started at once by parallel test workers never publish the
    same port, even while the board on it is stopped between cells, and a lab started by ``up`` (which
    returns at once) keeps its ports for as long as it runs."""
    folder = Path(tempfile.gettempdir()) / "treegen-ports"
    try:
        folder.mkdir(mode=0o1777, exist_ok=True)
        fd = os.open(folder / f"{port}.lock", os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:            # a folder of another user's that this one cannot write: no reservation
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _PORT_LOCKS[port] = fd
    return True


def pick_port(used: set) -> int:
    """A TCP port of 127.0.0.1 free now, not in ``used`` (added to it), below the kernel's ephemeral range
    (32768-60999 on Linux), where client connections and bind(0) take theirs -- two successive bind(0)s can
    return the same port, and a board's port is bound only while it runs -- and reserved for this process
    (:func:`_reserve`)."""
    for _ in range(200):
        port = _RNG.randrange(20000, 32768)
        if port in used:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
        if not _reserve(port):
            continue
        used.add(port)
        return port
    raise TreegenError("no free TCP port in 20000-32767 on 127.0.0.1")


def _wait_listening(port: int, proc: subprocess.Popen, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise TreegenError(f"{what} exited with status {proc.returncode}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            if s.connect_ex((HOST, port)) == 0:
                return
        time.sleep(0.05)
    raise TreegenError(f"{what} did not listen on port {port} within {timeout:g} s")


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out


def _pids_with(text: str) -> list[int]:
    """Processes whose command line contains ``text`` (the lab's ser2net, orphaned by a killed exporter)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                continue
            if text in cmd:
                out.append(int(entry))
    return out


def _kill(pid: int, sig=signal.SIGKILL) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class EmulatedLab:
    """The farm of ``places`` (:class:`PlaceSpec`) in folder ``root``: ``start()``, ``address``,
    ``kill_exporter(name)``, ``stop()``; a context manager."""

    def __init__(self, root, places: list[PlaceSpec]):
        self.root = Path(root).resolve()
        self.places = list(places)
        self.address: str | None = None
        self.pids: dict[str, int] = {}
        self.procs: dict[str, subprocess.Popen] = {}
        self.shm: str | None = None
        self.used_ports = _USED_PORTS          # shared by the labs of this process

    def __enter__(self) -> "EmulatedLab":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _spawn(self, name: str, cmd: list[str], ports=()) -> subprocess.Popen:
        """Start ``cmd`` in its own session; it inherits the reservations of ``ports`` (the lock files'
        descriptors), so they last as long as it does, whether or not this process does."""
        log = open(self.root / f"{name}.log", "wb")
        locks = [_PORT_LOCKS[p] for p in ports if p in _PORT_LOCKS]
        try:
            proc = subprocess.Popen(cmd, cwd=self.root, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, pass_fds=locks)
        except OSError as exc:
            raise TreegenError(f"cannot start {cmd[0]}: {exc.strerror or exc} (pip install 'treegen[farm]')") from None
        finally:
            log.close()
        self.procs[name] = proc
        self.pids[name] = proc.pid
        self._save()
        return proc

    def _save(self) -> None:
        if self.address:
            (self.root / "coordinator").write_text(self.address + "\n")
        (self.root / "lab.json").write_text(json.dumps({"coordinator": self.address, "pids": self.pids,
                                                        "shm": self.shm}, indent=1) + "\n")

    def exporter_yaml(self, exporter: str, ports: list | None = None) -> str:
        """The exporter's resources; the ports it publishes are appended to ``ports``."""
        lines = []
        for p in self.places:
            if p.exporter != exporter:
                continue
            lines.append(f"{p.name}:")
            if p.target == "native":
                lines += ["  RawSerialPort:", f"    port: {self.shm}/{p.name}", "    speed: 115200"]
            else:
                port = pick_port(self.used_ports)
                if ports is not None:
                    ports.append(port)
                lines += ["  NetworkSerialPort:", f"    host: {HOST}", f"    port: {port}",
                          "    speed: 115200", "    protocol: raw"]
        return "\n".join(lines) + "\n"

    def start(self) -> "EmulatedLab":
        for tool in ("labgrid-coordinator", "labgrid-exporter"):
            if shutil.which(tool) is None:
                raise TreegenError(f"{tool} not found: pip install 'treegen[farm]'")
        if any(p.target == "native" for p in self.places) and shutil.which("ser2net") is None \
                and not os.path.isfile("/usr/sbin/ser2net"):
            raise TreegenError("ser2net not found: apt-get install ser2net (scripts/setup.sh)")
        self.root.mkdir(parents=True, exist_ok=True)
        self.shm = tempfile.mkdtemp(prefix="treegen-farm-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        try:
            port = pick_port(self.used_ports)
            self.address = f"{HOST}:{port}"
            coord = self._spawn("coordinator", ["labgrid-coordinator", "-l", self.address], ports=[port])
            _wait_listening(port, coord, "labgrid-coordinator")
            exporters = sorted({p.exporter for p in self.places})
            for name in exporters:
                cfg = self.root / f"exporter-{name}.yaml"
                ports: list[int] = []
                cfg.write_text(self.exporter_yaml(name, ports))
                self._spawn(f"exporter-{name}", ["labgrid-exporter", "-c", self.address, "-n", name,
                                                 "--hostname", HOST, str(cfg)], ports=ports)
            with Coordinator(self.address) as lab:
                want = {f"{p.exporter}/{p.name}" for p in self.places}
                deadline = time.monotonic() + 30
                while True:
                    lab.sync()
                    have = {"/".join(r.split("/")[:2]) for r in lab.resource_names()}
                    if want <= have:
                        break
                    for name in exporters:
                        if self.procs[f"exporter-{name}"].poll() is not None:
                            raise TreegenError(f"labgrid-exporter {name} exited: see {self.root}/exporter-{name}.log")
                    if time.monotonic() > deadline:
                        raise TreegenError(f"the exporters did not publish {sorted(want - have)} within 30 s")
                    time.sleep(0.1)
                for p in self.places:
                    lab.define_place(p.name, [f"{p.exporter}/{p.name}/*"], {"target": p.target})
        except BaseException:
            self.stop()
            raise
        return self

    def kill_exporter(self, name: str, sig=signal.SIGKILL) -> None:
        """Kill exporter ``name`` (SIGKILL: no goodbye to the coordinator); its ser2net processes are left
        running, as on a host whose exporter crashed (:meth:`stop` ends them)."""
        proc = self.procs.get(f"exporter-{name}")
        if proc is None:
            raise TreegenError(f"no exporter {name}")
        os.kill(proc.pid, sig)
        proc.wait(10)

    def stop(self) -> None:
        stop_pids(self.pids, self.shm)
        for proc in self.procs.values():
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self.procs.clear()
        self.pids.clear()
        if self.shm:
            shutil.rmtree(self.shm, ignore_errors=True)
            self.shm = None


def stop_pids(pids: dict, shm: str | None) -> None:
    """End the lab's processes: exporters first (their ser2net children with them), then the coordinator."""
    order = sorted(pids, key=lambda n: n == "coordinator")
    for name in order:
        pid = pids[name]
        for child in _children(pid):
            _kill(child)
        _kill(pid)
    if shm:
        for pid in _pids_with(shm):          # ser2net orphaned by a killed exporter
            _kill(pid)


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m treegen.device.farm_lab",
                                 description="an emulated labgrid farm on 127.0.0.1")
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start a coordinator, exporters and places; print LG_COORDINATOR=...")
    up.add_argument("root", metavar="LAB")
    up.add_argument("places", nargs="+", metavar="TARGET@HOST")
    down = sub.add_parser("down", help="stop the farm started in LAB")
    down.add_argument("root", metavar="LAB")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "up":
            lab = EmulatedLab(args.root, specs(args.places))
            lab.start()
            for p in lab.places:
                print(f"place {p.name}  target={p.target}  exporter {p.exporter}")
            print(f"LG_COORDINATOR={lab.address}")
            return 0
        state = json.loads((Path(args.root) / "lab.json").read_text())
        stop_pids(state["pids"], state.get("shm"))
        if state.get("shm"):
            shutil.rmtree(state["shm"], ignore_errors=True)
        print(f"stopped the farm at {state['coordinator']}")
        return 0
    except (TreegenError, OSError) as exc:
        print(f"farm_lab: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
