"""Every store location is parsed once, by StoreLocation: paths, memory, PostgreSQL URLs;
anything else is one clear error that never echoes a password."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolcards.runtime import Team
from toolcards.stores import StoreLocation, UnknownStoreScheme
from toolcards.surfaces.config import ConfigError, load_config


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("team.db", "sqlite"),
        ("/var/lib/toolcards/team.db", "sqlite"),
        ("./state/team.db", "sqlite"),
        (":memory:", "memory"),
        ("postgresql://u:pw@127.0.0.1:5432/db", "postgres"),
        ("postgres://u@127.0.0.1/db", "postgres"),
        ("POSTGRESQL://u@127.0.0.1/db", "postgres"),
    ],
)
def test_accepted_locations_parse_to_their_backend(text: str, kind: str) -> None:
    assert StoreLocation.parse(text).kind == kind


@pytest.mark.parametrize(
    "text",
    ["mysql://u:pw@host/x", "sqlite:///x.db", "redis://h", "postgresql:x", "file://a", "  "],
)
def test_other_schemes_are_one_error_naming_the_accepted_ones(text: str) -> None:
    with pytest.raises(UnknownStoreScheme) as caught:
        StoreLocation.parse(text)
    message = str(caught.value)
    assert "postgresql://" in message and ":memory:" in message
    assert "pw" not in message and "\n" not in message


def test_a_printed_location_never_shows_the_password() -> None:
    where = StoreLocation.parse("postgresql://u:s3cret@127.0.0.1/db")
    assert "s3cret" not in str(where) + repr(where) + where.display
    assert where.target.endswith("@127.0.0.1/db")


def test_a_team_on_an_unknown_scheme_creates_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnknownStoreScheme):
        Team("t1", store="mysql://u:pw@host/x")
    assert list(tmp_path.iterdir()) == []


def test_a_config_with_an_unknown_scheme_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text("default_effect: allow\n")
    path = tmp_path / "toolcards.yaml"
    path.write_text("policy: policy.yaml\nstore: mysql://u:pw@host/x\n")
    with pytest.raises(ConfigError, match="unknown store scheme") as caught:
        load_config(path)
    assert "pw@" not in str(caught.value)
    assert set(tmp_path.iterdir()) == {path, tmp_path / "policy.yaml"}
