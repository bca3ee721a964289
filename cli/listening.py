"""Where `lineups serve` listens: one socket that every process shares, or, with
`--processes N` on Linux, a socket of its own in each worker (production issue;
found by `python -m bench scaling`).

Workers that accept on one shared socket share its connections badly: the worker
that wakes first takes the connection, and keep-alive clients stay on the worker
they landed on, so in one pass 4 keep-alive connections all went to one of two
workers. With `SO_REUSEPORT` each worker listens on a socket of its own bound to the
same address and port, and the kernel hands each new connection to one of those
sockets (by a hash of the connection's addresses and ports).

The parent still binds the port before any fork, so that a port in use is a
start-up error and `--port 0` gives every worker the same port: it binds without
listening (a socket that does not listen is given no connection) and keeps that
socket until it stops, holding the port while workers come and go. It binds without
`SO_REUSEPORT`: a port that another server holds, even another `lineups serve`
whose workers listen with `SO_REUSEPORT`, is refused rather than shared. (While no
worker listens, at start-up or while every worker is being replaced, the parent's
socket keeps out only programs that bind without `SO_REUSEADDR`; Linux lets sockets
that all set it share a port that none listens on.)

Elsewhere (no `SO_REUSEPORT`, or not Linux, where it does not balance), and with
one process, the parent's sockets listen and every process accepts on them, as
`tornado.netutil.bind_sockets` makes them.

What a socket per worker costs: the kernel queues a new connection on one worker's
socket, where it waits for that worker even if another is idle, and when a worker
dies its socket closes with the connections still queued on it. Those are reset,
unless the kernel hands them to another worker's socket, which Linux 5.14 and later
do with the setting `net.ipv4.tcp_migrate_req = 1` (`migrates_queued_connections`;
off by default). On a shared socket they waited for another worker.
"""

from __future__ import annotations

import errno
import socket
import sys

#: Connections waiting to be accepted, per listening socket (Tornado's default).
BACKLOG = 128


def reuse_port_balances() -> bool:
    """True where sockets bound with SO_REUSEPORT share the new connections (Linux)."""
    return sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


def migrates_queued_connections() -> bool:
    """Whether the kernel moves the connections queued on a closing SO_REUSEPORT
    socket to another socket of the port (`net.ipv4.tcp_migrate_req`, Linux 5.14+)."""
    try:
        with open("/proc/sys/net/ipv4/tcp_migrate_req") as setting:
            return setting.read().strip() == "1"
    except OSError:
        return False


class Listening:
    """The sockets that the parent bound (`bound`), and how each serving process
    gets the ones it accepts on (`worker_sockets`)."""

    def __init__(self, bound: list[socket.socket], per_worker: bool):
        self.bound = bound
        #: Each worker listens on its own SO_REUSEPORT sockets; `bound` only holds the port.
        self.per_worker = per_worker

    @classmethod
    def bind(cls, host: str, port: int, processes: int) -> "Listening":
        """Bind `host`:`port` in the parent, before any fork. Raises OSError (a port
        in use, an address that is not this machine's)."""
        if processes > 1 and reuse_port_balances():
            return cls(_bind_only(host, port), per_worker=True)
        from tornado.netutil import bind_sockets

        return cls(bind_sockets(port, host or None, backlog=BACKLOG), per_worker=False)

    @property
    def port(self) -> int:
        """The port bound (the one the kernel chose, for port 0)."""
        return self.bound[0].getsockname()[1]

    def describe(self) -> str:
        return ", ".join(_address(sock) for sock in self.bound)

    def worker_sockets(self) -> list[socket.socket]:
        """The listening sockets of this serving process. Per worker: new sockets
        bound with SO_REUSEPORT to the addresses the parent holds (called in the
        forked worker, which then closes its copies of the parent's sockets: the
        parent holds the port). Otherwise the parent's sockets, shared."""
        if not self.per_worker:
            return self.bound
        own: list[socket.socket] = []
        try:
            for held in self.bound:
                sock = _new_socket(held.family, held.proto, reuse_port=True)
                own.append(sock)
                sock.bind(held.getsockname())
                sock.listen(BACKLOG)
        except BaseException:
            for sock in own:
                sock.close()
            raise
        for held in self.bound:
            held.close()
        return own

    def close(self) -> None:
        for sock in self.bound:
            sock.close()


def _bind_only(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to every address of `host` (as `bind_sockets` resolves it) and
    one port (`port`, or the one the first bind got for port 0), not listening."""
    family = socket.AF_UNSPEC if socket.has_ipv6 else socket.AF_INET
    found = socket.getaddrinfo(host or None, port, family, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
    bound: list[socket.socket] = []
    try:
        for family, _, proto, _, address in sorted(dict.fromkeys(found), key=lambda res: res[0]):
            if port == 0 and bound:
                address = (address[0], bound[0].getsockname()[1], *address[2:])
            try:
                sock = _new_socket(family, proto, reuse_port=False)
            except OSError as exc:
                if exc.errno == errno.EAFNOSUPPORT:
                    continue
                raise
            try:
                sock.bind(address)
            except OSError as exc:
                sock.close()
                # IPv6 half disabled (as in some containers): skipped, as bind_sockets does.
                if exc.errno == errno.EADDRNOTAVAIL and host == "localhost" and address[0] == "::1":
                    continue
                raise
            bound.append(sock)
    except BaseException:
        for sock in bound:
            sock.close()
        raise
    return bound


def _new_socket(family: int, proto: int, reuse_port: bool) -> socket.socket:
    """A non-blocking TCP socket with the options `bind_sockets` sets."""
    sock = socket.socket(family, socket.SOCK_STREAM, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:  # IPv6 only, beside its own IPv4 socket
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"[{host}]:{port}" if sock.family == socket.AF_INET6 else f"{host}:{port}"
