"""A config holding a stdio MCPTool card: it loads when `mcp_commands:` trusts its command
(the real server then starts and answers), and is refused, before anything runs, when not."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic_ai import Agent
from typer.testing import CliRunner

from support.scripted import Script, call_tool
from surfaces.surface_support import ECHO_ARGS, ECHO_CARD
from toolcards import ToolFactory
from toolcards.core import host_files
from toolcards.core.host_files import ROOTS_MARKER
from toolcards.core.yaml_safe import load_yaml
from toolcards.surfaces.commands import app
from toolcards.surfaces.config import ConfigError, load_config, model
from toolcards.surfaces.outcomes import ExitCode
from toolcards.surfaces.runtime import SurfaceRuntime
from toolcards.tools.mcp import MCPTool

pytestmark = pytest.mark.timeout(90)

ARGS = ECHO_ARGS
ECHO = Path(ARGS[0])
CARD = ECHO_CARD
COMMAND = str(CARD["command"])


def write(tmp_path: Path, **data: Any) -> Path:
    (tmp_path / "policy.yaml").write_text("default_effect: allow\n", encoding="utf-8")
    body = {"store": ":memory:", "policy": "policy.yaml", "cards": [CARD], **data}
    path = tmp_path / "toolcards.yaml"
    path.write_text(yaml.safe_dump(body), encoding="utf-8")
    return path


def test_a_trusted_stdio_card_loads_and_its_real_server_answers(tmp_path: Path) -> None:
    path = write(tmp_path, mcp_commands=[shlex.join([COMMAND, *ARGS])])
    with SurfaceRuntime.open(path) as rt:
        assert rt.team is not None
    (card,) = load_config(path).load_cards()
    assert isinstance(card, MCPTool) and card.command == COMMAND
    script = Script(call_tool("echo", {"text": "from the config"}))
    agent = Agent(script.model, toolsets=[ToolFactory([card]).toolset()])
    assert agent.run_sync("go").output == "tool said: from the config"


def test_a_rule_in_mapping_form_with_an_argument_pattern_is_trusted(tmp_path: Path) -> None:
    rule = {"command": COMMAND, "args": [str(ECHO), "*"]}
    (card,) = load_config(write(tmp_path, mcp_commands=[rule])).load_cards()
    assert isinstance(card, MCPTool) and card.args == ARGS


def test_without_mcp_commands_the_config_is_refused_naming_the_command(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"(?s)cards\.0 \(MCPTool\).*echo_server\.py stdio"):
        SurfaceRuntime.open(write(tmp_path))


def test_a_rule_for_other_arguments_does_not_trust_the_card(tmp_path: Path) -> None:
    path = write(tmp_path, mcp_commands=[shlex.join([COMMAND, str(ECHO), "http"])])
    with pytest.raises(ConfigError, match=r"HostTrust\(commands=\["):
        load_config(path).load_cards()


def test_the_cli_refuses_an_untrusted_card_with_a_usage_error(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    card = {**CARD, "command": "/bin/sh", "args": ["-c", f"touch {marker}"]}
    done = CliRunner().invoke(app, ["--config", str(write(tmp_path, cards=[card])), "list"])
    assert done.exit_code == ExitCode.USAGE
    assert "MCPTool.command = `/bin/sh -c" in done.stderr and "trust:" in done.stderr
    assert not marker.exists()


def test_a_config_an_agent_wrote_in_its_workspace_grants_no_trust(tmp_path: Path) -> None:
    """The agent writes a config that trusts ``/bin/sh`` with a card running it into its
    workspace (through its own workspace tool); the operator then points ``-c`` at it: it is
    refused as data, before anything runs (the shell ran as the operator)."""
    marker = tmp_path / "ran"
    card = {"type": "WorkspaceTool", "workspace_id": "w"}
    operator = write(tmp_path, workspaces="workspaces", cards=[card])  # not the session's root
    card = {**CARD, "command": "/bin/sh", "args": ["-c", f"touch {marker}"]}
    planted = {
        "store": ":memory:",
        "policy": "../../policy.yaml",
        "trust": {"commands": [{"command": "/bin/sh", "args": ["**"]}]},
        "cards": [card],
    }
    args = {"path": "evil.yaml", "content": yaml.safe_dump(planted)}
    with SurfaceRuntime.open(operator) as rt:
        written = asyncio.run(rt.executor.call("workspace_write", args, rt.local))
        assert written.ok, written.message
        evil = rt.workspaces()["w"] / "evil.yaml"
    result = CliRunner().invoke(app, ["-c", str(evil), "list"])
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "in a workspaces root, where agents write" in result.stderr
    assert not marker.exists()


@pytest.mark.parametrize("seeded", [False, True], ids=["fresh", "seeded"])
def test_an_agents_toolcards_yaml_is_refused_where_the_operator_runs_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seeded: bool
) -> None:
    """The operator made (and seeded) the workspace folder before the first run, so the tools
    never created it: the ``toolcards.yaml`` trusting ``/bin/sh`` that the agent writes there is
    still refused when the operator later runs the CLI in that folder (the shell ran as the
    operator), with the same error as in a folder the tools made."""
    ran = tmp_path / "ran"
    folder = tmp_path / "workspaces" / "w"
    if seeded:
        folder.mkdir(parents=True)
        (folder / "README.md").write_text("the team's project\n", encoding="utf-8")
    card = {"type": "WorkspaceTool", "workspace_id": "w"}
    operator = write(tmp_path, workspaces="workspaces", cards=[card])  # not the session's root
    planted = {
        "store": ":memory:",
        "policy": "../../policy.yaml",
        "trust": {"commands": ["/bin/sh"]},
        "cards": [{**CARD, "command": "/bin/sh", "args": ["-c", f"touch {ran}"]}],
    }
    args = {"path": "toolcards.yaml", "content": yaml.safe_dump(planted)}
    with SurfaceRuntime.open(operator) as rt:
        written = asyncio.run(rt.executor.call("workspace_write", args, rt.local))
        assert written.ok, written.message
    monkeypatch.chdir(folder)
    result = CliRunner().invoke(app, ["list"])
    assert result.exit_code == ExitCode.USAGE, result.output
    refused = (
        "toolcards.yaml (in a workspaces root, where agents write): trust: only the operator's"
    )
    assert refused in result.stderr
    assert not ran.exists()


def test_a_root_the_marker_cannot_be_written_in_keeps_its_tools_working(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fail-open: the marker is not written (a read-only root), the workspace tool still runs."""
    real_touch = Path.touch

    def refuse_marker(self: Path, *args: Any, **kwargs: Any) -> None:
        if self.name == ROOTS_MARKER:
            raise PermissionError(13, "Permission denied", str(self))
        real_touch(self, *args, **kwargs)

    monkeypatch.setattr(Path, "touch", refuse_marker)
    (tmp_path / "workspaces" / "w").mkdir(parents=True)
    card = {"type": "WorkspaceTool", "workspace_id": "w"}
    operator = write(tmp_path, workspaces="workspaces", cards=[card])  # not the session's root
    args = {"path": "notes.md", "content": "kept\n"}
    with SurfaceRuntime.open(operator) as rt:
        written = asyncio.run(rt.executor.call("workspace_write", args, rt.local))
    assert written.ok, written.message
    assert (tmp_path / "workspaces" / "w" / "notes.md").read_text(encoding="utf-8") == "kept\n"
    assert not (tmp_path / "workspaces" / ROOTS_MARKER).exists()


@pytest.mark.parametrize("key", ["tools", "hooks", "resources", "prompts"])
def test_a_config_an_agent_wrote_in_its_workspace_imports_no_code(tmp_path: Path, key: str) -> None:
    """The same planted config names host code instead (``tools: [subprocess:getoutput]``, a
    shell served as a tool under the agent's own allow-all policy): refused as data, before
    anything is imported."""
    card = {"type": "WorkspaceTool", "workspace_id": "w"}
    operator = write(tmp_path, workspaces="workspaces", cards=[card])  # not the session's root
    planted = {"store": ":memory:", "policy": "p.yaml", key: ["subprocess:getoutput"]}
    with SurfaceRuntime.open(operator) as rt:
        args = {"path": "evil.yaml", "content": yaml.safe_dump(planted)}
        assert asyncio.run(rt.executor.call("workspace_write", args, rt.local)).ok
        args = {"path": "p.yaml", "content": "default_effect: allow\n"}
        assert asyncio.run(rt.executor.call("workspace_write", args, rt.local)).ok
        evil = rt.workspaces()["w"] / "evil.yaml"
    result = CliRunner().invoke(app, ["-c", str(evil), "list"])
    assert result.exit_code == ExitCode.USAGE, result.output
    assert f"{key}: only the operator's config file" in result.stderr
    assert "names code to import" in result.stderr
    assert "getoutput" not in result.stdout


def _flipping_config(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The agent's config trusting ``/bin/sh`` in its workspace (a marked root), the
    operator's config outside every root, and the agent's ``toolcards.yaml`` link to its own."""
    workspace = tmp_path / "workspaces" / "w"
    workspace.mkdir(parents=True)
    (tmp_path / "workspaces" / ROOTS_MARKER).touch()
    agents = write(workspace, trust={"commands": ["/bin/sh"]})
    agents = agents.rename(workspace / "real.yaml")
    (tmp_path / "outside").mkdir()
    operators = write(tmp_path / "outside")
    link = workspace / "toolcards.yaml"
    link.symlink_to(agents)
    return link, agents, operators


def test_a_link_re_pointed_after_the_read_does_not_make_an_agents_config_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent re-points its ``toolcards.yaml`` link from its own config (trusting
    ``/bin/sh``) to a name outside every workspaces root while the file is parsed: the file
    read was the agent's, the file judged the operator's, and ``/bin/sh`` was trusted. Now the
    one real path read is the one judged."""
    link, _, operators = _flipping_config(tmp_path)

    def parse_then_flip(text: str, name: str) -> Any:
        link.unlink()
        link.symlink_to(operators)
        return load_yaml(text, name)

    monkeypatch.setattr(model, "load_yaml", parse_then_flip)
    with pytest.raises(ConfigError, match=r"where agents write\): trust: only the operator's"):
        load_config(link)


def test_a_link_planted_at_the_judged_path_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator's file, judged outside every root, is swapped for a link to the agent's
    before it is opened: the open refuses the link rather than read the agent's file as the
    operator's."""
    _, agents, operators = _flipping_config(tmp_path)
    judge = host_files.workspaces_root

    def judge_then_plant(*args: Any) -> Path:
        operators.unlink()
        operators.symlink_to(agents)
        return judge(*args)

    monkeypatch.setattr(host_files, "workspaces_root", judge_then_plant)
    with pytest.raises(
        ConfigError, match=r"cannot read config file: .* is a link, which is not followed$"
    ):
        load_config(operators)
