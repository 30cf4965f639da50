"""Parsing the model's command: shlex, never a shell, and the allowlist."""

from __future__ import annotations

import pytest

from toolcards.core.errors import RetriableError
from toolcards.tools.exec.command import MAX_COMMAND_CHARS, canonical_command, parse_command


def test_splits_with_shell_quoting() -> None:
    assert parse_command("grep -n 'a b' \"c d\"", None) == ["grep", "-n", "a b", "c d"]


def test_metacharacters_inside_arguments_stay_literal() -> None:
    assert parse_command("echo '$(id)' '`id`' 'a;b'", None) == ["echo", "$(id)", "`id`", "a;b"]


@pytest.mark.parametrize("op", ["|", "&&", "||", ">", ">>", "<", "&", "2>&1", ";"])
def test_bare_shell_operators_are_refused(op: str) -> None:
    with pytest.raises(RetriableError, match="shell operators"):
        parse_command(f"ls {op} x", None)


def test_find_exec_terminator_is_allowed() -> None:
    assert parse_command(r"find . -name x -exec cat {} \;", None)[-1] == ";"


@pytest.mark.parametrize("shell", ["sh", "bash", "/bin/sh", "zsh"])
def test_shell_refused_without_allowlist(shell: str) -> None:
    with pytest.raises(RetriableError, match="shell"):
        parse_command(f"{shell} -c 'id'", None)


def test_shell_allowed_when_listed() -> None:
    assert parse_command("sh -c 'a | b'", ["sh"]) == ["sh", "-c", "a | b"]


def test_operator_hint_mentions_shell_only_when_allowed() -> None:
    with pytest.raises(RetriableError) as no_shell:
        parse_command("ls | wc", ["ls"])
    with pytest.raises(RetriableError) as with_shell:
        parse_command("ls | wc", ["ls", "sh"])
    assert "sh -c" not in str(no_shell.value)
    assert "sh -c" in str(with_shell.value)


def test_program_outside_allowlist_is_refused_and_lists_allowed() -> None:
    with pytest.raises(RetriableError, match="not allowed; allowed commands: ls, pytest"):
        parse_command("rm -rf .", ["pytest", "ls"])


def test_program_path_is_refused_with_allowlist() -> None:
    with pytest.raises(RetriableError, match="without a path"):
        parse_command("./pytest -q", ["pytest"])


def test_option_in_program_position_is_refused() -> None:
    with pytest.raises(RetriableError, match="must not start with '-'"):
        parse_command("--help", None)


@pytest.mark.parametrize("bad", [None, 3, ["ls"], b"ls"])
def test_wrong_types_are_retriable(bad: object) -> None:
    with pytest.raises(RetriableError, match="must be a string"):
        parse_command(bad, None)


@pytest.mark.parametrize(
    ("command", "message"),
    [("", "empty"), ("   ", "empty"), ("echo 'open", "cannot parse"), ("a\x00b", "NUL")],
)
def test_malformed_commands_are_retriable(command: str, message: str) -> None:
    with pytest.raises(RetriableError, match=message):
        parse_command(command, None)


def test_oversized_command_is_refused() -> None:
    with pytest.raises(RetriableError, match="longer than"):
        parse_command("echo " + "x" * MAX_COMMAND_CHARS, None)


@pytest.mark.parametrize(
    ("sent", "runs"),
    [
        ("cat sec''ret.env", "cat secret.env"),
        ('  grep\t-n   "a b" x', "grep -n 'a b' x"),
        ("echo \"it's\" ''", "echo 'it'\"'\"'s' ''"),
        ("sh -c 'a | b'", "sh -c 'a | b'"),
    ],
)
def test_the_canonical_command_is_its_argv_joined_back(sent: str, runs: str) -> None:
    """One spelling per argv (what the policy decides on), parsed back to the same argv."""
    allowed = ["cat", "grep", "echo", "sh"]
    assert canonical_command(sent, allowed) == runs
    assert parse_command(runs, allowed) == parse_command(sent, allowed)


def test_a_canonical_command_quoted_past_the_limit_is_refused() -> None:
    quotes = '"\'"' * (MAX_COMMAND_CHARS // 4)  # each "'" is a ', joined back '"'"'
    with pytest.raises(RetriableError, match="longer than"):
        canonical_command(f"echo {quotes}", None)
