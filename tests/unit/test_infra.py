"""The team/GPU infrastructure files are checked here, since Docker and GPUs are not: the compose
file's services wire up, the Prefect deployments point at real flows with valid parameters, pools and
schedules, the GPU pool's job template is one Prefect's process worker accepts, and the launch configs
reference files that exist."""

from __future__ import annotations

import importlib
import inspect
import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((INFRA / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def prefect_yaml() -> dict:
    return yaml.safe_load((INFRA / "prefect" / "prefect.yaml").read_text())


def test_compose_services_wire_up(compose: dict) -> None:
    services = compose["services"]
    assert {"postgres", "minio", "mlflow", "prefect-server", "prefect-worker"} <= set(services)
    for name, service in services.items():
        assert "image" in service or "build" in service, f"service {name}: neither image nor build"
        for dep in service.get("depends_on", []):
            assert dep in services, f"service {name} depends on unknown {dep}"
        for port in service.get("ports", []):
            assert re.fullmatch(r"\d+:\d+", port), f"service {name}: port {port!r}"
        for volume in service.get("volumes", []):
            named = volume.split(":", 1)[0]
            assert named.startswith(("/", ".")) or named in compose.get("volumes", {}), volume
    build = services["prefect-worker"]["build"]
    assert (INFRA / build["context"] / build["dockerfile"]).resolve().is_file()
    worker_env = services["prefect-worker"]["environment"]
    assert worker_env["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
    assert worker_env["PREFECT_API_URL"] == "http://prefect-server:4200/api"
    assert "--port 5000" in services["mlflow"]["command"] and "5000:5000" in services["mlflow"]["ports"]
    assert "postgresql://" in services["mlflow"]["command"]
    assert "infra/prefect/prefect.yaml" in services["prefect-worker"]["command"]
    # every pool a deployment targets is created before `prefect deploy --all`
    command = services["prefect-worker"]["command"]
    created = set(re.findall(r"work-pool create (\S+)", command))
    targeted = {d["work_pool"]["name"] for d in
                yaml.safe_load((INFRA / "prefect" / "prefect.yaml").read_text())["deployments"]}
    assert targeted <= created and command.index("work-pool create") < command.index("prefect deploy")


def test_deployments_point_at_real_flows(prefect_yaml: dict) -> None:
    from prefect import Flow
    from prefect.client.schemas.schedules import CronSchedule

    from mimesis_rl.config import load_params

    cron = load_params(ROOT / "params.yaml")["pipeline"]["schedule_cron"]
    pools = {"mimesis", "mimesis-gpu"}
    for dep in prefect_yaml["deployments"]:
        path, func = dep["entrypoint"].split(":")
        assert (ROOT / path).is_file(), dep["entrypoint"]
        flow = getattr(importlib.import_module(path.removesuffix(".py").replace("/", ".")), func)
        assert isinstance(flow, Flow), f"{dep['entrypoint']} is not a Prefect flow"
        accepted = set(inspect.signature(flow.fn).parameters)
        assert set(dep.get("parameters", {})) <= accepted, f"{dep['name']}: unknown parameters"
        assert dep["work_pool"]["name"] in pools
        assert dep.get("concurrency_limit") == 1, f"{dep['name']}: one run per checkout"
        for schedule in dep.get("schedules", []):
            CronSchedule(cron=schedule["cron"], timezone=schedule.get("timezone"))  # raises when invalid
            assert schedule["cron"] == cron, f"{dep['name']}: cron differs from params.yaml"
    gpu = [d for d in prefect_yaml["deployments"] if d["work_pool"]["name"] == "mimesis-gpu"]
    assert gpu and gpu[0]["work_pool"]["work_queue_name"] == "gpu"


def test_gpu_pool_template_is_a_process_template(prefect_yaml: dict) -> None:
    from prefect.workers.process import ProcessWorker

    template = json.loads((INFRA / "prefect" / "gpu-pool.json").read_text())
    default = ProcessWorker.get_default_base_job_template()
    assert template["job_configuration"] == default["job_configuration"]
    assert set(template["variables"]["properties"]) == set(default["variables"]["properties"])
    env = template["variables"]["properties"]["env"]["default"]
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    # job variables the GPU deployment sets must be variables of the template
    for dep in prefect_yaml["deployments"]:
        if dep["work_pool"]["name"] == "mimesis-gpu":
            assert set(dep["work_pool"].get("job_variables", {})) <= set(template["variables"]["properties"])


def test_launch_configs_reference_existing_files() -> None:
    for path in sorted((INFRA / "accelerate").glob("*.yaml")):
        config = yaml.safe_load(path.read_text())
        ds = (config.get("deepspeed_config") or {}).get("deepspeed_config_file")
        if ds:
            assert (ROOT / ds).is_file(), f"{path.name}: {ds} missing"
            json.loads((ROOT / ds).read_text())
        hostfile = (config.get("deepspeed_config") or {}).get("deepspeed_hostfile")
        if hostfile:
            assert (ROOT / hostfile).is_file(), f"{path.name}: {hostfile} missing"
        if config.get("num_machines", 1) > 1:
            assert config["num_processes"] % config["num_machines"] == 0, path.name
    hosts = [line.split() for line in (INFRA / "deepspeed" / "hostfile").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert hosts and all(len(h) == 2 and re.fullmatch(r"slots=\d+", h[1]) for h in hosts)
    multi = yaml.safe_load((INFRA / "accelerate" / "multi_node_zero3.yaml").read_text())
    assert multi["num_machines"] == len(hosts)
    assert multi["num_processes"] == sum(int(h[1].split("=")[1]) for h in hosts)


def test_cuda_dockerfile_matches_the_cpu_one() -> None:
    cuda = (INFRA / "Dockerfile.cuda").read_text()
    pin = re.search(r"TORCH_PIN := (\S+)", (ROOT / "Makefile").read_text())[1]
    assert pin in cuda and "download.pytorch.org/whl/cu" in cuda  # same torch, its CUDA build
    assert re.search(r"^FROM nvidia/cuda:\S+-devel-", cuda, re.M)  # nvcc for DeepSpeed's ops
    assert "make setup" in cuda and "python3.11" in cuda
