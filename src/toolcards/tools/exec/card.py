"""ExecTool: run commands in the team workspace, sandboxed, bounded, and failing closed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import Field, PrivateAttr, field_validator

from toolcards.core.card import CardCapability, ToolCard, ToolFunc
from toolcards.core.channels import Channels
from toolcards.core.params import BaseToolParam
from toolcards.core.pathargs import PathArgs
from toolcards.core.progress import progress_enabled, report_progress
from toolcards.core.spec import annotate
from toolcards.core.trust import HostAccess, Reach
from toolcards.tools._common.caller import caller_address, governed_writer
from toolcards.tools._common.workspace_dir import workspace_dir, workspace_id_for
from toolcards.tools.exec.backends import check_mode, isolating
from toolcards.tools.exec.backends.docker import DEFAULT_IMAGE, check_image
from toolcards.tools.exec.command import (
    ANY_PROGRAM,
    DEFAULT_ALLOWED_COMMANDS,
    canonical_command,
    check_allowed_entry,
)
from toolcards.tools.exec.limits import ExecLimits
from toolcards.tools.exec.service import ExecService, ExecSettings, service_for

DEFAULT_ENV_ALLOW = ["LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ"]
STANDALONE_TEAM = "standalone"


T = TypeVar("T")


class ExecCommand(BaseToolParam):
    """``exec_command(command)``: run one command and wait for its result."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.TOOL_CALL})


class ExecJobs(BaseToolParam):
    """``exec_start(command)`` and ``exec_result(job_id)``: long commands in the background."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.TOOL_CALL})


class ExecTool(ToolCard):
    """Command execution in the team workspace under a sandbox backend.

    ``mode="auto"`` picks the best isolating backend (bwrap on Linux, seatbelt on macOS,
    docker when a daemon answers) and raises when none is available; it never falls back to
    running unconfined. ``mode="local"`` runs on the host and is only used when chosen. Other
    names are backends registered with ``register_backend`` or installed in the
    ``toolcards.exec_backends`` entry-point group.

    A command may start with a program of ``allowed_commands``: by default a short list of
    file readers, Python build and test tools and read-only git subcommands
    (``DEFAULT_ALLOWED_COMMANDS``); any program only with ``allowed_commands="any"``.

    Loaded from data, the card needs the host's trust (``HostTrust``) for a ``mode`` that does
    not isolate (``execution=["local"]``), for ``env_allow`` names beyond the default
    (``env=[...]``), for ``network=True`` (``private_network=True``) and for a
    ``docker_image`` other than the default (``execution=[image]``). The allowlist needs none:
    the sandbox is the boundary, and the default list already holds ``python3``.
    """

    mode: Annotated[
        str,
        HostAccess(Reach.EXECUTION, "runs commands unconfined on this host", safe=isolating),
    ] = "auto"
    workspace_id: str | None = None
    """The workspace directory (default: the team's, as for WorkspaceTool)."""
    _workspaces_root: str | None = PrivateAttr(default=None)
    timeout_s: float = Field(default=60.0, gt=0, le=24 * 3600)
    limits: ExecLimits = Field(default_factory=ExecLimits)
    allowed_commands: list[str] | Literal["any"] = Field(
        default_factory=lambda: list(DEFAULT_ALLOWED_COMMANDS)
    )
    """Programs a command may start with (its first word, by name; ``"git log"`` allows git
    with that subcommand only). Default: ``DEFAULT_ALLOWED_COMMANDS`` (file readers, Python
    build and test tools, read-only git). ``"any"``: any program, only when set so. A
    started program may start others (``env sh -c``, ``find -exec``, ``make``): this list
    is not a boundary, the sandbox is. A shell as the first word needs to be listed."""
    env_allow: Annotated[
        list[str], HostAccess(Reach.ENV, "passes a host variable to every command", each="item")
    ] = Field(default_factory=lambda: list(DEFAULT_ENV_ALLOW))
    """Host environment variables passed through; everything else is scrubbed."""
    network: Annotated[
        bool, HostAccess(Reach.NETWORK, "gives commands this host's network, loopback included")
    ] = False
    max_concurrent: int = Field(default=4, ge=1, le=64)
    docker_image: Annotated[
        str | None,
        HostAccess(
            Reach.EXECUTION,
            "is pulled (with this host's registry logins) and run by this host's docker daemon",
            safe=lambda image: image == DEFAULT_IMAGE,
        ),
    ] = None
    """The docker backend's image (default ``DEFAULT_IMAGE``). The host's daemon pulls it from
    the registry it names, a private-network one included, and runs it on the workspace."""
    exec_command: bool | ExecCommand = True
    exec_jobs: bool | ExecJobs = True

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, mode: str) -> str:
        return check_mode(mode)

    @field_validator("docker_image")
    @classmethod
    def _an_image(cls, image: str | None) -> str | None:
        return None if image is None else check_image(image)

    @field_validator("allowed_commands", mode="before")
    @classmethod
    def _plain_names(cls, names: Any) -> Any:
        if names is None:
            raise ValueError(
                'allowed_commands=None is not a choice: give a list of programs, or "any" '
                "for any program (leave it out for the default list)"
            )
        if isinstance(names, list):
            for name in names:
                if isinstance(name, str):
                    check_allowed_entry(name)
        return names

    def settings(self) -> ExecSettings:
        """The hashable settings that key the team's exec service."""
        chosen = self.allowed_commands
        allowed = None if chosen == ANY_PROGRAM else tuple(sorted(set(chosen)))
        return ExecSettings(
            mode=self.mode,
            timeout_s=self.timeout_s,
            limits=self.limits,
            allowed_commands=allowed,
            env_allow=tuple(sorted(set(self.env_allow))),
            network=self.network,
            max_concurrent=self.max_concurrent,
            docker_image=self.docker_image,
        )

    def service(self) -> ExecService:
        """The team's exec service (created, and its backend chosen, on first use)."""
        team = getattr(self.observer_or_none(), "team_id", None) or STANDALONE_TEAM
        return service_for(str(team), self.settings())

    def use_workspaces_root(self, root: str | Path) -> None:
        """Keep this card's workspaces under ``root`` (the host's choice, e.g. a surfaces
        config's ``workspaces:``; never read from card data, which could name ``/``)."""
        self._workspaces_root = str(root)

    def workspace(self) -> Path:
        """The workspace directory commands run in."""
        return workspace_dir(self.workspace_id, self.observer_or_none(), root=self._workspaces_root)

    def _bound_workspace(self) -> Callable[[], Path]:
        """The workspace resolver fixed at binding (the owner is held weakly and may go)."""
        chosen = workspace_id_for(self.workspace_id, self.observer_or_none())
        root = self._workspaces_root
        return lambda: workspace_dir(chosen, None, root=root)

    def _bound_caller(self) -> Callable[[], str]:
        """Who calls the bound tools, as ``writer_of`` says (the governed call's principal,
        else the member), with the member fixed at binding: the owner is held weakly."""
        address = caller_address(self)
        return lambda: governed_writer(address)

    def _about(self, service: ExecService) -> str:
        allowed = self.allowed_commands
        programs = (
            "any program"
            if allowed == ANY_PROGRAM
            else f"{', '.join(allowed)} (the program a command starts with; what it runs in "
            "turn is bounded by the confinement above)"
        )
        where = service.backend.workdir or "the workspace directory"
        return (
            f"Runs in {where}; {service.backend.describe(self.network)}. "
            f"Allowed: {programs}. Timeout {self.timeout_s:g}s; output keeps the head and "
            "tail of each stream."
        )

    def _binding(self) -> tuple[ExecService, Callable[[], Path], str, bool]:
        service = self.service()  # fails closed here, at binding, when no sandbox works
        open_world = self.network or not service.backend.isolating
        return service, self._bound_workspace(), self._about(service), open_world

    def _command_tool(self, param: ExecCommand) -> ToolFunc:
        service, workspace, about, open_world = self._binding()
        return self._exec_command(service, workspace, about, param, open_world)

    def _job_tools(self, param: ExecJobs) -> list[ToolFunc]:
        service, workspace, about, open_world = self._binding()
        return self._jobs(service, workspace, self._bound_caller(), about, param, open_world)

    def _exec_command(
        self,
        service: ExecService,
        workspace: Callable[[], Path],
        about: str,
        param: BaseToolParam,
        open_world: bool,
    ) -> ToolFunc:
        async def exec_command(command: str) -> str:
            run = service.run_async(command, workspace())
            return (await with_elapsed_progress(run, "running")).render()

        exec_command.__doc__ = _doc(
            "Run one command (program and arguments, shell-style quoting) and return its "
            "exit code, stdout and stderr.",
            about,
            'command: e.g. "pytest -q tests/test_x.py". No pipes or redirections.',
        )
        annotate(
            exec_command,
            destructive=True,
            open_world=open_world,
            long_running=True,
            paths=_command_arg(service),
        )
        return exec_command

    def _jobs(
        self,
        service: ExecService,
        workspace: Callable[[], Path],
        caller: Callable[[], str],
        about: str,
        param: BaseToolParam,
        open_world: bool,
    ) -> list[ToolFunc]:
        async def exec_start(command: str) -> str:
            job_id = service.start(command, workspace(), caller())
            return f"job_id: {job_id}\nstatus: running"

        async def exec_result(job_id: str, wait_s: float = 0.0) -> str:
            """The result of a job started with exec_start, or its status if still running.

            Args:
                job_id: The id exec_start returned.
                wait_s: Seconds to wait for the job to finish before answering.
            """
            result = await service.result_async(job_id, wait_s, caller())
            if result is None:
                return f"job_id: {job_id}\nstatus: running"
            return f"job_id: {job_id}\nstatus: finished\n{result.render()}"

        exec_start.__doc__ = _doc(
            "Start a long command in the background; returns a job id for exec_result.",
            about,
            'command: e.g. "make test". No pipes or redirections.',
        )
        annotate(exec_start, destructive=True, open_world=open_world, paths=_command_arg(service))
        annotate(exec_result, readonly=True, idempotent=True)
        return [exec_start, exec_result]

    capabilities: ClassVar[dict[str, CardCapability]] = {
        "exec_command": CardCapability(tool=_command_tool),
        "exec_jobs": CardCapability(tool=_job_tools),
    }


async def with_elapsed_progress(work: Awaitable[T], what: str, every: float = 1.0) -> T:
    """Await ``work``, telling a listening caller the seconds elapsed every ``every`` s (MCP
    progress); cancelling the caller cancels ``work``."""
    if not progress_enabled():
        return await work
    task = asyncio.ensure_future(work)
    started = time.monotonic()
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every)
            if done:
                return task.result()
            elapsed = time.monotonic() - started
            report_progress(elapsed, None, f"{what} for {elapsed:.0f} s")
    finally:
        if not task.done():  # cancelled: the command is killed before this returns
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def _command_arg(service: ExecService) -> PathArgs:
    """``command`` declared with its canonical form, the argv the service will run joined
    back (:func:`canonical_command`): the policy, grants, approvers and the audit see the
    command as it runs, whatever quoting or spacing was sent, and the tool runs that string.
    A command the service would refuse ends the call before the policy."""
    allowed = service.settings.allowed_commands
    return PathArgs(lambda command: canonical_command(command, allowed), fields=("command",))


def _doc(summary: str, about: str, *args: str) -> str:
    """A Google-style docstring: summary, confinement, then the Args section."""
    lines = "\n".join(f"    {a}" for a in args)
    return f"{summary}\n\n{about}\n\nArgs:\n{lines}\n"
