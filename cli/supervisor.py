"""The parent process of `lineups serve --processes N`: forks the workers and keeps
N of them running (production issue).

The port is bound before the fork (`cli.listening`), so every worker serves the same
port: on Linux each worker listens on a socket of its own bound with SO_REUSEPORT and
the kernel spreads new connections over them, while the parent's socket, which does
not listen, holds the port; elsewhere every worker accepts on the parent's socket.
Each worker makes its own engine, pools, caches and rate-limiter client after the
fork; the parent serves nothing and holds no database connection.

- A worker that dies (a crash, the out-of-memory killer, SIGKILL) is replaced while
  the others keep serving; after a second's pause if it died within a second of
  starting, so a worker that cannot start does not spin, and at most
  `max_restarts` times, after which the parent stops the rest and exits 1.
- A worker that exits with status 0 (someone sent it SIGTERM) is not replaced, as
  with `tornado.process.fork_processes`.
- SIGTERM or SIGINT to the parent: it closes its sockets and passes the signal on
  to every worker, which stops listening, finishes its requests in flight and
  exits. The parent exits 0 once all have exited cleanly; workers still running
  `kill_after` seconds later are killed.

Tornado's `fork_processes` keeps the workers' process ids to itself, so it cannot
pass a SIGTERM on, and it would restart workers that are stopping; hence this class.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import time
from typing import Callable

log = logging.getLogger("lineups.server")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_WATCHED = {signal.SIGCHLD, *STOP_SIGNALS}
#: A worker that dies sooner than this after starting is replaced after this pause.
QUICK_DEATH_S = 1.0


class Supervisor:
    """Forks `count` workers that each run `work(index)`, and supervises them."""

    def __init__(
        self,
        count: int,
        work: Callable[[int], None],
        sockets: list[socket.socket],
        max_restarts: int = 100,
        kill_after: float = 30.0,
    ):
        self.count = count
        self.work = work
        self.sockets = sockets
        self.max_restarts = max_restarts
        self.kill_after = kill_after
        self.workers: dict[int, tuple[int, float]] = {}  # pid -> (index, start time)
        self.pending: list[tuple[int, float]] = []  # (index, when) of replacements
        self.restarts = 0
        self.stopping_since: float | None = None
        self.unclean = False

    def run(self) -> int:
        """Fork the workers and supervise them until every one has exited; returns
        the parent's exit status. In a worker it never returns (the worker exits)."""
        # Signals wait in the mask for sigtimedwait; the handlers catch one that a
        # thread with an older mask (a progress bar's monitor) happens to take.
        for signum in STOP_SIGNALS:
            signal.signal(signum, lambda received, _frame: self.stop(received))
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)
        try:
            for index in range(self.count):
                self._fork(index, previous)
            while self.workers or self.pending:
                received = signal.sigtimedwait(_WATCHED, 0.5)
                if received is not None and received.si_signo in STOP_SIGNALS:
                    self.stop(received.si_signo)
                self._reap()
                self._replace_due(previous)
                self._kill_stragglers()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        log.info("All workers have exited")
        return 1 if self.unclean else 0

    def stop(self, signum: int = signal.SIGTERM) -> None:
        """Stop taking connections and ask every worker to finish and exit."""
        if self.stopping_since is None:
            self.stopping_since = time.monotonic()
            log.info("%s: stopping %d worker(s)", signal.Signals(signum).name, len(self.workers))
            for sock in self.sockets:
                sock.close()
            self.pending.clear()
        for pid in list(self.workers):
            _signal(pid, signum)

    # ------------------------------------------------------------ workers
    def _fork(self, index: int, mask: set) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the worker
            status = 1
            try:
                for signum in STOP_SIGNALS:
                    signal.signal(signum, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                self.work(index)
                status = 0
            except BaseException:
                log.exception("Worker %d failed", index)
            finally:
                os._exit(status)
        self.workers[pid] = (index, time.monotonic())
        log.info("Worker %d started (pid %d)", index, pid)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.workers:
                index, started = self.workers.pop(pid)
                self._exited(index, pid, os.waitstatus_to_exitcode(status), time.monotonic() - started)

    def _exited(self, index: int, pid: int, code: int, lived: float) -> None:
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"
        if self.stopping_since is not None:
            self.unclean |= code != 0
            log.log(logging.INFO if code == 0 else logging.WARNING, "Worker %d (pid %d) %s", index, pid, how)
            return
        if code == 0:
            log.info("Worker %d (pid %d) %s; not replaced", index, pid, how)
            return
        self.restarts += 1
        if self.restarts > self.max_restarts:
            log.error("Worker %d (pid %d) %s; %d restarts already: stopping", index, pid, how, self.max_restarts)
            self.unclean = True
            self.stop()
            return
        log.error("Worker %d (pid %d) %s; replacing it", index, pid, how)
        self.pending.append((index, time.monotonic() + (QUICK_DEATH_S if lived < QUICK_DEATH_S else 0.0)))

    def _replace_due(self, mask: set) -> None:
        now = time.monotonic()
        due = [entry for entry in self.pending if entry[1] <= now]
        for entry in due:
            self.pending.remove(entry)
            self._fork(entry[0], mask)

    def _kill_stragglers(self) -> None:
        if self.stopping_since is not None and time.monotonic() - self.stopping_since > self.kill_after:
            for pid in list(self.workers):
                log.warning("Worker pid %d still running %g s after the stop: killing it", pid, self.kill_after)
                _signal(pid, signal.SIGKILL)
            self.stopping_since = time.monotonic()  # once per period, not every turn


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:  # exited; reaped on the next turn
        pass
