"""MCPTrust rules: which stdio commands, working directories and environment names they allow."""

from __future__ import annotations

from typing import Any

import pytest

from toolcards.tools.mcp import CommandRule, MCPTrust, UntrustedCommand


def allowed(trust: MCPTrust, command: str, *args: str, **fields: Any) -> bool:
    try:
        trust.check(
            name="s",
            command=command,
            args=list(args),
            cwd=fields.get("cwd"),
            env=fields.get("env", {}),
            env_from=fields.get("env_from", {}),
        )
    except UntrustedCommand:
        return False
    return True


def test_nothing_is_allowed_without_a_decision() -> None:
    assert not allowed(MCPTrust.of(None), "uvx", "mcp-server-fetch")


def test_a_bare_program_rule_allows_any_arguments() -> None:
    trust = MCPTrust(["uvx"])
    assert allowed(trust, "uvx")
    assert allowed(trust, "uvx", "mcp-server-fetch", "--flag")


def test_a_bare_program_rule_never_allows_a_path_of_the_same_name() -> None:
    trust = MCPTrust(["python3"])
    assert not allowed(trust, "/tmp/evil/python3")
    assert not allowed(trust, "./python3")


def test_an_absolute_rule_needs_the_same_path() -> None:
    trust = MCPTrust(["/usr/bin/node"])
    assert allowed(trust, "/usr/bin/node", "server.js")
    assert allowed(trust, "/usr/bin/../bin/node")
    assert not allowed(trust, "node")
    assert not allowed(trust, "/usr/local/bin/node")


def test_argument_patterns_match_one_argument_each() -> None:
    trust = MCPTrust(["uvx mcp-server-fetch --timeout *"])
    assert allowed(trust, "uvx", "mcp-server-fetch", "--timeout", "30")
    assert not allowed(trust, "uvx", "mcp-server-fetch", "--timeout")
    assert not allowed(trust, "uvx", "mcp-server-fetch", "--timeout", "30", "--evil")
    assert not allowed(trust, "uvx", "other-server", "--timeout", "30")


def test_a_final_double_star_allows_any_further_arguments() -> None:
    trust = MCPTrust(["npx -y @modelcontextprotocol/server-filesystem **"])
    assert allowed(trust, "npx", "-y", "@modelcontextprotocol/server-filesystem")
    assert allowed(trust, "npx", "-y", "@modelcontextprotocol/server-filesystem", "/a", "/b")
    assert not allowed(trust, "npx", "-y", "evil-package", "/a")


def test_a_working_directory_needs_a_rule_that_names_it() -> None:
    plain = MCPTrust(["node server.js"])
    placed = MCPTrust([CommandRule("node", ("server.js",), cwd="/opt/mcp")])
    assert allowed(plain, "node", "server.js")
    assert not allowed(plain, "node", "server.js", cwd="/tmp/attacker")
    assert allowed(placed, "node", "server.js", cwd="/opt/mcp/")
    assert not allowed(placed, "node", "server.js", cwd="/tmp/attacker")


def test_environment_names_need_listing_on_both_sides_of_env_from() -> None:
    trust = MCPTrust(["srv"], env=["GITHUB_TOKEN"])
    assert allowed(trust, "srv", env_from={"GITHUB_TOKEN": "GITHUB_TOKEN"})
    assert not allowed(trust, "srv", env_from={"GITHUB_TOKEN": "AWS_SECRET_ACCESS_KEY"})
    assert not allowed(trust, "srv", env_from={"LD_PRELOAD": "GITHUB_TOKEN"})
    assert not allowed(trust, "srv", env={"PATH": "/tmp"})


def test_environment_names_of_one_rule_do_not_apply_to_another() -> None:
    trust = MCPTrust([CommandRule("a", env=frozenset({"TOKEN"})), CommandRule("b")])
    assert allowed(trust, "a", env_from={"TOKEN": "TOKEN"})
    assert not allowed(trust, "b", env_from={"TOKEN": "TOKEN"})


def test_config_entries_are_strings_or_mappings() -> None:
    trust = MCPTrust.from_config(
        [
            "uvx mcp-server-fetch",
            {"command": "/usr/bin/node", "args": ["/opt/s.js", "**"], "cwd": "/opt", "env": ["K"]},
        ]
    )
    assert allowed(trust, "uvx", "mcp-server-fetch")
    assert allowed(trust, "/usr/bin/node", "/opt/s.js", "-v", cwd="/opt", env={"K": "1"})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("uvx", "must be a list"),
        ([{"command": "uvx", "argz": []}], "unknown keys"),
        ([{"args": ["x"]}], "needs 'command'"),
        ([{"command": "uvx", "env": "TOKEN"}], "list of variable names"),
        (["bin/server"], "must be absolute"),
        ([{"command": "srv", "cwd": "relative"}], "must be absolute"),
        ([""], "needs a program"),
        ([42], "string or a mapping"),
    ],
)
def test_malformed_config_entries_are_refused(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MCPTrust.from_config(value)
