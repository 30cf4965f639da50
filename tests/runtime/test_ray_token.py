"""A Ray cluster started with token authentication refuses a process without its token (or
with another) in one line, before Ray's own 20 s of retries: against a real head started with
``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN`` in its own environment only. Each test sets the
test process's token sources itself, with ``HOME`` in a temporary folder (the machine's
``~/.ray/auth_token`` is never read)."""

from __future__ import annotations

import contextlib
import os
import secrets
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.launch import PYTHON
from toolcards.runtime.ray_address import check_admitted
from toolcards.runtime.system import ActorSystemUnavailable

pytestmark = pytest.mark.xdist_group("ray")

HEAD = Path(__file__).with_name("ray_token_head.py")
NEEDS_TOKEN = "needs its token: export RAY_AUTH_MODE=token and RAY_AUTH_TOKEN="
REFUSED = "refused this process's token: export RAY_AUTH_TOKEN="
TIMEOUT = 10.0  # the probe's bound; a refusal comes back at once
_AUTH_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS")


_CONNECT = """
import sys
from toolcards.runtime import RayActorSystem
from toolcards.runtime.system import ActorSystemUnavailable

try:
    RayActorSystem(address=sys.argv[1], connect_timeout=10).connect()
except ActorSystemUnavailable as exc:
    print(exc)
    sys.exit(3)
print("connected")
"""


@dataclass(frozen=True)
class TokenCluster:
    address: str
    token: str


def _first_line(process: subprocess.Popen[bytes], bound: float) -> str:
    """The process's first line of output, waited for at most ``bound`` seconds ('' when it
    ended or the time ran out)."""
    assert process.stdout is not None
    deadline = time.monotonic() + bound
    line = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            if selector.select(deadline - time.monotonic()):
                chunk = os.read(process.stdout.fileno(), 256)
                if not chunk:
                    break
                line += chunk
    return line.decode().strip() if line.endswith(b"\n") else ""


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Close the head's stdin (it shuts its cluster down), then its process group if it
    lingers."""
    assert process.stdin is not None
    with contextlib.suppress(OSError):
        process.stdin.close()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def token_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenCluster]:
    """One Ray head for the module's tests, with a token only its own environment knows (the
    module's "ray" mark keeps its tests in the suite's one Ray group)."""
    pytest.importorskip("ray")
    token = secrets.token_hex(32)
    folder = tmp_path_factory.mktemp("ray-token-head")
    env = {k: v for k, v in os.environ.items() if k not in _AUTH_VARIABLES}
    env.update(
        HOME=str(folder),
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN=token,
        RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
    )
    log = folder / "head.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(HEAD)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            start_new_session=True,
        )
    try:
        address = _first_line(process, bound=120)
        if not address:
            pytest.fail(
                f"the token-authenticated Ray head did not start: {log.read_text()[-2000:]}"
            )
        yield TokenCluster(address, token)
    finally:
        _stop(process)


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """This process with no token source of its own: no Ray auth variables, ``HOME`` empty."""
    for name in _AUTH_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def _refusal(address: str) -> str:
    with pytest.raises(ActorSystemUnavailable) as caught:
        check_admitted(address, TIMEOUT)
    line = str(caught.value)
    assert "\n" not in line
    return line


class TestTokenCluster:
    """Every test against the one head (see ``token_cluster``)."""

    def test_without_the_token_mode_the_refusal_names_the_token(
        self, token_cluster: TokenCluster, home: Path
    ) -> None:
        (home / ".ray").mkdir()
        (home / ".ray" / "auth_token").write_text(token_cluster.token)  # unused without the mode
        assert f"{token_cluster.address} {NEEDS_TOKEN}" in _refusal(token_cluster.address)

    def test_a_wrong_token_is_refused_in_one_line(
        self, token_cluster: TokenCluster, home: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("RAY_AUTH_MODE", "token")
        monkeypatch.setenv("RAY_AUTH_TOKEN", secrets.token_hex(32))
        assert f"{token_cluster.address} {REFUSED}" in _refusal(token_cluster.address)

    @pytest.mark.parametrize("source", ["RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "home"])
    def test_each_token_source_is_sent_in_rays_order(
        self, token_cluster: TokenCluster, home: Path, monkeypatch: pytest.MonkeyPatch, source: str
    ) -> None:
        """The right token from one source is admitted, while every source after it in Ray's order
        holds a wrong one; the same source with a wrong token is refused."""
        monkeypatch.setenv("RAY_AUTH_MODE", "token")
        (home / ".ray").mkdir()
        default, named = home / ".ray" / "auth_token", home / "named_token"

        def give(token: str) -> None:
            wrong = secrets.token_hex(32)
            default.write_text((token if source == "home" else wrong) + "\n")
            if source != "home":
                named.write_text((token if source == "RAY_AUTH_TOKEN_PATH" else wrong) + "\n")
                monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(named))
            if source == "RAY_AUTH_TOKEN":
                monkeypatch.setenv("RAY_AUTH_TOKEN", token)

        give(token_cluster.token)
        check_admitted(token_cluster.address, TIMEOUT)
        give(secrets.token_hex(32))
        assert f"{token_cluster.address} {REFUSED}" in _refusal(token_cluster.address)

    def test_a_token_file_is_read_up_to_4096_bytes(
        self, token_cluster: TokenCluster, home: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Past 4096 bytes a token file is not read: an oversized file sends its first 4096 (and
        is refused); the right token padded with blanks to 4096 bytes is admitted whatever follows
        (Ray, reading it all, would refuse it after its retries: the check only turns refusals
        into one line)."""
        monkeypatch.setenv("RAY_AUTH_MODE", "token")
        named = home / "token"
        monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(named))
        named.write_text("x" * 100_000)
        assert f"{token_cluster.address} {REFUSED}" in _refusal(token_cluster.address)
        named.write_text(token_cluster.token.ljust(4096) + "x" * 100_000)
        check_admitted(token_cluster.address, TIMEOUT)

    def test_an_empty_token_file_is_no_token(
        self, token_cluster: TokenCluster, home: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An empty (or blank) file named by ``RAY_AUTH_TOKEN_PATH`` gives no token, and
        ``~/.ray/auth_token`` is not read in its place."""
        monkeypatch.setenv("RAY_AUTH_MODE", "token")
        (home / ".ray").mkdir()
        (home / ".ray" / "auth_token").write_text(token_cluster.token)
        named = home / "token"
        monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(named))
        for text in ("", " \n"):
            named.write_text(text)
            assert f"{token_cluster.address} {NEEDS_TOKEN}" in _refusal(token_cluster.address)

    @pytest.mark.parametrize(
        "content",
        [b"caf\xe9", "café".encode(), b"a\x01b", b"\x00" * 10_000],
        ids=["not-utf8", "accent", "control", "nuls"],
    )
    def test_a_token_file_a_header_cannot_carry_is_refused_in_one_line(
        self,
        token_cluster: TokenCluster,
        home: Path,
        monkeypatch: pytest.MonkeyPatch,
        content: bytes,
    ) -> None:
        """A token file that is not printable ASCII (not UTF-8, accents, control characters, NULs)
        is named in one line instead of a decoding traceback or gRPC's own error lines."""
        monkeypatch.setenv("RAY_AUTH_MODE", "token")
        named = home / "token"
        named.write_bytes(content)
        monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(named))
        assert f"the Ray token in {named} is not printable ASCII" in _refusal(token_cluster.address)

    def test_a_token_variable_a_header_cannot_carry_is_refused_in_one_line(
        self, token_cluster: TokenCluster, home: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("RAY_AUTH_MODE", "token")
        monkeypatch.setenv("RAY_AUTH_TOKEN", token_cluster.token + "\u00e9\x01")
        line = _refusal(token_cluster.address)
        assert "the Ray token in RAY_AUTH_TOKEN is not printable ASCII" in line
        assert token_cluster.token not in line

    def test_a_ray_actor_system_without_the_token_fails_in_one_line(
        self, token_cluster: TokenCluster, home: Path
    ) -> None:
        """Through the public API, in a process of its own (one Ray connection per process: this
        one may hold the suite's cluster)."""
        env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
        done = subprocess.run(
            [PYTHON, "-c", _CONNECT, token_cluster.address],
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        assert done.returncode == 3, done.stdout + done.stderr[-2000:]
        assert done.stdout.splitlines() == [
            f"the Ray cluster at {token_cluster.address} {NEEDS_TOKEN}<the token the cluster was "
            "started with>"
        ]
