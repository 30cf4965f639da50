"""The first hour of a new user, as the README and docs tell it (issue #28, items 6-13): real
`serve` and `dashboard` processes with real MCP clients over HTTP and real HTTP sign-ins, the
command line of the docs' examples as printed (a shell, the installed command), and the other
command lines through the entry point in process; each test follows one step a newcomer takes
and checks what they see."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp.types as types
import pytest
import yaml
from mcp_clients import http_session

from support.cli import InProcessCli
from support.launch import REAL_TOOLCARDS
from support.processes import ListeningProcess, free_port
from surfaces.surface_support import SURFACE_ENV, TOOLCARDS
from toolcards.governance import AuditLog
from toolcards.surfaces.config import hash_token

pytestmark = pytest.mark.timeout(180)

REPO = Path(__file__).resolve().parents[2]
BIN = TOOLCARDS.parent
ENV = {k: v for k, v in SURFACE_ENV.items() if k != "TOOLCARDS_WORKSPACES_ROOT"}
NO_ROOT: dict[str, str | None] = {"TOOLCARDS_WORKSPACES_ROOT": None}
WRITERS = {"callers": ["*"], "targets": ["*"], "effect": "allow"}
WRITERS["conditions"] = {"roles": ["writer"]}
ALLOW_WRITERS = {"rules": [WRITERS]}


def write(directory: Path, config: dict[str, Any], policy: dict[str, Any] = ALLOW_WRITERS) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "policy.yaml").write_text(yaml.safe_dump(policy), encoding="utf-8")
    path = directory / "toolcards.yaml"
    path.write_text(yaml.safe_dump({"policy": "policy.yaml", **config}), encoding="utf-8")
    return path


def token_entry(token: str, who: str, roles: list[str]) -> dict[str, Any]:
    return {"token_sha256": hash_token(token), "id": who, "roles": roles}


def bash_lines(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    return [ln for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S) for ln in b.splitlines()]


class Served(ListeningProcess):
    """A `toolcards` server command on a free port (`serve ... --transport http` or
    `dashboard`), with the text it wrote to stderr in :meth:`output`."""

    def __init__(self, config: Path, *args: str) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        argv = [str(TOOLCARDS), *args, "--config", str(config), "--port", str(port)]
        super().__init__(argv, port, ENV, what=args[0])

    def said(self, pattern: str, timeout: float = 30.0) -> re.Match[str]:
        """The first match of ``pattern`` in what the server wrote (awaited, bounded)."""
        deadline = time.monotonic() + timeout
        while (found := re.search(pattern, self.output())) is None:
            assert time.monotonic() < deadline, self.output()
            time.sleep(0.05)
        return found


def sign_in(url: str, token: str) -> tuple[httpx.Client, httpx.Response]:
    client = httpx.Client(base_url=url, timeout=10, follow_redirects=False)
    form = client.get("/login").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', form)
    assert csrf is not None, form
    return client, client.post("/login", data={"token": token, "csrf": csrf.group(1)})


# -- 6. the README's command line block ----------------------------------------------------------


def test_the_pages_say_to_activate_the_venv_before_the_first_toolcards_command() -> None:
    lines = bash_lines(REPO / "README.md")
    first = next(i for i, ln in enumerate(lines) if ln.startswith("toolcards "))
    assert any("source .venv/bin/activate" in ln for ln in lines[:first]), lines[: first + 1]
    assert "source .venv/bin/activate" in (REPO / "docs" / "getting-started.md").read_text()


def test_the_readme_makes_a_token_before_serving_over_http() -> None:
    lines = bash_lines(REPO / "README.md")
    http = next(i for i, ln in enumerate(lines) if "serve" in ln and "--transport http" in ln)
    assert any(ln.startswith("toolcards hash-token") for ln in lines[:http]), lines[: http + 1]


# -- 7. a dashboard of a config without tokens ---------------------------------------------------


SERVE_DASHBOARD = ("serve", "--transport", "http", "--dashboard")


@pytest.mark.parametrize(
    ("starter", "command"),
    [
        ("toolcards init", ("dashboard",)),
        ("examples/team", ("dashboard",)),
        ("examples/team", SERVE_DASHBOARD),  # it printed no link: a page nobody could pass
    ],
)
def test_a_starter_configs_dashboard_prints_a_one_time_sign_in_link_that_works(
    tmp_path: Path, starter: str, command: tuple[str, ...], toolcards_cli: InProcessCli
) -> None:
    """The configs a newcomer starts from give their local principal a viewer role, so the
    dashboard's link signs in (before: a warning that nobody could, and a page anyway)."""
    if starter == "toolcards init":
        assert toolcards_cli("init", cwd=tmp_path).returncode == 0
    else:
        for name in ("toolcards.yaml", "policy.yaml"):
            (tmp_path / name).write_text((REPO / "examples" / "team" / name).read_text())
    server = Served(tmp_path / "toolcards.yaml", *command)
    try:
        found = server.said(r"sign in as (\S+) \(once\) at (http://\S+)")
        who, link = found.group(1), found.group(2)
        base, _, fragment = link.partition("login#token=")  # base: the page's secret path
        assert base.startswith(server.url + "/") and "warning" not in server.output()
        client, first = sign_in(base, fragment)
        assert first.status_code == 303 and who in client.get("/").text
        _, again = sign_in(base, fragment)
        assert again.status_code != 303  # the link's token was spent by its first sign-in
    finally:
        server.stop()


def test_a_dashboard_nobody_can_sign_in_to_names_the_missing_key_and_the_command(
    tmp_path: Path,
) -> None:
    local = {"id": "alice", "roles": ["writer"]}
    config = write(tmp_path, {"store": "team.db", "principals": {"local": local}})
    server = Served(config, "dashboard")
    try:
        line = server.said(r"warning: .*\n").group(0)
        assert "principals.tokens" in line and "toolcards hash-token" in line
    finally:
        server.stop()


# -- 8. approvals with --dashboard ----------------------------------------------------------------

AGENT_TOKEN, APPROVER_TOKEN = "agent-secret-token", "approver-secret-token"


def approvals_config(base: Path, timeout: float) -> Path:
    tokens = [
        token_entry(AGENT_TOKEN, "agent.bot", ["writer"]),
        token_entry(APPROVER_TOKEN, "rita", ["approver", "viewer"]),
    ]
    return write(
        base,
        {"store": "team.db", "tools": ["approval_tools:TOOLS"], "approval_timeout": timeout,
         "principals": {"tokens": tokens}},
    )  # fmt: skip


async def call_send_note(server: Served, told: list[str]) -> types.CallToolResult:
    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        told.append(str(params.data))

    async with http_session(f"{server.url}/mcp", AGENT_TOKEN, logging_callback=on_log) as s:
        with anyio.fail_after(60):
            return await s.call_tool("send_note", {"to": "ops", "body": "hi"})


def audited(base: Path, outcome: str, timeout: float = 30.0) -> list[Any]:
    deadline = time.monotonic() + timeout
    while True:
        with AuditLog(base / "audit.db") as log:
            rows = log.query(tool="send_note", outcome=outcome, limit=10)
        if rows or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


@pytest.mark.anyio
async def test_with_the_dashboard_a_call_nobody_decides_is_announced_then_an_approval_timeout(
    tmp_path: Path,
) -> None:
    config = approvals_config(tmp_path, timeout=0.5)  # the timeout is the subject: a short one
    server = Served(config, "serve", "--transport", "http", "--dashboard")
    told: list[str] = []
    try:
        server.said(re.escape(f"dashboard at {server.url}/"))
        result = await call_send_note(server, told)
    finally:
        server.stop()
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error is True and text.startswith("approval timeout:"), text
    assert "refused" not in text and "denied" not in text
    (waiting,) = [t for t in told if "waits" in t]
    assert "toolcards approvals grant" in waiting  # the caller, an agent, never learns the
    assert "in the dashboard at the address this server printed" in waiting  # secret path
    assert server.url not in waiting
    assert [row.principal for row in audited(tmp_path, "approval_timeout")] == ["agent.bot"]


@pytest.mark.anyio
async def test_the_approval_card_shows_the_configured_deadline(tmp_path: Path) -> None:
    config = approvals_config(tmp_path, timeout=40)
    server = Served(config, "serve", "--transport", "http", "--dashboard")
    shown: list[str] = []

    async def look() -> None:
        page_url = server.said(r"dashboard at (http://\S+)").group(1)  # its secret path too
        client, response = sign_in(page_url, APPROVER_TOKEN)
        assert response.status_code == 303
        with anyio.fail_after(30):
            while "expires in" not in (page := client.get("/panel/approvals").text):
                await anyio.sleep(0.1)
        shown.append(page)

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call_send_note, server, [])
            await look()
            tasks.cancel_scope.cancel()
    finally:
        server.stop()
    deadline = re.search(r"expires in (\d+) (s|min)", shown[0])
    assert deadline is not None and deadline.group(2) == "s", shown[0]
    assert int(deadline.group(1)) <= 40


# -- 9. who a task was created by -----------------------------------------------------------------


@pytest.mark.anyio
async def test_a_task_created_over_mcp_records_the_calling_principal(
    tmp_path: Path, toolcards_cli: InProcessCli
) -> None:
    tokens = [token_entry(AGENT_TOKEN, "agent.bot", ["writer"])]
    config = write(
        tmp_path,
        {"store": "team.db", "cards": [{"type": "PlanningTool", "vector_store": False}],
         "principals": {"local": {"id": "alice", "roles": ["writer"]}, "tokens": tokens}},
    )  # fmt: skip
    server = Served(config, "serve", "--transport", "http")
    try:
        async with http_session(f"{server.url}/mcp", AGENT_TOKEN) as s:
            created = await s.call_tool("update_planning", {"create": [{"description": "Ship it"}]})
        assert created.is_error is False, created
    finally:
        server.stop()
    shown = toolcards_cli("--config", config, "call", "get_planning_task", "id=1")
    assert shown.returncode == 0, shown.stderr
    assert "Creator: @agent.bot" in shown.stdout and "alice" not in shown.stdout


# -- 10. paths of a config ------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "folder"), [(None, "workspaces"), ("files", "files")])
def test_the_workspace_root_is_relative_to_the_config_file(
    tmp_path: Path, key: str | None, folder: str, toolcards_cli: InProcessCli
) -> None:
    extra = {} if key is None else {"workspaces": key}
    config = write(
        tmp_path / "project",
        {"team_id": "t1", "store": "team.db", "cards": [{"type": "WorkspaceTool"}],
         "principals": {"local": {"id": "alice", "roles": ["writer"]}}, **extra},
    )  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = toolcards_cli("--config", "../project/toolcards.yaml", "call", "workspace_write",
                         "path=a.txt", "content=x", cwd=elsewhere, env=NO_ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (config.parent / folder / "t1" / "a.txt").read_text() == "x"
    assert list(elsewhere.iterdir()) == []


def test_card_data_cannot_choose_the_workspaces_root(
    tmp_path: Path, toolcards_cli: InProcessCli
) -> None:
    card = {"type": "WorkspaceTool", "workspace_id": "etc", "workspaces_root": "/"}
    config = write(tmp_path, {"store": ":memory:", "cards": [card]})
    done = toolcards_cli("--config", config, "list", env=NO_ROOT)
    assert done.returncode == 2 and "workspaces_root" in done.stderr, done.stderr


# -- 11. one's own tools --------------------------------------------------------------------------


def test_an_unknown_card_type_names_the_entry_point_and_the_tools_key(
    tmp_path: Path, toolcards_cli: InProcessCli
) -> None:
    config = write(tmp_path, {"store": ":memory:", "cards": [{"type": "CatalogTool"}]})
    done = toolcards_cli("--config", config, "list")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "unknown card type 'CatalogTool'" in line
    assert "toolcards.cards" in line and "entry-point" in line and "PYTHONPATH" in line


def test_a_tools_module_not_on_the_path_names_pythonpath(
    tmp_path: Path, toolcards_cli: InProcessCli
) -> None:
    (tmp_path / "mytools.py").write_text("TOOLS = []\n")
    config = write(tmp_path, {"store": ":memory:", "tools": ["mytools:TOOLS"]})
    done = toolcards_cli("--config", config, "list", cwd=tmp_path, env={"PYTHONPATH": ""})
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "No module named 'mytools'" in line and "PYTHONPATH=" in line


def test_the_writing_cards_command_line_example_runs_as_printed(tmp_path: Path) -> None:
    page = (REPO / "docs" / "writing-cards.md").read_text(encoding="utf-8")
    section = page.split("## Your own tools from the command line", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)
    files = {
        code.splitlines()[0].lstrip("# ").strip(): code for lang, code in blocks if lang != "bash"
    }
    assert set(files) == {"mytools.py", "toolcards.yaml", "policy.yaml"}
    for name, code in files.items():
        (tmp_path / name).write_text(code, encoding="utf-8")
    lang, command = blocks[-1]
    assert lang == "bash"
    command = command.strip()
    expected = command.split("#")[-1].strip()
    env = {**ENV, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": ""}
    done = subprocess.run(
        ["bash", "-c", command.split("#")[0]], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected


# -- 12. what users of typer expect -------------------------------------------------------------


def test_version_prints_the_installed_version(toolcards_cli: InProcessCli) -> None:
    done = toolcards_cli("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"toolcards {version('toolcards')}"


def test_shell_completion_is_offered(toolcards_cli: InProcessCli) -> None:
    assert "--install-completion" in toolcards_cli("--help").stdout
    # asked from a bash (the shell is detected from the parent process, as a user's is)
    done = subprocess.run(
        ["bash", "-c", f"'{REAL_TOOLCARDS}' --show-completion bash; exit $?"],  # bash stays
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0 and "_toolcards_completion" in done.stdout, done.stderr


def test_init_writes_a_config_that_loads_and_lists_tools(
    tmp_path: Path, toolcards_cli: InProcessCli
) -> None:
    done = toolcards_cli("init", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    config = (tmp_path / "toolcards.yaml").read_text()
    assert config.startswith("#") and len(config.splitlines()) < 40
    listed = toolcards_cli("--json", "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    names = {row["name"] for row in json.loads(listed.stdout) if row["callable"]}
    assert {"workspace_write", "update_planning"} <= names


def test_init_leaves_existing_files_alone_without_force(
    tmp_path: Path, toolcards_cli: InProcessCli
) -> None:
    (tmp_path / "policy.yaml").write_text("mine\n")
    refused = toolcards_cli("init", cwd=tmp_path)
    assert refused.returncode == 2 and "policy.yaml" in refused.stderr
    assert (tmp_path / "policy.yaml").read_text() == "mine\n"
    assert not (tmp_path / "toolcards.yaml").exists()
    forced = toolcards_cli("init", "--force", cwd=tmp_path)
    assert forced.returncode == 0 and (tmp_path / "policy.yaml").read_text() != "mine\n"


# -- 13. the demo shows its steps: tests/demo/test_main_job.py (the demo's own process)
