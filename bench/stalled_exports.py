"""Share-link clients that stop reading (issue 16 item 2): the figures.

`lineups serve` over a demo store whose whole result is larger than the socket
buffers; `--clients` connections each ask one of the demo buyer's share links
(`--links` of them), read the first bytes, and then read nothing. Reported: how many
were admitted and how many refused (429, the caps per link, buyer and process), the
server's resident memory before, while they stall and after the progress timeout
(`api.exports.ExportLimits.stall_s`), and when the last stalled one was cut off.
The tests (tests/reliability/test_stalled_exports.py) assert only behaviour.

    python -m bench stalled-exports
"""

from __future__ import annotations

import json
import socket
import tempfile
import time
from pathlib import Path

from bench.figures import Figure, Run, command
from bench.processes import Process, rss_mib, serve
from bench.soak import export_links, requests_rows
from bench.stores import build_demo
from store.database.db import make_engine, make_sessionmaker


def stall(base_url: str, url: str) -> tuple[socket.socket, int]:
    """A connection that asks `url`, reads its status line, then nothing more."""
    port = int(base_url.rsplit(":", 1)[1])
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {url.removeprefix(base_url)} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    sock.settimeout(60)
    return sock, int(sock.recv(1024).split(b" ", 2)[1])


def cut_off(log: Path) -> int:
    """Exports the server has cut off for want of progress, by its log."""
    return log.read_text(errors="replace").count(": the client read nothing for ")


def stall_round(server: Process, base_url: str, urls: list[str], clients: int) -> dict:
    """`clients` connections that stall; until the server has cut off every admitted
    one. Returns statuses, RSS while stalled and after, and when the last was cut."""
    cut_before = cut_off(server.log_path)
    began = time.monotonic()
    opened = [stall(base_url, urls[n % len(urls)]) for n in range(clients)]
    admitted = sum(1 for _, status in opened if status == 200)
    time.sleep(3)
    rss_stalled = rss_mib(server.pid)
    # The clients never read again: the server's log says when it cut each off.
    while cut_off(server.log_path) - cut_before < admitted and time.monotonic() - began < 120:
        time.sleep(0.2)
    all_cut_after = round(time.monotonic() - began, 1)
    time.sleep(2)
    for sock, _ in opened:
        sock.close()
    return {
        "statuses": {str(s): sum(1 for _, status in opened if status == s) for s in sorted({s for _, s in opened})},
        "rss_mib_stalled": round(rss_stalled, 1), "rss_mib_after_cut_off": round(rss_mib(server.pid), 1),
        "all_stalled_cut_off_after_s": all_cut_after, "still_open": admitted - (cut_off(server.log_path) - cut_before),
    }


def main(argv: list[str] | None = None) -> int:
    parser = command("stalled-exports", __doc__)
    parser.add_argument("--records", type=int, default=60_000)
    parser.add_argument("--clients", type=int, default=40)
    parser.add_argument("--links", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2, help="stall rounds, one after the other (memory given back?)")
    args = parser.parse_args(argv)
    run = Run("stalled-exports", args.results, argv)
    with tempfile.TemporaryDirectory(prefix="lineups-stalled-") as tmp:
        env, _ = build_demo(Path(tmp), args.records)
        with serve(Path(tmp), "serve", env) as server:
            engine = make_engine(env["LINEUPS_DB"])
            urls, _ = export_links(make_sessionmaker(engine), (env["LINEUPS_SECRET"],), server.base_url, args.links, keys=1)
            engine.dispose()
            rows = requests_rows(urls[0])  # merged and warm
            rss_before = rss_mib(server.pid)
            rounds = [stall_round(server, server.base_url, urls, args.clients) for _ in range(args.rounds)]
    print(json.dumps({"date": run.measured, "records": args.records, "rows_per_export": rows, "clients": args.clients,
                      "links": args.links, "rss_mib_before": round(rss_before, 1), "rounds": rounds}, indent=1))
    section = f"Share-link clients that stop reading ({args.clients} clients, {args.links} links)"
    last = rounds[-1]
    figures = [
        Figure("stalled.admitted", section, "exports admitted (the rest refused with 429)", "", [last["statuses"].get("200", 0)]),
        Figure("stalled.rss", section, "server RSS while they stall, over before", "MiB", [last["rss_mib_stalled"] - rss_before]),
        Figure("stalled.cut_off", section, "until every stalled export was cut off", "s", [last["all_stalled_cut_off_after_s"]]),
        Figure("stalled.rss_after", section, "server RSS after the cut-off, over before", "MiB",
               [last["rss_mib_after_cut_off"] - rss_before]),
    ]
    run.save(figures, args.records)
    return 0 if all(r["still_open"] == 0 for r in rounds) else 1
