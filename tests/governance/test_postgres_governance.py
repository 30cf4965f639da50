"""Governance state shared by the processes of a team through PostgreSQL."""

from __future__ import annotations

import re
import subprocess
import textwrap

from support.launch import PYTHON
from toolcards.governance import ApprovalBroker, Identity
from toolcards.governance.approvals.broker import ApprovalState
from toolcards.governance.policy.parse import Limit
from toolcards.stores.postgres.governance import PostgresApprovalStore, PostgresRateLimiter

LIMITER = textwrap.dedent(
    """
    import re, sys
    from toolcards.governance.policy.parse import Limit
    from toolcards.stores.postgres.governance import PostgresRateLimiter
    limiter = PostgresRateLimiter(sys.argv[1], "t")
    anything = re.compile(".*")
    limit = Limit(0, anything, anything, 5, 60.0, "5/min")
    print(sum(1 for _ in range(5) if limiter.acquire((limit,), "agent.x", "send") == 0.0))
    limiter.close()
    """
)


def test_a_limit_of_five_a_minute_holds_across_four_processes(postgres_url: str) -> None:
    procs = [
        subprocess.Popen([PYTHON, "-c", LIMITER, postgres_url], stdout=subprocess.PIPE)
        for _ in range(4)
    ]
    allowed = sum(int(proc.communicate(timeout=120)[0]) for proc in procs)
    assert allowed == 5  # 20 attempts from 4 processes, one shared bucket


def test_a_refused_call_reports_the_wait_and_takes_nothing(postgres_url: str) -> None:
    limiter = PostgresRateLimiter(postgres_url, "t")
    try:
        limit = Limit(0, re.compile(".*"), re.compile(".*"), 2, 60.0, "2/min")
        assert limiter.acquire((limit,), "a", "t") == 0.0
        assert limiter.acquire((limit,), "a", "t") == 0.0
        wait = limiter.acquire((limit,), "a", "t")
        assert 0.0 < wait <= 30.0
        assert limiter.acquire((limit,), "b", "t") == 0.0  # per principal
    finally:
        limiter.close()


GRANTER = textwrap.dedent(
    """
    import sys
    from toolcards.governance import ApprovalBroker, Identity
    from toolcards.stores.postgres.governance import PostgresApprovalStore
    broker = ApprovalBroker(store=PostgresApprovalStore(sys.argv[1], "t"))
    (pending,) = broker.pending()
    broker.grant(pending.approval_id, approver=Identity("boss", roles=["approver"]))
    print(pending.tool_id)
    """
)


def test_a_grant_in_another_process_releases_the_waiting_call(postgres_url: str) -> None:
    import asyncio

    broker = ApprovalBroker(store=PostgresApprovalStore(postgres_url, "t"))
    carol = Identity("carol", roles=["finance"])
    request = broker.request(
        tool_id="wire",
        args={"amount": 5},
        identity=carol,
        reason="check",
        call_id="call-1",
    )

    async def wait_and_grant() -> ApprovalState:
        waiting = asyncio.ensure_future(broker.wait(request, timeout=30))
        await asyncio.sleep(0.2)
        out = await asyncio.to_thread(
            subprocess.run,
            [PYTHON, "-c", GRANTER, postgres_url],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.stdout.strip() == "wire", out.stderr
        return await waiting

    assert asyncio.run(wait_and_grant()) is ApprovalState.GRANTED
    binding = {"tool_id": "wire", "args_digest": request.args_digest, "principal": "carol"}
    assert broker.settle("call-1", **binding)[0] is ApprovalState.GRANTED  # runs once...
    assert broker.settle("call-1", **binding)[0] is ApprovalState.EXPIRED  # ...only once
