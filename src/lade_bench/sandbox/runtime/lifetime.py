"""The supervisor ends when its caller does; stdlib only.

bubblewrap's ``--die-with-parent`` gives the sandbox's pid 1 (the supervisor) a parent-death signal,
but that cannot hold for a root caller: the privilege drop clears it, and armed again it is never
delivered, since the kernel sends it with the dying parent's credentials (bubblewrap's monitor:
another uid, no CAP_KILL). So the supervisor watches its caller itself: the read end of the
"sections" pipe it writes its time limits to is held by the calling process alone, and when that
process dies the write end reports POLLERR. The supervisor then exits, and the kernel kills everything
else in its PID namespace.
"""

import os
import select
import threading

_EXIT_CALLER_GONE = 75  # EX_TEMPFAIL: nobody is left to read a verdict


def exit_with_caller(sections_fd: int) -> None:
    """Exit this process (at once, from a watcher thread) when no reader of ``sections_fd`` is left."""
    poller = select.poll()
    poller.register(sections_fd, select.POLLERR)  # POLLERR on a pipe's write end: no reader left

    def watch() -> None:
        while True:
            for _, events in poller.poll():
                if events & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                    os._exit(_EXIT_CALLER_GONE)

    threading.Thread(target=watch, name="caller-watch", daemon=True).start()
