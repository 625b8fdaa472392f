"""Routes to a simulator that decides like its card (issue 27), on the same seeds and items.

    python -m benchmarks.sim_routes [--profile evidence] [--routes sft_lora,rl_decision,...]
                                    [--sft-steps 150] [--rl-steps 12] [--items 16] [--env-dialogues 2]

Routes (each from the profile's `sim_sft` / `sim_rl` settings, only what the route is about changed):

- `sft_lora`: the profile's simulator SFT as it is (LoRA): the reference, and route 1's start;
- `rl_decision` (route 1): GRPO from `sft_lora` with the prompts drawn mostly from decision states
  (pending proposals at, within and beyond the card's limit; questions about a slot), the decision and
  answers rewards weighted up beside the realism and pattern rewards;
- `sft_grounded` (route 2): SFT with twice the environment share, about half of its pool boundary
  decisions (`env.decision_items: 32` per domain: proposals at, within and beyond the card's limit,
  half of them turned down, and questions, each ending on the card user's grounded reply);
- `sft_full` (route 3): `sft_lora`'s data and steps, every weight trained (`method: full`);
- `sft_grounded_fit`: route 2 once windows are fitted to `max_length` (`sft_data.fit_windows`; the
  first four routes ran before it, when the trainer cut 40-50% of the environment windows' simulator
  tokens off their end, the decision turns among them), at 512 tokens so campsite's decisions fit;
- `sft_decision_focus`: as `sft_grounded_fit`, with 4x the boundary items (128 per domain), 0.9 of the
  windows from the environment, and each item trained on its last exchange alone (`env.decision_focus`:
  the loss falls on the decision, not on the scripted turns before it). Run it with `--sft-steps 300`
  to see past the other routes' 150 (its curve has their step 150 as its ½ point).
- `sft_verdict_x16`, `sft_verdict_x64`: `sft_decision_focus` with the verdict weighted
  (`env.verdict_weight` 16 / 64, `verdict_span: reply`: a proposal reply's "so $470 is over my limit:
  ..." through its message, ~40 tokens, count that many times in the loss, `training.span_weights`);
  `sft_verdict_clause`: x64 on the verdict clause alone (" so $470 is over my $427 limit", ~10
  tokens); `sft_verdict_dense`: the clause at x64 with the world narrowed to the two domains whose
  verdict compares numbers (bargain, campsite) and 512 items each, so a domain sees ~4x the verdicts
  (the drill needed ~400 to learn one; the wider routes see ~100 per domain in 300 steps). Run it
  with `--sft-steps 400`. `benchmarks.verdict_probe` found every route's verdict token at chance and the base
  learning it in 25-50 steps with the loss on it alone; this is that finding inside the simulator's
  own SFT, the rest of the mix unchanged. Run with `--sft-steps 300` like `sft_decision_focus`, the
  route it is compared with.
- `sft_verdict_dialogue`: `sft_verdict_dense` continued (`sim_sft.warm_start`) on the same items whole
  (`decision_focus` off): the dense route learned the verdict teacher-forced but, replayed over a whole
  dialogue, seldom starts the grounded reasoning it comes in. Run with `--sft-steps 150`.
- `sft_verdict_whole`: `sft_verdict_dialogue` at 768 tokens: campsite's card (~310 tokens), opening,
  proposal and grounded reply need ~560, and at 512 `fit_windows` cut the opening off 160 of its 189
  decision windows (bargain's fit whole). Run with `--sft-steps 150`.
- `sft_verdict_all`: `sft_verdict_dialogue` continued in all eight domains at 768 tokens (128 items
  each, whole): does entering the grounded reasoning carry over to the domains whose verdicts are
  not numbers? Run with `--sft-steps 200 --items 32`.
- `rl_verdict`: route 1's GRPO from `sft_verdict_dense`, its prompts and curve in bargain and campsite:
  the verdict is learned, so sampled groups should differ in their decisions and the decision reward
  has a spread to climb. Run with `--rl-steps 24`.

Every route draws the same learning curve (`simulator.curve`: the same held-out decision and question
items, the same seed) at ¼, ½, ¾ and all of its steps (step 0, the base, once), and its final model
plays the scripted agent in all 8 domains on the same seeds, so the routes differ by their training
only. A route whose result is in the JSON is not rerun (`--force` reruns it); models go to
models/routes/<route>, checkpoints (a killed run resumes) to checkpoints/routes/<route>.
Writes benchmarks/results/sim_routes.json and sim_routes.png; `--transcripts` replays the held-out
items with each finished route's model into sim_routes_transcripts.jsonl; `--env N` plays the scripted
agent against finished models, N dialogues per domain, beside the cooperative scripted user on the same
seeds (`final_env@N`, with the domains where the route reaches half the cooperative user's success).
`--fidelity` scores finished models against held-out real users with `sim_eval`'s fidelity measures,
the assistant beside them (`fidelity`: claim 1's Turing distance for each route).
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS_DIR, machine, write_result
from mimesis_rl.training.config import stage_section

RUN_BY_DEFAULT = False  # ~1.5 h on 2 cores; needs the processed conversations and models/base (make run's)
ROUTES = ("sft_lora", "rl_decision", "sft_grounded", "sft_full", "sft_grounded_fit", "sft_decision_focus",
          "sft_verdict_x16", "sft_verdict_x64", "sft_verdict_clause", "sft_verdict_dense",
          "sft_verdict_dialogue", "rl_verdict", "sft_verdict_whole", "sft_verdict_all")
# GRPO routes: the SFT route each starts from, and the domains its prompts and curve come from
RL_ROUTES = {"rl_decision": ("sft_lora", None), "rl_verdict": ("sft_verdict_dense", ["bargain", "campsite"])}
WARM_STARTS = {"sft_verdict_dialogue": "sft_verdict_dense", "sft_verdict_whole": "sft_verdict_dense",
               "sft_verdict_all": "sft_verdict_dialogue"}  # SFT routes that continue another's adapter
VERDICT_WEIGHTS = {"sft_verdict_x16": (16.0, "reply"), "sft_verdict_x64": (64.0, "reply"),
                   "sft_verdict_clause": (64.0, "clause"), "sft_verdict_dense": (64.0, "clause"),
                   "sft_verdict_dialogue": (64.0, "clause"), "sft_verdict_whole": (64.0, "clause"),
                   "sft_verdict_all": (64.0, "clause")}
FRACTIONS = [0.0, 0.25, 0.5, 0.75, 1.0]
RESULT = RESULTS_DIR / "sim_routes.json"
STAMP = ("benchmark", "time", "machine")  # write_result stamps them anew when a mode rewrites the file


def _curve(items: int, route: str, fractions: list[float] | None = None) -> dict[str, Any]:
    """Decision and answers accuracy at every point; the scripted agent's dialogues only on the final
    model (`final_env`: a dialogue point on an untrained base costs minutes of re-sampled garbage).
    Step 0 (the base model) is drawn once, on `sft_lora`: the other SFT routes start from the same base."""
    if fractions is None:
        fractions = FRACTIONS if route == "sft_lora" or route in RL_ROUTES else FRACTIONS[1:]
    return {"enabled": True, "fractions": fractions, "decision_prompts": items, "env_dialogues": 0}


def final_env(folder: str, dialogues: int, seed: int) -> dict[str, float]:
    """The scripted agent's success against the route's saved simulator, `dialogues` per domain, all
    eight domains in one batch (`simulator.curve.env_point`, the curve's own measure)."""
    from mimesis_rl.simulator.curve import env_point
    from mimesis_rl.simulator.runtime import UserSimulator

    user = UserSimulator.load(folder, device="cpu", batch_size=16, seed=seed)
    started = time.perf_counter()
    point = env_point(user, dialogues, per_domain=True)
    return {**point, "env_dialogues": 8 * dialogues, "seconds": round(time.perf_counter() - started, 1)}


def sft_section(params: dict[str, Any], route: str, steps: int, curve: dict[str, Any]) -> dict[str, Any]:
    """The route's `sim_sft` section: the profile's, with the route's change."""
    section = copy.deepcopy(stage_section(params, "sim_sft")[0])  # the registry part is the stage's
    section.update(output_dir=f"models/routes/{route}", checkpoint_dir=f"checkpoints/routes/{route}",
                   curve=curve)
    section["trainer"] = {**section.get("trainer", {}), "max_steps": steps, "save_steps": max(10, steps // 4)}
    section["leave"] = {**section.get("leave", {}), "enabled": False}  # when to leave is not measured here
    env = dict(section.get("env", {}))
    if route in ("sft_grounded", "sft_grounded_fit"):
        env.update(share=min(0.9, 2 * float(env.get("share", 0.3))), decision_items=32)
    focus = route == "sft_decision_focus" or route in VERDICT_WEIGHTS
    if route == "sft_grounded_fit" or focus:  # campsite's card (~310 tokens) and its decision exchange
        section["trainer"]["max_length"] = 512  # fit whole
    if focus:
        env.update(share=0.9, decision_items=128, decision_focus=True)
    if route in VERDICT_WEIGHTS:
        weight, span = VERDICT_WEIGHTS[route]
        env.update(verdict_weight=weight, verdict_span=span)
    if route in ("sft_verdict_dense", "sft_verdict_dialogue", "sft_verdict_whole"):  # the two number-
        env.update(domains=["bargain", "campsite"], decision_items=512)  # comparing domains, ~4x the verdicts
    if route in WARM_STARTS:  # the verdict learned; now the decision in the whole dialogue it comes in
        section["warm_start"] = f"models/routes/{WARM_STARTS[route]}"
        env.update(decision_focus=False)
    if route in ("sft_verdict_whole", "sft_verdict_all"):  # campsite's card, opening, proposal and reply:
        section["trainer"]["max_length"] = 768  # ~560 tokens; at 512 its windows lose the opening
    section["env"] = env
    if route == "sft_full":
        section["method"] = "full"
        section["trainer"]["learning_rate"] = 5.0e-5  # every weight moves: a quarter of LoRA's rate
    return section


def rl_section(params: dict[str, Any], route: str, steps: int, curve: dict[str, Any]) -> dict[str, Any]:
    """A GRPO route's `sim_rl` section: from its SFT route, prompts mostly decision states, decisions
    weighted up."""
    start, domains = RL_ROUTES[route]
    section = copy.deepcopy(stage_section(params, "sim_rl")[0])
    section.update(sft_dir=f"models/routes/{start}", output_dir=f"models/routes/{route}",
                   checkpoint_dir=f"checkpoints/routes/{route}", curve=curve,
                   corpus_prompts_per_domain=4, env_prompts_per_domain=1, decision_prompts_per_domain=8,
                   labeler="rules")
    if domains:
        section["env"] = {**section.get("env", {}), "domains": domains}
    section["rewards"] = {**section.get("rewards", {}), "decision": 2.0, "answers": 1.0}
    section["trainer"] = {**section.get("trainer", {}), "max_steps": steps, "save_steps": max(2, steps // 4)}
    return section


def run_route(params: dict[str, Any], route: str, args: argparse.Namespace) -> dict[str, Any]:
    from mimesis_rl.simulator.rl import RLSettings, train_rl
    from mimesis_rl.simulator.sft import SFTSettings, train_sft

    seed = int(params.get("seed", 0))
    fractions = [float(f) for f in args.fractions.split(",")] if args.fractions else None
    curve = _curve(args.items, route, fractions)
    started = time.perf_counter()
    if route in RL_ROUTES:
        section = rl_section(params, route, args.rl_steps, curve)
        metrics = train_rl(RLSettings.from_section(section), seed=seed, data_hash=f"routes-{args.rl_steps}")
    else:
        section = sft_section(params, route, args.sft_steps, curve)
        metrics = train_sft(SFTSettings.from_section(section), seed=seed,
                            data_hash=f"routes-{args.sft_steps}")
    keep = ("train_seconds", "train_examples", "trainable_params", "logged_loss.first", "logged_loss.last",
            "eval_loss", "tokens_per_second", "reward.first", "reward.last", "prompts", "prompts_decision",
            "prompts_question", "verdict_spans.asked", "verdict_spans.found")
    out = {k: metrics[k] for k in keep if k in metrics}
    out.update({k: v for k, v in metrics.items()
                if k.startswith("reward.") and k.endswith((".first", ".last"))})
    seconds = round(time.perf_counter() - started, 1)
    env = final_env(section["output_dir"], args.env_dialogues, seed) if args.env_dialogues else {}
    return {"seconds": seconds, "settings": section, "curve": metrics.get("curve", []), "metrics": out,
            "final_env": env}


def cooperative_env(dialogues: int) -> dict[str, float]:
    """The scripted agent against the cooperative scripted user on the same seeds: the issue's
    baseline ("≥ ½ of its success against the cooperative scripted user")."""
    from mimesis_rl.envs.multi import PerDomainUser
    from mimesis_rl.envs.registry import DOMAINS, scripted_user
    from mimesis_rl.simulator.curve import env_point

    users = PerDomainUser({d: scripted_user(d, "cooperative") for d in DOMAINS}, "cooperative")
    return env_point(users, dialogues, per_domain=True)


def env_rule(point: dict[str, float], baseline: dict[str, float]) -> dict[str, Any]:
    """The domains where the scripted agent's success against the route is at least half of its
    success against the cooperative user (issue 27 asks for 6 of 8)."""
    domains = [k.split(".", 1)[1] for k in baseline if k.startswith("env_success.")]
    held = [d for d in domains if point[f"env_success.{d}"] >= 0.5 * baseline[f"env_success.{d}"]]
    return {"domains_at_half": len(held), "of": len(domains), "held": held}


def fidelity(params: dict[str, Any], routes: dict[str, Any]) -> dict[str, Any]:
    """Claim 1's measure on the routes' final models: `sim_eval`'s fidelity against held-out real users
    (the profile's settings; the assistant baseline beside them, the environment part off): does
    training the decision cost the simulator its human side?"""
    from mimesis_rl.eval.fidelity import summary_row
    from mimesis_rl.eval.fidelity_run import run_eval
    from mimesis_rl.eval.sim_eval_settings import SimEvalSettings
    from mimesis_rl.simulator.labeling import load_labeler
    from mimesis_rl.training.config import resolve_bf16

    section = copy.deepcopy(params["sim_eval"])
    section["simulators"] = [{"name": "assistant", "spec": "assistant"},
                             *({"name": r, "spec": routes[r]["settings"]["output_dir"]} for r in routes)]
    settings = SimEvalSettings.from_params({**params, "sim_eval": section})
    bf16 = resolve_bf16(params, {"device": settings.device, "bf16": settings.bf16})
    with tempfile.TemporaryDirectory() as report_dir:  # the rows are kept; sim_eval's report is not
        report = run_eval(settings.simulators, settings.data, load_labeler(settings.labeler, params),
                          settings.fidelity, settings.base_model, report_dir, settings.device,
                          settings.batch_size, "bfloat16" if bf16 else None)
    return {name: summary_row(result) for name, result in report["results"].items()}


def transcripts(routes: dict[str, Any], items: int, seed: int) -> Path:
    """Each route's final model on the curve's held-out items, reply by reply (what it decided and
    said, what the card decides): where a route falls short, in words. One JSON line per reply."""
    from mimesis_rl.envs.actions import reply_accepts
    from mimesis_rl.simulator.curve import held_out_items
    from mimesis_rl.simulator.decisions import replay_many
    from mimesis_rl.simulator.runtime import UserSimulator

    held_out = held_out_items(items)
    path = RESULTS_DIR / "sim_routes_transcripts.jsonl"
    kept = [line for line in (path.read_text().splitlines() if path.exists() else [])
            if json.loads(line)["route"] not in routes]  # other routes' replies stay as they were
    with path.open("w") as out:
        out.writelines(line + "\n" for line in kept)
        for route, result in routes.items():
            folder = result["settings"]["output_dir"]
            user = UserSimulator.load(folder, device="cpu", batch_size=16, seed=seed)
            for item, (_, reply) in zip(held_out, replay_many(held_out, user), strict=True):
                row = {"route": route, "domain": item.domain, "kind": item.kind,
                       "card_accepts": item.expected_accept, "asked_slots": list(item.asked_slots),
                       "agent": item.agent_messages[-1], "accepted": reply_accepts(reply) if reply else None,
                       "message": reply.message if reply else None,
                       "reasoning": reply.reasoning if reply else None,
                       "repairs": (reply.meta.get("repairs") if reply else None)}
                out.write(json.dumps(row) + "\n")
    return path


def decide(routes: dict[str, Any], proposals: int, max_new_tokens: int, seed: int,
           domains: list[str] | None = None) -> dict[str, Any]:
    """Each route's final model on `proposals` held-out pending proposals (the curve's items, more of
    them: ~proposals/4 per proposing domain, or per one of `domains`), sampled at a token budget of
    `max_new_tokens`, per domain.

    Why beside the curve: the curve's 16 items are 4 per domain (±0.125 at chance), and at the
    simulator's 96-token budget the format guard closes reasoning at the first sentence end past 48
    tokens and by 72 at the latest, where campsite's grounded verdict (~71 tokens of reasoning) only
    just fits and leaves ~24 tokens for the message; at 160 every domain's verdict and message fit."""
    from dataclasses import replace

    from mimesis_rl.eval.decisions import decision_accuracy
    from mimesis_rl.models.artifact import read_manifest
    from mimesis_rl.simulator.curve import held_out_items
    from mimesis_rl.simulator.runtime import UserSimulator

    items = [item for item in held_out_items(proposals, domains) if item.kind != "question"]
    out = {}
    for route, result in routes.items():
        folder = result["settings"]["output_dir"]
        sampling = replace(read_manifest(folder).sampling, max_new_tokens=max_new_tokens)
        user = UserSimulator.load(folder, device="cpu", batch_size=16, seed=seed, sampling=sampling)
        started = time.perf_counter()
        row = decision_accuracy(user, items)
        stats = user.stats.as_metrics()
        row.update(max_new_tokens=max_new_tokens, domains=domains,
                   seconds=round(time.perf_counter() - started, 1),
                   closed_at_budget=stats.get("parse.closed_at_budget_turn_rate"))
        out[route] = row
        print(route, row, flush=True)
    return out


def chart(routes: dict[str, Any], path: Path) -> Path:
    """One panel per metric (`report.curves.panels`); the GRPO route is drawn after its SFT route's steps."""
    from mimesis_rl.report.charts import curve_chart
    from mimesis_rl.report.curves import panels

    curves = {name: result.get("curve", []) for name, result in routes.items()}
    continues = {**{route: start for route, (start, _) in RL_ROUTES.items()}, **WARM_STARTS}
    return curve_chart(panels("simulator", curves, continues=continues), path,
                       "Routes to card decisions (same items and seeds; GRPO steps after SFT)")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="evidence")
    parser.add_argument("--routes", default=",".join(ROUTES))
    parser.add_argument("--sft-steps", type=int, default=150)
    parser.add_argument("--rl-steps", type=int, default=12)
    parser.add_argument("--items", type=int, default=16, help="held-out proposals (and as many questions)")
    parser.add_argument("--env-dialogues", type=int, default=2,
                        help="scripted-agent dialogues per domain against each final model")
    parser.add_argument("--fractions", default=None,
                        help="curve points, fractions of the steps: 0.5,1 (default: ¼,½,¾,1; 0 once)")
    parser.add_argument("--force", action="store_true", help="rerun routes already in the results")
    parser.add_argument("--transcripts", action="store_true",
                        help="only replay the held-out items with the finished models of --routes (JSONL)")
    parser.add_argument("--decide", type=int, default=0, metavar="N",
                        help="only measure the finished models of --routes on N held-out proposals, per "
                             "domain, at --decide-tokens (stored as each route's `decide`)")
    parser.add_argument("--decide-tokens", type=int, default=160)
    parser.add_argument("--fidelity", action="store_true",
                        help="only score the finished models of --routes against held-out real users "
                             "(sim_eval's fidelity, beside the assistant; stored as `fidelity`)")
    parser.add_argument("--env", type=int, default=0, metavar="N",
                        help="only play the scripted agent against the finished models of --routes, N "
                             "dialogues per domain, beside the cooperative user on the same seeds")
    parser.add_argument("--decide-domains", default=None, help="comma-separated (default: every domain)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from mimesis_rl.config import load_params
    from mimesis_rl.threads import set_threads

    set_threads()
    params = load_params(profile=args.profile)
    previous = json.loads(RESULT.read_text()) if RESULT.exists() else {}
    routes: dict[str, Any] = dict(previous.get("routes", {}))
    seed = int(params.get("seed", 0))
    named = [r.strip() for r in args.routes.split(",") if r.strip() in routes]  # finished routes asked for

    def store(update: Callable[[dict[str, Any]], None]) -> None:
        """A measuring mode's results into the file as it is on disk now (other runs may have written)."""
        stored = json.loads(RESULT.read_text())
        update(stored)
        write_result("sim_routes", {k: v for k, v in stored.items() if k not in STAMP})

    if args.transcripts:
        print(transcripts({r: routes[r] for r in named}, args.items, seed))
        return
    if args.fidelity:
        rows = fidelity(params, {r: routes[r] for r in named})
        store(lambda stored: stored.update(fidelity={**stored.get("fidelity", {}), **rows}))
        return
    if args.env:
        baseline = cooperative_env(args.env)
        points = {}
        for route in named:
            points[route] = final_env(routes[route]["settings"]["output_dir"], args.env, seed)
            points[route].update(env_rule(points[route], baseline))
            print(route, points[route], flush=True)

        def add_env(stored: dict[str, Any]) -> None:
            stored[f"cooperative_env@{args.env}"] = baseline
            for route, point in points.items():
                stored["routes"][route][f"final_env@{args.env}"] = point

        store(add_env)
        return
    if args.decide:
        domains = args.decide_domains.split(",") if args.decide_domains else None
        measured = decide({r: routes[r] for r in named}, args.decide, args.decide_tokens, seed, domains)
        key = "decide" if domains is None else f"decide.{'+'.join(domains)}@{args.decide_tokens}"

        def add_decide(stored: dict[str, Any]) -> None:
            for route, row in measured.items():
                stored["routes"][route][key] = row

        store(add_decide)
        return
    for route in [r.strip() for r in args.routes.split(",") if r.strip()]:
        if route not in ROUTES:
            raise SystemExit(f"unknown route {route!r}; known: {', '.join(ROUTES)}")
        if route in routes and not args.force:
            continue
        start = RL_ROUTES.get(route, (WARM_STARTS.get(route), None))[0]
        if start and start not in routes:
            raise SystemExit(f"{route} starts from {start}: run that route first")
        result = {**run_route(params, route, args), "machine": machine()}
        # after each route; re-read, so routes run side by side in two processes all keep their results
        on_disk = json.loads(RESULT.read_text()).get("routes", {}) if RESULT.exists() else {}
        routes = {**routes, **on_disk, route: result}
        write_result("sim_routes", {"profile": args.profile, "routes": routes})
    picture = chart(routes, RESULTS_DIR / "sim_routes.png")
    write_result("sim_routes", {"profile": args.profile, "routes": routes, "chart": picture.name})


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
