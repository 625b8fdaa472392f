"""Stage `agent_eval`: every trained agent x every unseen panel member x all 8 environments, paired.

    python -m tasks.agent_eval [--profile tiny]

Reads `agent_eval` in params.yaml. Writes `reports/agent_eval/`: `generalisation.{json,md}`, one
heatmap PNG per agent, `claims.{json,md}` (the paper's three claims with verdicts from this run's
intervals and `sim_eval`'s fidelity.json), transcripts per agent (with the coach's note on each
agent turn, which the report shows); metrics to `metrics/agent_eval.json` and the stage's MLflow
run. Agents that are missing (their stage has not run) and optional panel members their stage
skipped are listed in the report, never silently dropped (`on_missing: fail` makes them an error).
"""

from __future__ import annotations

import logging
import os
import platform
import time
from pathlib import Path
from typing import Any

from mimesis_rl.eval.claims import claims_table, read_fidelity
from mimesis_rl.eval.claims import markdown as claims_markdown
from mimesis_rl.eval.coach_notes import with_coach_notes
from mimesis_rl.eval.generalisation_metrics import analyse
from mimesis_rl.eval.generalisation_report import heatmap, markdown
from mimesis_rl.eval.generalisation_run import (
    Played,
    agent_problem,
    agent_twin,
    build_agent,
    build_users,
    play_agent,
    trained_against,
)
from mimesis_rl.eval.generalisation_settings import GeneralisationSettings, cell_seeds
from mimesis_rl.fsutil import write_json, write_text
from tasks._runner import main

STAGE = "agent_eval"
log = logging.getLogger("mimesis")


def settings(params: dict[str, Any]) -> tuple[GeneralisationSettings, dict[str, Any]]:
    section = dict(params.get(STAGE) or {})
    claims = dict(section.pop("claims", None) or {})
    return GeneralisationSettings.from_section(section), claims


def inputs(params: dict[str, Any]) -> list[str]:
    s, claims = settings(params)
    return [s.base_model, claims.get("fidelity", "reports/sim_eval/fidelity.json"),
            *[a.spec for a in s.agents if not a.spec.startswith(("scripted", "models:/"))]]


def cpu_info() -> dict[str, Any]:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {"cpu": model, "cores": os.cpu_count(), "load": round(load, 2) if load is not None else None}


def _cpu_seconds() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _members(s: GeneralisationSettings) -> tuple[list[tuple[str, str]], list[dict[str, str]]]:
    """(name, spec to build) of the unseen members in the matrix, and those left out (with why)."""
    from mimesis_rl.envs.panel import default_panel

    panel = default_panel()
    unseen = {m.name: m for m in panel.by_role("unseen")}
    wanted = list(s.members) if s.members is not None else list(unseen)
    unknown = [n for n in wanted if n not in unseen]
    if unknown:
        raise SystemExit(f"params.yaml agent_eval.members: {unknown} are not unseen panel members; "
                         f"unseen: {', '.join(unseen)}")
    states = dict(zip([m.name for m in panel.members], panel.status(base_model=s.base_model),
                      strict=True))
    keep, left = [], []
    for name in wanted:
        st = states[name]
        if st.built:
            keep.append((name, st.spec))
        elif unseen[name].optional or s.on_missing == "skip":
            left.append({"name": name, "reason": st.detail})
            log.warning("agent_eval: unseen member %s left out: %s", name, st.detail)
        else:
            raise SystemExit(f"agent_eval: unseen member {name} is not built: {st.detail}")
    if not keep:
        raise SystemExit("agent_eval: no unseen panel member is built")
    return keep, left


def _play_all(agents: list[Any], users: Any, env_objs: Any, seeds: list[int], pool: Any,
              s: GeneralisationSettings, base: Path) -> tuple[dict[str, Played], dict[str, dict[str, Any]]]:
    """Every agent's dialogues and what they cost. An agent whose folder has the fingerprint of one
    already played (an RL stage that kept its warm start) reuses that agent's dialogues: greedy, the
    same weights on the same seeds play the same turns, so replaying them would only cost CPU."""
    plays: dict[str, Played] = {}
    cost: dict[str, dict[str, Any]] = {}
    played_by: dict[str, str] = {}  # folder fingerprint -> the agent that played it
    for variant in agents:
        key, twin = agent_twin(variant.spec, played_by)
        if twin is not None:
            plays[variant.name] = plays[twin].as_agent(variant.name)
            cost[variant.name] = {"seconds": 0.0, "dialogues": len(plays[twin].rows), "same_as": twin}
            log.info("agent_eval %s: the same folder fingerprint as %s: its %d dialogues reused",
                     variant.name, twin, len(plays[twin].rows))
            continue
        agent = build_agent(variant, list(env_objs), pool, s, base)
        cpu0 = _cpu_seconds()
        played = play_agent(agent, variant.name, users, env_objs, seeds, batch_dialogues=s.batch_dialogues)
        # CPU seconds (all threads) next to wall seconds: on a shared machine the former is the
        # steadier measure of what a dialogue costs
        cost[variant.name] = {"seconds": round(played.seconds, 2),
                              "cpu_seconds": round(_cpu_seconds() - cpu0, 2), "dialogues": len(played.rows),
                              "agent_turns": played.agent_turns, "user_turns": played.user_turns}
        log.info("agent_eval %s: %d dialogues in %.1f s", variant.name, len(played.rows), played.seconds)
        plays[variant.name] = played
        if key is not None:
            played_by[key] = variant.name
    return plays, cost


def run(params: dict[str, Any]) -> dict[str, Any]:
    import mlflow

    from mimesis_rl.envs.registry import DOMAINS, make_env
    from mimesis_rl.models.config import PrecisionSettings
    from mimesis_rl.models.inference.pool import ModelPool

    s, claim_conf = settings(params)
    envs = list(s.envs) if s.envs is not None else list(DOMAINS)
    members, skipped = _members(s)
    agents, missing = [], []
    for variant in s.agents:
        problem = agent_problem(variant.spec)
        if problem and s.on_missing == "fail":
            raise SystemExit(f"agent_eval: agent {variant.name}: {problem}")
        if problem:
            missing.append({"name": variant.name, "spec": variant.spec, "reason": problem})
            log.warning("agent_eval: agent %s not evaluated: %s", variant.name, problem)
            continue
        leaked = sorted({m for m, spec in members for text in trained_against(variant.spec)
                         if text in (m, spec, spec.split(":", 1)[1])})
        if leaked:
            raise SystemExit(f"agent_eval: agent {variant.name} was trained against unseen member(s) "
                             f"{leaked} (its mimesis.json says so); the unseen panel must stay unseen")
        agents.append(variant)
    if not agents:
        raise SystemExit("agent_eval: no agent to evaluate (" + "; ".join(
            f"{m['name']}: {m['reason']}" for m in missing) + ")")
    seeds = cell_seeds(s)
    base = Path(s.base_model)
    pool = ModelPool(PrecisionSettings.from_params(params))
    env_objs = {e: make_env(e, max_turns=s.max_turns) for e in envs}
    users = build_users(members, envs, pool, s, base)
    report = Path(s.report_dir)
    start = time.perf_counter()
    cpu_start = _cpu_seconds()
    plays, cost = _play_all(agents, users, env_objs, seeds, pool, s, base)
    rows = [row for played in plays.values() for row in played.rows]
    if s.write_transcripts:
        from mimesis_rl.data.jsonl import write_jsonl

        for name, played in plays.items():
            write_jsonl(report / "transcripts" / f"{name}.jsonl",
                        with_coach_notes(played.records, s.coach_horizon))
    seconds = time.perf_counter() - start
    names, member_names = [a.name for a in agents], [m for m, _ in members]
    result: dict[str, Any] = {
        "settings": {k: v for k, v in s.__dict__.items() if k not in ("agents", "comparisons")},
        "agents": names,
        "trained_on": {a.name: a.trained_on for a in agents},
        "agent_specs": {a.name: a.spec for a in agents},
        "missing_agents": missing,
        "members": member_names,
        "member_specs": dict(members),
        "member_kinds": {m: spec.split(":", 1)[0] for m, spec in members},
        "skipped_members": skipped,
        "envs": envs,
        "seeds": seeds,
        **analyse(rows, s, names, member_names, envs),
        "cost": {"dialogues": len(rows), "seconds": round(seconds, 2),
                 "seconds_per_dialogue": round(seconds / max(1, len(rows)), 4),
                 "cpu_seconds_per_dialogue": round((_cpu_seconds() - cpu_start) / max(1, len(rows)), 4),
                 "per_agent": cost,
                 **cpu_info()},
    }
    result["heatmaps"] = {a: str(heatmap(result, a, report / f"heatmap_{a}.png")) for a in names}
    write_json(report / "generalisation.json", result)
    write_text(report / "generalisation.md", markdown(result))
    write_json(report / "rows.json", rows)
    fidelity = read_fidelity(claim_conf.get("fidelity", "reports/sim_eval/fidelity.json"))
    table = claims_table(fidelity, result, final=claim_conf.get("final", "sft+rl"),
                         baseline=claim_conf.get("baseline", "assistant"))
    write_json(report / "claims.json", table)
    write_text(report / "claims.md", claims_markdown(table))
    if mlflow.active_run() is not None:
        mlflow.log_artifacts(str(report), artifact_path=STAGE)
    metrics: dict[str, Any] = {
        "dialogues": len(rows), "agents": len(names), "members": len(member_names), "envs": len(envs),
        "missing_agents": len(missing), "skipped_members": len(skipped), "seconds": round(seconds, 2),
        "seconds_per_dialogue": result["cost"]["seconds_per_dialogue"],
        "agent": {a: {"success_rate": result["per_agent"][a]["success_rate"],
                      "mean_reward": result["per_agent"][a]["mean_reward"]} for a in names},
        "claims": {f"claim{r['id']}": r["verdict"] for r in table["rows"]},
    }
    for name, comp in result["comparisons"].items():
        if comp["measured"]:
            metrics[name] = {"diff": comp["overall"]["diff"], "better": comp["better"], "of": comp["of"],
                             "better_clear": comp["better_clear"]}
    return metrics


if __name__ == "__main__":
    main(STAGE, run, inputs)
