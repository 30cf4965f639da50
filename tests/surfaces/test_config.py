"""The surfaces' YAML config: paths, principals, and errors that name the file and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from support.cli import InProcessCli
from toolcards.core.host_files import ROOTS_MARKER
from toolcards.governance import Identity
from toolcards.surfaces.config import ConfigError, hash_token, load_config
from toolcards.surfaces.mcp_server.options import MCPOptions
from toolcards.surfaces.runtime import SurfaceRuntime

POLICY = "default_effect: deny\n"


def write(tmp_path: Path, data: object, policy: str = POLICY) -> Path:
    (tmp_path / "policy.yaml").write_text(policy, encoding="utf-8")
    path = tmp_path / "team.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_paths_are_relative_to_the_config_file(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, {"policy": "policy.yaml", "store": "state/t.db"}))
    assert config.policy_path == tmp_path / "policy.yaml"
    assert config.store_location == str(tmp_path / "state" / "t.db")
    assert config.audit_path == tmp_path / "audit.db"


def test_local_principal_becomes_the_identity(tmp_path: Path) -> None:
    data = {"policy": "policy.yaml", "principals": {"local": {"id": "ann", "roles": ["ops"]}}}
    assert load_config(write(tmp_path, data)).local_identity == Identity("ann", "user", ["ops"])


def test_without_a_local_principal_the_caller_is_anonymous(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, {"policy": "policy.yaml"})).local_identity.is_anonymous


@pytest.mark.parametrize(
    ("principals", "field"),
    [
        ({"tokens": [{"token_sha256": "sha256:" + "ab" * 32, "id": "anonymous"}]}, "tokens.0"),
        ({"local": {"id": "anonymous"}}, "local"),
        ({"terminal_approver": {"id": "anonymous", "roles": ["approver"]}}, "terminal_approver"),
    ],
)
def test_a_principal_named_anonymous_is_refused(
    tmp_path: Path, principals: dict[str, Any], field: str
) -> None:
    """It would share the sessions and tasks of every caller that sends no token."""
    data = {"policy": "policy.yaml", "principals": principals}
    with pytest.raises(ConfigError) as refused:
        load_config(write(tmp_path, data))
    message = str(refused.value)
    assert f"principals.{field}.id" in message and "'anonymous'" in message
    assert "\n" not in message


def _token(digit: str, **spec: Any) -> dict[str, Any]:
    return {"token_sha256": "sha256:" + digit * 64, **spec}


@pytest.mark.parametrize(
    ("principals", "entries"),
    [
        (
            {"tokens": [_token("a", id="alice"), _token("b", id="alice", type="agent")]},
            "tokens[1] and tokens[0]",
        ),
        (
            {"local": {"id": "alice", "roles": ["ops"]}, "tokens": [_token("a", id="alice")]},
            "tokens[0] and local",
        ),
        (
            {
                "terminal_approver": {"id": "rita", "roles": ["approver"]},
                "tokens": [_token("a", id="rita", type="agent", roles=["approver"])],
            },
            "tokens[0] and terminal_approver",
        ),
    ],
)
def test_two_principals_sharing_an_id_are_refused(
    tmp_path: Path, principals: dict[str, Any], entries: str
) -> None:
    """MCP tasks and approvals know their principal by id: an agent ``alice`` would list and
    read a user ``alice``'s tasks and results."""
    data = {"policy": "policy.yaml", "principals": principals}
    with pytest.raises(ConfigError) as refused:
        load_config(write(tmp_path, data))
    message = str(refused.value)
    assert f"principals: {entries} share the id" in message, message
    assert "\n" not in message


def test_one_identity_may_hold_several_tokens_and_be_local(tmp_path: Path) -> None:
    alice = {"id": "alice", "type": "agent", "roles": ["ops"]}
    principals = {"local": alice, "tokens": [_token("a", **alice), _token("b", **alice)]}
    config = load_config(write(tmp_path, {"policy": "policy.yaml", "principals": principals}))
    assert {t.identity() for t in config.principals.tokens} == {config.local_identity}


def test_missing_policy_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"team\.yaml: policy: Field required"):
        load_config(write(tmp_path, {"team_id": "t"}))


def test_unknown_key_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"team\.yaml: polcy: unknown key"):
        load_config(write(tmp_path, {"policy": "policy.yaml", "polcy": "x"}))


def test_malformed_token_digest_names_the_token(tmp_path: Path) -> None:
    data = {"policy": "policy.yaml", "principals": {"tokens": [{"token_sha256": "abc", "id": "a"}]}}
    with pytest.raises(ConfigError, match=r"principals\.tokens\.0\.token_sha256"):
        load_config(write(tmp_path, data))


def test_plain_token_in_place_of_a_digest_is_refused(tmp_path: Path) -> None:
    data = {"policy": "policy.yaml", "principals": {"tokens": [{"token": "s3cret", "id": "a"}]}}
    with pytest.raises(ConfigError, match=r"principals\.tokens\.0"):
        load_config(write(tmp_path, data))


def test_card_without_a_type_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cards"):
        load_config(write(tmp_path, {"policy": "policy.yaml", "cards": [{"name": "x"}]}))


def test_unknown_card_type_names_the_card(tmp_path: Path) -> None:
    path = write(
        tmp_path, {"policy": "policy.yaml", "store": ":memory:", "cards": [{"type": "Nope"}]}
    )
    with pytest.raises(ConfigError, match=r"cards\.0 \(Nope\)"):
        SurfaceRuntime.open(path)


def test_bad_policy_file_names_the_config_and_the_policy(tmp_path: Path) -> None:
    path = write(tmp_path, {"policy": "policy.yaml"}, policy="default_effect: maybe\n")
    with pytest.raises(ConfigError, match=r"team\.yaml: policy: .*policy\.yaml"):
        SurfaceRuntime.open(path)


def test_unimportable_tools_name_the_entry(tmp_path: Path) -> None:
    path = write(tmp_path, {"policy": "policy.yaml", "tools": ["no_such_module_x:TOOLS"]})
    with pytest.raises(ConfigError, match=r"tools: cannot import 'no_such_module_x:TOOLS'"):
        SurfaceRuntime.open(path)


@pytest.mark.parametrize("field", ["prompts", "resources"])
def test_unimportable_mcp_entries_name_the_entry_when_the_mcp_server_needs_them(
    tmp_path: Path, field: str
) -> None:
    path = write(tmp_path, {"policy": "policy.yaml", field: ["no_such_module_x:THINGS"]})
    with SurfaceRuntime.open(path) as rt:  # a command that serves no MCP never imports them
        match = rf"{field}: cannot import 'no_such_module_x:THINGS'"
        with pytest.raises(ConfigError, match=match):
            MCPOptions.of(rt)


def test_invalid_yaml_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("policy: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"broken\.yaml: not valid YAML"):
        load_config(path)


def test_token_digests_load_into_the_runtime(tmp_path: Path) -> None:
    spec = {"token_sha256": hash_token("t0k"), "id": "svc", "type": "service"}
    path = write(tmp_path, {"policy": "policy.yaml", "principals": {"tokens": [spec]}})
    with SurfaceRuntime.open(path) as rt:
        assert rt.tokens.resolve("t0k") == Identity("svc", "service")


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: Path("/dev/zero"), "not a regular file"),
        (lambda p: p.write_bytes(b"team_id: caf\xe9\n") and p, "not UTF-8"),
        (lambda p: p.write_bytes(b"#" * (2 << 20)) and p, "larger than 1048576 bytes"),
    ],
    ids=["device", "latin-1", "huge"],
)
def test_a_config_file_that_is_no_text_config_is_one_line(
    tmp_path: Path, make: Any, said: str
) -> None:
    """``-c /dev/zero`` grew the process until MemoryError; a Latin-1 file was a traceback."""
    path = make(tmp_path / "toolcards.yaml")
    with pytest.raises(ConfigError, match=said):
        load_config(path)


@pytest.mark.parametrize("spec", [":", ".x:y", "json"])
def test_a_tools_entry_that_is_not_module_colon_name_is_one_line(tmp_path: Path, spec: str) -> None:
    (tmp_path / "policy.yaml").write_text("default_effect: allow\n")
    path = tmp_path / "toolcards.yaml"
    path.write_text(yaml.safe_dump({"policy": "policy.yaml", "tools": [spec]}))
    with pytest.raises(ConfigError, match="give 'module:attribute'"):
        SurfaceRuntime.open(path)


def test_a_policy_file_that_is_a_device_is_one_line(tmp_path: Path) -> None:
    """``policy: /dev/zero`` (a config may name any file) was read until memory ran out."""
    from toolcards.governance import Policy
    from toolcards.governance.policy.policy import PolicyError

    with pytest.raises(PolicyError, match="not a regular file"):
        Policy.from_yaml(Path("/dev/zero"))


@pytest.mark.parametrize(
    ("team", "card", "loads"),
    [
        ("my team", {"type": "WorkspaceTool"}, False),
        ("../up", {"type": "ExecTool"}, False),
        ("my team", {"type": "WorkspaceTool", "workspace_id": "files"}, True),
        ("my team", {"type": "PlanningTool"}, True),
        ("crew-1", {"type": "WorkspaceTool"}, True),
    ],
)
def test_a_team_id_that_cannot_name_a_cards_workspace_is_a_config_error(
    tmp_path: Path, team: str, card: dict[str, Any], loads: bool
) -> None:
    """A card without a workspace_id keeps its files in a directory named after the team: a
    team id that names none fails the config in one line (it failed every call before)."""
    path = write(tmp_path, {"policy": "policy.yaml", "team_id": team, "cards": [card]})
    if loads:
        assert load_config(path).team_id == team
        return
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(error.value).startswith(
        f"{path}: team_id: cards.0 ({card['type']}): workspace id {team!r} (the team id"
    )


NO_HOME = "~no-such-user-of-this-host"


@pytest.mark.parametrize(
    ("key", "value"),
    [("policy", f"{NO_HOME}/policy.yaml"), ("audit", f"{NO_HOME}/audit.db"),
     ("approvals", f"{NO_HOME}/a.db"), ("store", f"{NO_HOME}/t.db"), ("policy", "a\0.yaml"),
     ("audit", "a\0.db"), ("approvals", "a\0.db"), ("store", "t\0.db")],
    ids=["policy-home", "audit-home", "approvals-home", "store-home", "policy-nul", "audit-nul",
         "approvals-nul", "store-nul"],
)  # fmt: skip
def test_a_path_that_names_no_file_is_one_line_naming_the_field(
    toolcards_cli: InProcessCli, tmp_path: Path, key: str, value: str
) -> None:
    """A ``~user`` this host has no home folder for, or a NUL character, in a config's path
    was a traceback from the opener (RuntimeError, ``ValueError: embedded null byte``)."""
    path = write(tmp_path, {"policy": "policy.yaml", "store": ":memory:", key: value})
    done = toolcards_cli("-c", path, "list")
    assert done.returncode == 2, done
    assert done.stderr.startswith(f"error: {path}: {key}: "), done.stderr
    assert done.stderr.count("\n") == 1


def test_a_data_config_naming_a_link_loop_is_one_line(
    toolcards_cli: InProcessCli, tmp_path: Path
) -> None:
    """A config in a workspaces root naming a link to itself as its policy was a traceback
    (``RuntimeError: Symlink loop``) from the check that its files lie in its folder."""
    folder = tmp_path / "ws" / "w"
    folder.mkdir(parents=True)
    (tmp_path / "ws" / ROOTS_MARKER).write_text("")
    (folder / "loop").symlink_to(folder / "loop")
    (folder / "evil.yaml").write_text("policy: loop\n")
    done = toolcards_cli("-c", "ws/w/evil.yaml", "list", cwd=tmp_path)
    assert done.returncode == 2, done
    message = "(in a workspaces root, where agents write): policy: 'loop' names no file"
    assert message in done.stderr and done.stderr.count("\n") == 1, done.stderr
