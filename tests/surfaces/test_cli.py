"""The `toolcards` command line: exit codes, argument coercion, JSON output, approvals,
audit reading and team status."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from surfaces.surface_support import SURFACE_ENV, TOOLCARDS, write_config
from toolcards.governance import Identity, Policy
from toolcards.surfaces.commands import app
from toolcards.surfaces.outcomes import ExitCode

cli_module = importlib.import_module("toolcards.surfaces.commands")
BOB = Identity("bob", "user", ["sales"])
CAROL = Identity("carol", "user", ["finance"])
ME = Identity("me", "user", [])
DAVE = Identity("dave", "user", ["ops"])


def allow_all(tmp_path: Path) -> Path:
    policy = tmp_path / "allow.yaml"
    policy.write_text("default_effect: allow\n", encoding="utf-8")
    return write_config(tmp_path, local=ME, policy=policy, tools=["extra_tools:TOOLS"])


def run(config: Path, *args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["--config", str(config), *args], input=input)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def extra(tmp_path: Path) -> Path:
    return allow_all(tmp_path)


def test_ok_call_exits_zero_and_prints_the_value(extra: Path) -> None:
    code, out, _ = run(extra, "call", "pick", "index=1")
    assert code == ExitCode.OK
    assert out.strip() == "b"


def test_tool_failure_exits_one_without_internals(extra: Path) -> None:
    code, out, err = run(extra, "call", "explode", "reason=x")
    assert code == ExitCode.FAILED
    assert "explode failed (RuntimeError)" in err
    assert "secret internals" not in out + err


def test_denied_call_exits_three(tmp_path: Path) -> None:
    code, _, err = run(write_config(tmp_path, local=DAVE), "call", "run_command", "command=rm")
    assert code == ExitCode.DENIED
    assert "denied: run_command" in err


def test_unknown_tool_exits_seven(extra: Path) -> None:
    assert run(extra, "call", "no_such_tool")[0] == ExitCode.UNKNOWN_TOOL


def test_hidden_tool_exits_seven_like_an_unknown_one(tmp_path: Path) -> None:
    code, _, err = run(write_config(tmp_path, local=BOB), "call", "crm_delete", "id=1")
    assert code == ExitCode.UNKNOWN_TOOL
    assert "unknown tool: crm_delete" in err


def test_wrong_type_exits_four(extra: Path) -> None:
    code, _, err = run(extra, "call", "pick", "index=first")
    assert code == ExitCode.INVALID
    assert "index" in err


def test_tool_asking_for_a_fix_exits_four(extra: Path) -> None:
    code, _, err = run(extra, "call", "pick", "index=7")
    assert code == ExitCode.INVALID
    assert "index must be 0, 1 or 2" in err


def test_approval_without_a_terminal_fails_closed_saying_how_calls_are_approved(
    extra: Path,
) -> None:
    code, out, err = run(extra, "call", "publish", "text=hello")
    assert code == ExitCode.APPROVAL
    assert "published" not in out
    assert "approval required" in err
    assert "a caller cannot approve its own call" in err and "toolcards approvals grant" in err


def test_malformed_pair_is_a_usage_error(extra: Path) -> None:
    assert run(extra, "call", "pick", "index")[0] == ExitCode.USAGE


def test_pairs_and_json_together_are_a_usage_error(extra: Path) -> None:
    assert run(extra, "call", "pick", "index=1", "--json", '{"index": 1}')[0] == ExitCode.USAGE


def test_json_arguments_that_are_not_an_object_are_a_usage_error(extra: Path) -> None:
    assert run(extra, "call", "pick", "--json", "[1, 2]")[0] == ExitCode.USAGE


def test_missing_config_is_a_usage_error_naming_the_file(tmp_path: Path) -> None:
    code, _, err = run(tmp_path / "absent.yaml", "list")
    assert code == ExitCode.USAGE
    assert "absent.yaml" in err


def test_pairs_are_coerced_by_the_schema(extra: Path) -> None:
    code, out, _ = run(
        extra, "--json", "call", "configure",
        "limit=5", "ratio=0.5", "enabled=yes", 'tags=["a","b"]', "name=007",
    )  # fmt: skip
    assert code == ExitCode.OK
    assert json.loads(out)["value"] == {
        "limit": 5, "ratio": 0.5, "enabled": True, "tags": ["a", "b"], "name": "007",
    }  # fmt: skip


def test_json_arguments_can_come_from_stdin(extra: Path) -> None:
    code, out, _ = run(extra, "--json", "call", "pick", "--json", "-", input='{"index": 2}')
    assert code == ExitCode.OK and json.loads(out)["value"] == "c"


def test_json_output_of_a_failure_names_the_outcome(tmp_path: Path) -> None:
    config = write_config(tmp_path, local=DAVE)
    code, out, _ = run(config, "--json", "call", "run_command", "command=rm")
    data = json.loads(out)
    assert code == ExitCode.DENIED
    assert data == {
        "tool": "run_command", "ok": False, "outcome": "denied", "kind": "denied",
        "message": "denied: run_command is not permitted for dave",
    }  # fmt: skip


def test_rate_limited_call_exits_six(tmp_path: Path) -> None:
    from toolcards.surfaces.runtime import SurfaceRuntime

    policy = tmp_path / "limited.yaml"
    policy.write_text("default_effect: allow\nlimits:\n  - {targets: [pick], rate: 1/hour}\n")
    rt = SurfaceRuntime.open(allow_all(tmp_path))
    rt.executor.policy = Policy.from_yaml(policy)
    runner = CliRunner()
    codes = []
    for _ in range(2):
        state = cli_module.State(factory=lambda _team: rt)
        codes.append(runner.invoke(app, ["call", "pick", "index=0"], obj=state).exit_code)
    rt.close()
    assert codes == [ExitCode.OK, ExitCode.RATE_LIMITED]


def test_list_shows_only_callable_tools(tmp_path: Path) -> None:
    code, out, _ = run(write_config(tmp_path, local=BOB), "--json", "list")
    assert code == ExitCode.OK
    assert {t["name"] for t in json.loads(out)} == {"crm_read", "crm_search", "send_email"}


def test_describe_shows_schema_and_annotations(tmp_path: Path) -> None:
    code, out, _ = run(write_config(tmp_path, local=CAROL), "--json", "describe", "transfer_money")
    data = json.loads(out)
    assert code == ExitCode.OK
    assert data["annotations"]["destructive"] is True
    assert data["input_schema"]["properties"]["amount"] == {"type": "number"}


def test_describe_hides_tools_the_caller_may_not_call(tmp_path: Path) -> None:
    code, out, _ = run(write_config(tmp_path, local=BOB), "describe", "crm_delete")
    assert code == ExitCode.UNKNOWN_TOOL
    assert "crm_delete" not in out


def test_audit_tail_and_query_read_the_calls(extra: Path) -> None:
    run(extra, "call", "pick", "index=0")
    run(extra, "call", "explode", "reason=x")
    code, out, _ = run(extra, "--json", "audit", "tail", "-n", "1")
    assert code == ExitCode.OK
    assert [(e["tool"], e["outcome"], e["surface"]) for e in json.loads(out)] == [
        ("explode", "error", "cli")
    ]
    code, out, _ = run(extra, "--json", "audit", "query", "--tool", "pick", "--since", "1h")
    assert [e["args"] for e in json.loads(out)] == [{"index": 0}]


def test_team_status_lists_tool_actors_and_events(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, local=ME, policy=allow_all(tmp_path).parent / "allow.yaml", tools=[],
        store=str(tmp_path / "team.db"), cards=[{"type": "PlanningTool", "vector_store": False}],
    )  # fmt: skip
    task = json.dumps({"create": [{"description": "write the report"}]})
    assert run(config, "call", "update_planning", "--json", task)[0] == ExitCode.OK
    code, out, _ = run(config, "--json", "team", "status")
    data = json.loads(out)
    assert code == ExitCode.OK
    assert "#PlanningTool" in data["tool_actors"]
    assert any(e["tool_id"] == "#PlanningTool" for e in data["events"])


def test_team_status_reads_only_the_events_it_shows(tmp_path: Path) -> None:
    """``team status --events 1`` parsed the team's whole event log (15 s and 850 MB at
    300,000 events), on the serving process's loop when forwarded; a forwarded request may
    also ask for any count."""
    from toolcards.surfaces.cli.operations import MAX_STATUS_EVENTS, team_data
    from toolcards.surfaces.runtime import SurfaceRuntime

    config = write_config(
        tmp_path, local=ME, tools=[], store=str(tmp_path / "team.db"),
        cards=[{"type": "PlanningTool", "vector_store": False}],
    )  # fmt: skip
    with SurfaceRuntime.open(config, with_team=True) as rt:
        assert rt.team is not None
        log = rt.team.log
        for i in range(MAX_STATUS_EVENTS + 50):
            log.append("#Noise", {"n": i})
        reads: list[int] = []
        events = log.events

        def counting(since: int = 0) -> list[Any]:
            found = events(since)
            reads.append(len(found))
            return found

        log.events = counting  # type: ignore[method-assign]
        rt.team.events = counting  # type: ignore[method-assign]
        data = team_data(rt, 3)
        assert data is not None and [e["payload"]["n"] for e in data["events"]] == [
            MAX_STATUS_EVENTS + 47, MAX_STATUS_EVENTS + 48, MAX_STATUS_EVENTS + 49,
        ]  # fmt: skip
        asked = team_data(rt, 10**9)  # what a forwarded request may say
        assert asked is not None and len(asked["events"]) == MAX_STATUS_EVENTS
        assert reads == [3, MAX_STATUS_EVENTS]


def test_hash_token_prints_a_storable_digest(tmp_path: Path) -> None:
    from toolcards.surfaces.config import hash_token

    code, out, _ = run(tmp_path / "unused.yaml", "--json", "hash-token", "s3cret")
    assert code == ExitCode.OK
    assert json.loads(out) == {"token": None, "token_sha256": hash_token("s3cret")}


def test_help_does_not_import_pydantic_ai_or_mcp() -> None:
    code = (
        "import sys\nfrom toolcards.surfaces.commands import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('pydantic_ai', 'mcp') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip().endswith("[]"), proc.stdout[-300:]


def test_installed_command_reports_exit_codes(tmp_path: Path) -> None:
    config = allow_all(tmp_path)
    proc = subprocess.run(
        [str(TOOLCARDS), "--json", "--config", str(config), "call", "pick", "index=9"],
        env=SURFACE_ENV, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == ExitCode.INVALID
    assert json.loads(proc.stdout)["outcome"] == "retry"
