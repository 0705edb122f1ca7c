"""Run firmware on an emulated target: an emulator process with the board's UART on a local TCP socket.

::

    with QemuBoard("qemu-m4", "fw.elf") as board:
        link = serial.serial_for_url(board.url, timeout=5)   # socket://127.0.0.1:PORT
        ...

The target's ``[emulator] engine`` says which emulator runs it: ``qemu`` (the default; :class:`QemuBoard`)
or ``simavr`` (:class:`treegen.device.simavr.SimavrBoard`, the AVR boards);
:func:`treegen.device.emulated.emulated_board` picks the one. Both listen on a free port of
127.0.0.1 and hold the boot until a client connects (no early output is lost), so the caller must
connect promptly; pyserial's ``serial_for_url`` reaches it exactly like a real ``/dev/ttyACM0``.

QEMU starts with ``-chardev socket,...,server=on,wait=on,nodelay=on``; its arguments come from the
target's ``[emulator]`` table (machine, ``-icount shift=0,align=off,sleep=on`` for repeatable
instruction counts; ``firmware_option``: ``-kernel`` or ``-bios``). ``sleep=on``: a board waiting
in WFI for its UART sleeps on the host. With ``sleep=off`` QEMU instead jumps virtual time from one
timer deadline to the next (the free-running SysTick's) as fast as it can, and an idle board took
most of a host core while waiting for the next request; no instruction count changes (a timed span
never includes waiting: the harness times computations only). The emulator is killed when the
``with`` block ends, whatever happens inside it; it runs in its own process group, registered with
:mod:`treegen.device.processes` (stopped at exit even if the ``with`` block is never left).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from treegen.core import targets as targets_mod
from treegen.core.errors import TreegenError
from treegen.device import processes

DEFAULT_QEMU = "qemu-system-arm"
DEFAULT_ARGS = ("-display", "none", "-monitor", "none", "-icount", "shift=0,align=off,sleep=on")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _proc_listening(port: int, pid: int | None = None) -> bool | None:
    """Whether some IPv4 socket listens on TCP ``port`` (from /proc/net/tcp) -- with ``pid``, a socket
    of that process (another process that took the same free port, e.g. a second QEMU started at the
    same moment by a parallel test worker, is not ours); None if unknown."""
    try:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return None
    suffix = f":{port:04X}"
    inodes = set()
    for line in lines:
        fields = line.split()
        if len(fields) > 9 and fields[1].endswith(suffix) and fields[3] == "0A":   # 0A = TCP_LISTEN
            inodes.add(f"socket:[{fields[9]}]")
    if not inodes or pid is None:
        return bool(inodes)
    try:
        fds = Path(f"/proc/{pid}/fd")
        return any(os.readlink(fd) in inodes for fd in fds.iterdir())
    except OSError:              # the process is gone (it failed), or its descriptors are not ours to read
        return None if Path(f"/proc/{pid}").exists() else False


def serial_args(emulator: dict, chardev: str = "u0") -> list[str]:
    """The ``-serial`` options: QEMU maps the n-th to the machine's n-th UART, so the harness's UART
    (``[emulator] uart_index``, default 0) gets the socket and the ones before it ``null``
    (netduinoplus2: USART2 is the second, ``-serial null -serial chardev:u0``)."""
    index = int(emulator.get("uart_index", 0))
    if not 0 <= index <= 7:
        raise TreegenError(f"[emulator] uart_index {index} is not 0..7")
    return ["-serial", "null"] * index + ["-serial", f"chardev:{chardev}"]


def _one_line(text: str, limit: int = 400) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


class EmulatorBoard:
    """Context manager running ``elf`` on the emulated ``target`` (name or Target) in an emulator
    process that serves the harness's UART on a TCP port; subclasses give the command.

    Attributes after ``__enter__``: ``port`` (TCP port), ``url`` (``socket://127.0.0.1:PORT``),
    ``command`` (the emulator's argument list), ``process`` (the Popen object); ``label`` names the
    emulator in messages.
    """

    label = "emulator"

    def __init__(self, target, elf, *, port: int | None = None, host: str = "127.0.0.1",
                 start_timeout: float = 10.0, extra_args=()):
        self.target = target if isinstance(target, targets_mod.Target) else targets_mod.get(str(target))
        if self.target.kind != "emulated":
            raise TreegenError(f"target {self.target.name!r} is not an emulated board (kind {self.target.kind!r})")
        self.elf = Path(elf)
        self.host = host
        self.port = port
        self.start_timeout = start_timeout
        self.extra_args = list(extra_args)
        self.process: subprocess.Popen | None = None
        self.command: list[str] = []
        self._stderr = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise TreegenError(f"{type(self).__name__} is not running")
        return f"socket://{self.host}:{self.port}"

    def _command(self, port: int) -> list[str]:          # pragma: no cover - the subclasses' job
        raise NotImplementedError

    def _stderr_text(self) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.seek(0)
            return self._stderr.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    def _listening(self) -> bool:
        """True once QEMU listens on the port, probed without connecting (a connection would be
        QEMU's one client): binding must fail, and where the kernel's socket table is readable
        (Linux /proc/net/tcp) the port must be in state LISTEN -- QEMU binds before it listens, and
        a client connecting in between is refused."""
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((self.host, self.port))
            except OSError:
                pass
            else:
                return False
        listening = _proc_listening(self.port, self.process.pid if self.process is not None else None)
        return True if listening is None else listening

    def start(self) -> "EmulatorBoard":
        if not self.elf.is_file():
            raise TreegenError(f"firmware {self.elf} not found")
        fixed_port = self.port is not None
        for attempt in range(3):
            port = self.port if self.port is not None else free_port(self.host)
            self.command = self._command(port)
            self._stderr = tempfile.TemporaryFile()
            try:
                self.process = processes.spawn(self.command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                               stderr=self._stderr)
            except OSError as exc:
                self.close()
                raise TreegenError(f"cannot start {self.command[0]}: {exc.strerror or exc}") from None
            self.port = port
            deadline = time.monotonic() + self.start_timeout
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    break
                if self._listening():
                    return self
                time.sleep(0.005)
            rc = self.process.poll()
            err = self._stderr_text()
            self.close()
            if rc is not None and "Address already in use" in err and attempt < 2 and not fixed_port:
                self.port = None   # lost a race for the free port: pick another one
                continue
            if rc is not None:
                raise TreegenError(f"{self.label} exited early with status {rc}: {_one_line(err) or 'no message'}")
            raise TreegenError(f"{self.label} did not open its UART socket within "
                               f"{self.start_timeout:.0f} s: {_one_line(err) or 'no message'}")
        raise TreegenError(f"{self.label} could not get a free TCP port")  # pragma: no cover

    def __enter__(self) -> "EmulatorBoard":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def poll(self) -> int | None:
        """The emulator's exit status, or None while it runs."""
        return None if self.process is None else self.process.poll()

    def stderr(self) -> str:
        """What the emulator wrote to stderr so far."""
        return self._stderr_text()

    def close(self) -> None:
        """Stop the emulator (idempotent)."""
        proc, self.process = self.process, None
        processes.stop(proc, grace=0)
        if self._stderr is not None:
            try:
                self._stderr.close()
            except OSError:
                pass
            self._stderr = None

    def wait(self) -> int:
        """Block until the emulator exits (e.g. ``treegen flash`` waiting for Ctrl-C); returns its status."""
        if self.process is None:
            raise TreegenError(f"{type(self).__name__} is not running")
        return processes.wait(self.process)


class QemuBoard(EmulatorBoard):
    """:class:`EmulatorBoard` on QEMU: ``-M machine``, the ELF by ``-kernel`` (or the target's
    ``firmware_option``), the harness's UART on ``-chardev socket,...,server=on,wait=on,nodelay=on``."""

    def __init__(self, target, elf, **kwargs):
        super().__init__(target, elf, **kwargs)
        if not self.target.emulator.get("machine") or self.target.emulator.get("engine", "qemu") != "qemu":
            raise TreegenError(f"target {self.target.name!r} is not run by QEMU (its [emulator] engine is "
                               f"{self.target.emulator.get('engine', 'qemu')!r})")
        self.label = f"QEMU ({self.target.emulator['machine']})"

    def _qemu(self) -> str:
        name = self.target.emulator.get("qemu", DEFAULT_QEMU)
        path = shutil.which(name)
        if path is None:
            package = "qemu-system-arm" if name == DEFAULT_QEMU else "qemu-system-misc"
            raise TreegenError(f"{name} not found: install QEMU (Debian package {package}, "
                               f"see scripts/setup.sh) to run the emulated target {self.target.name}")
        return path

    def _command(self, port: int) -> list[str]:
        emu = self.target.emulator
        return [self._qemu(), "-M", emu["machine"], emu.get("firmware_option", "-kernel"), str(self.elf),
                *emu.get("args", DEFAULT_ARGS), *self.extra_args,
                "-chardev", f"socket,id=u0,host={self.host},port={port},server=on,wait=on,nodelay=on",
                *serial_args(emu)]

