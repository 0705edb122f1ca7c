"""``--scheduler`` of compare and cv (issue 24, part A): an address that is not tcp://HOST:PORT is
refused at once; every connection failure — nothing listening, packets dropped (a black hole), a
listener that says nothing, one that speaks garbage, an SSH or HTTP server — is one line, exit 2,
no traceback, within 10 s, and leaves no thread or process behind."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from conftest import run_cli
from rel_util import DATASETS

IRIS = DATASETS / "irs.csv.gz"
BANNERS = {"garbage": b"\x00\xff\x13\x37 not a handshake \xfe" * 8,
           "ssh": b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n",
           "http": b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
           "huge-frame": (1 << 40).to_bytes(8, "little"),
           "not-a-handshake": (24).to_bytes(8, "little") + (1).to_bytes(8, "little") + (8).to_bytes(8, "little")
           + b"8 bytes!"}


class Listener:
    """A TCP listener on 127.0.0.1 that sends ``banner`` (or nothing) to every client and then waits."""

    def __init__(self, banner: bytes | None):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.banner, self.conns, self.stopped = banner, [], False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.banner:
                try:
                    conn.sendall(self.banner)
                except OSError:
                    pass

    def close(self):
        self.stopped = True
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.fixture
def black_hole():
    """A port whose accept queue is full: new connections get no SYN-ACK (as an address that drops packets)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(0)
    port, held = s.getsockname()[1], []
    while True:
        c = socket.socket()
        c.settimeout(0.3)
        try:
            c.connect(("127.0.0.1", port))
        except OSError:
            c.close()
            break
        held.append(c)
    yield port
    for c in held:
        c.close()
    s.close()


def _cv(address):
    return ["cv", IRIS, "--algo", "cart", "--folds", "2", "-q", "--scheduler", address]


def _compare(tmp_path, address):
    return ["compare", IRIS, "--algos", "cart", "--folds", "2", "-q", "--json", tmp_path / "o.json",
            "--scheduler", address]


def _one_line_within_10s(capsys, argv, says: str) -> str:
    threads = set(threading.enumerate())
    t0 = time.monotonic()
    code, out, err = run_cli(capsys, argv)
    took = time.monotonic() - t0
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("treegen: error: "), (code, err[-2000:])
    assert says in lines[0], lines[0]
    assert took < 10, f"{took:.1f} s: {lines[0]}"
    left = [t for t in threading.enumerate() if t not in threads and t.is_alive()]
    assert not left, left                         # no Dask client thread left running
    return lines[0]


@pytest.mark.parametrize("address, says", [
    ("foo://127.0.0.1:8786", "the foo:// scheme is not supported"),
    ("tls://127.0.0.1:8786", "the tls:// scheme is not supported"),
    ("127.0.0.1", "must look like tcp://HOST:PORT"),
    ("tcp://127.0.0.1:0", "port must be 1..65535"),
    ("tcp://127.0.0.1:65536", "port must be 1..65535"),
    ("tcp://a b:1", "must look like tcp://HOST:PORT"),
], ids=["foo-scheme", "tls-scheme", "no-port", "port-0", "port-65536", "space"])
def test_a_malformed_address_is_refused_at_once(capsys, tmp_path, address, says):
    for argv in (_cv(address), _compare(tmp_path, address)):
        line = _one_line_within_10s(capsys, argv, says)
        assert "argument --scheduler" in line        # refused by the parser: nothing ran
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("kind", list(BANNERS))
def test_a_listener_that_is_not_a_scheduler(capsys, tmp_path, kind):
    srv = Listener(BANNERS[kind])
    try:
        line = _one_line_within_10s(capsys, _compare(tmp_path, f"tcp://127.0.0.1:{srv.port}"),
                                    "is not a Dask scheduler")
    finally:
        srv.close()
    assert ("SSH-2.0-" in line) == (kind == "ssh")
    assert not (tmp_path / "o.json").exists() and not (tmp_path / "o.tasks.jsonl").exists()


def test_a_listener_that_says_nothing(capsys):
    srv = Listener(None)
    try:
        _one_line_within_10s(capsys, _cv(f"tcp://127.0.0.1:{srv.port}"), "sent nothing within")
    finally:
        srv.close()


def test_a_black_hole(capsys, black_hole):
    _one_line_within_10s(capsys, _cv(f"tcp://127.0.0.1:{black_hole}"), "cannot reach the Dask scheduler")


def test_nothing_listening_and_an_unknown_host(capsys, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]            # closed again: nothing listens there
    _one_line_within_10s(capsys, _compare(tmp_path, f"127.0.0.1:{port}"), "Connection refused")
    _one_line_within_10s(capsys, _cv("tcp://no-such-host.invalid:8786"), "unknown host")


def test_a_greeting_cut_short_gives_up_at_the_deadline():
    """The probe's deadline covers the whole greeting (a length announced, fewer bytes sent)."""
    from treegen.core.errors import TreegenError
    from treegen.learn.scheduler import probe

    srv = Listener((200).to_bytes(8, "little") + b"\x01" + b"\x00" * 7)
    t0 = time.monotonic()
    try:
        with pytest.raises(TreegenError, match="its greeting was cut short"):
            probe("127.0.0.1", srv.port, 1.0)
    finally:
        srv.close()
    assert time.monotonic() - t0 < 2
