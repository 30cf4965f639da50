"""Config keys for a team shared by many processes: `store:` (a path or a PostgreSQL URL),
`system:` (pykka, ray, or a Ray address), where the audit trail, the approvals and the rate
limits live, `approval:`, `sessions:` and `mcp_commands:`."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.cli import InProcessCli
from support.planted import host_approvals_with_a_pending_secret
from toolcards.core.host_files import ROOT_ENV, ROOTS_MARKER
from toolcards.surfaces.config import ConfigError, SurfaceConfig, load_config, parse_config
from toolcards.tools._common import workspace_dir

PG = "postgresql://toolcards:pa55-word@127.0.0.1:5432/team"


def config(tmp_path: Path, **data: Any) -> SurfaceConfig:
    return parse_config(
        {"policy": "policy.yaml", "team_id": "crm", **data},
        source="team.yaml",
        base_dir=tmp_path,
        host_written=True,
    )


@pytest.mark.parametrize("key", ["store", "audit", "approvals"])
def test_a_shared_store_needs_an_explicit_team_id(tmp_path: Path, key: str) -> None:
    data = {"policy": "policy.yaml", key: PG}
    with pytest.raises(ConfigError) as refused:
        parse_config(data, source="team.yaml", base_dir=tmp_path, host_written=True)
    message = str(refused.value)
    assert message.startswith("team.yaml: team_id: postgresql://toolcards:***@127.0.0.1")
    assert "\n" not in message and "pa55-word" not in message


def test_a_postgres_url_is_never_resolved_as_a_path(tmp_path: Path) -> None:
    found = config(tmp_path, store=PG)
    assert found.store_location == PG
    assert found.shared_store


def test_a_store_password_never_appears_in_the_repr(tmp_path: Path) -> None:
    found = config(tmp_path, store=PG, audit=PG, approvals=PG)
    assert "pa55-word" not in repr(found)
    assert "pa55-word" not in found.store_display
    assert "postgresql://toolcards:***@127.0.0.1:5432/team" in repr(found)


def test_a_bad_store_value_is_reported_without_echoing_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="store") as caught:
        config(tmp_path, store={"url": PG})
    assert "pa55-word" not in str(caught.value)


def test_with_a_postgres_store_audit_approvals_and_limits_share_its_database(
    tmp_path: Path,
) -> None:
    found = config(tmp_path, store=PG)
    assert found.audit_location == PG
    assert found.approvals_location == PG
    assert found.rate_limits_location == PG
    assert found.audit_path is None


def test_an_explicit_audit_location_wins_over_the_postgres_store(tmp_path: Path) -> None:
    assert config(tmp_path, store=PG, audit="trail.db").audit_location == str(tmp_path / "trail.db")
    assert config(tmp_path, store=PG, audit=None).audit_location is None


def test_with_sqlite_the_approvals_are_a_file_beside_the_audit_file(tmp_path: Path) -> None:
    found = config(tmp_path, store="team.db", audit="logs/audit.db")
    assert found.approvals_location == str(tmp_path / "logs" / "audit.approvals.db")
    assert found.rate_limits_location is None


def test_without_an_audit_file_the_approvals_are_beside_the_config(tmp_path: Path) -> None:
    assert config(tmp_path, audit=None).approvals_location == str(tmp_path / "approvals.db")


def test_an_explicit_approvals_location_is_used(tmp_path: Path) -> None:
    assert config(tmp_path, approvals="inbox.db").approvals_location == str(tmp_path / "inbox.db")
    assert config(tmp_path, approvals=PG).approvals_location == PG


def test_pykka_passes_through_to_the_team(tmp_path: Path) -> None:
    assert config(tmp_path, store=PG, system="pykka").actor_system() == "pykka"


def test_ray_by_name_is_the_cluster_of_ray_address_in_the_teams_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolcards.runtime import RayActorSystem

    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    system = config(tmp_path, team_id="crm", store=PG, system="ray").actor_system()
    assert isinstance(system, RayActorSystem) and not system.starts_private_cluster()
    assert (system.address, system.namespace) == (None, "toolcards-crm")


def test_a_ray_mapping_builds_a_ray_actor_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolcards.runtime import RayActorSystem

    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")  # for the mapping without an address

    ray = {"ray": {"address": "127.0.0.1:6379"}}
    found = config(tmp_path, team_id="crm", store=PG, system=ray)
    system = found.actor_system()
    assert isinstance(system, RayActorSystem)
    assert (system.address, system.namespace) == ("127.0.0.1:6379", "toolcards-crm")
    named = config(tmp_path, store=PG, system={"ray": {"namespace": "team-a"}}).actor_system()
    assert isinstance(named, RayActorSystem) and named.namespace == "team-a"


@pytest.mark.parametrize(
    "system",
    ["dask", {"ray": {"adress": "x"}}, {"ray": {}, "pykka": {}}, {"ray": {"address": 5}}],
)
def test_an_unknown_system_is_a_config_error_naming_the_field(tmp_path: Path, system: Any) -> None:
    with pytest.raises(ConfigError, match=r"team\.yaml: system"):
        config(tmp_path, system=system)


@pytest.mark.parametrize("store", ["team.db", ":memory:"])
def test_ray_with_a_store_other_processes_cannot_open_is_a_config_error(
    tmp_path: Path, store: str
) -> None:
    with pytest.raises(ConfigError, match=r"team\.yaml: system: ray .*postgresql://"):
        config(tmp_path, store=store, system="ray")


def test_approval_defaults_to_an_out_of_band_approver(tmp_path: Path) -> None:
    found = config(tmp_path)
    assert (found.approval, found.approval_timeout) == ("approver", 300.0)


def test_an_unknown_approval_mode_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"team\.yaml: approval"):
        config(tmp_path, approval="caller")


def test_session_limits_have_defaults_and_refuse_nonsense(tmp_path: Path) -> None:
    limits = config(tmp_path).sessions
    assert (limits.max, limits.per_principal, limits.idle_timeout) == (1000, 100, 900.0)
    with pytest.raises(ConfigError, match=r"sessions\.per_principal"):
        config(tmp_path, sessions={"per_principal": 0})


def test_a_malformed_mcp_command_rule_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"team\.yaml: mcp_commands"):
        config(tmp_path, mcp_commands=[{"command": "uvx", "argz": []}])


class Catcher:
    """A database server's port on 127.0.0.1 that records who connects (and hangs up)."""

    def __init__(self) -> None:
        self.connected: list[str] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, peer = self._server.accept()
                self.connected.append(f"{peer[0]}:{peer[1]}")
                conn.close()

    def close(self) -> None:
        self._server.close()


@pytest.fixture
def catcher(monkeypatch: pytest.MonkeyPatch) -> Iterator[Catcher]:
    """The data's server, and the host's database password where libpq looks for one."""
    monkeypatch.setenv("PGPASSWORD", HOST_PASSWORD)
    found = Catcher()
    yield found
    found.close()


HOST_PASSWORD = "host-db-secret-4e1a"
OPENS = {"store": ("list",), "audit": ("audit", "tail"), "approvals": ("approvals", "list")}
"""A command that opens the database of each key."""


@pytest.mark.parametrize("key", ["store", "audit", "approvals"])
@pytest.mark.parametrize(
    ("user", "refusal"),
    [("alice", "without its own password"), ("alice:own-pw", "private network")],
    ids=["no-password", "loopback"],
)
@pytest.mark.timeout(120)
def test_a_data_config_sends_no_host_password_where_it_says(
    toolcards_cli: InProcessCli,
    catcher: Catcher,
    tmp_path: Path,
    key: str,
    user: str,
    refusal: str,
) -> None:
    """A config in a workspaces root is data: a database URL without its own password would
    get the operator's PGPASSWORD from libpq, a loopback one reach this host's servers."""
    folder = tmp_path / "ws" / "w"
    folder.mkdir(parents=True)
    (tmp_path / "ws" / ".toolcards-workspaces").write_text("")
    (folder / "policy.yaml").write_text("default_effect: deny\n")
    url = f"postgresql://{user}@127.0.0.1:{catcher.port}/team"
    (folder / "evil.yaml").write_text(f"team_id: t\npolicy: policy.yaml\n{key}: '{url}'\n")
    done = toolcards_cli("-c", "ws/w/evil.yaml", *OPENS[key], cwd=tmp_path)
    assert catcher.connected == []
    assert done.returncode == 2, done
    message = done.stderr.strip()
    assert f"(in a workspaces root, where agents write): {key}: " in message
    assert refusal in message and "\n" not in message
    assert HOST_PASSWORD not in message and "own-pw" not in message


@pytest.mark.parametrize("key", ["store", "audit", "approvals"])
def test_the_host_written_config_keeps_its_loopback_database(tmp_path: Path, key: str) -> None:
    for url in ("postgresql://alice@127.0.0.1:5432/team", PG):
        assert getattr(config(tmp_path, **{key: url}), key) == url


def test_a_data_config_names_no_ray_cluster(tmp_path: Path) -> None:
    data = {"policy": "policy.yaml", "team_id": "t", "store": "team.db"}
    ray = {"ray": {"address": "ray://attacker.example:10001"}}
    with pytest.raises(ConfigError, match=r"^team\.yaml: system: .*names a Ray cluster to join"):
        parse_config({**data, "system": ray}, source="team.yaml", base_dir=tmp_path)
    assert parse_config({**data, "system": "pykka"}, source="team.yaml").system == "pykka"


PROBE_OAUTH = {
    "issuer": "https://idp.example.com/",
    "resource": "http://127.0.0.1:18735/mcp",
    "jwks_uri": "http://127.0.0.1:18734/internal/admin?action=delete-everything",
}
LOOPBACK_ISSUER = {"issuer": "http://localhost:18734/", "resource": "http://127.0.0.1:18735/mcp"}


@pytest.mark.parametrize(
    ("key", "oauth"),
    [("jwks_uri", PROBE_OAUTH), ("issuer", LOOPBACK_ISSUER)],
    ids=["jwks_uri", "issuer"],
)
def test_a_data_config_has_the_server_fetch_nothing_on_the_private_network(
    toolcards_cli: InProcessCli, tmp_path: Path, key: str, oauth: dict[str, str]
) -> None:
    """An agent wrote an issuer's keys (or the issuer) on loopback into a config in its
    workspace; served over HTTP, any client's JWT-shaped token made the server GET that URL
    (``/internal/admin?action=delete-everything``). Refused as data in one line naming the
    field; the operator's own config keeps it (a local issuer under test)."""
    folder = tmp_path / "ws" / "w"
    folder.mkdir(parents=True)
    (tmp_path / "ws" / ".toolcards-workspaces").write_text("")
    for where in (folder, tmp_path):
        (where / "policy.yaml").write_text("default_effect: deny\n")
    text = json.dumps({"team_id": "t", "policy": "policy.yaml", "principals": {"oauth": oauth}})
    (folder / "evil.yaml").write_text(text)
    done = toolcards_cli("-c", "ws/w/evil.yaml", "list", cwd=tmp_path)
    assert done.returncode == 2, done
    message = done.stderr.strip()
    assert f"(in a workspaces root, where agents write): principals.oauth.{key}: " in message
    assert "private network" in message and "\n" not in message
    (tmp_path / "own.yaml").write_text(text)
    own = load_config(tmp_path / "own.yaml").principals.oauth
    assert own is not None and getattr(own, key) == oauth[key]


def test_a_data_config_cannot_point_the_workspace_tools_at_a_host_folder(
    toolcards_cli: InProcessCli, tmp_path: Path
) -> None:
    """An agent wrote ``workspaces: <host folder>`` into a config in its workspace; run by the
    operator, its workspace tools read the operator's private key and wrote ``.bashrc``."""
    host = tmp_path / "operator"
    (host / "home" / ".ssh").mkdir(parents=True)
    (host / "home" / ".ssh" / "id").write_text("operator-secret\n")
    folder = tmp_path / "ws" / "w"
    folder.mkdir(parents=True)
    (tmp_path / "ws" / ".toolcards-workspaces").write_text("")
    (folder / "policy.yaml").write_text("default_effect: allow\n")
    card = "{type: WorkspaceTool, workspace_id: home}"
    (folder / "evil.yaml").write_text(
        f"team_id: t\npolicy: policy.yaml\nworkspaces: {host}\ncards: [{card}]\n"
    )
    done = toolcards_cli(
        "-c", "ws/w/evil.yaml", "call", "workspace_read", "path=.ssh/id", cwd=tmp_path
    )
    assert done.returncode == 2, done
    assert "operator-secret" not in done.stdout
    assert "workspaces: only the operator's config file" in done.stderr.strip()


def _team1_writes_for_team2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, card: str
) -> tuple[Path, Path]:
    """A workspaces root (the host's, ``$TOOLCARDS_WORKSPACES_ROOT``) holding team2's
    ``secret.txt`` and, in team1's folder, a config team1's agent wrote naming ``team_id:
    team2`` and ``card``: the root, and team1's folder."""
    root = tmp_path / "ws"
    (root / "team2").mkdir(parents=True)
    (root / ROOTS_MARKER).write_text("")
    (root / "team2" / "secret.txt").write_text("team2-only-secret\n")
    folder = root / "team1"
    folder.mkdir()
    (folder / "policy.yaml").write_text("default_effect: allow\n")
    config = f"team_id: team2\npolicy: policy.yaml\ncards: [{card}]\n"
    (folder / "toolcards.yaml").write_text(config)
    monkeypatch.setenv(ROOT_ENV, str(root))
    return root, folder


def test_a_data_config_keeps_its_workspaces_beside_it_under_the_hosts_root(
    toolcards_cli: InProcessCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent of team1 wrote a config naming ``team_id: team2`` (and no ``workspaces:``)
    into its workspace; run by the operator with ``$TOOLCARDS_WORKSPACES_ROOT`` set, its
    workspace tools read team2's files and wrote into them. Its workspaces lie beside it."""
    root, folder = _team1_writes_for_team2(tmp_path, monkeypatch, "{type: WorkspaceTool}")
    call = ["-c", str(folder / "toolcards.yaml"), "call"]
    read = toolcards_cli(*call, "workspace_read", "path=secret.txt", cwd=tmp_path)
    written = toolcards_cli(*call, "workspace_write", "path=planted.txt", "content=x", cwd=tmp_path)
    assert "team2-only-secret" not in read.stdout + read.stderr
    assert written.returncode == 0, written
    assert sorted(p.name for p in (root / "team2").iterdir()) == ["secret.txt"]
    assert (folder / "workspaces" / "team2" / "planted.txt").read_text() == "x"
    (tmp_path / "own.yaml").write_text("policy: policy.yaml\n")  # the operator's follows it
    assert load_config(tmp_path / "own.yaml").workspaces_root == root.resolve()


@pytest.mark.parametrize("moment", ["after the config was read", "while a call opens it"])
def test_a_data_config_follows_no_workspaces_link_planted_after_it_was_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moment: str
) -> None:
    """The agent of team1 that wrote a config naming ``workspace_id: team2`` swapped the
    ``workspaces`` folder beside it for a link to the host's root once a long-lived process
    had read it: each call resolved the folder again, read team2's secret.txt and wrote
    planted.txt there. The root recorded is refused once it is no longer its real path; an
    operator's link (outside every workspaces root) is still followed where it points."""
    card = "{type: WorkspaceTool, workspace_id: team2}"
    root, folder = _team1_writes_for_team2(tmp_path, monkeypatch, card)
    [card] = load_config(folder / "toolcards.yaml").load_cards()
    tools = {fn.__name__: fn for fn in card.get_tools()}
    assert tools["workspace_write"](path="own.txt", content="x")  # its own, beside it

    def plant() -> None:
        if not (folder / "workspaces").is_symlink():
            shutil.rmtree(folder / "workspaces")
            (folder / "workspaces").symlink_to(root)

    if moment == "after the config was read":
        plant()
    else:  # after the root was checked, before the workspace is resolved
        mark = workspace_dir._mark_agents_ground

        def plant_then_mark(at: Path) -> None:
            plant()
            mark(at)

        monkeypatch.setattr(workspace_dir, "_mark_agents_ground", plant_then_mark)
    refused = "no longer its real path|escapes the workspaces root"
    with pytest.raises(ValueError, match=refused):
        tools["workspace_read"](path="secret.txt")
    with pytest.raises(ValueError, match=refused):
        tools["workspace_write"](path="planted.txt", content="x")
    assert sorted(p.name for p in (root / "team2").iterdir()) == ["secret.txt"]
    own = tmp_path / "own.yaml"
    own.write_text("policy: policy.yaml\nworkspaces: link\ncards: [{type: WorkspaceTool}]\n")
    (tmp_path / "link").symlink_to(tmp_path)
    [card] = load_config(own).load_cards()
    for target in ("a", "b"):  # the operator re-points its own link: followed
        (tmp_path / target).mkdir()
        (tmp_path / "link").unlink()
        (tmp_path / "link").symlink_to(tmp_path / target)
        assert card.workspace().root == tmp_path / target / "default"


def test_a_data_config_follows_no_workspaces_link_out_of_its_folder(tmp_path: Path) -> None:
    """The ``workspaces`` folder beside a data config is its own: a link there to the host's
    root is refused, as a link for any file it names."""
    (tmp_path / "ws" / "w").mkdir(parents=True)
    (tmp_path / "ws" / "w" / "workspaces").symlink_to(tmp_path / "ws")
    data = {"policy": "policy.yaml", "team_id": "t"}
    with pytest.raises(ConfigError, match=r"^team\.yaml: workspaces: .*outside the config's"):
        parse_config(data, source="team.yaml", base_dir=tmp_path / "ws" / "w")


@pytest.mark.parametrize(
    ("key", "value"),
    [("store", "{out}/team.db"), ("audit", "{out}/audit.db"), ("approvals", "../../a.db"),
     ("policy", "{out}/policy.yaml"), ("store", "link/team.db")],
    ids=["store", "audit", "approvals-up", "policy", "store-through-a-link"],
)  # fmt: skip
def test_a_data_config_keeps_its_files_in_its_own_folder(
    tmp_path: Path, key: str, value: str
) -> None:
    """Files a data config names (its databases, its policy) were opened wherever it said: a
    host folder's database written, the host's own policy file read as this config's."""
    out = tmp_path / "host"
    out.mkdir()
    (tmp_path / "ws" / "w").mkdir(parents=True)
    (tmp_path / "ws" / "w" / "link").symlink_to(out)
    data = {"policy": "policy.yaml", "team_id": "t", key: value.format(out=out)}
    with pytest.raises(ConfigError, match=rf"^team\.yaml: {key}: .*outside the config's folder"):
        parse_config(data, source="team.yaml", base_dir=tmp_path / "ws" / "w")
    inside = {**data, key: "own/x.db" if key != "policy" else "own.yaml"}
    assert parse_config(inside, source="team.yaml", base_dir=tmp_path / "ws" / "w").team_id == "t"


@pytest.mark.parametrize(
    ("audit", "derived"),
    [("", "audit.approvals.db"), ("audit: null\n", "approvals.db")],
    ids=["beside-the-audit-file", "beside-the-config"],
)
def test_a_data_config_opens_no_derived_approvals_file_through_a_link(
    toolcards_cli: InProcessCli, tmp_path: Path, audit: str, derived: str
) -> None:
    """A data config naming no ``approvals:`` opened the file derived from its audit file
    unchecked: an agent planted it as a link to the host's approvals, and the approver its
    config chose listed the host's waiting calls unredacted and granted them."""
    host = host_approvals_with_a_pending_secret(tmp_path / "host")
    folder = tmp_path / "ws" / "w"
    folder.mkdir(parents=True)
    (tmp_path / "ws" / ".toolcards-workspaces").write_text("")
    (folder / "policy.yaml").write_text("default_effect: deny\n")
    (folder / derived).symlink_to(host)
    me = "{id: someone, roles: [approver]}"
    (folder / "evil.yaml").write_text(
        f"team_id: toolcards\npolicy: policy.yaml\n{audit}principals: {{local: {me}}}\n"
    )
    done = toolcards_cli("-c", "ws/w/evil.yaml", "approvals", "list", cwd=tmp_path)
    assert done.returncode == 2, done
    assert "HOST-SECRET" not in done.stdout + done.stderr
    assert f"approvals: '{folder.resolve() / derived}' lies outside" in done.stderr


@pytest.mark.parametrize(
    "planted",
    ["audit.approvals.db.grants", "team.db.lock", "audit.db-wal", "audit.approvals.db-shm"],
)
def test_a_data_config_opens_no_file_beside_its_databases_through_a_link(
    tmp_path: Path, planted: str
) -> None:
    """The files opened beside a database (the grants stamp, the store's lock, SQLite's
    journals) lie in the config's folder too: each is opened for writing."""
    (tmp_path / "host").mkdir()
    folder = tmp_path / "ws" / "w"
    folder.mkdir(parents=True)
    (folder / planted).symlink_to(tmp_path / "host" / "x")
    data = {"policy": "policy.yaml", "team_id": "t"}
    with pytest.raises(ConfigError, match=rf"^team\.yaml: \w+: .*{planted}' lies outside"):
        parse_config(data, source="team.yaml", base_dir=folder)


def test_a_data_config_names_the_real_paths_it_checked(tmp_path: Path) -> None:
    """The openers open the paths checked: a folder link on the way, pointed at the host's
    folder after the check, is not followed."""
    folder = tmp_path / "ws" / "w"
    (folder / "own").mkdir(parents=True)
    (folder / "link").symlink_to(folder / "own")
    data = {"policy": "link/policy.yaml", "team_id": "t", "store": "link/team.db"}
    found = parse_config({**data, "audit": "link/audit.db"}, source="t.yaml", base_dir=folder)
    (folder / "link").unlink()
    (folder / "link").symlink_to(tmp_path)
    own = folder.resolve() / "own"
    assert found.store_location == str(own / "team.db")
    assert found.audit_path == own / "audit.db"
    assert found.approvals_location == str(own / "audit.approvals.db")
    assert found.policy_path == own / "policy.yaml"
