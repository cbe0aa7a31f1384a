"""Dropping a root-started sandbox to an unprivileged host uid; stdlib only.

A root caller's bwrap runs without a user namespace (where the sandbox user would be host root) and
keeps only CAP_SETUID and CAP_SETGID; :func:`drop_to` is the first thing the supervisor does.
"""

import os


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
