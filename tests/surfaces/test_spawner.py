"""Spawner: tasks started in an anyio group from other threads and from loop callbacks
(where anyio alone refuses when sniffio is installed), dropped after close."""

from __future__ import annotations

import asyncio
import threading

import anyio
import pytest

from toolcards.surfaces.mcp_server.spawner import Spawner

pytestmark = pytest.mark.anyio


async def test_jobs_from_a_thread_and_a_loop_callback_run_in_the_group() -> None:
    ran: list[str] = []
    done = anyio.Event()

    async def job(name: str) -> None:
        ran.append(name)
        if len(ran) == 2:
            done.set()

    async with anyio.create_task_group() as tasks:
        spawner = Spawner(tasks)
        threading.Thread(target=spawner.spawn, args=(job, "thread")).start()
        asyncio.get_running_loop().call_soon(spawner.spawn, job, "callback")
        with anyio.fail_after(5):
            await done.wait()
        spawner.close()
    assert sorted(ran) == ["callback", "thread"]


async def test_after_close_jobs_are_dropped_and_the_group_ends() -> None:
    ran: list[str] = []

    async def job() -> None:
        ran.append("ran")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            spawner = Spawner(tasks)
            spawner.close()
            spawner.spawn(job)
    assert ran == []


async def test_a_job_failure_is_the_groups_error() -> None:
    async def broken() -> None:
        raise ValueError("boom")

    caught: list[BaseException] = []
    try:
        async with anyio.create_task_group() as tasks:
            Spawner(tasks).spawn(broken)
            await anyio.sleep(5)
    except BaseExceptionGroup as group:
        caught.extend(group.exceptions)
    assert [type(e) for e in caught] == [ValueError]
