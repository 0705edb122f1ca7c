"""A running Dask scheduler's address, checked before Dask is given it: the address must be
``tcp://HOST:PORT`` (or ``HOST:PORT``), and the listener there must answer as a Dask scheduler does
within a deadline — a refused port, an address that drops packets, a listener that says nothing,
one that speaks another protocol (an SSH or HTTP server, garbage) each give one line
(:class:`TreegenError`) within ``timeout`` seconds, instead of Dask's retries, hangs and tracebacks.

What is checked: a Dask server speaks first — on accepting a connection it sends its handshake, one
message framed as Dask's TCP comm frames every message (an 8-byte little-endian length, then the
frames: their count, their lengths, the bytes), holding the fields ``compression``, ``python`` and
``pickle-protocol`` (msgpack). The probe reads that message and closes the connection.
"""

from __future__ import annotations

import re
import socket
import struct
import time

from treegen.core.errors import TreegenError

#: a handshake is a few hundred bytes; anything claiming more is not a Dask scheduler
MAX_HANDSHAKE = 1 << 16
_ADDRESS = re.compile(r"^(?:tcp://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})$")


def parse_address(text: str) -> tuple[str, int, str]:
    """``(host, port, "tcp://host:port")`` of ``tcp://HOST:PORT`` or ``HOST:PORT``; other forms
    (another scheme such as ``foo://``, no port, a port outside 1..65535) raise :class:`TreegenError`."""
    m = _ADDRESS.match(str(text).strip())
    if m is None:
        scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://", str(text))
        why = f"the {scheme.group(1)}:// scheme is not supported" if scheme and scheme.group(1) != "tcp" else \
            "expected tcp://HOST:PORT"
        raise TreegenError(f"scheduler address must look like tcp://HOST:PORT, got {text!r} ({why})")
    host, port = m.group(1), int(m.group(2))
    if not 1 <= port <= 65535:
        raise TreegenError(f"scheduler address {text!r}: port must be 1..65535, got {port}")
    return host.strip("[]"), port, f"tcp://{host}:{port}"


def _read_exactly(sock: socket.socket, n: int, deadline: float) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionResetError("closed the connection")
        buf += chunk
    return bytes(buf)


def _handshake_problem(payload: bytes) -> str | None:
    """What makes ``payload`` (the bytes after the length) no Dask handshake (None: it is one)."""
    if len(payload) < 8:
        return "a message too short for Dask's framing"
    (n_frames,) = struct.unpack_from("<Q", payload, 0)
    if not 1 <= n_frames <= 64 or len(payload) < 8 * (1 + n_frames):
        return "a message not framed as Dask's"
    lengths = struct.unpack_from(f"<{n_frames}Q", payload, 8)
    if 8 * (1 + n_frames) + sum(lengths) != len(payload):
        return "a message not framed as Dask's"
    if b"pickle-protocol" not in payload or b"compression" not in payload:
        return "a message that is not Dask's handshake"
    return None


def probe(host: str, port: int, timeout: float) -> None:
    """Connect to ``host:port`` and read a Dask scheduler's handshake, all within ``timeout`` seconds;
    :class:`TreegenError` (one line, saying what was found there) otherwise."""
    where = f"the Dask scheduler at tcp://{host}:{port}"
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except socket.gaierror as exc:
        raise TreegenError(f"cannot reach {where}: unknown host ({exc.strerror or exc})") from None
    except TimeoutError:
        raise TreegenError(f"cannot reach {where}: no answer to the connection within {timeout:g} s "
                           "(a firewall or a wrong address?)") from None
    except OSError as exc:
        raise TreegenError(f"cannot reach {where}: {exc.strerror or type(exc).__name__}") from None
    try:
        try:
            head = _read_exactly(sock, 8, deadline)
        except TimeoutError:
            raise TreegenError(f"cannot reach {where}: a server listens there but sent nothing within "
                               f"{timeout:g} s (a Dask scheduler greets first: another service?)") from None
        except OSError as exc:
            raise TreegenError(f"cannot reach {where}: the server {exc.strerror or exc} before greeting "
                               "(not a Dask scheduler?)") from None
        (size,) = struct.unpack("<Q", head)
        if head.startswith((b"SSH-", b"HTTP/")) or (head.isascii() and head.decode().isprintable()):
            raise TreegenError(f"cannot reach {where}: the server there is not a Dask scheduler (it greeted with "
                               f"{head.decode('ascii')!r}...)")
        if not 16 <= size <= MAX_HANDSHAKE:
            raise TreegenError(f"cannot reach {where}: the server there is not a Dask scheduler (its first bytes "
                               "are not Dask's framing)")
        try:
            payload = _read_exactly(sock, size, deadline)
        except (TimeoutError, OSError):
            raise TreegenError(f"cannot reach {where}: the server there is not a Dask scheduler (its greeting "
                               f"was cut short)") from None
        problem = _handshake_problem(payload)
        if problem:
            raise TreegenError(f"cannot reach {where}: the server there is not a Dask scheduler (it sent {problem})")
    finally:
        sock.close()
