"""Real servers started by the project, no Docker: an MLflow tracking server, a Prefect server and a
Prefect process worker, on 127.0.0.1, as child processes of `mimesis infra up` (`make up`).

Once the Prefect server answers, `up` provisions it: the work pools `mimesis` (process) and
`mimesis-gpu` (process, job template infra/prefect/gpu-pool.json) are created when missing, and the
deployments of infra/prefect/prefect.yaml are (re)deployed from the checkout (`prefect deploy --all`;
their pull step is `set_working_directory: $MIMESIS_CHECKOUT`, which the worker's environment names:
flow runs import the flows from this checkout, no git pull, no remote storage). Then the worker
starts on the CPU pool; with `gpu_worker` a second one serves `mimesis-gpu` (queue `gpu`) from the
same checkout, for a one-machine GPU box (the pipeline sends its `training` stages there).

Each runs in its own session (process group), logs to `<run_dir>/<name>.log`, and has its pid in
`<run_dir>/<name>.pid`; `up` returns only once each answers its health check, `down` sends SIGTERM
to each group, waits, then SIGKILL, and removes the pid files, so nothing is left running.

    MLflow : sqlite:///<run_dir>/mlflow.db, artifacts served from <run_dir>/mlartifacts
    Prefect: its own home <run_dir>/prefect (sqlite), pools `mimesis` and `mimesis-gpu`, the deployments
             of infra/prefect/prefect.yaml, one worker on `mimesis` (and one on `mimesis-gpu`)
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

NAMES = ("mlflow", "prefect-server", "prefect-worker", "prefect-gpu-worker")
WORKERS = ("prefect-worker", "prefect-gpu-worker")
GPU_POOL, GPU_QUEUE = "mimesis-gpu", "gpu"
PREFECT_YAML = Path("infra") / "prefect" / "prefect.yaml"
GPU_TEMPLATE = Path("infra") / "prefect" / "gpu-pool.json"


class PortInUse(RuntimeError):
    """A port we were asked to serve on is taken (another server, another checkout's `make up`)."""


@dataclass(frozen=True)
class Servers:
    """Where the servers are and how to point the project at them."""

    run_dir: Path
    mlflow_port: int = 5000
    prefect_port: int = 4200
    pool: str = "mimesis"
    checkout: Path | None = None  # the project the deployments run from (default: the cwd's checkout)
    gpu_worker: bool = False  # also start a worker on `mimesis-gpu` (this machine has the GPUs)

    @property
    def project(self) -> Path:
        if self.checkout is not None:
            return Path(self.checkout).resolve()
        from mimesis_rl.config import project_root

        return project_root()

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


def _worker_registered(servers: Servers, pool: str | None = None) -> bool:
    try:
        workers = _post_json(f"{servers.prefect_api}/work_pools/{pool or servers.pool}/workers/filter", {})
    except (urllib.error.URLError, OSError, ValueError):
        return False
    return isinstance(workers, list) and any(w.get("status") == "ONLINE" for w in workers)


def _worker_env(servers: Servers, env: dict[str, str]) -> dict[str, str]:
    """What a worker (and every flow run it starts) sees: the servers, and the checkout to run from.

    Flow runs log at INFO (`MIMESIS_WORKER_LOG_LEVEL` overrides) whatever level the shell that ran
    `make up` had (the Makefile sets WARNING for itself): the server's UI is where a team reads what a
    deployment run did, stage routes included."""
    project = str(servers.project)
    path = os.pathsep.join(p for p in (project, str(Path(project) / "src"), env.get("PYTHONPATH")) if p)
    level = env.get("MIMESIS_WORKER_LOG_LEVEL", "INFO")
    return {"PREFECT_WORKER_QUERY_SECONDS": "3", **env, "PREFECT_API_URL": servers.prefect_api,
            "MLFLOW_TRACKING_URI": servers.mlflow_uri, "MIMESIS_CHECKOUT": project, "PYTHONPATH": path,
            "PREFECT_LOGGING_LEVEL": level}


def deployment_pools(prefect_yaml: Path) -> list[str]:
    """The work pools the deployments of prefect.yaml target, in order of first use."""
    import yaml

    pools: list[str] = []
    for dep in (yaml.safe_load(prefect_yaml.read_text()) or {}).get("deployments") or []:
        name = (dep.get("work_pool") or {}).get("name")
        if name and name not in pools:
            pools.append(name)
    return pools


def ensure_pools(servers: Servers) -> list[str]:
    """Create the process pools this project uses when missing (the CPU pool, `mimesis-gpu` with the GPU
    job template, any other pool prefect.yaml targets); an existing pool is left as it is. Returns the
    pools created."""
    from prefect.workers.process import ProcessWorker

    project = servers.project
    wanted = [servers.pool, GPU_POOL] + deployment_pools(project / PREFECT_YAML)
    created = []
    for name in dict.fromkeys(wanted):
        template = (json.loads((project / GPU_TEMPLATE).read_text()) if name == GPU_POOL
                    else ProcessWorker.get_default_base_job_template())
        try:
            _post_json(f"{servers.prefect_api}/work_pools/", {"name": name, "type": "process",
                                                              "base_job_template": template})
        except urllib.error.HTTPError as exc:
            if exc.code != 409:  # 409: the pool exists
                raise RuntimeError(f"creating work pool {name!r} failed: {exc.code} {exc.read()[:500]!r}") \
                    from exc
            continue
        created.append(name)
    return created


def deploy(servers: Servers, env: dict[str, str], timeout: float = 300.0) -> None:
    """`prefect --no-prompt deploy --all` from the checkout's infra/prefect/prefect.yaml (idempotent: a
    deployment of the same name is updated)."""
    log = servers.run_dir / "prefect-deploy.log"
    cmd = [_bin("prefect"), "--no-prompt", "deploy", "--prefect-file", str(PREFECT_YAML), "--all"]
    with log.open("ab") as out:
        done = subprocess.run(cmd, cwd=servers.project, env=_worker_env(servers, env), stdout=out,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=timeout)
    if done.returncode != 0:
        tail = log.read_text(errors="backslashreplace")[-3000:]
        raise RuntimeError(f"`prefect deploy` from {servers.project / PREFECT_YAML} failed; {log}:\n{tail}")


def deployments(servers: Servers) -> list[str]:
    """`flow name/deployment name` of every deployment the Prefect server holds."""
    found = _post_json(f"{servers.prefect_api}/deployments/filter", {})
    flows = {f["id"]: f["name"] for f in _post_json(f"{servers.prefect_api}/flows/filter", {})}
    return sorted(f"{flows.get(d['flow_id'], '?')}/{d['name']}" for d in found)


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
        workers = [("prefect-worker", servers.pool, [])]
        if servers.gpu_worker:
            workers.append(("prefect-gpu-worker", GPU_POOL, ["--work-queue", GPU_QUEUE]))
        if "prefect-server" in started or "prefect-worker" not in running:  # what `make up` leaves
            ensure_pools(servers)
            deploy(servers, env, timeout=max(timeout, 300.0))
        for name, pool, extra in workers:
            if name in running:
                continue
            pid = _start(servers, name, [
                _bin("prefect"), "worker", "start", "--pool", pool, "--type", "process", *extra,
                "--name", f"{pool}-{servers.prefect_port}"], _worker_env(servers, env))
            started.append(name)
            _wait(name.replace("-", " "), lambda pool=pool: _worker_registered(servers, pool), pid,
                  servers.run_dir / f"{name}.log", timeout)
    except BaseException:
        down(servers.run_dir, only=started)
        raise
    (servers.run_dir / "servers.json").write_text(json.dumps(
        {"mlflow_port": servers.mlflow_port, "prefect_port": servers.prefect_port, "pool": servers.pool,
         "gpu_pool": GPU_POOL, "checkout": str(servers.project), **servers.env()}, indent=2))
    return servers


def down(run_dir: Path, only: list[str] | None = None, grace: float = 20.0) -> list[str]:
    """Stop each server of `run_dir` (its whole process group): SIGTERM, wait, SIGKILL. Returns the names
    stopped."""
    _ship_prefect_logs()
    stopped = []
    for name in reversed(only if only is not None else NAMES):  # the workers first, MLflow last
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
            if name in WORKERS:
                _forget_worker(run_dir, name)
        (run_dir / f"{name}.pid").unlink(missing_ok=True)
    if only is None:
        (run_dir / "servers.json").unlink(missing_ok=True)
    return stopped


def _forget_worker(run_dir: Path, name: str, settle: float = 10.0) -> None:
    """Delete a stopped worker's record from its pool while the server is up, so the API stops calling
    it ONLINE at once (the pipeline routes by that), not only after its heartbeats time out.

    Checked, not assumed: on a loaded machine the DELETE can time out, or a heartbeat the worker sent
    before it died can be processed after the DELETE and bring the record back. So the record is
    deleted until the pool has stayed without it for two polls in a row (within `settle` seconds)."""
    try:
        recorded = json.loads((run_dir / "servers.json").read_text())
        pool = recorded["pool"] if name == "prefect-worker" else recorded["gpu_pool"]
        api, worker = recorded["PREFECT_API_URL"], f"{pool}-{recorded['prefect_port']}"
    except (OSError, KeyError, ValueError):  # no record of the servers: nothing to forget
        return
    deadline, absent = time.monotonic() + settle, 0
    while absent < 2 and time.monotonic() < deadline:
        try:
            names = [w.get("name") for w in _post_json(f"{api}/work_pools/{pool}/workers/filter", {})]
            if worker in names:
                absent = 0
                request = urllib.request.Request(f"{api}/work_pools/{pool}/workers/{worker}", method="DELETE")
                with urllib.request.urlopen(request, timeout=10):  # noqa: S310
                    pass
            else:
                absent += 1
        except urllib.error.HTTPError as exc:
            if exc.code == 404:  # the pool (or the record) is gone: nothing to forget
                return
        except (OSError, ValueError):  # the server is gone or slow: try again until the deadline
            pass
        time.sleep(0.5)


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
        if pid is None and name == "prefect-gpu-worker":
            continue  # only listed when `up` started one
        out[name] = {"pid": pid, "running": bool(pid and _alive(pid))}
    return out
