"""The real command line without paying its imports each time: children forked from one server process.

A run of ``python -m lade_bench.run`` spends most of a tiny cell's CPU importing torch, transformers,
W&B, matplotlib and Hydra's plugins (about 8 of its 10 CPU-seconds on the 2-core CI host). The server
(this file run as a script) imports them once; each request forks a child that starts its own session
(``setsid``), enters the requested folder, takes the requested environment, sends its output to the
requested files and runs the module as ``python -m`` does (``runpy.run_module(..., run_name="__main__")``
with ``sys.argv`` and ``sys.path[0]`` set as the interpreter sets them). What the child runs is the
CLI's own code, from Hydra's entry point to its exit status; only the interpreter's start is skipped.

Not for what happens at import time: a child inherits the server's imported modules, so an environment
variable read while importing (``HF_HUB_OFFLINE``, ``PYTHONPROFILEIMPORTTIME``) takes no effect there.
The tests of those, and of the interpreter's start itself, run a real ``python -m lade_bench.run``
(``run_cli(..., env=...)`` does: tests/runner/conftest.py).

Protocol (one JSON line per request on the server's stdin, one JSON line per answer on its stdout):

* ``{"op": "start", "module", "args", "cwd", "env", "stdout", "stderr", "timeout_s", "patch"}``:
  fork a child, answer ``{"pid": N}`` at once. ``stdout``/``stderr`` are paths (the same path: one file,
  as ``stderr=STDOUT``; a FIFO: read while the child runs). ``patch`` is null or ``[helper, argument]``:
  the child calls ``install(argument)`` of the helper module beside this file (``kill_mid_cell``,
  ``kill_during_finalisation``), or of the helper file whose path ends in ``.py`` (tests/tune's
  ``kill_mid_trial.py``), before it runs the module; the patch lives in that child only.
* ``{"op": "poll", "pid"}``: ``{"returncode": N or null}`` (null while it runs);
* ``{"op": "wait", "pid", "kill_group"}``: wait for it, answer ``{"returncode": N}`` (negative: killed by
  that signal, as :class:`subprocess.Popen` says it); ``kill_group`` then kills what the child's session
  left running (a run killed mid-way leaves W&B's service behind);
* ``{"op": "call", "command"}``: run a command in the server's mount namespace (``mount``, ``cp``),
  answer ``{"returncode": N, "output": TEXT}``.

Where ``unshare --mount`` works (root), the server runs in a private mount namespace of its own, so a
test can mount a small tmpfs for its children (a real full disk) without touching the host's mounts.

A child still running after ``timeout_s`` gets SIGALRM (and its test fails on the exit status).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

SERVER = Path(__file__).resolve()

# What a run of the CLI imports, heaviest first (the rest comes in with these); the server imports them
# once so that each child only runs. Found by listing the modules a forked full run added to sys.modules.
CLI_MODULES = (
    "torch",
    "transformers",
    "wandb",
    "wandb.apis.public",
    "wandb.sdk.launch",
    "requests",
    "opentelemetry.exporter.otlp.proto.http._log_exporter",
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
    "opentelemetry.sdk._logs.export",
    "opentelemetry.sdk.metrics.export",
    "opentelemetry.sdk.trace",
    "matplotlib.pyplot",
    "matplotlib.backends.backend_agg",
    "matplotlib.backends.backend_pdf",
    "fontTools.subset",
    "pyarrow.dataset",
    "pyarrow.parquet",
    "hydra._internal.core_plugins.basic_launcher",
    "hydra._internal.core_plugins.basic_sweeper",
    "hydra._internal.core_plugins.importlib_resources_config_source",
    "hydra_plugins.hydra_ray_launcher.ray_launcher",
    "hydra_plugins.lade_bench_launchers.launchers",
    "lade_bench.runner.config_schema",
    "lade_bench.runner.job",
    "lade_bench.runner.cell",
    "lade_bench.runner.arms",
    "lade_bench.runner.launch_plan",
    "lade_bench.runner.output_check",
    "lade_bench.decoding.lookahead.lookahead",
    "lade_bench.sandbox.judge",
    # The tuner's command line (tests/tune forks `python -m lade_bench.tune` from here too).
    "optuna",
    "lade_bench.tune.tuner",
    "lade_bench.tune.methods_tune",
)

# The default limit of one child (seconds); a test passes its own where it waits on something slower.
DEFAULT_TIMEOUT_S = 600


# --- the server (this file run as a script) ---------------------------------------------------------


def _import_the_cli() -> None:
    """Import what a run of the CLI imports, without running anything (no torch computation before a fork)."""
    for name in CLI_MODULES:
        importlib.import_module(name)


def _redirect(stdout: str, stderr: str) -> None:
    """The child's fds 1 and 2 to the requested files (one file for both when the paths are equal)."""
    out = os.open(stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)  # a FIFO opens once its reader does
    err = out if stderr == stdout else os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)


def _run_in_this_child(request: dict[str, Any]) -> None:
    """In the forked child: own session, folder, environment, output and patch; run the module; never returns."""
    code = 1
    try:
        os.setsid()  # a kill of the child's group (its own or the server's kill_group) never reaches the server
        _redirect(request["stdout"], request["stderr"])  # first: a reader waiting on a FIFO must see it opened
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        signal.alarm(int(request["timeout_s"]))
        if request.get("patch"):
            helper, argument = request["patch"]
            _helper(helper).install(argument)
        module = request["module"]
        # As `python -m MODULE ARGS` sets them: the arguments, and the current folder first on the path.
        sys.argv = [module, *request["args"]]
        sys.path[0] = os.getcwd()
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        if not isinstance(exc.code, int) and exc.code is not None:
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _helper(name: str) -> Any:
    """A patch helper: a module beside this file by name, or another folder's helper by its file's path."""
    if not name.endswith(".py"):
        return importlib.import_module(name)
    spec = importlib.util.spec_from_file_location(Path(name).stem, name)
    assert spec is not None and spec.loader is not None, f"no patch helper at {name}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _returncode(status: int) -> int:
    """Popen's convention: the exit status, or minus the signal that killed the child."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    op = request["op"]
    if op == "start":
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _run_in_this_child(request)
        return {"pid": pid}
    if op == "poll":
        pid, status = os.waitpid(request["pid"], os.WNOHANG)
        return {"returncode": None if pid == 0 else _returncode(status)}
    if op == "wait":
        _, status = os.waitpid(request["pid"], 0)
        if request.get("kill_group"):
            try:  # whatever the child's session left running
                os.killpg(request["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
        return {"returncode": _returncode(status)}
    if op == "call":
        done = subprocess.run(request["command"], capture_output=True, text=True, timeout=120)
        return {"returncode": done.returncode, "output": done.stdout + done.stderr}
    raise ValueError(f"unknown op {op!r}; one of start, poll, wait, call")


def serve() -> None:
    """Import the CLI once, then answer each JSON request on stdin until stdin closes."""
    _import_the_cli()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        print(json.dumps(_answer(json.loads(line))), flush=True)


# --- the tests' side --------------------------------------------------------------------------------


class ForkedRun:
    """One child of the server, as much of :class:`subprocess.Popen` as the tests use."""

    def __init__(self, server: CliServer, pid: int, stdout: IO[str] | None) -> None:
        self._server = server
        self.pid = pid
        self.stdout = stdout  # the FIFO's read end when started with stream=True
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit status (Popen's convention) once the child has ended, else None."""
        if self.returncode is None:
            self.returncode = self._server.ask({"op": "poll", "pid": self.pid})["returncode"]
        return self.returncode

    def send_signal(self, signal_number: int) -> None:
        """Send the child a signal (it is the server's child, but any process of this user may signal it)."""
        if self.poll() is None:
            os.kill(self.pid, signal_number)

    def wait(self, kill_group: bool = False) -> int:
        """Wait for the child (its own ``timeout_s`` bounds it); ``kill_group``: then kill its session."""
        if self.returncode is None:
            self.returncode = self._server.ask({"op": "wait", "pid": self.pid, "kill_group": kill_group})["returncode"]
        return self.returncode


class CliServer:
    """The server process, started once (a session fixture per pytest worker), and the tests' calls to it."""

    def __init__(self, log: Path) -> None:
        self.log = log
        # A private mount namespace where this host allows one (root with util-linux's unshare).
        namespace = ["unshare", "--mount", "--propagation", "private"]
        probe = subprocess.run([*namespace, "true"], capture_output=True) if shutil.which("unshare") else None
        self.private_mounts = probe is not None and probe.returncode == 0
        # A folder of its own for run()'s output files and the FIFOs of stream=True.
        self._scratch = Path(tempfile.mkdtemp(prefix="cli-server-"))
        self._count = 0
        with log.open("w") as server_log:
            self._process = subprocess.Popen(
                [*(namespace if self.private_mounts else []), sys.executable, str(SERVER)],
                cwd=SERVER.parent,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=server_log,
                text=True,
            )
        self.ask(None)  # its imports done

    def ask(self, request: dict[str, Any] | None) -> dict[str, Any]:
        """Send ``request`` (None: only read) and read the server's answer."""
        if request is not None:
            self._process.stdin.write(json.dumps(request) + "\n")
            self._process.stdin.flush()
        answer = self._process.stdout.readline()
        assert answer, f"the CLI server died\n{self.log.read_text()[-3000:]}"
        return json.loads(answer)

    def _scratch_file(self, name: str) -> Path:
        self._count += 1
        return self._scratch / f"{self._count}.{name}"

    def start(
        self,
        args: Sequence[str],
        *,
        cwd: Path,
        output: Path | None = None,
        stderr: Path | None = None,
        stream: bool = False,
        env: dict[str, str] | None = None,
        patch: tuple[str, Any] | None = None,
        module: str = "lade_bench.run",
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> ForkedRun:
        """Start ``python -m module ARGS`` in ``cwd`` as a forked child; its stdout (and, unless ``stderr``
        names another file, its stderr) to ``output``, or to a FIFO read as ``run.stdout`` with
        ``stream=True``. ``env``: the whole environment (default: this process's)."""
        if stream:
            output = self._scratch_file("fifo")
            os.mkfifo(output)
        assert output is not None, "start() needs output=PATH or stream=True"
        request = {
            "op": "start",
            "module": module,
            "args": [str(arg) for arg in args],
            "cwd": str(cwd),
            "env": dict(os.environ if env is None else env),
            "stdout": str(output),
            "stderr": str(stderr or output),
            "timeout_s": timeout,
            "patch": list(patch) if patch else None,
        }
        pid = self.ask(request)["pid"]
        reader = open(output, encoding="utf-8") if stream else None  # noqa: SIM115 - the run's stdout, read by the test
        return ForkedRun(self, pid, reader)

    def run(
        self,
        args: Sequence[str],
        *,
        cwd: Path,
        env: dict[str, str] | None = None,
        module: str = "lade_bench.run",
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> subprocess.CompletedProcess:
        """``subprocess.run([python, -m, module, *args], capture_output=True, text=True)``, forked."""
        out, err = self._scratch_file("stdout"), self._scratch_file("stderr")
        child = self.start(args, cwd=cwd, output=out, stderr=err, env=env, module=module, timeout=timeout)
        returncode = child.wait()
        stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
        out.unlink()
        err.unlink()
        return subprocess.CompletedProcess([module, *args], returncode, stdout, stderr)

    def call(self, command: Sequence[str | Path]) -> subprocess.CompletedProcess:
        """Run ``command`` in the server's mount namespace (not forked from the CLI: a plain subprocess)."""
        answer = self.ask({"op": "call", "command": [str(part) for part in command]})
        return subprocess.CompletedProcess(list(command), answer["returncode"], answer["output"], "")

    def close(self) -> None:
        """Stop the server (it ends once stdin closes) and remove its scratch folder."""
        self._process.stdin.close()
        self._process.wait(timeout=60)
        self._process.stdout.close()
        for path in self._scratch.iterdir():
            path.unlink()
        self._scratch.rmdir()


if __name__ == "__main__":
    serve()
