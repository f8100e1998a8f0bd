"""Starting Horovod workers on this machine through ``horovodrun`` (Gloo controller).

:func:`launch_horovod` writes the resolved configuration to a temporary file and runs
``horovodrun -np N -H localhost:N --gloo python -m landcover train --config FILE``: each process
it starts finds ``HOROVOD_RANK``/``HOROVOD_SIZE`` in its environment and runs as one worker.
The workers' output is passed through without horovodrun's ``[R]<stdout>:`` prefixes, and a
failed job becomes one :class:`~landcover.errors.LandcoverError` line: a worker's own message
when it reported one, otherwise which process failed and how. For several machines, run
``landcover train --engine horovod`` under ``horovodrun -H host1:K,host2:K`` or ``mpirun``
yourself.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from landcover.config import Config, save_config
from landcover.errors import LandcoverError
from landcover.parallel.horovod_install import INSTALL_HINT, import_horovod
from landcover.parallel.workerreports import (
    ERROR_DIR_ENV,
    describe_exit,
    reported_error,
    set_parent_death_signal,
)

log = logging.getLogger("landcover")

_WORKER_LINE = re.compile(r"^\[(\d+)\]<(stdout|stderr)>:(.*)$")
_PROCESS_EXIT = re.compile(r"Process (\d+) exit with status code (-?\d+)")


def horovodrun_command() -> str:
    """The ``horovodrun`` executable of this environment.

    Returns:
        Its path.

    Raises:
        LandcoverError: If Horovod's launcher is not installed.
    """
    beside = Path(sys.executable).with_name("horovodrun")
    if beside.is_file():
        return str(beside)
    found = shutil.which("horovodrun")
    if found is None:
        raise LandcoverError(f"horovodrun (Horovod's launcher) is not installed; {INSTALL_HINT}")
    return found


def launch_horovod(config: Config, nproc: int) -> None:
    """Runs ``nproc`` Horovod training workers on this machine and waits for them.

    Args:
        config: The resolved configuration (``run.engine`` is ``horovod``).
        nproc: Number of worker processes.

    Raises:
        LandcoverError: If Horovod is missing or a worker fails.
    """
    import_horovod()
    runner = horovodrun_command()
    log.info("starting %d workers (horovodrun, Gloo controller)", nproc)
    with tempfile.TemporaryDirectory(prefix="landcover-horovod-") as tmp:
        config_file = Path(tmp, "config.yaml")
        save_config(config, config_file)
        error_dir = Path(tmp, "errors")
        error_dir.mkdir()
        timeout = str(max(1, round(config.run.timeout_s)))
        command = [
            runner,
            "-np",
            str(nproc),
            "-H",
            f"localhost:{nproc}",
            "--gloo",
            "--gloo-timeout-seconds",
            timeout,
            sys.executable,
            "-m",
            "landcover",
            "train",
            "--config",
            str(config_file),
        ]
        env = dict(os.environ)
        env[ERROR_DIR_ENV] = str(error_dir)
        # a peer that stops answering ends the job after the collective timeout (Horovod
        # shuts a stalled job down no sooner than its stall warning)
        env.setdefault("HOROVOD_STALL_CHECK_TIME_SECONDS", str(min(60, int(timeout))))
        env.setdefault("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", timeout)
        env["PYTHONUNBUFFERED"] = "1"
        returncode, runner_lines = _run_streaming(command, env)
        if returncode == 0:
            return
        message = reported_error(error_dir)
        if message is None:
            message = _runner_failure(runner_lines, returncode)
        raise LandcoverError(message)


def _run_streaming(command: list[str], env: dict[str, str]) -> tuple[int, list[str]]:
    """Runs horovodrun, passing worker lines to stderr; returns its exit code and own lines."""
    runner_lines: list[str] = []
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        preexec_fn=set_parent_death_signal,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            worker = _WORKER_LINE.match(line.rstrip("\n"))
            if worker is None:
                runner_lines.append(line.rstrip("\n"))
                continue
            text = worker.group(3)
            if text.startswith("error: "):
                continue  # reported through the error folder, printed once by the caller
            print(text, file=sys.stderr, flush=True)
        return proc.wait(), runner_lines
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _runner_failure(lines: list[str], returncode: int) -> str:
    """One line from horovodrun's own output about which process failed."""
    for line in lines:
        failed = _PROCESS_EXIT.search(line)
        if failed:
            rank, code = int(failed.group(1)), int(failed.group(2))
            return f"horovod worker rank {rank} {describe_exit(code)}"
    detail = next((ln.strip() for ln in reversed(lines) if ln.strip()), "")
    return f"horovodrun exited with code {returncode}" + (f": {detail[:300]}" if detail else "")
