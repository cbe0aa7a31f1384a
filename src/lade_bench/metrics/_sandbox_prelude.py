"""Bootstrap run by :mod:`lade_bench.metrics.sandbox` in the child interpreter, before the user code.

Usage (by the sandbox only): ``python -I -B _sandbox_prelude.py ROOT PROGRAM RUN_NAME ALLOW_SUBPROCESS``.

It installs a PEP 578 audit hook that ends the process (exit status ``VIOLATION_EXIT_CODE`` and a
``SANDBOX VIOLATION`` line on fd 2) on any attempt to create, write, delete, rename or re-permission a
path outside ROOT, or (unless allowed) to start another program, then runs PROGRAM with ``runpy``.

Ending the process, rather than raising, is deliberate: generated code and test suites are full of
``except Exception`` / bare ``except``, and a swallowed violation would let the write attempt be scored
as a pass. Audit hooks cannot be removed once added.

PEP 578 is explicit that audit hooks are not a security boundary: ctypes, native extensions and races
between the check and the system call can still get around this. It guards against model-generated
code that misbehaves by accident, together with the process-level limits set by the parent.

This file must stay self-contained (stdlib only, no lade_bench imports): ``-I`` keeps the script's
directory and the user site off ``sys.path``.
"""

import os
import sys
import threading

VIOLATION_EXIT_CODE = 86
VIOLATION_MARKER = "SANDBOX VIOLATION:"

# Write-like events whose listed argument positions are paths that must stay inside ROOT, with the
# position of their dir_fd argument (or None) and whether the call follows a final symlink.
# (event, ((path_index, dir_fd_index, follow_symlinks), ...))
_PATH_EVENTS = {
    "os.remove": ((0, 1, False),),
    "os.rmdir": ((0, 1, False),),
    "os.mkdir": ((0, 2, False),),
    "os.rename": ((0, 2, False), (1, 3, False)),  # also raised by os.replace
    "shutil.rmtree": ((0, 1, True),),
    "os.truncate": ((0, None, True),),
    "os.chmod": ((0, 2, True),),
    "os.chown": ((0, 3, True),),
    "os.utime": ((0, 3, True),),
    # A hard link to an outside file would make it writable through a path inside ROOT.
    "os.link": ((0, 2, True), (1, 3, False)),
    "os.symlink": ((1, 2, False),),
}
_SPAWN_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.startfile"})
# Devices a program may legitimately open for writing.
_ALLOWED_WRITE_PATHS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})


def install_audit_hook(root: str, allow_subprocess: bool) -> None:
    """Install the hook confining write-like operations to ``root`` (an absolute, resolved path)."""
    # Bind everything the hook needs now: user code may later replace os.path functions.
    realpath = os.path.realpath
    dirname = os.path.dirname
    basename = os.path.basename
    join = os.path.join
    isabs = os.path.isabs
    isdir = os.path.isdir
    fspath = os.fspath
    fsdecode = os.fsdecode
    getcwd = os.getcwd
    readlink = os.readlink
    write = os.write
    hard_exit = os._exit
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    root = realpath(root)
    root_prefix = root.rstrip(os.sep) + os.sep
    local = threading.local()

    def resolve(path, dir_fd, follow):
        p = fspath(path)
        if isinstance(p, bytes):
            p = fsdecode(p)
        if not isabs(p):
            # -1 or None means "no dir_fd"; a real one is resolved through /proc.
            base = readlink(f"/proc/self/fd/{dir_fd}") if dir_fd not in (None, -1) else getcwd()
            p = join(base, p)
        if follow:
            return realpath(p)
        # The call acts on the final link itself (remove, rename, ...), so only resolve its directory.
        return join(realpath(dirname(p) or "."), basename(p))

    def inside(resolved):
        return resolved == root or resolved.startswith(root_prefix)

    def deny(event, detail, why=f"outside {root}"):
        try:
            write(2, f"\n{VIOLATION_MARKER} {event} {detail!r} ({why})\n".encode(errors="replace"))
        finally:
            hard_exit(VIOLATION_EXIT_CODE)

    def check_open(args):
        path, mode, flags = (tuple(args) + (None, None))[:3]
        if isinstance(path, int) or path is None:
            return  # an fd that was checked when it was opened
        wants_write = bool((flags or 0) & write_flags) or (isinstance(mode, str) and any(ch in mode for ch in "wax+"))
        resolved = resolve(path, None, True)
        if inside(resolved) or resolved in _ALLOWED_WRITE_PATHS:
            return
        if wants_write:
            deny("open", (resolved, mode))
        # os.open(dir) hands back an fd usable as dir_fd; the later "open" event only shows the
        # relative name, so deny directory fds outside ROOT up front.
        if mode is None and isdir(resolved):
            deny("open(dir_fd)", resolved)

    def hook(event, args):
        if getattr(local, "busy", False):
            return
        local.busy = True
        try:
            if event == "open":
                check_open(args)
            elif event in _PATH_EVENTS:
                for path_i, fd_i, follow in _PATH_EVENTS[event]:
                    path = args[path_i]
                    if isinstance(path, int):
                        continue
                    dir_fd = args[fd_i] if fd_i is not None and fd_i < len(args) else None
                    resolved = resolve(path, dir_fd, follow)
                    if not inside(resolved):
                        deny(event, resolved)
            elif event == "sqlite3.connect":
                database = args[0]
                if isinstance(database, (str, bytes, os.PathLike)):
                    name = fspath(database)
                    name = fsdecode(name) if isinstance(name, bytes) else name
                    if name.startswith("file:"):
                        name = name[len("file:") :].split("?", 1)[0]
                    if name not in ("", ":memory:") and not inside(resolve(name, None, True)):
                        deny(event, name)
            elif event in _SPAWN_EVENTS and not allow_subprocess:
                deny(event, args[0] if args else None, "starting programs is not allowed")
        finally:
            local.busy = False

    sys.addaudithook(hook)


def main() -> None:
    """Install the hook, then run the program as a script named RUN_NAME."""
    root, program, run_name, allow_subprocess = sys.argv[1:5]
    install_audit_hook(root, allow_subprocess == "1")
    import runpy

    sys.argv = [program]
    runpy.run_path(program, run_name=run_name)


if __name__ == "__main__":
    main()
