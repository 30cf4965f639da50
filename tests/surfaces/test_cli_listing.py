"""``toolcards list``'s cache (surfaces/cli/listing.py), on real processes over a copy of
examples/team: a repeated ``list`` is read from the cache (it imports no pydantic) and prints
what a listing made afresh prints (made in the test's process); an edit of the policy or of
the config's principal, even one that keeps the files' size and time, or of a link on the way
to the policy, is listed at once; a damaged entry is a miss (the entry point in this process:
reading the entry is the subject)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.cli import EXAMPLE_STATE, InProcessCli
from support.launch import REAL_TOOLCARDS
from support.planted import feeding_fifo
from toolcards.surfaces.cli import listing, run

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "team"


@pytest.fixture
def team(tmp_path: Path) -> Path:
    copy = tmp_path / "team"
    shutil.copytree(EXAMPLE, copy, ignore=EXAMPLE_STATE)
    config = copy / "toolcards.yaml"
    _settle(config, copy / "policy.yaml")
    return config


def _settle(*files: Path) -> None:
    """Date ``files`` a minute back: the cache takes no file changed just before a listing."""
    past = time.time_ns() - 60 * 1_000_000_000
    for file in files:
        os.utime(file, ns=(past, past))


def _rewrite(file: Path, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` (of the same length) in ``file``, keeping its times."""
    assert len(old) == len(new)
    st = file.stat()
    text = file.read_text(encoding="utf-8")
    assert old in text
    file.write_text(text.replace(old, new), encoding="utf-8")
    os.utime(file, ns=(st.st_atime_ns, st.st_mtime_ns))


def _run_list(
    config: Path, *flags: str, cache: Path, as_json: bool = False, path: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``toolcards [--json] list [flags] -c config`` run (``-X importtime``); ``path``: the
    ``PYTHONPATH`` (none by default: the console script as installed, since a working
    directory on ``sys.path``, which the listing writes to, is a miss every time)."""
    root = ["--json"] if as_json else []
    argv = [sys.executable, "-X", "importtime", str(REAL_TOOLCARDS), *root, "list", *flags]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if path is not None:
        env["PYTHONPATH"] = path
    return subprocess.run(
        [*argv, "-c", str(config)],
        env={**env, "XDG_CACHE_HOME": str(cache)},
        cwd=config.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _list(
    config: Path, *flags: str, cache: Path, as_json: bool = False, path: str | None = None
) -> tuple[str, set[str]]:
    """What ``toolcards [--json] list [flags] -c config`` prints (:func:`_run_list`), and
    the modules it imported."""
    done = _run_list(config, *flags, cache=cache, as_json=as_json, path=path)
    assert done.returncode == 0, done.stderr[-2000:]
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return done.stdout, modules


def _cached(modules: set[str]) -> bool:
    return "pydantic" not in modules


def _made(cli: InProcessCli, config: Path, *flags: str, cache: Path, as_json: bool = False) -> str:
    """What a listing made afresh prints (the entry point in this process, an empty cache)."""
    root = ["--json"] if as_json else []
    env: dict[str, str | None] = {"XDG_CACHE_HOME": str(cache)}
    done = cli(*root, "list", *flags, "-c", config, cwd=config.parent, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_repeated_list_is_read_from_the_cache_and_prints_the_same(
    team: Path, tmp_path: Path, toolcards_cli: InProcessCli
) -> None:
    cache = tmp_path / "cache"
    _list(team, cache=cache)  # made here: the entry holds every tool's row, for every form
    for as_json in [False, True]:
        for flags in [(), ("--all",)]:
            fresh_cache = tmp_path / f"fresh-{as_json}-{len(flags)}"
            made = _made(toolcards_cli, team, *flags, cache=fresh_cache, as_json=as_json)
            read, read_modules = _list(team, *flags, cache=cache, as_json=as_json)
            assert _cached(read_modules), (as_json, flags)
            assert read == made, (as_json, flags)
    assert "update_planning" in read
    assert len(list((cache / "toolcards").glob("list-*.json"))) == 1  # one for the config


def _names(listed: str) -> set[str]:
    return {row["name"] for row in json.loads(listed)}


def _listed_after_an_edit(
    team: Path, tmp_path: Path, cli: InProcessCli, edited: Path, old: str, new: str
) -> str:
    """The listing from the cache's command after ``old`` became ``new`` in ``edited`` (the
    same size, the same file times), checked made afresh and without the planning tool."""
    cache = tmp_path / "cache"
    _list(team, cache=cache)
    before, modules = _list(team, cache=cache, as_json=True)
    assert _cached(modules) and "update_planning" in _names(before)
    _rewrite(edited, old, new)
    fresh = _made(cli, team, cache=tmp_path / "fresh", as_json=True)
    after, modules = _list(team, cache=cache, as_json=True)
    assert not _cached(modules)
    assert after == fresh and "update_planning" not in _names(after)
    return after


def test_an_edited_policy_is_listed_at_once(
    team: Path, tmp_path: Path, toolcards_cli: InProcessCli
) -> None:
    cache = tmp_path / "cache"
    # the writers' rule now names a role alice lacks
    policy = team.parent / "policy.yaml"
    fresh = _listed_after_an_edit(
        team, tmp_path, toolcards_cli, policy, "roles: [writer]", "roles: [wrote_]"
    )
    again, modules = _list(team, cache=cache, as_json=True)
    assert _cached(modules) and again == fresh
    every, _ = _list(team, "--all", cache=cache, as_json=True)
    denied = {row["name"] for row in json.loads(every) if not row["callable"]}
    assert "update_planning" in denied


def test_another_principal_in_the_config_is_listed_for_that_principal(
    team: Path, tmp_path: Path, toolcards_cli: InProcessCli
) -> None:
    _listed_after_an_edit(
        team, tmp_path, toolcards_cli, team, "roles: [writer, viewer]", "roles: [reader, viewer]"
    )


def _entries_read(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each listing in this process from now on was read from the cache, in order."""
    read: list[bool] = []

    def cached_rows(config: Path) -> list[dict[str, object]] | None:
        rows = listing.cached_rows(config)
        read.append(rows is not None)
        return rows

    monkeypatch.setattr(run, "cached_rows", cached_rows)
    return read


def test_a_damaged_entry_is_a_miss(
    team: Path, tmp_path: Path, toolcards_cli: InProcessCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the entry point in this process (what reads the cache is the subject, not the process):
    # each damaged entry is read as a miss and the listing is made afresh, the same
    read = _entries_read(monkeypatch)
    cache = tmp_path / "cache"
    made = _made(toolcards_cli, team, cache=cache)
    entries = list((cache / "toolcards").glob("list-*.json"))
    assert len(entries) == 1 and read == [False]
    assert _made(toolcards_cli, team, cache=cache) == made and read[-1]  # a hit when whole
    entry = json.loads(entries[0].read_text(encoding="utf-8"))
    damaged = [
        "{",
        json.dumps({"format": 1, "rows": [{"name": "forged"}]}),
        "[]",
        *(
            json.dumps({**entry, "rows": rows})
            for rows in [[{"name": "forged"}], [{"name": 1, "callable": 1, "hints": 1}], {}]
        ),
        json.dumps(
            {
                **entry,
                "rows": [{"name": "forged", "callable": True, "hints": [], "description": "x"}],
                "context": "another environment",
            }
        ),
    ]
    for damage in damaged:
        entries[0].write_text(damage, encoding="utf-8")
        assert _made(toolcards_cli, team, cache=cache) == made and not read[-1], damage


def test_a_config_changed_while_listing_is_not_cached(team: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    later = time.time_ns() + 3600 * 1_000_000_000  # changed after the listing started
    os.utime(team.parent / "policy.yaml", ns=(later, later))
    _list(team, cache=cache)
    assert list((cache / "toolcards").glob("list-*.json")) == []  # so the next one is a miss
    _settle(team.parent / "policy.yaml")
    _list(team, cache=cache)
    _, modules = _list(team, cache=cache)
    assert _cached(modules)


def test_a_listing_with_tools_of_another_package_is_not_cached(team: Path, tmp_path: Path) -> None:
    # a module's tools may be made from anything (here: one per line of a file it reads)
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "made_tools.py").write_text(
        "from pathlib import Path\n"
        "def _tool(name):\n"
        "    def tool() -> str:\n"
        "        return name\n"
        "    tool.__name__ = name\n"
        "    tool.__doc__ = f'Say {name}.'\n"
        "    return tool\n"
        "TOOLS = [_tool(n) for n in (Path(__file__).parent / 'names.txt').read_text().split()]\n",
        encoding="utf-8",
    )
    (modules / "names.txt").write_text("say_hello\n", encoding="utf-8")
    text = team.read_text(encoding="utf-8")
    team.write_text(
        text.replace("policy: policy.yaml", "tools: ['made_tools:TOOLS']\npolicy: policy.yaml")
    )
    _settle(team, *modules.iterdir())
    cache = tmp_path / "cache"
    first, _ = _list(team, cache=cache, as_json=True, path=str(modules))
    assert "say_hello" in _names(first)
    (modules / "names.txt").write_text("say_goodbye\n", encoding="utf-8")
    _settle(modules / "names.txt")
    then, modules_loaded = _list(team, cache=cache, as_json=True, path=str(modules))
    assert not _cached(modules_loaded)
    assert "say_goodbye" in _names(then) and "say_hello" not in _names(then)
    assert list((cache / "toolcards").glob("list-*.json")) == []


def test_a_policy_swapped_for_a_fifo_is_refused_as_without_an_entry(
    team: Path, tmp_path: Path
) -> None:
    """The cache compared the policy's text read whole and blocking: a FIFO in its place hung
    ``list`` (a sparse file of 800 MiB was read whole) where the config loader refuses it at
    once. Now it is read as the loader reads it: a miss, refused the same. The FIFO here
    answers a reader with the policy's own text, so a read would show."""
    cache = tmp_path / "cache"
    _list(team, cache=cache)
    _, modules = _list(team, cache=cache)
    assert _cached(modules)
    policy = team.parent / "policy.yaml"
    text = policy.read_text(encoding="utf-8")
    with feeding_fifo(policy, text):
        done = _run_list(team, cache=cache)
    assert done.returncode != 0 and "update_planning" not in done.stdout
    assert "the policy file is not a regular file" in done.stderr


@pytest.mark.parametrize("linked", ["current/policy.yaml", "policy.yaml"])
def test_a_policy_link_re_pointed_is_listed_at_once(
    team: Path,
    tmp_path: Path,
    toolcards_cli: InProcessCli,
    monkeypatch: pytest.MonkeyPatch,
    linked: str,
) -> None:
    """The entry held the policy's real path: after a link on the way to it was re-pointed
    (a folder ``current -> releases/v2`` or the file itself) to a release where alice may
    read no plan, ``list`` read the entry still and printed every tool of v1."""
    read = _entries_read(monkeypatch)
    folder = team.parent
    v1, v2 = folder / "releases" / "v1", folder / "releases" / "v2"
    v1.mkdir(parents=True)
    v2.mkdir()
    text = (folder / "policy.yaml").read_text(encoding="utf-8")
    (folder / "policy.yaml").rename(v1 / "policy.yaml")
    narrowed = text.replace('targets: ["*"]', "targets: [workspace_read]")
    assert narrowed != text
    (v2 / "policy.yaml").write_text(narrowed, encoding="utf-8")
    config = team.read_text(encoding="utf-8")
    team.write_text(config.replace("policy: policy.yaml", f"policy: {linked}"), encoding="utf-8")
    _settle(team, v2 / "policy.yaml")
    link = folder / linked.split("/")[0]

    def point(release: Path) -> None:
        target = release.relative_to(folder)
        (folder / "new").symlink_to(target if link.name == "current" else target / link.name)
        (folder / "new").replace(link)  # as `ln -sfn` re-points a link

    point(v1)
    cache = tmp_path / "cache"
    before = _made(toolcards_cli, team, cache=cache, as_json=True)
    assert _made(toolcards_cli, team, cache=cache, as_json=True) == before and read == [False, True]
    assert "update_planning" in _names(before)
    point(v2)
    fresh = _made(toolcards_cli, team, cache=tmp_path / "fresh", as_json=True)
    assert "workspace_read" in _names(fresh) and "update_planning" not in _names(fresh)
    assert _made(toolcards_cli, team, cache=cache, as_json=True) == fresh and not read[-1]
