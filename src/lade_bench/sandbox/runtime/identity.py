"""Dropping a root-started sandbox to an unprivileged host uid; stdlib only.

A root caller's bwrap runs without a user namespace (where the sandbox user would be host root) and
keeps only CAP_SETUID and CAP_SETGID; :func:`drop_to` is the first thing the supervisor does, and
:func:`die_with_parent` the second (the drop disarmed the parent-death signal).
"""

import ctypes
import os
import signal


def drop_to(uid: int) -> None:
    """Become ``uid`` (and gid ``uid``, no supplementary groups) for good, with no capabilities left.

    Raises:
        OSError: if the switch failed or could be undone (the sandbox must then not start).
    """
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # from uid 0 to another: the kernel clears every capability
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (uid, uid, uid) or os.getgroups():
        raise OSError(f"could not drop to uid/gid {uid}")
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise OSError("dropped privileges could be regained (setuid(0) succeeded)")


_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Be killed (SIGKILL) when the parent (bubblewrap's monitor) dies.

    bubblewrap's ``--die-with-parent`` sets this, but the kernel clears it on every change of
    credentials, so :func:`drop_to` undoes it: it is armed again afterwards.

    Raises:
        OSError: if the kernel refused.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
