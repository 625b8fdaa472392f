"""`mimesis serve` under load: N concurrent sessions x T turns against the demo-size simulator, the
micro-batched server against the same server with batching off, in one run, over loopback only.

    python -m benchmarks.serve [--sessions 100] [--turns 5] [--max-new-tokens 12]
                               [--batched-limit-s 1500] [--unbatched-limit-s 300]

Each mode starts its own server process (`uvicorn` on 127.0.0.1, an API key from the environment,
the same `UserSimulator.load("assistant")` = SmolLM2-135M-Instruct in models/base, sampled with a
per-session seed), then N client coroutines each open a session and send T agent messages, one
at a time, waiting for each reply (a client whose user leaves early opens a new session and goes
on, so every client sends exactly T messages). `batched`: the server's micro-batcher gathers up to
`--max-batch` requests within `--window-ms`; `unbatched`: max_batch 1 (one generate per request).

Bounded and self-stopping: each mode has a wall-clock limit; whatever is still unanswered then is
cancelled and reported as `not_reached` (not as an error), and the server is stopped. Throughput
(user turns per second, openings included) is computed over what was answered, so a mode stopped by
its limit still gives a rate; `complete` says whether all N x T turns were done. Errors are
non-2xx answers and transport failures. The CPU is shared with other jobs: the CPU model and the
load average before and after each mode are recorded beside the numbers.

Why `assistant` and not a trained simulator: none is registered on a fresh checkout; `assistant`
is the same 135M base the demo simulator is a LoRA over (merged at load), so the cost per token is
the same.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._common import cpu_model, write_result

ROOT = Path(__file__).resolve().parents[1]
AGENT_LINES = ("Hi! What can I help you with today?", "Could you tell me a bit more about what you need?",
               "Do you have a budget or a deadline in mind?", "Here is what I would suggest. Does that work?",
               "Anything else I can do for you?")
GOALS = (("shopping", "Buy a waterproof hiking jacket under 120 euros."),
         ("travel", "Book a cheap weekend trip to the coast in May."),
         ("support", "Get the laptop's wifi working again."),
         ("returns", "Return a pair of shoes that arrived in the wrong size."),
         ("chitchat", "Chat about a film you saw last night."))


# ----------------------------------------------------------------------------------------------
# The server child


def serve_child(args: argparse.Namespace) -> None:
    """One server process: the demo-size simulator behind the real app and uvicorn, on loopback."""
    import torch
    import uvicorn

    from mimesis_rl.config import load_params
    from mimesis_rl.models.decoding import SamplingParams
    from mimesis_rl.serve import ServeSettings, create_app
    from mimesis_rl.simulator.runtime import UserSimulator

    torch.set_num_threads(args.threads)
    dtype = (load_params(ROOT / "params.yaml").get("models") or {}).get("cpu_dtype")
    sampling = SamplingParams(max_new_tokens=args.max_new_tokens, do_sample=True, temperature=0.8, top_p=0.95,
                              max_retries=1)
    simulator = UserSimulator.load(args.simulator, base_model=args.base_model, device="cpu", dtype=dtype,
                                   sampling=sampling, batch_size=args.max_batch)
    settings = ServeSettings(model=args.simulator, base_model=args.base_model, max_batch=args.max_batch,
                             batch_window_ms=args.window_ms, max_sessions=10_000, max_sessions_per_key=10_000,
                             rate_per_s=10_000, rate_burst=100_000, request_timeout_s=3600)
    # Keep-alive well past the longest wait between two requests of a client: with uvicorn's 5 s default
    # the server may close a pooled connection just as the client reuses it (a transport error that
    # says nothing about the simulator).
    uvicorn.run(create_app(simulator, settings), host="127.0.0.1", port=args.port, log_level="warning",
                access_log=False, timeout_keep_alive=3600)


# ----------------------------------------------------------------------------------------------
# The load


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 3)
    return round(statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1], 3)


async def load(url: str, key: str, sessions: int, turns: int, limit_s: float) -> dict[str, Any]:
    """N clients x T turns, cancelled at `limit_s`; latencies of answered requests, errors, counts."""
    import httpx

    latencies: list[float] = []
    first_openings: list[float] = []  # when each client's first opening came back (s from the start)
    errors: list[str] = []
    counts = {"openings": 0, "replies": 0, "sessions_opened": 0, "user_left": 0}
    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=sessions + 10, max_keepalive_connections=sessions + 10)

    async def request(http: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        start = time.perf_counter()
        try:
            r = await http.post(path, json=body)
        except httpx.HTTPError as exc:
            errors.append(f"{path}: {type(exc).__name__}")
            return None
        if r.status_code >= 300:
            errors.append(f"{path}: {r.status_code} {r.text[:200]}")
            return None
        latencies.append(time.perf_counter() - start)
        return r.json()

    async def client(i: int, http: httpx.AsyncClient) -> None:
        sent, restarts, sid = 0, 0, None
        while sent < turns:
            if sid is None:
                domain, goal = GOALS[i % len(GOALS)]
                opened = await request(http, "/v1/sessions", {"domain": domain, "goal": {"text": goal},
                                                              "seed": i + 1000 * restarts})
                if opened is None:
                    return
                if restarts == 0:
                    first_openings.append(time.perf_counter() - start)
                counts["openings"] += 1
                counts["sessions_opened"] += 1
                sid, restarts = opened["session_id"], restarts + 1
                if opened["ended"]:
                    counts["user_left"] += 1
                    sid = None
                    continue
            reply = await request(http, f"/v1/sessions/{sid}/messages", {"message": AGENT_LINES[sent]})
            if reply is None:
                return
            counts["replies"] += 1
            sent += 1
            if reply["ended"]:
                counts["user_left"] += 1
                sid = None

    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=limit_s + 60, limits=limits) as http:
        start = time.perf_counter()
        tasks = [asyncio.create_task(client(i, http)) for i in range(sessions)]
        done, pending = await asyncio.wait(tasks, timeout=limit_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        seconds = time.perf_counter() - start
        health = (await http.get("/healthz")).json()
    for task in done:
        if task.exception() is not None:
            errors.append(repr(task.exception()))
    answered = counts["openings"] + counts["replies"]
    # The opening round alone (every client's first opening; no KV to reuse, the longest prefill):
    # comparable across modes even when a mode is stopped by its limit inside that round.
    round_s = max(first_openings) if len(first_openings) == sessions else seconds
    return {
        "complete": not pending and counts["replies"] == sessions * turns,
        "stopped_by_limit": bool(pending),
        "seconds": round(seconds, 1),
        "user_turns": answered,
        **counts,
        "not_reached": sessions * turns - counts["replies"],
        "errors": len(errors),
        "error_examples": errors[:5],
        "turns_per_s": round(answered / seconds, 3),
        "opening_round": {"openings": len(first_openings), "seconds": round(round_s, 1),
                          "per_s": round(len(first_openings) / round_s, 3)},
        "latency_s": {"p50": percentile(latencies, 50), "p95": percentile(latencies, 95),
                      "p99": percentile(latencies, 99),
                      "max": round(max(latencies), 3) if latencies else None},
        "server": {"simulator_calls": health["batches"], "answered_through_them": health["batched_requests"],
                   "mean_batch": round(health["batched_requests"] / max(1, health["batches"]), 2)},
    }


def run_mode(name: str, args: argparse.Namespace, max_batch: int, window_ms: float, limit_s: float) -> dict:
    """Start a server child, wait for /healthz, run the load, stop the child; everything bounded."""
    import httpx

    key = secrets.token_hex(24)
    port = free_port()
    env = {**os.environ, "MIMESIS_API_KEYS": key, "OMP_NUM_THREADS": str(args.threads),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "DO_NOT_TRACK": "1"}
    cmd = [sys.executable, "-m", "benchmarks.serve", "--child", "--port", str(port),
           "--max-batch", str(max_batch), "--window-ms", str(window_ms), "--max-new-tokens",
           str(args.max_new_tokens), "--threads", str(args.threads), "--base-model", args.base_model,
           "--simulator", args.simulator]
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"mimesis-bench-serve-{name}.log", "w")  # noqa: SIM115
    child = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + args.startup_limit_s
        while True:
            if child.poll() is not None:
                raise RuntimeError(f"{name} server exited with {child.returncode}; see {log.name}")
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} server not up within {args.startup_limit_s} s; see {log.name}")
            time.sleep(1)
        load_before = os.getloadavg()
        print(f"== {name}: {args.sessions} sessions x {args.turns} turns, max_batch {max_batch}, "
              f"limit {limit_s:g} s", flush=True)
        result = asyncio.run(load(url, key, args.sessions, args.turns, limit_s))
        result.update(max_batch=max_batch, window_ms=window_ms, limit_s=limit_s,
                      load_avg_before=[round(x, 2) for x in load_before],
                      load_avg_after=[round(x, 2) for x in os.getloadavg()])
        print(json.dumps(result), flush=True)
        return result
    finally:
        child.terminate()
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        log.close()




def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=12)
    parser.add_argument("--max-batch", type=int, default=100, help="the batched server's max_batch")
    parser.add_argument("--window-ms", type=float, default=50.0, help="the batched server's window")
    parser.add_argument("--batched-limit-s", type=float, default=1500.0)
    parser.add_argument("--unbatched-limit-s", type=float, default=300.0)
    parser.add_argument("--startup-limit-s", type=float, default=600.0)
    parser.add_argument("--threads", type=int, default=2, help="torch threads in the server")
    parser.add_argument("--base-model", default="models/base")
    parser.add_argument("--simulator", default="assistant",
                        help="assistant, a simulator folder or a models:/ URI (the demo run's)")
    parser.add_argument("--modes", nargs="+", default=["batched", "unbatched"],
                        choices=["batched", "unbatched"])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        serve_child(args)
        return
    if not (ROOT / args.base_model).is_dir():
        raise SystemExit(f"{args.base_model} is missing: build it with `python -m tasks.base_model`")
    modes = {"batched": (args.max_batch, args.window_ms, args.batched_limit_s),
             "unbatched": (1, 0.0, args.unbatched_limit_s)}
    results = {name: run_mode(name, args, *modes[name]) for name in args.modes}
    payload: dict[str, Any] = {
        "what": f"{args.sessions} concurrent sessions x {args.turns} agent messages over loopback HTTP; "
                "user turns/s (openings included), latency per request",
        "simulator": (("assistant = SmolLM2-135M-Instruct (models/base), the demo simulator's base"
                       if args.simulator == "assistant" else args.simulator)
                      + f"; sampled, max_new_tokens {args.max_new_tokens}, 1 re-sample on a rejected turn"),
        "cpu_model": cpu_model(), "server_torch_threads": args.threads,
        "sessions": args.sessions, "turns": args.turns, **results,
    }
    if "batched" in results and "unbatched" in results and results["unbatched"]["turns_per_s"]:
        batched, unbatched = results["batched"], results["unbatched"]
        payload["throughput_ratio_batched_vs_unbatched"] = round(
            batched["turns_per_s"] / unbatched["turns_per_s"], 2)
        # Like for like: both modes' opening rounds (the unbatched one may be all its limit allowed).
        payload["throughput_ratio_opening_round"] = round(
            batched["opening_round"]["per_s"] / max(1e-9, unbatched["opening_round"]["per_s"]), 2)
    write_result("serve", payload)


if __name__ == "__main__":
    main(sys.argv[1:])
