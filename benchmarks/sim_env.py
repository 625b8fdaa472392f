"""The scripted agent against a saved simulator, domain by domain: how many succeed, how the dialogues
end and why the user left, with the transcripts (issue 27 reads success per domain: the done-when asks
for at least half the cooperative scripted user's success in 6 of the 8 domains).

    python -m benchmarks.sim_env FOLDER [FOLDER ...] [--dialogues 4] [--name sim_env]
    python -m benchmarks.sim_env --rescore NAME   # recount results/NAME.json from its transcripts
    python -m benchmarks.sim_env BASE OTHER [...] --compare BASE   # + each folder minus BASE, paired
    python -m benchmarks.sim_env FOLDER --seed-base 10000 --max-turns 5 --domains bargain campsite
                                  # sim_eval's environment goals (sim_eval.environment) in 2 domains

The seeds are the simulator curve's (`simulator.curve.ENV_SEED_BASE`) unless `--seed-base` says
otherwise, so the numbers line up with the stage curves and earlier runs (sim_eval's environment part
plays seeds from 10000, 5 agent turns: the card effect read on one goal set did not carry to the other);
each folder's user samples with `--seed` (default 0): the same model on another sampling seed is the
noise floor of a comparison. Writes results/<name>.json and results/<name>_transcripts.jsonl (one
dialogue per line, tagged with its folder). `decisions` is every proposal the dialogues met, against the
card user's decision in the same state (`eval.decisions.dialogue_decisions`): whether the simulator
declines what its card accepts or never says yes or no. `--compare BASE` adds each folder's success
minus BASE's over the same goals (paired by domain and seed, every domain weighing the same, a bootstrap
interval): one sampling seed moves a 64-dialogue count by about 8, so a gain is read from its interval."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from typing import Any

from benchmarks._common import RESULTS_DIR, peak_rss_mib, write_result

RUN_BY_DEFAULT = False  # needs a trained simulator folder


def end_cause(record: dict[str, Any]) -> str:
    """Why a dialogue ended, with the user's own reason when it left: `invalid_turn:<failure>` (no valid
    turn after re-sampling), `leave_model`, or `end_marker` (the simulator wrote its end marker)."""
    reason = str(record.get("end_reason"))
    if reason != "user_left":
        return reason
    last = next((t for t in reversed(record["turns"]) if t["role"] == "user"), None)
    meta = (last or {}).get("meta") or {}
    if str(meta.get("end_reason", "")).startswith("invalid_turn"):
        return f"user_left:{meta['end_reason']}"
    return "user_left:leave_model" if meta.get("left_by") == "leave_model" else "user_left:end_marker"


def summarise(records: list[dict[str, Any]], names: list[str], dialogues: int) -> dict[str, Any]:
    from mimesis_rl.eval.decisions import dialogue_decisions

    per_domain = {d: sum(bool(r["success"]) for r in records if r["domain"] == d) for d in names}
    causes = Counter(end_cause(r) for r in records)
    return {"success": sum(per_domain.values()), "of": len(records), "per_domain": per_domain,
            "domains_at_half": sum(2 * won >= dialogues for won in per_domain.values()),
            "end_causes": dict(causes.most_common()), "decisions": dialogue_decisions(records)}


def play_folder(folder: str, dialogues: int, seed: int = 0, temperature: float | None = None,
                decide_by_reasoning: bool = False, domains: list[str] | None = None,
                seed_base: int | None = None, max_turns: int | None = None,
                ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`domains` (None: every built-in one), `dialogues` seeded dialogues each from `seed_base` (None:
    the curve's) with `max_turns` agent turns (None: the domain's own; `simulator.curve.env_dialogues`);
    `temperature` overrides the folder's own sampling temperature; `decide_by_reasoning`: the
    runtime's `reasoned_decision` (a reply that says neither yes nor no decides by its reasoning), on
    as well when the folder's manifest says so (`sim_sft.decide_by_reasoning`)."""
    from dataclasses import replace

    from mimesis_rl.envs.registry import DOMAINS
    from mimesis_rl.models.artifact import read_manifest
    from mimesis_rl.simulator.curve import ENV_SEED_BASE, env_dialogues
    from mimesis_rl.simulator.runtime import UserSimulator

    names = list(domains or DOMAINS)
    sampling = None
    if temperature is not None:
        sampling = replace(read_manifest(folder).sampling, temperature=temperature)
    user = UserSimulator.load(folder, device="cpu", batch_size=16, seed=seed, sampling=sampling)
    user.decide_by_reasoning = user.decide_by_reasoning or decide_by_reasoning
    started = time.perf_counter()
    states = env_dialogues(user, dialogues, names, max_turns,
                           ENV_SEED_BASE if seed_base is None else seed_base)
    seconds = time.perf_counter() - started
    records = [{"folder": folder, **s.to_record(agent="scripted", user=folder)} for s in states]
    return {**summarise(records, names, dialogues), "seconds": round(seconds, 1)}, records


def compared(records: list[dict[str, Any]], base: str, boots: int = 2000) -> dict[str, Any]:
    """Every other folder's success minus `base`'s on the same (domain, seed) goals, with a paired
    bootstrap interval stratified by domain (`stats.paired_difference`) and its verdict."""
    from mimesis_rl.stats import interval_verdict, paired_difference

    wins: dict[str, dict[tuple[str, int], float]] = {}
    for r in records:
        wins.setdefault(r["folder"], {})[(r["domain"], int(r["seed"]))] = float(bool(r["success"]))
    if base not in wins:
        raise SystemExit(f"--compare {base}: not among the folders played ({', '.join(wins)})")
    out = {}
    for folder, mine in wins.items():
        if folder != base:
            diff = paired_difference(mine, wins[base], boots, 0.95, strata=lambda key: key[0])
            out[folder] = {**diff, "verdict": interval_verdict(diff["ci"])}
    return {"base": base, "success_minus_base": out}


def rescore(name: str, compare: str | None = None) -> None:
    """Recount a saved run from its transcripts (the success and endings as played, the decisions
    with this checkout's reading), keeping each folder's recorded seconds; `compare`: as `--compare`."""
    from mimesis_rl.envs.registry import DOMAINS

    path = RESULTS_DIR / f"{name}.json"
    saved = json.loads(path.read_text())
    lines = (RESULTS_DIR / f"{name}_transcripts.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    for folder, old in saved["results"].items():
        mine = [r for r in records if r["folder"] == folder]
        saved["results"][folder] = {**summarise(mine, saved.get("domains") or list(DOMAINS),
                                                saved["dialogues_per_domain"]),
                                    "seconds": old.get("seconds")}
        print(json.dumps({folder: saved["results"][folder]["decisions"]["by_domain"]}), flush=True)
    if compare:
        saved["comparison"] = compared(records, compare)
        print(json.dumps(saved["comparison"]), flush=True)
    saved["rescored"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    path.write_text(json.dumps(saved, indent=2) + "\n")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="*", help="saved simulator folders (UserSimulator.load)")
    parser.add_argument("--dialogues", type=int, default=4, help="seeded dialogues per domain")
    parser.add_argument("--name", default="sim_env", help="results/<name>.json")
    parser.add_argument("--seed", type=int, default=0, help="the simulator's sampling seed (the goals stay)")
    parser.add_argument("--rescore", metavar="NAME", help="recount results/NAME.json from its transcripts")
    parser.add_argument("--compare", metavar="BASE", help="each other folder's success minus BASE's, paired")
    parser.add_argument("--temperature", type=float, help="override each folder's sampling temperature")
    parser.add_argument("--decide-by-reasoning", action="store_true",
                        help="a reply that says neither yes nor no decides by its own reasoning's verdict "
                             "(on by itself for a folder whose manifest says so)")
    parser.add_argument("--domains", nargs="+", help="these domains only (default: all 8)")
    parser.add_argument("--seed-base", type=int,
                        help="the goals' first seed (default: the curve's; sim_eval's environment: 10000)")
    parser.add_argument("--max-turns", type=int, help="agent turns per dialogue (default: the domain's own)")
    args = parser.parse_args(argv)
    if args.rescore:
        rescore(args.rescore, args.compare)
        return
    if not args.folders:
        parser.error("name at least one simulator folder (or --rescore NAME)")
    results, transcripts = {}, []
    for folder in args.folders:
        summary, records = play_folder(folder, args.dialogues, args.seed, args.temperature,
                                       args.decide_by_reasoning, args.domains, args.seed_base, args.max_turns)
        results[folder] = summary
        transcripts += records
        print(json.dumps({folder: summary}), flush=True)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{args.name}_transcripts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in transcripts))
    extra = {"comparison": compared(transcripts, args.compare)} if args.compare else {}
    write_result(args.name, {"dialogues_per_domain": args.dialogues, "sampling_seed": args.seed,
                             "domains": args.domains, "seed_base": args.seed_base,
                             "max_turns": args.max_turns,
                             "temperature": args.temperature, "decide_by_reasoning": args.decide_by_reasoning,
                             "results": results, **extra, "transcripts": path.name,
                             "peak_rss_mib": peak_rss_mib()})


if __name__ == "__main__":
    main(sys.argv[1:])
