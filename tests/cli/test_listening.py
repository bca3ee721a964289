"""Where `lineups serve` listens (`cli.listening`): with several processes on Linux the
parent only holds the port and each worker listens on a SO_REUSEPORT socket of its
own; with one process, or without SO_REUSEPORT, one listening socket is shared."""

from __future__ import annotations

import socket

import pytest

import cli.listening
from cli.listening import Listening, reuse_port_balances


def accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except (ConnectionRefusedError, ConnectionResetError):  # a closing socket resets what it had queued
        return False
    return True


def is_listening(sock: socket.socket) -> bool:
    return bool(sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))


@pytest.mark.skipif(not reuse_port_balances(), reason="needs SO_REUSEPORT on Linux")
def test_the_parent_holds_the_port_and_each_worker_listens_on_its_own_socket():
    listening = Listening.bind("127.0.0.1", 0, processes=2)
    try:
        assert listening.per_worker
        [held] = listening.bound
        port = held.getsockname()[1]
        assert port != 0 and not is_listening(held)
        assert not accepts(port)  # a bound socket that does not listen takes no connection
        with socket.socket() as other:  # a server without SO_REUSEADDR is kept out
            with pytest.raises(OSError):
                other.bind(("127.0.0.1", port))

        # What two forked workers do (each on its own copy of the parent's sockets).
        workers = [Listening([held.dup()], per_worker=True).worker_sockets() for _ in range(2)]
        try:
            for [sock] in workers:
                assert is_listening(sock) and sock.getsockname() == held.getsockname()
            assert accepts(port)
            with socket.socket() as other:  # now any other server is refused
                other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                with pytest.raises(OSError):
                    other.bind(("127.0.0.1", port))
            with pytest.raises(OSError):  # another `lineups serve` too: it does not join the workers
                Listening.bind("127.0.0.1", port, processes=2)
        finally:
            for [sock] in workers:
                sock.close()
        assert not accepts(port)
        assert held.fileno() != -1  # the parent's socket is kept: it holds the port
    finally:
        listening.close()


@pytest.mark.parametrize("processes", [1, 2])
def test_one_listening_socket_is_shared_with_one_process_or_without_reuse_port(monkeypatch, processes):
    if processes == 2:
        monkeypatch.setattr(cli.listening, "reuse_port_balances", lambda: False)
    listening = Listening.bind("127.0.0.1", 0, processes=processes)
    try:
        assert not listening.per_worker
        [sock] = listening.bound
        assert is_listening(sock)
        assert listening.worker_sockets() == [sock]
        assert accepts(sock.getsockname()[1])
    finally:
        listening.close()
