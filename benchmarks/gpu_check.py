"""GPU check: `sim_sft`, `sim_rl` and `agent_rl` for a few steps on a random-init model of the demo's
shape (SmolLM2-135M: hidden 576, 30 layers, 9 heads, 3 KV heads, intermediate 1536, vocabulary 49,152)
with DeepSpeed ZeRO-2 (infra/deepspeed/zero2.json) and bf16 on CUDA; tokens/s, MFU and peak memory per
stage into benchmarks/results/gpu.json. Nothing is downloaded: the base is built on the spot (a byte-level
BPE of 49,152 entries trained on the test fixtures plus seeded filler words, a random-init Llama), the
data are tests/fixtures/sim/conversations.jsonl and the environments' own scripted dialogues.

The command a session with a GPU runs (one H200: expected 3-5 minutes; hard limit 8 minutes, the
wheels' install included), from a checkout that holds this file:

    bash benchmarks/gpu_check.sh wheels   # first, on the developer's machine (PyPI reachable): the
                                          # training stack at this venv's versions as Python 3.12
                                          # wheels in .gpucheck-wheels/ (~31 MiB, ignored by git)
    run(command="bash benchmarks/gpu_check.sh", carry=[".gpucheck-wheels"], timeout_s=540)   # device tool
    bash benchmarks/gpu_check.sh          # the same, typed on the GPU machine itself

gpu_check.sh installs the wheels into /tmp (the GPU image has torch but not trl, deepspeed, datasets,
pydantic, skops, and has transformers 5 where this project pins < 5), runs this module under
`timeout`, and copies gpu.json to $OUT. mlflow is not carried: where it is missing a stand-in module
takes its place (the stages only log to MLflow inside a stage run, and there is none here). Without a
GPU, `python -m benchmarks.gpu_check --smoke` runs the same path on CPU (tiny shape, 1-2 steps per
stage, no DeepSpeed unless --deepspeed; into gpu_smoke.json; tests/integration/test_gpu_check.py);
`--device cpu --shape demo` runs the demo shape on CPU (minutes per GRPO step).

What runs is the pipeline's own code: `simulator.sft.train_sft`, `simulator.rl.train_rl` and
`agent.rl.train_agent_rl` with params.yaml's demo settings, overridden only where a check must be
(data: the fixtures; steps; no checkpoints; `labeler: rules` since no labeler was trained; the realism
discriminator fitted on 8 samples, which train_rl generates on the CPU, before the trainer moves the
model to the GPU; no before/after evaluation in agent_rl). With --deepspeed every stage's `deepspeed` setting
names the same ZeRO-2 file. The agent starts from a fresh LoRA adapter
(what agent_sft would save) and plays against the sim_rl simulator (the `mimesis` variant's user; the
sim_sft one, or `prompted:assistant`, if that stage failed). A random-init model never ends a turn,
so every completion runs to its token limit: the GRPO numbers are for full-length completions.

Each stage runs in its own process (a clean CUDA context, its own peak memory, a timeout of its own):
one failing is reported with its error and exit status 1, the others still run, and gpu.json is
rewritten after every stage, so what was measured survives a failure or a kill.

Numbers, per stage: `tokens_per_s` counts the tokens the trainer trained on (TRL's `num_tokens`:
prompt + completion for GRPO) over the steady-state steps (the first step, with its warm-up, left
out), wall time of whole steps (GRPO's generation included). `mfu` is model FLOPs/s over the device's
dense bf16 peak (PEAK_TFLOPS), counting what the step computes: forward 2N + causal attention, the
backward's activation gradients (the same again), weight gradients only for trainable weights (LoRA:
2 x adapter params) and one more forward where layers are checkpointed; `mfu_6n` is the conventional
6 N tokens/s over the peak, for comparison. `peak_memory_gib`: torch.cuda.max_memory_allocated.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULT = REPO / "benchmarks" / "results" / "gpu.json"
FIXTURE = REPO / "tests" / "fixtures" / "sim" / "conversations.jsonl"
ZERO2 = REPO / "infra" / "deepspeed" / "zero2.json"
RUN_BY_DEFAULT = False  # `python -m benchmarks` runs on CPU machines: this one is run on purpose
STAGES = ("sim_sft", "sim_rl", "agent_rl")

# SmolLM2-135M's config.json (HuggingFaceTB/SmolLM2-135M-Instruct), random init.
DEMO_SHAPE = {"vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
              "num_attention_heads": 9, "num_key_value_heads": 3, "max_position_embeddings": 8192,
              "rope_theta": 100000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": True}
SMOKE_SHAPE = {"vocab_size": 512, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 1024,
               "tie_word_embeddings": True}

# Dense bf16 peak TFLOP/s (no sparsity), by a substring of torch.cuda.get_device_name; first match wins.
PEAK_TFLOPS: tuple[tuple[str, float], ...] = (
    ("H200", 989.0), ("H100 PCIe", 756.0), ("H100", 989.0), ("H800", 989.0), ("GH200", 989.0),
    ("B200", 2250.0), ("B100", 1750.0), ("A100", 312.0), ("A800", 312.0), ("L40S", 362.0),
    ("L40", 181.0), ("L4", 121.0), ("A10G", 70.0), ("A10", 125.0), ("RTX 4090", 165.0),
    ("RTX 3090", 71.0), ("V100", 125.0), ("T4", 65.0),
)
FALLBACK_TFLOPS = 989.0  # an unknown device is scored against an H100/H200 (said so in the JSON)

# Per-stage step counts: (GPU run, --smoke). Sized so the whole run takes ~4-5 min on one H200.
STEPS = {"sim_sft": (30, 2), "sim_rl": (6, 1), "agent_rl": (4, 1)}
# Seconds each child may take at most (the parent also keeps the whole run inside --budget).
STAGE_CAP = {"prepare": 120, "sim_sft": 150, "sim_rl": 180, "agent_rl": 180}
STAGE_FLOOR = 60  # seconds kept back for every stage still to come


def peak_tflops(name: str) -> tuple[float, bool]:
    """(dense bf16 peak of the device named `name`, whether the name was in the table)."""
    for key, value in PEAK_TFLOPS:
        if key.lower() in name.lower():
            return value, True
    return FALLBACK_TFLOPS, False


def train_flops_per_token(n_params: int, n_trainable: int, layers: int, hidden: int, seq_len: float,
                          recompute: bool) -> float:
    """Model FLOPs one trained token costs: forward 2N + causal attention (QK^T and AV over on average
    half the sequence: 2 L H S), backward activation gradients (the same), weight gradients 2 x trainable
    params, plus one forward again when layers are checkpointed."""
    forward = 2.0 * n_params + 2.0 * layers * hidden * seq_len
    return forward * (3.0 if recompute else 2.0) + 2.0 * n_trainable


# ---- the parent: orchestrate, time, write --------------------------------------------------------

def machine_info() -> dict[str, Any]:
    from benchmarks._common import cpu_model

    info: dict[str, Any] = {"python": sys.version.split()[0], "platform": platform.platform(),
                            "cpus": os.cpu_count(), "cpu_model": cpu_model()}
    try:
        import torch

        info["torch"] = torch.__version__
        info["cuda"] = torch.version.cuda
        if torch.cuda.is_available():  # (the parent's CUDA context: a few hundred MiB, never trained in)
            props = torch.cuda.get_device_properties(0)
            info.update(gpu=torch.cuda.get_device_name(0), gpu_count=torch.cuda.device_count(),
                        gpu_memory_gib=round(props.total_memory / 2**30, 1),
                        gpu_capability=f"{props.major}.{props.minor}")
            try:
                nccl = torch.cuda.nccl.version()
                info["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
            except Exception:  # noqa: BLE001
                info["nccl"] = None
        else:
            info["gpu"] = None
    except Exception as exc:  # noqa: BLE001 - the machine block must never stop the check
        info["torch_error"] = repr(exc)
    for name in ("transformers", "trl", "peft", "accelerate", "deepspeed", "datasets", "tokenizers"):
        try:
            from importlib.metadata import version

            info[name] = version(name)
        except Exception:  # noqa: BLE001
            info[name] = None
    return info


def write(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def run_child(stage: str, args: argparse.Namespace, work: Path, timeout: float) -> dict[str, Any]:
    """One stage in its own process; its result JSON, or what went wrong (never raises)."""
    out = work / f"{stage}.result.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "benchmarks.gpu_check", "--child", stage, "--work", str(work)]
    cmd += ["--smoke"] if args.smoke else []
    cmd += ["--deepspeed" if args.deepspeed else "--no-deepspeed", "--device", args.device]
    for name in STAGES:
        cmd += [f"--{name.replace('_', '-')}-steps", str(getattr(args, f"{name}_steps"))]
    log = work / f"{stage}.log"
    start = time.perf_counter()
    status: dict[str, Any]
    with log.open("w") as sink:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        code: int | None = None
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        finally:  # timed out, or this process told to stop: never leave a child holding the GPU
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)  # the child and whatever it started
                proc.wait()
    seconds = round(time.perf_counter() - start, 1)
    status = json.loads(out.read_text()) if out.exists() else {"ok": False}
    status["process_seconds"] = seconds
    if code is None:
        status.update(ok=False, error=f"timed out after {timeout:.0f} s (the stage's share of the budget)")
    elif code != 0 and status.get("ok", False):
        status.update(ok=False, error=f"exit status {code}")
    elif code != 0 and "error" not in status:
        status["error"] = f"exit status {code}"
    if not status.get("ok"):
        status["log_tail"] = log.read_text(errors="replace")[-4000:]
    return status


def parent(args: argparse.Namespace) -> int:
    _offline_env()
    _mlflow_stub()
    import torch

    cuda = torch.cuda.is_available()
    if args.device == "auto":
        args.device = "cpu" if args.smoke or not cuda else "cuda"
    if args.device == "cuda" and not cuda:
        print("gpu_check: --device cuda but torch sees no CUDA device", file=sys.stderr)
        return 2
    if args.deepspeed is None:
        args.deepspeed = args.device == "cuda"
    out = Path(args.out) if args.out else RESULT.with_name("gpu_smoke.json") if args.smoke else RESULT
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="mimesis-gpucheck-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    record: dict[str, Any] = {
        "benchmark": "gpu_check", "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "mode": "smoke" if args.smoke else "gpu", "device": args.device,
        "deepspeed": str(ZERO2.relative_to(REPO)) if args.deepspeed else None,
        "precision": "bf16" if args.device == "cuda" else "fp32",
        "shape": SMOKE_SHAPE if args.shape == "tiny" else DEMO_SHAPE,
        "machine": machine_info(), "budget_seconds": args.budget, "stages": {}, "ok": False,
    }
    name = record["machine"].get("gpu") or ""
    peak, known = peak_tflops(name) if args.device == "cuda" else (None, False)
    record["peak_bf16_tflops"] = peak
    if args.device == "cuda":
        record["peak_source"] = "table" if known else f"fallback {FALLBACK_TFLOPS:g}: device not in the table"
    write(out, record)
    failed: list[str] = []

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    before = signal.signal(signal.SIGTERM, stop)  # `timeout` (gpu_check.sh): child killed, JSON kept
    try:
        run_stages(args, work, out, record, failed, started, peak)
    except KeyboardInterrupt as exc:
        record["interrupted"] = f"{exc} after {time.perf_counter() - started:.0f} s"
        failed.append("interrupted")
    finally:
        signal.signal(signal.SIGTERM, before)
    record["seconds"] = round(time.perf_counter() - started, 1)
    record["failed"] = failed
    record["ok"] = not failed
    write(out, record)
    print(f"gpu_check: wrote {out} ({record['seconds']} s)")
    if failed:
        print(f"gpu_check: FAILED: {', '.join(failed)} (details in {out})", file=sys.stderr)
        return 1
    if not args.keep_work and not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def run_stages(args: argparse.Namespace, work: Path, out: Path, record: dict[str, Any], failed: list[str],
               started: float, peak: float | None) -> None:
    order = ("prepare", *STAGES)
    for i, stage in enumerate(order):
        left = args.budget - (time.perf_counter() - started)
        cap = STAGE_CAP[stage] * (2 if args.smoke else 1)
        timeout = min(cap, left - STAGE_FLOOR * (len(order) - 1 - i))
        if timeout < 20:
            result: dict[str, Any] = {"ok": False, "error": f"skipped: {left:.0f} s of the budget left"}
        elif stage == "sim_rl" and not (work / "sim_sft" / "adapter").is_dir():
            result = {"ok": False, "error": "skipped: sim_sft left no simulator to continue"}
        elif stage != "prepare" and "prepare" in failed:
            result = {"ok": False, "error": "skipped: prepare (the base model) failed"}
        else:
            print(f"gpu_check: {stage} (at most {timeout:.0f} s) ...", flush=True)
            result = (prepare(work, args.shape == "tiny") if stage == "prepare"
                      else run_child(stage, args, work, timeout))
        if stage != "prepare" and result.get("ok") and args.device == "cuda":
            add_mfu(result, peak)
        if stage == "prepare":
            record["prepare"] = result
        else:
            record["stages"][stage] = result
        if not result.get("ok"):
            failed.append(stage)
            print(f"gpu_check: {stage} FAILED: {result.get('error')}", file=sys.stderr, flush=True)
            if result.get("log_tail"):
                print(result["log_tail"][-2500:], file=sys.stderr, flush=True)
        else:
            print(f"gpu_check: {stage} ok: {summary(result)}", flush=True)
        record["seconds"] = round(time.perf_counter() - started, 1)
        record["failed"] = failed
        write(out, record)


def prepare(work: Path, smoke: bool) -> dict[str, Any]:
    """The base model and the agent folder, built in this process (CPU work: no CUDA context)."""
    try:
        return build_base(work, smoke)
    except Exception as exc:  # noqa: BLE001 - reported like a stage's failure
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000],
                "log_tail": traceback.format_exc()[-4000:]}


def add_mfu(result: dict[str, Any], peak: float | None) -> None:
    tps = result.get("tokens_per_s")
    if not tps or not peak:
        return
    shape = result["shape"]
    flops = train_flops_per_token(result["params"], result["trainable_params"], shape["num_hidden_layers"],
                                  shape["hidden_size"], result.get("mean_seq_len") or 0.0,
                                  bool(result.get("gradient_checkpointing")))
    result["flops_per_token"] = flops
    result["mfu"] = round(flops * tps / (peak * 1e12), 5)
    result["mfu_6n"] = round(6.0 * result["params"] * tps / (peak * 1e12), 5)


def summary(result: dict[str, Any]) -> str:
    keys = ("steps", "seconds", "tokens_per_s", "mfu", "peak_memory_gib", "final_loss")
    return ", ".join(f"{k} {result.get(k)}" for k in keys if k in result)


# ---- the children: one stage each -----------------------------------------------------------------

def _offline_env() -> None:
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "DO_NOT_TRACK",
                "TRL_EXPERIMENTAL_SILENCE"):
        os.environ.setdefault(key, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _mlflow_stub() -> None:
    """The stages log into MLflow only when a run is active (none here); where mlflow is not installed
    (a bare GPU image), a stand-in that says so keeps the imports working."""
    try:
        import mlflow  # noqa: F401
        return
    except ImportError:
        pass
    import importlib.machinery
    import types

    class MlflowException(Exception):
        pass

    class MlflowClient:
        def __init__(self, *a: Any, **k: Any) -> None:
            raise RuntimeError("mlflow is not installed (gpu_check's stand-in)")

    mod = types.ModuleType("mlflow")
    mod.active_run = lambda: None  # type: ignore[attr-defined]
    mod.MlflowClient = MlflowClient  # type: ignore[attr-defined]
    mod.exceptions = types.SimpleNamespace(MlflowException=MlflowException)  # type: ignore[attr-defined]
    mod.entities = types.SimpleNamespace(Metric=None, RunStatus=None)  # type: ignore[attr-defined]
    mod.__gpu_check_stub__ = True  # type: ignore[attr-defined]
    mod.__spec__ = importlib.machinery.ModuleSpec("mlflow", None)  # find_spec("mlflow") must not fail
    sys.modules["mlflow"] = mod


def _distributed_env(device: str) -> None:
    """A one-rank world for DeepSpeed (what `accelerate launch` would set)."""
    port = 29500 + random.Random(os.getpid()).randrange(1000)
    for key, value in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "WORLD_SIZE": "1",
                       "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}.items():
        os.environ.setdefault(key, value)


class Meter:
    """A TrainerCallback (built lazily: transformers is imported in the child only) recording when each
    step ends, TRL's cumulative `num_tokens` and the logged loss."""

    def __new__(cls, cuda: bool) -> Any:
        from transformers import TrainerCallback

        class _Meter(TrainerCallback):
            def __init__(self) -> None:
                self.step_ends: list[float] = []
                self.logs: list[dict[str, Any]] = []
                self.start = 0.0
                self.model: Any = None
                self.optimizer = ""

            def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                self.start = time.perf_counter()
                self.model = kw.get("model")

            def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                if cuda:
                    import torch

                    torch.cuda.synchronize()
                self.step_ends.append(time.perf_counter())
                if not self.optimizer:  # the wrappers down to the optimizer: ZeRO shows as its own class
                    opt, chain = kw.get("optimizer"), []
                    while opt is not None and len(chain) < 4:
                        chain.append(type(opt).__name__)
                        opt = getattr(opt, "optimizer", None)
                    self.optimizer = " > ".join(chain)

            def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
                numbers = {k: v for k, v in (logs or {}).items()
                           if isinstance(v, int | float) and not isinstance(v, bool)}
                if numbers:
                    self.logs.append({"step": state.global_step, "time": time.perf_counter(), **numbers})

        return _Meter()


def meter_numbers(meter: Any) -> dict[str, Any]:
    """Steady-state tokens/s (first step left out when there are two or more) and the last loss."""
    ends, logs = meter.step_ends, [e for e in meter.logs if "num_tokens" in e]
    by_step = {e["step"]: e for e in logs}
    out: dict[str, Any] = {"steps": len(ends), "seconds": round(ends[-1] - meter.start, 3) if ends else None,
                           "optimizer": meter.optimizer}
    losses = [e["loss"] for e in meter.logs if "loss" in e]
    out["final_loss"] = float(losses[-1]) if losses else None
    out["first_loss"] = float(losses[0]) if losses else None
    tokens = {s: e["num_tokens"] for s, e in by_step.items()}
    if not ends or not tokens:
        return out
    last = len(ends)
    total = tokens.get(last, max(tokens.values()))
    out["tokens"] = int(total)
    if last >= 2 and 1 in tokens:
        out["tokens_per_s"] = round((total - tokens[1]) / (ends[-1] - ends[0]), 1)
        out["measured_steps"] = last - 1
    else:
        out["tokens_per_s"] = round(total / (ends[-1] - meter.start), 1)
        out["measured_steps"] = last
    out["step_seconds"] = [round(b - a, 3) for a, b in zip([meter.start, *ends[:-1]], ends, strict=True)]
    out["tokens_per_step"] = round(total / last, 1)
    return out


def build_base(work: Path, smoke: bool) -> dict[str, Any]:
    """The random-init base (demo shape, or tiny with --smoke) + a fresh LoRA agent folder."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from mimesis_rl.agent.artifact import save_agent
    from mimesis_rl.config import load_params
    from mimesis_rl.data.jsonl import read_conversations
    from mimesis_rl.models.acquire import _save, _set_special_ids
    from mimesis_rl.models.config import LoraSettings
    from mimesis_rl.models.decoding import SamplingParams
    from mimesis_rl.models.lora import peft_lora_config
    from mimesis_rl.models.testing import SAMPLE_TEXTS
    from mimesis_rl.models.tokenizer import train_bpe_tokenizer

    start = time.perf_counter()
    shape = dict(SMOKE_SHAPE if smoke else DEMO_SHAPE)
    texts = [t.content for c in read_conversations(FIXTURE) for t in c.turns]
    texts += [t.reasoning for c in read_conversations(FIXTURE) for t in c.turns if t.reasoning]
    corpus = (texts + list(SAMPLE_TEXTS)) * 20
    if not smoke:  # seeded filler words: enough distinct pairs for BPE to reach the full 49,152 entries
        rng = random.Random(0)
        words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9)))
                 for _ in range(60000)]
        corpus += [" ".join(words[i:i + 12]) for i in range(0, len(words), 12)] * 2
    tokenizer = train_bpe_tokenizer(corpus, vocab_size=shape["vocab_size"],
                                    model_max_length=shape["max_position_embeddings"])
    if smoke:
        shape["vocab_size"] = len(tokenizer)
    elif len(tokenizer) < shape["vocab_size"]:  # never seen; keep ids and vocabulary the same size
        tokenizer.add_tokens([f"<filler_{i}>" for i in range(shape["vocab_size"] - len(tokenizer))])
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**shape))
    _set_special_ids(model, tokenizer)
    params = int(sum(p.numel() for p in model.parameters()))
    _save(model, tokenizer, work / "base", "float32",
          {"kind": "tiny", "source": "benchmarks.gpu_check (random init, the demo's shape)", "seed": 0})
    del model
    # The agent: a fresh LoRA adapter with agent_sft's settings, saved the way agent_sft saves one.
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    demo = load_params(REPO / "params.yaml", profile="demo")
    lora = LoraSettings.from_section(demo["agent_sft"].get("lora"), "agent_sft.lora")
    base = AutoModelForCausalLM.from_pretrained(work / "base", dtype=torch.float32)
    agent = get_peft_model(base, peft_lora_config(lora))
    save_agent(agent, tokenizer, work / "agent_sft", work / "base", SamplingParams(max_new_tokens=64),
               "agent_sft", extra={"note": "gpu_check: a fresh adapter"})
    return {"ok": True, "params": params, "vocab": len(tokenizer), "shape": shape,
            "seconds": round(time.perf_counter() - start, 1)}


def _common_overrides(args: argparse.Namespace, work: Path, stage: str) -> dict[str, Any]:
    return {"device": args.device, "bf16": args.device == "cuda",
            "deepspeed": str(ZERO2) if args.deepspeed else None,
            "output_dir": str(work / stage), "checkpoint_dir": str(work / "ckpt" / stage)}


def run_sim_sft(args: argparse.Namespace, work: Path, meter: Any) -> dict[str, Any]:
    import mimesis_rl.simulator.sft as sft
    from mimesis_rl.config import load_params

    section = dict(load_params(REPO / "params.yaml", profile="demo")["sim_sft"])
    section.pop("registry", None)
    trainer = dict(section.pop("trainer", None) or {})
    trainer.update(max_steps=args.sim_sft_steps, logging_steps=1, save_steps=10**6, eval_steps=None)
    if args.smoke:
        section["env"] = {**section.get("env", {}), "episodes_per_domain": 1, "domains": ["bargain"]}
    section.update(train=str(FIXTURE), val=None, base_model=str(work / "base"), trainer=trainer,
                   **_common_overrides(args, work, "sim_sft"))
    settings = sft.SFTSettings.from_section(section)
    real = sft.build_trainer
    holder: dict[str, Any] = {}

    def build(*a: Any, **k: Any) -> Any:
        trainer = real(*a, **{**k, "extra_callbacks": [*(k.get("extra_callbacks") or []), meter]})
        holder["trainer"] = trainer
        return trainer

    sft.build_trainer = build
    try:
        metrics = sft.train_sft(settings, seed=0)
    finally:
        sft.build_trainer = real
    trainer = holder["trainer"]
    return {"stage_metrics": metrics, "gradient_checkpointing": bool(trainer.args.gradient_checkpointing),
            "rows_per_step": settings.option("per_device_train_batch_size")
            * settings.option("gradient_accumulation_steps"), **_model_numbers(trainer)}


def run_sim_rl(args: argparse.Namespace, work: Path, meter: Any) -> dict[str, Any]:
    import mimesis_rl.simulator.rl as rl
    from mimesis_rl.config import load_params

    section = dict(load_params(REPO / "params.yaml", profile="demo")["sim_rl"])
    section.pop("registry", None)
    trainer = dict(section.pop("trainer", None) or {})
    trainer.update(max_steps=args.sim_rl_steps, logging_steps=1, save_steps=10**6)
    if args.smoke:
        trainer.update(per_device_train_batch_size=2, gradient_accumulation_steps=1, num_generations=2,
                       max_completion_length=16)
        section.update(corpus_prompts_per_domain=4, env_prompts_per_domain=1,
                       env={"presets": ["cooperative"], "domains": ["bargain"], "episodes_per_domain": 1})
    section.update(sft_dir=str(work / "sim_sft"), train=str(FIXTURE), labeler="rules", trainer=trainer,
                   discriminator={**section.get("discriminator", {}), "samples": 4 if args.smoke else 8},
                   **_common_overrides(args, work, "sim_rl"))
    settings = rl.RLSettings.from_section(section)
    metrics = rl.train_rl(settings, seed=0, extra_callbacks=[meter])
    return {"stage_metrics": metrics,
            "gradient_checkpointing": bool(settings.option("gradient_checkpointing")),
            "rows_per_step": settings.option("per_device_train_batch_size")
            * settings.option("gradient_accumulation_steps"), **_model_numbers_from(meter.model)}


def run_agent_rl(args: argparse.Namespace, work: Path, meter: Any) -> dict[str, Any]:
    import mimesis_rl.agent.rl as agent_rl
    from mimesis_rl.agent.rl_settings import AgentRLSettings
    from mimesis_rl.config import load_params

    section = dict(load_params(REPO / "params.yaml", profile="demo")["agent_rl"])
    for key in ("registry", "variants"):
        section.pop(key, None)
    user, variant = "prompted:assistant", "assistant"
    for folder in ("sim_rl", "sim_sft"):  # the `mimesis` variant's user: the freshest simulator there is
        if (work / folder / "adapter").is_dir():
            user, variant = f"learned:{work / folder}", f"mimesis (user: {folder})"
            break
    section.update(sft_dir=str(work / "agent_sft"), base_model=str(work / "base"), user=user,
                   variant="mimesis",
                   max_steps=args.agent_rl_steps, eval_seeds=0, save_steps=10**6, logging_steps=1,
                   device=args.device, bf16=args.device == "cuda", output_dir=str(work / "agent_rl"),
                   report_dir=str(work / "agent_rl_report"), checkpoint_dir=str(work / "ckpt" / "agent_rl"))
    if args.smoke:
        section.update(domains=["bargain"], batch_size=2, num_generations=2, max_turns=1,
                       agent_max_new_tokens=8, user_max_new_tokens=8)
    if args.deepspeed:  # the same ZeRO-2 file as the simulator stages
        section["deepspeed"] = str(ZERO2)
    settings = AgentRLSettings.from_section(section)
    real = agent_rl.build_trainer
    holder: dict[str, Any] = {}

    def build(*a: Any, **k: Any) -> Any:
        trainer = real(*a, **k)
        trainer.add_callback(meter)
        holder["trainer"] = trainer
        return trainer

    agent_rl.build_trainer = build
    try:
        metrics = agent_rl.train_agent_rl(settings, seed=0)
    finally:
        agent_rl.build_trainer = real
    trainer = holder["trainer"]
    return {"stage_metrics": metrics, "user": user, "variant": variant,
            "rows_per_step": settings.option("batch_size"),
            "gradient_checkpointing": bool(trainer.args.gradient_checkpointing),
            "deepspeed_in_config": bool(trainer.args.deepspeed), **_model_numbers(trainer)}


def _model_numbers(trainer: Any) -> dict[str, Any]:
    return _model_numbers_from(trainer.model)


def _model_numbers_from(model: Any) -> dict[str, Any]:
    if model is None:
        return {}
    inner = getattr(model, "module", model)  # a DeepSpeed engine wraps the model
    named = list(inner.named_parameters())
    trainable = sum(p.numel() for _, p in named if p.requires_grad)
    frozen = [p for _, p in named if not p.requires_grad]
    return {"params": int(sum(p.numel() for n, p in named if "lora_" not in n)),  # the base model's N
            "trainable_params": int(trainable),
            "param_dtype": str((frozen or [named[0][1]])[0].dtype)}


def child(args: argparse.Namespace) -> int:
    work = Path(args.work)
    out = work / f"{args.child}.result.json"
    cuda = args.device == "cuda"
    result: dict[str, Any] = {"ok": False}
    start = time.perf_counter()
    try:  # everything, imports included: whatever fails lands in the result file
        _offline_env()
        _mlflow_stub()
        import torch

        from mimesis_rl.threads import set_threads

        set_threads(None if cuda else int(os.environ.get("MIMESIS_THREADS", "0") or 0) or None)
        if args.deepspeed:
            _distributed_env(args.device)
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        meter = Meter(cuda)
        run = {"sim_sft": run_sim_sft, "sim_rl": run_sim_rl, "agent_rl": run_agent_rl}[args.child]
        extra = run(args, work, meter)
        config = json.loads((work / "base" / "config.json").read_text())
        result = {"ok": True, **meter_numbers(meter), **extra,
                  "shape": {k: config[k] for k in ("hidden_size", "num_hidden_layers", "vocab_size")}}
        if result.get("tokens_per_step") and result.get("rows_per_step"):
            result["mean_seq_len"] = round(result["tokens_per_step"] / result["rows_per_step"], 1)
        if cuda:
            result["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
            result["peak_reserved_gib"] = round(torch.cuda.max_memory_reserved() / 2**30, 3)
        from benchmarks._common import peak_rss_mib

        result["peak_rss_mib"] = peak_rss_mib()
        stub = getattr(sys.modules.get("mlflow"), "__gpu_check_stub__", False)
        result["mlflow"] = "stand-in" if stub else "installed"
        code = 0
    except BaseException as exc:  # noqa: BLE001 - report every failure, KeyboardInterrupt included
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000],
                  "traceback": traceback.format_exc()[-6000:]}
        traceback.print_exc()
        code = 1
    result["child_seconds"] = round(time.perf_counter() - start, 1)
    out.write_text(json.dumps(result, indent=2, default=str))
    return code


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="CPU, tiny shape, 1-2 steps per stage, no DeepSpeed")
    p.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    p.add_argument("--shape", default=None, choices=("demo", "tiny"),
                   help="the model built: demo (SmolLM2-135M's; the default) or tiny (--smoke's)")
    p.add_argument("--deepspeed", dest="deepspeed", action="store_true", default=None,
                   help="ZeRO-2 (infra/deepspeed/zero2.json); the default on CUDA")
    p.add_argument("--no-deepspeed", dest="deepspeed", action="store_false")
    p.add_argument("--out", default=None,
                   help=f"result JSON (default {RESULT.relative_to(REPO)}; gpu_smoke.json with --smoke)")
    p.add_argument("--work", default=None,
                   help="scratch folder (default: a temporary one, removed on success)")
    p.add_argument("--keep-work", action="store_true")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds for the whole run (default 450 on a GPU: 8 min with set-up to spare)")
    p.add_argument("--child", choices=STAGES, help=argparse.SUPPRESS)
    for stage in STAGES:
        p.add_argument(f"--{stage.replace('_', '-')}-steps", type=int, default=None)
    args = p.parse_args(argv)
    for stage in STAGES:
        key = f"{stage}_steps"
        if getattr(args, key) is None:
            setattr(args, key, STEPS[stage][1 if args.smoke else 0])
    if args.shape is None:
        args.shape = "tiny" if args.smoke else "demo"
    if args.budget is None:
        args.budget = 900.0 if args.smoke else 450.0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    sys.path.insert(0, str(REPO / "src")) if str(REPO / "src") not in sys.path else None
    if args.child:
        return child(args)
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
