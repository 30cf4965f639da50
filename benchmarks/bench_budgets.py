"""What a team's budgets cost a governed call on PostgreSQL: round trips and CPU.

The same executor pipeline, the same tool, the same run, on a throwaway PostgreSQL server
(127.0.0.1, ``fsync`` on), reached through a counting TCP proxy that counts the client's round
trips (each simple query, and each extended-protocol exchange up to its ``Sync``):

- a call with no budget (the baseline): no round trip;
- a call counted against three ``calls`` budgets at once (per principal, per run, per team):
  one statement, one round trip, whatever the number of budgets;
- a model request's check (before) and the addition of its usage (after), with ``tokens`` and
  ``cost`` budgets: one round trip each.

Goal: at most one round trip per governed call. Also printed: the client CPU per call, with
the budgets and without (same run, interleaved rounds, best round).

Run: .venv/bin/python benchmarks/bench_budgets.py [--quick]
(needs the ``postgres`` extra and the PostgreSQL server binaries).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from _results import record

from toolcards.core.identity import Identity
from toolcards.governance import CapabilityRegistry, Executor, Policy
from toolcards.stores.postgres.governance import PostgresBudgets

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.servers import PostgresServer

CAROL = Identity("agent.carol", "agent")
BUDGETS = [
    {"name": "mine", "per": "principal", "period": "day", "calls": 10**9},
    {"name": "this run", "per": "run", "calls": 10**9},
    {"name": "team", "per": "team", "calls": 10**9, "tokens": 10**12, "cost": 10.0**6},
]


async def ping(n: int) -> int:
    """Ping."""
    return n


class CountingProxy:
    """127.0.0.1:<port> forwarding to a PostgreSQL server, counting the client's round trips:
    simple queries (``Q``) and extended-protocol exchanges (each ``Sync``)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._listener = socket.create_server(("127.0.0.1", 0))
        port = self._listener.getsockname()[1]
        netloc = parts.netloc.rsplit(":", 1)[0] + f":{port}"
        self.url = urlunsplit(parts._replace(netloc=netloc))
        self.trips = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _ = self._listener.accept()
            server = socket.create_connection(self._target)
            threading.Thread(target=self._pipe, args=(server, client, None), daemon=True).start()
            threading.Thread(
                target=self._pipe, args=(client, server, self._count), daemon=True
            ).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, count: Any) -> None:
        buffer = b""
        started = False
        while True:
            data = src.recv(65536)
            if not data:
                dst.close()
                return
            dst.sendall(data)
            if count is None:
                continue
            buffer += data
            while True:
                if not started:  # untyped: an SSL or GSS request, then the startup message
                    if len(buffer) < 8:
                        break
                    length, code = struct.unpack("!II", buffer[:8])
                    if len(buffer) < length:
                        break
                    buffer = buffer[length:]
                    started = code not in (80877103, 80877104)
                    continue
                if len(buffer) < 5:
                    break
                kind, length = buffer[:1], struct.unpack("!I", buffer[1:5])[0]
                if len(buffer) < 1 + length:
                    break
                buffer = buffer[1 + length :]
                if kind in (b"Q", b"S"):
                    count()

    def _count(self) -> None:
        with self._lock:
            self.trips += 1


def per_call_trips(proxy: CountingProxy, fn: Any, n: int) -> float:
    before = proxy.trips
    for i in range(n):
        fn(i)
    return (proxy.trips - before) / n


def cpu(fn: Any, n: int) -> float:
    start = time.process_time()
    for i in range(n):
        fn(i)
    return (time.process_time() - start) / n * 1e6


def main(quick: bool) -> None:
    n, rounds = (20, 1) if quick else (500, 5)
    try:
        server = PostgresServer(fsync=True).start()
    except (RuntimeError, FileNotFoundError, KeyError) as exc:
        print(f"skipped: no PostgreSQL server here ({exc})")
        return
    try:
        url = server.fresh_database("budgets")
        proxy = CountingProxy(url)
        store = PostgresBudgets(proxy.url, "bench")
        direct = PostgresBudgets(url, "bench")  # CPU is measured without the proxy's threads
        registry = CapabilityRegistry.from_tools([ping])
        with_budgets = Policy.from_dict({"default_effect": "allow", "budgets": BUDGETS})
        budgeted = Executor(registry, with_budgets, budgets=store)
        plain = Executor(registry, Policy.allow_all(), budgets=store)
        loop = asyncio.new_event_loop()

        def call(executor: Executor) -> Any:
            def one(i: int) -> None:
                done = loop.run_until_complete(
                    executor.call("ping", {"n": i}, CAROL, run_id="run-1")
                )
                assert done.ok, done.message

            return one

        def check(i: int) -> None:
            assert budgeted.budgets.check_model(with_budgets, CAROL, "run-1") is None

        def spend(i: int) -> None:
            budgeted.budgets.spend_model(with_budgets, CAROL, "run-1", f"m/{i}", 100, 0.001)

        call(budgeted)(0)  # warm: connection, plans, counters
        trips = {
            "call, no budget": per_call_trips(proxy, call(plain), n),
            "call, three calls budgets": per_call_trips(proxy, call(budgeted), n),
            "model request check (tokens, cost)": per_call_trips(proxy, check, n),
            "model response usage added": per_call_trips(proxy, spend, n),
        }
        unproxied = Executor(registry, with_budgets, budgets=direct)
        plain_direct = Executor(registry, Policy.allow_all(), budgets=direct)
        call(unproxied)(0)
        best = {"no budget": float("inf"), "three budgets": float("inf")}
        for _ in range(rounds):
            best["no budget"] = min(best["no budget"], cpu(call(plain_direct), n))
            best["three budgets"] = min(best["three budgets"], cpu(call(unproxied), n))
        loop.close()
        store.close()
        direct.close()
    finally:
        server.stop()
    print(f"{'path':40} {'round trips per use':>20}")
    for name, value in trips.items():
        print(f"{name:40} {value:20.2f}")
    print(
        f"\nclient CPU per call: {best['three budgets']:.1f} us with three budgets, "
        f"{best['no budget']:.1f} us without (same run)"
    )
    record(
        "PostgreSQL round trips per governed call, three calls budgets",
        trips["call, three calls budgets"],
        "round trips",
        peer="the same call with no budget",
        peer_value=trips["call, no budget"] or None,
        goal="<= 1",
    )
    record(
        "client CPU per governed call, three budgets on PostgreSQL",
        best["three budgets"],
        "us",
        peer="the same call with no budget",
        peer_value=best["no budget"],
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="20 calls, 1 round (a smoke run)")
    main(parser.parse_args().quick)
