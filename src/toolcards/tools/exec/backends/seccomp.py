"""A tiny seccomp filter for bwrap: no setuid/setgid bits, no new namespaces, no typing into a
terminal.

Inside bwrap a command may run as uid 0 of its namespace, which maps to the host's uid; when
the host process is root, a file it chmods ``u+s`` in the workspace would be a root-owned
setuid program on the host. The filter refuses (EPERM) every chmod, open/creat and mknod
call whose mode carries S_ISUID or S_ISGID, answers ENOSYS to ``openat2`` (its mode is out
of the filter's reach; libc falls back to ``openat``), and refuses every system call of a
foreign ABI (x32, 32-bit compat), which could otherwise go around it.

It answers ENOSYS to io_uring (``io_uring_setup``, ``io_uring_enter``, ``io_uring_register``),
as container runtimes' default profiles do: a file registered in a ring's fixed-file table
stays held by the ring alone once its descriptor is closed, where the workspace cap's count
of unnamed files (descriptors and mappings, ``watch.held``) cannot see it. Callers fall back
to ordinary system calls. It answers ENOSYS to the calls that make something charged to a
per-user quota of the host (``_NOSYS_CALLS``): the kernel keyring calls, as container
runtimes' default profiles do too, inotify and fanotify instances and POSIX message queues.
Those quotas count the host user the sandbox's uid maps to, namespaces or not, so a command
could fill one and make the host's own ``add_key``, ``inotify_init1`` (every file watcher of
that user), ``fanotify_init`` or ``mq_open`` fail while it runs.

Namespaces are such a quota too (``/proc/sys/user/max_*_namespaces``, per host user): bwrap's
``--disable-userns`` keeps a command from entering a user namespace of its own, where it could
create the others without limit, and the filter refuses (EPERM) ``unshare``, ``setns`` and a
``clone`` with any CLONE_NEW* flag. ``clone3`` passes its flags in a struct the filter cannot
read: it is answered ENOSYS, and libc falls back to ``clone`` (as with Docker's profile).

It also refuses the TIOCSTI and TIOCLINUX ioctls (typing into a terminal). They alone do
not keep the sandbox off a terminal it shares: in the caller's session a command could open
``/dev/tty``, take the foreground and read what the operator types. The sandbox gets a
session of its own (no controlling terminal) whether or not the filter loads.
"""

from __future__ import annotations

import errno
import functools
import os
import platform
import struct

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JSET_K = 0x45
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_DENY = 0x00050000 | errno.EPERM
_SETID = 0o6000
_X32_BIT = 0x40000000

_NOSYS = 0x00050000 | errno.ENOSYS
_NOSYS_CALLS: dict[str, tuple[int | None, int | None]] = {
    # name: (x86_64 number, aarch64 number); None where the machine has no such call.
    # Its mode sits in a struct the filter cannot read; libc falls back to openat.
    "openat2": (437, 437),
    # A ring's fixed-file table holds files the workspace cap cannot count.
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    # What these make is charged to a per-user quota of the host user the sandbox's uid maps
    # to; filled from inside, the host's own calls fail while the command runs.
    "add_key": (248, 217),  # keys: kernel.keys.maxkeys and maxbytes
    "request_key": (249, 218),
    "keyctl": (250, 219),
    "inotify_init": (253, None),  # fs.inotify.max_user_instances (128 for every file watcher)
    "inotify_init1": (294, 26),
    "fanotify_init": (300, 262),  # fs.fanotify.max_user_groups (128)
    "mq_open": (240, 180),  # the user's queue bytes, RLIMIT_MSGQUEUE (819,200)
    # Its flags sit in a struct; glibc falls back to clone, whose flags the filter reads.
    "clone3": (435, 435),
}
"""System calls answered ENOSYS (callers see them as missing and fall back or go without)."""


_CLONE_NEW = 0x7E020000
"""CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID and NEWNET: each new namespace is
charged to the host user's ``max_*_namespaces``. (CLONE_NEWTIME, 0x80, is clone's exit
signal there; the kernel takes it from ``unshare`` and ``clone3`` only.)"""


def _nosys(column: int) -> tuple[int, ...]:
    """The numbers of ``_NOSYS_CALLS`` on one machine (0: x86_64, 1: aarch64)."""
    return tuple(nr for nrs in _NOSYS_CALLS.values() if (nr := nrs[column]) is not None)


def _checks(modes: dict[int, int], clone: int) -> dict[int, tuple[int, int]]:
    """{syscall: (argument index, bits refused)}: the mode calls' S_ISUID/S_ISGID and
    clone's CLONE_NEW* flags (its first argument)."""
    return {nr: (arg, _SETID) for nr, arg in modes.items()} | {clone: (0, _CLONE_NEW)}


# machine -> (audit arch, {syscall: (argument index, bits refused)}, syscalls refused EPERM,
# syscalls refused as ENOSYS, ioctl's number)
# x86_64: chmod fchmod fchmodat fchmodat2 open creat openat mknod mknodat; clone;
# unshare setns
_Arch = tuple[int, dict[int, tuple[int, int]], tuple[int, ...], tuple[int, ...], int]
_ARCHES: dict[str, _Arch] = {
    "x86_64": (
        0xC000003E,
        _checks({90: 1, 91: 1, 268: 2, 452: 2, 2: 2, 85: 1, 257: 3, 133: 1, 259: 2}, 56),
        (272, 308),
        _nosys(0),
        16,
    ),
    # aarch64: fchmod fchmodat fchmodat2 openat mknodat; clone; unshare setns
    "aarch64": (
        0xC00000B7,
        _checks({52: 1, 53: 2, 452: 2, 56: 3, 33: 2}, 220),
        (97, 268),
        _nosys(1),
        29,
    ),
}
TIOCSTI = 0x5412
"""Pushes bytes into a terminal's input queue: refused, so a command cannot type into a
terminal (one it opened itself: the sandbox has none of the host's)."""
TIOCLINUX = 0x541C
"""Can do the same on a virtual console (selection paste)."""


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


@functools.cache
def setid_filter(machine: str | None = None) -> bytes | None:
    """The BPF program for ``machine`` (default: this host), or None for unknown machines.

    Refuses (EPERM) setuid/setgid mode bits in chmod/open/mknod calls, CLONE_NEW* flags in
    clone, ``unshare``, ``setns`` and the TIOCSTI and TIOCLINUX ioctls; answers ENOSYS to
    ``_NOSYS_CALLS``; refuses every foreign-ABI system call.
    """
    found = _ARCHES.get(machine or platform.machine())
    if found is None:
        return None
    arch, calls, denied, nosys, ioctl = found
    checks = sorted(set(calls.values()))
    # layout: ld arch, jeq arch, ld nr, jset x32, one jeq per checked call, one jeq for ioctl,
    # one jeq per EPERM call, one jeq per ENOSYS call, allow; per (argument, bits)
    # [ld arg, jset bits, allow]; the ioctl check [ld arg 1, jeq TIOCSTI, jeq TIOCLINUX,
    # allow]; then deny, nosys.
    first_cmp = 4
    allow = first_cmp + len(calls) + 1 + len(denied) + len(nosys)
    check = {key: allow + 1 + 3 * i for i, key in enumerate(checks)}
    ioctl_check = allow + 1 + 3 * len(checks)
    deny = ioctl_check + 4
    enosys = deny + 1
    x32 = _X32_BIT if arch == 0xC000003E else 0
    prog = [
        _ins(_LD_W_ABS, 4),
        _ins(_JEQ_K, arch, 0, deny - 2),
        _ins(_LD_W_ABS, 0),
        _ins(_JSET_K, x32, deny - 4, 0),
    ]
    for nr, key in calls.items():
        prog.append(_ins(_JEQ_K, nr, check[key] - len(prog) - 1, 0))
    prog.append(_ins(_JEQ_K, ioctl, ioctl_check - len(prog) - 1, 0))
    for nr in denied:
        prog.append(_ins(_JEQ_K, nr, deny - len(prog) - 1, 0))
    for nr in nosys:
        prog.append(_ins(_JEQ_K, nr, enosys - len(prog) - 1, 0))
    prog.append(_ins(_RET_K, _ALLOW))
    for arg, bits in checks:
        prog.append(_ins(_LD_W_ABS, 16 + 8 * arg))  # the low 32 bits (little-endian)
        prog.append(_ins(_JSET_K, bits, deny - len(prog) - 1, 0))
        prog.append(_ins(_RET_K, _ALLOW))
    prog.append(_ins(_LD_W_ABS, 16 + 8 * 1))  # the request; the kernel reads 32 bits of it
    prog.append(_ins(_JEQ_K, TIOCSTI, deny - len(prog) - 1, 0))
    prog.append(_ins(_JEQ_K, TIOCLINUX, deny - len(prog) - 1, 0))
    prog.append(_ins(_RET_K, _ALLOW))
    prog.append(_ins(_RET_K, _DENY))
    prog.append(_ins(_RET_K, _NOSYS))
    assert len(prog) == enosys + 1
    return b"".join(prog)


def filter_fd(program: bytes) -> int:
    """A fresh readable fd holding ``program`` at offset 0 (one per bwrap run)."""
    fd = os.memfd_create("toolcards-seccomp", 0)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
