"""The sandbox's ``/etc``: a staged copy of the listed host files, bound with one mount.

Binding each file on its own costs bwrap one mount (and a scan of the mount table) per file;
a staged directory holding copies of the same files costs one. The copy is refreshed when a
source changes (checked at most every ``RECHECK_S`` seconds) or when a temp cleaner removed
it. Directories keep their symbolic links (their targets are under ``/usr``, or next to
them); files are copied with their content, so a link to a path the sandbox does not show
(``resolv.conf`` into ``/run``) still works.
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import stat
import tempfile
import threading
import time
from pathlib import Path

ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki/tls/certs",
    "/etc/pki/ca-trust",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/hosts",
    "/etc/gai.conf",
    "/etc/protocols",
    "/etc/services",
    "/etc/mime.types",
    "/etc/python3*",
)
"""What the dynamic loader, TLS and interpreters need. Never shadow, a home or private keys
(``/etc/ssl/private``): the sandbox may run as uid 0 of its namespace, so mode bits alone do
not keep root-owned files in view unreadable."""
NETWORK_ETC = ("/etc/resolv.conf",)
PASSWD = "root:x:0:0:sandbox:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"
GROUP = "root:x:0:\nnogroup:x:65534:\n"
RECHECK_S = 2.0

Signature = tuple[tuple[str, int, int, int], ...]


class EtcView:
    """One staged ``/etc`` (with or without the network files)."""

    def __init__(self, network: bool) -> None:
        self.patterns = ETC_FILES + (NETWORK_ETC if network else ())
        self.path: Path | None = None
        self.signature: Signature = ()
        self.checked = 0.0
        self.lock = threading.Lock()

    def get(self) -> Path:
        """The staged directory, rebuilt first when stale or gone."""
        with self.lock:
            now = time.monotonic()
            if self.path is not None and now - self.checked < RECHECK_S:
                return self.path
            self.checked = now
            signature = _signature(self.patterns)
            fresh = self.path is not None and (self.path / "group").exists()
            if not fresh or signature != self.signature:
                old, self.path = self.path, _stage(self.patterns)
                self.signature = signature
                if old is not None:
                    shutil.rmtree(old, ignore_errors=True)
            assert self.path is not None
            return self.path

    def remove(self) -> None:
        """Delete the staged directory (at exit)."""
        with self.lock:
            if self.path is not None:
                shutil.rmtree(self.path, ignore_errors=True)
                self.path = None


_VIEWS = {False: EtcView(network=False), True: EtcView(network=True)}
for _view in _VIEWS.values():
    atexit.register(_view.remove)


def etc_view(network: bool) -> Path:
    """The staged ``/etc`` directory for a sandbox with or without network."""
    return _VIEWS[network].get()


def _sources(patterns: tuple[str, ...]) -> list[str]:
    return [path for pattern in patterns for path in sorted(glob.glob(pattern))]


def _signature(patterns: tuple[str, ...]) -> Signature:
    entries = []
    for path in _sources(patterns):
        try:
            st = os.stat(path)
        except OSError:
            continue
        entries.append((path, st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(entries)


def _stage(patterns: tuple[str, ...]) -> Path:
    root = Path(tempfile.mkdtemp(prefix="toolcards-bwrap-etc-"))
    for source in _sources(patterns):
        target = root / os.path.relpath(source, "/etc")
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            if stat.S_ISDIR(os.stat(source).st_mode):
                shutil.copytree(source, target, symlinks=True)
            else:
                shutil.copyfile(source, target)
        except OSError:
            continue  # unreadable or vanished: the sandbox simply does not get it
    (root / "passwd").write_text(PASSWD)
    (root / "group").write_text(GROUP)
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    return root
