"""Real servers started by the project, no Docker: an MLflow tracking server, a Prefect server and a
Prefect process worker, on 127.0.0.1, as child processes of `mimesis infra up` (`make up`).

Each runs in its own session (process group), logs to `<run_dir>/<name>.log`, and has its pid in
`<run_dir>/<name>.pid`; `up` returns only once each answers its health check, `down` sends SIGTERM
to each group, waits, then SIGKILL, and removes the pid files, so nothing is left running.

    MLflow : sqlite:///<run_dir>/mlflow.db, artifacts served from <run_dir>/mlartifacts
    Prefect: its own home <run_dir>/prefect (sqlite), work pool `mimesis` (type process), one worker
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

NAMES = ("mlflow", "prefect-server", "prefect-worker")


class PortInUse(RuntimeError):
    """A port we were asked to serve on is taken (another server, another checkout's `make up`)."""


@dataclass(frozen=True)
class Servers:
    """Where the servers are and how to point the project at them."""

    run_dir: Path
    mlflow_port: int = 5000
    prefect_port: int = 4200
    pool: str = "mimesis"

    @property
    def mlflow_uri(self) -> str:
        return f"http://127.0.0.1:{self.mlflow_port}"

    @property
    def prefect_api(self) -> str:
        return f"http://127.0.0.1:{self.prefect_port}/api"

    def env(self) -> dict[str, str]:
        """What `make run` (and anything else) needs to use these servers."""
        return {"MLFLOW_TRACKING_URI": self.mlflow_uri, "PREFECT_API_URL": self.prefect_api}


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _bin(name: str) -> str:
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else name


def _get(url: str, timeout: float = 2.0) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - our own localhost URL
            return response.status
    except (urllib.error.URLError, OSError):
        return 0


def _post_json(url: str, body: dict, timeout: float = 3.0) -> object:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - localhost
        return json.loads(response.read() or b"null")


def _pid(run_dir: Path, name: str) -> int | None:
    path = run_dir / f"{name}.pid"
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (our exited child not yet reaped) is not running
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def _start(servers: Servers, name: str, cmd: list[str], env: dict[str, str]) -> int:
    log = (servers.run_dir / f"{name}.log").open("ab")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env, cwd=servers.run_dir, start_new_session=True)
    log.close()
    (servers.run_dir / f"{name}.pid").write_text(str(proc.pid))
    return proc.pid


def _wait(what: str, check: Callable[[], bool], pid: int, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if not _alive(pid):
            tail = log.read_text(errors="backslashreplace")[-3000:] if log.exists() else ""
            raise RuntimeError(f"{what} exited during start-up; {log}:\n{tail}")
        time.sleep(0.5)
    raise TimeoutError(f"{what} did not pass its health check within {timeout:.0f}s (log: {log})")


def _base_env(servers: Servers) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"PREFECT_HOME": str(servers.run_dir / "prefect"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                "DO_NOT_TRACK": "1", "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING": "false",
                "PATH": str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")})
    env.pop("PREFECT_API_URL", None)
    return env


def _worker_registered(servers: Servers) -> bool:
    try:
        workers = _post_json(f"{servers.prefect_api}/work_pools/{servers.pool}/workers/filter", {})
    except (urllib.error.URLError, OSError, ValueError):
        return False
    return isinstance(workers, list) and len(workers) > 0


def up(servers: Servers, timeout: float = 180.0) -> Servers:
    """Start the three processes (those already running from this run_dir are kept) and health-check them."""
    servers.run_dir.mkdir(parents=True, exist_ok=True)
    running = {n for n in NAMES if (p := _pid(servers.run_dir, n)) is not None and _alive(p)}
    for name, port in (("mlflow", servers.mlflow_port), ("prefect-server", servers.prefect_port)):
        if name not in running and not port_free(port):
            raise PortInUse(f"port {port} on 127.0.0.1 is taken: cannot start {name} "
                            f"(choose another with --{name.split('-')[0]}-port)")
    env = _base_env(servers)
    started: list[str] = []
    try:
        if "mlflow" not in running:
            db = (servers.run_dir / "mlflow.db").resolve()
            artifacts = (servers.run_dir / "mlartifacts").resolve()
            pid = _start(servers, "mlflow", [
                _bin("mlflow"), "server", "--host", "127.0.0.1", "--port", str(servers.mlflow_port),
                "--backend-store-uri", f"sqlite:///{db}", "--artifacts-destination", artifacts.as_uri(),
                "--serve-artifacts", "--workers", "1"], env)
            started.append("mlflow")
            _wait("mlflow server", lambda: _get(f"{servers.mlflow_uri}/health") == 200, pid,
                  servers.run_dir / "mlflow.log", timeout)
        if "prefect-server" not in running:
            cmd = [_bin("prefect"), "server", "start", "--host", "127.0.0.1",
                   "--port", str(servers.prefect_port)]
            pid = _start(servers, "prefect-server", cmd, env)
            started.append("prefect-server")
            _wait("prefect server", lambda: _get(f"{servers.prefect_api}/health") == 200, pid,
                  servers.run_dir / "prefect-server.log", timeout)
        if "prefect-worker" not in running:
            worker_env = {**env, "PREFECT_API_URL": servers.prefect_api}
            pid = _start(servers, "prefect-worker", [
                _bin("prefect"), "worker", "start", "--pool", servers.pool, "--type", "process",
                "--name", f"mimesis-{servers.prefect_port}"], worker_env)
            started.append("prefect-worker")
            _wait("prefect worker", lambda: _worker_registered(servers), pid,
                  servers.run_dir / "prefect-worker.log", timeout)
    except BaseException:
        down(servers.run_dir, only=started)
        raise
    (servers.run_dir / "servers.json").write_text(json.dumps(
        {"mlflow_port": servers.mlflow_port, "prefect_port": servers.prefect_port, "pool": servers.pool,
         **servers.env()}, indent=2))
    return servers


def down(run_dir: Path, only: list[str] | None = None, grace: float = 20.0) -> list[str]:
    """Stop each server of `run_dir` (its whole process group): SIGTERM, wait, SIGKILL. Returns the names
    stopped."""
    _ship_prefect_logs()
    stopped = []
    for name in reversed(only if only is not None else NAMES):  # the worker first, MLflow last
        pid = _pid(run_dir, name)
        if pid is None:
            continue
        if _alive(pid) or _group_alive(pid):
            _signal_group(pid, signal.SIGTERM)
            if not _wait_group(pid, grace):
                _signal_group(pid, signal.SIGKILL)
                if not _wait_group(pid, 10.0):
                    raise RuntimeError(f"{name} (process group {pid}) survived SIGKILL: "
                                       f"{group_members(pid)}")
            stopped.append(name)
        (run_dir / f"{name}.pid").unlink(missing_ok=True)
    if only is None:
        (run_dir / "servers.json").unlink(missing_ok=True)
    return stopped


def _ship_prefect_logs(timeout: float = 30.0) -> None:
    """Send this process's queued Prefect API logs while the server is still up, and retire the log
    worker. The worker keeps the API client it started with: left running, it retries every later log
    against the stopped server, and Prefect's exit hook waits on that queue without a time limit (a
    process that used the servers would hang at exit)."""
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=timeout)


def _wait_group(pgid: int, seconds: float) -> bool:
    """Wait (reaping the leader, our child) until no process of the group is left; False on timeout."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        _reap(pgid)
        if not _group_alive(pgid):
            return True
        time.sleep(0.2)
    _reap(pgid)
    return not _group_alive(pgid)


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)  # started with start_new_session: the group id is the leader's pid


def group_members(pgid: int) -> list[int]:
    """Live processes of process group `pgid` (Linux /proc), zombies excluded."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def _group_alive(pgid: int) -> bool:
    return bool(group_members(pgid))


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def status(run_dir: Path) -> dict[str, dict[str, object]]:
    """name -> {pid, running} for the servers recorded in `run_dir`."""
    out: dict[str, dict[str, object]] = {}
    for name in NAMES:
        pid = _pid(run_dir, name)
        out[name] = {"pid": pid, "running": bool(pid and _alive(pid))}
    return out
