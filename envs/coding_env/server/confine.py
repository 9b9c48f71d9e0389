"""Confining the current process: rlimits, privilege drop, Landlock and a seccomp filter.

Standard library only (ctypes for the three syscalls Python lacks), because the sandbox worker
imports this module by path before it locks itself down. Every function acts on the calling
process and is inherited by its children; none can be undone.

Layers, in the order `sandbox_worker` applies them (after lowering its priority to nice 10, so
that spinning sandboxes do not starve the server):
1. rlimits: CPU seconds, address space, file size, process count, open files, no core dumps.
2. privilege drop: when started as root, a uid/gid of its own (so DAC keeps it out of the
   server's files, /proc entries, other sessions' processes and root-only files).
3. no_new_privs, then Landlock: reads only below the Python runtime and system library folders,
   writes only below the session's folder, no TCP bind/connect (ABI >= 4), no signals or
   abstract-socket connects outside the sandbox (ABI >= 6).
4. seccomp: `socket()` fails (no network of any family), and so do the syscalls that reach
   outside a process: ptrace, mount, namespaces, io_uring, bpf, keyrings, kernel modules,
   setsid/setpgid (so no child leaves the process group the server kills on timeout).
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import struct
from collections.abc import Iterable

__all__ = [
    "ConfinementError",
    "apply_landlock",
    "apply_rlimits",
    "apply_seccomp",
    "drop_privileges",
    "landlock_abi",
    "seccomp_supported",
    "set_no_new_privs",
    "set_parent_death_signal",
]


class ConfinementError(OSError):
    """A confinement layer could not be applied; the worker must not run user code."""


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int

_PR_SET_PDEATHSIG = 1
_PR_SET_SECCOMP = 22
_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_MODE_FILTER = 2

# -- rlimits and privileges ---------------------------------------------------------------------------


def apply_rlimits(*, cpu_s: int, memory_bytes: int, file_bytes: int, processes: int, open_files: int) -> None:
    """Set soft = hard limits (the process cannot raise them again once unprivileged).

    The CPU hard limit is one second above the soft one: SIGXCPU first, SIGKILL after.
    """
    limits = {
        resource.RLIMIT_CPU: (cpu_s, cpu_s + 1),
        resource.RLIMIT_AS: (memory_bytes, memory_bytes),
        resource.RLIMIT_FSIZE: (file_bytes, file_bytes),
        resource.RLIMIT_NPROC: (processes, processes),
        resource.RLIMIT_NOFILE: (open_files, open_files),
        resource.RLIMIT_CORE: (0, 0),
    }
    for which, value in limits.items():
        resource.setrlimit(which, value)


def drop_privileges(uid: int, gid: int) -> None:
    """Become `uid`/`gid` with no supplementary groups (needs root).

    Raises:
        ConfinementError: the switch did not take (still root afterwards).
    """
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() == 0 or os.geteuid() == 0:
        raise ConfinementError(errno.EPERM, "privilege drop failed: still root")


def _prctl(option: int, arg2: int) -> int:
    return _libc.prctl(
        ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)
    )


def set_parent_death_signal(sig: int) -> None:
    """Ask the kernel to send `sig` when the parent exits (set it after changing credentials,
    which clears it)."""
    if _prctl(_PR_SET_PDEATHSIG, sig) != 0:
        err = ctypes.get_errno()
        raise ConfinementError(err, f"PR_SET_PDEATHSIG: {os.strerror(err)}")


def set_no_new_privs() -> None:
    """No setuid binary or file capability can grant this process more (needed by the next two)."""
    if _prctl(_PR_SET_NO_NEW_PRIVS, 1) != 0:
        err = ctypes.get_errno()
        raise ConfinementError(err, f"PR_SET_NO_NEW_PRIVS: {os.strerror(err)}")


# -- Landlock -------------------------------------------------------------------------------------------

_SYS_LANDLOCK_CREATE_RULESET = 444  # the same on every architecture (unified syscall table)
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1

_FS_EXECUTE = 1 << 0
_FS_WRITE_FILE = 1 << 1
_FS_READ_FILE = 1 << 2
_FS_READ_DIR = 1 << 3
_FS_TRUNCATE = 1 << 14
_FS_IOCTL_DEV = 1 << 15
_FS_ABI1 = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
_FS_BY_ABI = {1: _FS_ABI1, 2: _FS_ABI1 | 1 << 13, 3: _FS_ABI1 | 1 << 13 | _FS_TRUNCATE}
_NET_BIND_TCP = 1 << 0
_NET_CONNECT_TCP = 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
_SCOPE_SIGNAL = 1 << 1
_FILE_ONLY = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is missing or blocked."""
    ret = _libc.syscall(
        _SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION)
    )
    return int(ret) if ret > 0 else 0


def _fs_rights(abi: int) -> int:
    rights = _FS_BY_ABI.get(min(abi, 3), 0)
    if abi >= 5:
        rights |= _FS_IOCTL_DEV
    return rights


def apply_landlock(read_paths: Iterable[str], write_paths: Iterable[str], rw_files: Iterable[str] = ()) -> int:
    """Restrict the file system to reading `read_paths` and writing `write_paths` (recursively),
    and, where the kernel can, forbid TCP and signals/abstract sockets outside the sandbox.

    Paths that do not exist are skipped. Returns the ABI version that was applied.

    Raises:
        ConfinementError: Landlock is unavailable, or a call failed.
    """
    abi = landlock_abi()
    if abi < 1:
        raise ConfinementError(errno.ENOSYS, "Landlock is not available in this kernel")
    handled_fs = _fs_rights(abi)
    handled_net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0
    attr = struct.pack("<QQQ", handled_fs, handled_net, scoped)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    buf = ctypes.create_string_buffer(attr[:size], size)
    fd = _libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, buf, ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        err = ctypes.get_errno()
        raise ConfinementError(err, f"landlock_create_ruleset: {os.strerror(err)}")
    try:
        read_rights = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
        for path in read_paths:
            _add_rule(fd, path, read_rights & handled_fs)
        for path in write_paths:
            _add_rule(fd, path, handled_fs)
        for path in rw_files:
            _add_rule(fd, path, (_FS_READ_FILE | _FS_WRITE_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV) & handled_fs)
        if _libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            err = ctypes.get_errno()
            raise ConfinementError(err, f"landlock_restrict_self: {os.strerror(err)}")
    finally:
        os.close(fd)
    return abi


def _add_rule(ruleset_fd: int, path: str, rights: int) -> None:
    try:
        pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if not os.path.isdir(path):
            rights &= _FILE_ONLY  # directory-only rights on a file are rejected with EINVAL
        rule = ctypes.create_string_buffer(struct.pack("<Qi", rights, pfd), 12)  # packed struct
        if (
            _libc.syscall(
                _SYS_LANDLOCK_ADD_RULE,
                ctypes.c_int(ruleset_fd),
                ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
                rule,
                ctypes.c_uint32(0),
            )
            != 0
        ):
            err = ctypes.get_errno()
            raise ConfinementError(err, f"landlock_add_rule({path}): {os.strerror(err)}")
    finally:
        os.close(pfd)


# -- seccomp ----------------------------------------------------------------------------------------------

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# Syscalls that fail with EPERM inside the sandbox, by architecture (numbers from the kernel's tables).
_DENY = {
    "x86_64": {
        "socket": 41,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "bpf": 321,
        "perf_event_open": 298,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "chroot": 161,
        "unshare": 272,
        "setns": 308,
        "keyctl": 250,
        "add_key": 248,
        "request_key": 249,
        "userfaultfd": 323,
        "kexec_load": 246,
        "kexec_file_load": 320,
        "init_module": 175,
        "finit_module": 313,
        "delete_module": 176,
        "reboot": 169,
        "swapon": 167,
        "swapoff": 168,
        "acct": 163,
        "settimeofday": 164,
        "clock_settime": 227,
        "clock_adjtime": 305,
        "adjtimex": 159,
        "open_by_handle_at": 304,
        "name_to_handle_at": 303,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "setsid": 112,
        "setpgid": 109,
        "quotactl": 179,
        "syslog": 103,
        "vhangup": 153,
        "fanotify_init": 300,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "kcmp": 312,
        "pidfd_getfd": 438,
        "iopl": 172,
        "ioperm": 173,
    },
    "aarch64": {
        "socket": 198,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "bpf": 280,
        "perf_event_open": 241,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "chroot": 51,
        "unshare": 97,
        "setns": 268,
        "keyctl": 219,
        "add_key": 217,
        "request_key": 218,
        "userfaultfd": 282,
        "kexec_load": 104,
        "kexec_file_load": 294,
        "init_module": 105,
        "finit_module": 273,
        "delete_module": 106,
        "reboot": 142,
        "swapon": 224,
        "swapoff": 225,
        "acct": 89,
        "settimeofday": 170,
        "clock_settime": 112,
        "clock_adjtime": 266,
        "adjtimex": 171,
        "open_by_handle_at": 265,
        "name_to_handle_at": 264,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "setsid": 157,
        "setpgid": 154,
        "quotactl": 60,
        "syslog": 116,
        "vhangup": 58,
        "fanotify_init": 262,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "kcmp": 272,
        "pidfd_getfd": 438,
    },
}
# Signals to other processes, denied only when nothing else keeps them inside the sandbox.
_SIGNALS = {
    "x86_64": {
        "kill": 62,
        "tkill": 200,
        "tgkill": 234,
        "pidfd_send_signal": 424,
        "rt_sigqueueinfo": 129,
        "rt_tgsigqueueinfo": 297,
    },
    "aarch64": {
        "kill": 129,
        "tkill": 130,
        "tgkill": 131,
        "pidfd_send_signal": 424,
        "rt_sigqueueinfo": 138,
        "rt_tgsigqueueinfo": 240,
    },
}
_CLONE = {"x86_64": 56, "aarch64": 220}
_CLONE3 = 435
# CLONE_NEWTIME | CLONE_NEWNS | CLONE_NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_CLONE_NS_FLAGS = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000
_X32_BIT = 0x40000000


def seccomp_supported() -> bool:
    """Whether this machine's architecture has a filter here."""
    return os.uname().machine in _AUDIT_ARCH


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def _program(arch: str, deny_signals: bool) -> bytes:
    denied = dict(_DENY[arch])
    if deny_signals:
        denied.update(_SIGNALS[arch])
    eperm = _RET_ERRNO | errno.EPERM
    out = [
        _insn(_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        _insn(_JEQ_K, 1, 0, _AUDIT_ARCH[arch]),
        _insn(_RET_K, 0, 0, _RET_KILL_PROCESS),  # a foreign ABI (e.g. int 0x80 on x86_64): kill
        _insn(_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if arch == "x86_64":  # x32 syscalls are another numbering of the same calls
        out += [_insn(_JGE_K, 0, 1, _X32_BIT), _insn(_RET_K, 0, 0, eperm)]
    # clone3 gets ENOSYS so that libc falls back to clone(), whose flags a filter can read.
    out += [_insn(_JEQ_K, 0, 1, _CLONE3), _insn(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    out += [
        _insn(_JEQ_K, 0, 4, _CLONE[arch]),
        _insn(_LD_W_ABS, 0, 0, 16),  # low 32 bits of args[0]: the clone flags
        _insn(_JSET_K, 0, 1, _CLONE_NS_FLAGS),
        _insn(_RET_K, 0, 0, eperm),
        _insn(_RET_K, 0, 0, _RET_ALLOW),
    ]
    for nr in sorted(denied.values()):
        out += [_insn(_JEQ_K, 0, 1, nr), _insn(_RET_K, 0, 0, eperm)]
    out.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(out)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def apply_seccomp(*, deny_signals: bool = False) -> None:
    """Install the filter (no_new_privs must be set first, unless root).

    Args:
        deny_signals: also deny kill() and friends, for when neither a uid of its own nor
            Landlock scoping keeps the sandbox from signalling the server.

    Raises:
        ConfinementError: unknown architecture, or the kernel refused the filter.
    """
    arch = os.uname().machine
    if arch not in _AUDIT_ARCH:
        raise ConfinementError(errno.ENOSYS, f"no seccomp filter for the {arch} architecture")
    code = _program(arch, deny_signals)
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _SockFprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if (
        _libc.prctl(
            ctypes.c_int(_PR_SET_SECCOMP),
            ctypes.c_ulong(_SECCOMP_MODE_FILTER),
            ctypes.c_ulong(ctypes.addressof(prog)),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
        )
        != 0
    ):
        err = ctypes.get_errno()
        raise ConfinementError(err, f"seccomp filter refused: {os.strerror(err)}")
