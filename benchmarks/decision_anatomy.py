"""Where a sampled decision goes wrong, step by step (issue 27).

    python -m benchmarks.decision_anatomy [--routes sft_verdict_dense,rl_verdict] [--items 32] [--samples 2]

`benchmarks.verdict_probe` scores the verdict teacher-forced: the template and the card's numbers are
given, and `sft_verdict_dense` gets it right 0.955 (bargain) and 1.0 (campsite) of the time. Sampled,
the same model decides at chance. The grounded reasoning the card user is trained on,

    bargain:  They offer $O; I'd pay at most $L, so $O is within / over my $L limit: ...
    campsite: They'd leave me ...; with ... that's P points, and I need at least N, so P is enough / short ...

chains four things a sampled reply must each get right, and this splits the chain on the held-out
proposals of the two number-comparing domains (the curve's items, more of them, replayed with the
model's own opening turn in the context, as the environment plays it), `--samples` sampling seeds
each:

- `template`: the reasoning states the numbers and a verdict in the template's words;
- `facts`: of those, the numbers are the card's (the card user's own reasoning for the same state:
  limit and offer; points and need);
- `consistent`: of those with a template, the verdict follows from the numbers it stated;
- `verdict`: of those with a template, the verdict is the card's;
- `follows`: of those with a template, the reply's acceptance as the environment reads it
  (`reply_accepts`) is what its verdict says;
- `decision`: of all replies, the acceptance is the card's (the curve's decision accuracy), also
  split by whether the template was there; `card_accept_rate` beside it (the items accept at and
  within the limit, decline beyond it: a constant answer scores it or one minus it).

A rate near 1 followed by one near chance says where the chain breaks. Needs models/base and the
routes' models (`python -m benchmarks.sim_routes`). JSON in benchmarks/results/decision_anatomy.json (routes
measured earlier on the same items and samples are kept).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import time
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS_DIR, write_result

RUN_BY_DEFAULT = False  # ~3 min per route and sample on one thread; needs benchmarks.sim_routes' models
ROOT = Path(__file__).resolve().parents[1]
RESULT = RESULTS_DIR / "decision_anatomy.json"
# the numbers a verdict turns on, then the verdict word; the word that means "accept" first in ACCEPTS
TEMPLATES = {
    "bargain": re.compile(r"at most \$(\d+), so \$(\d+) is (within|over)"),
    "campsite": re.compile(r"that's (\d+) points, and I need at least (\d+), so (\d+) is (enough|short)"),
}
ACCEPTS = {"bargain": "within", "campsite": "enough"}


def facts(domain: str, reasoning: str | None) -> tuple[tuple[int, ...], str] | None:
    """The numbers a reasoning states and its verdict word, or None without the template."""
    found = list(TEMPLATES[domain].finditer(reasoning or ""))
    if not found:
        return None
    *numbers, word = found[-1].groups()  # bargain (limit, offer); campsite (points, need, points again)
    return (int(numbers[0]), int(numbers[1])), word


def follows_from(domain: str, numbers: tuple[int, ...], word: str) -> bool:
    """Does the verdict word agree with the numbers stated beside it?"""
    first, second = numbers
    accept = second <= first if domain == "bargain" else first >= second  # offer <= limit; points >= need
    return accept == (word == ACCEPTS[domain])


def anatomy(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The chain's rates over classified replies (see the module's docstring)."""
    def rate(values: list[bool]) -> float | None:
        return round(sum(values) / len(values), 3) if values else None

    templated = [r for r in rows if r["stated"] is not None]
    return {
        "replies": len(rows),
        "template": rate([r["stated"] is not None for r in rows]),
        "facts": rate([r["stated"] == r["truth"] for r in templated]),
        "consistent": rate([r["consistent"] for r in templated]),
        "verdict": rate([r["word"] == r["truth_word"] for r in templated]),
        "follows": rate([r["accepted"] == (r["word"] == ACCEPTS[r["domain"]]) for r in templated]),
        "decision": rate([r["accepted"] == r["expected"] for r in rows]),
        "decision_with_template": rate([r["accepted"] == r["expected"] for r in templated]),
        "decision_without": rate([r["accepted"] == r["expected"] for r in rows if r["stated"] is None]),
        "accept_rate": rate([bool(r["accepted"]) for r in rows]),
        "card_accept_rate": rate([r["expected"] for r in rows]),  # a constant answer scores it or 1 - it
    }


def card_truth(items: list[Any]) -> dict[int, tuple[tuple[int, ...], str]]:
    """id(item) -> the card user's (numbers, verdict) for it; the card user plays one domain at a time."""
    from mimesis_rl.simulator.decisions import replay_many

    truth = {}
    for domain in sorted({item.domain for item in items}):
        group = [item for item in items if item.domain == domain]
        for item, (_, reply) in zip(group, replay_many(group), strict=True):
            known = facts(domain, reply.reasoning if reply else None)
            if known is None:
                raise ValueError(f"{domain} seed {item.seed}: the card user's reasoning has no template")
            truth[id(item)] = known
    return truth


def classify(route: str, items: list[Any], truth: dict[int, Any], seed: int) -> list[dict[str, Any]]:
    """One reply per item from the route's model (sampling seed `seed`), beside the card's `truth`."""
    from mimesis_rl.envs.actions import reply_accepts
    from mimesis_rl.simulator.decisions import replay_many
    from mimesis_rl.simulator.runtime import UserSimulator

    folder = route if "/" in route else ROOT / "models" / "routes" / route
    user = UserSimulator.load(folder, device="cpu", batch_size=16, seed=seed)
    rows = []
    for item, (_, reply) in zip(items, replay_many(items, user), strict=True):
        known = truth[id(item)]
        stated = facts(item.domain, reply.reasoning if reply else None)
        rows.append({"route": route, "domain": item.domain, "seed": item.seed, "sample": seed,
                     "kind": item.kind, "expected": bool(item.expected_accept),
                     "accepted": bool(reply and reply_accepts(reply)),
                     "stated": stated[0] if stated else None, "word": stated[1] if stated else None,
                     "consistent": bool(stated and follows_from(item.domain, *stated)),
                     "truth": known[0], "truth_word": known[1],
                     "reasoning": reply.reasoning if reply else None,
                     "message": reply.message if reply else None})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--routes", default="sft_decision_focus,sft_verdict_dense",
                        help="routes (models/routes/<route>) or simulator folders (with a /)")
    parser.add_argument("--items", type=int, default=32, help="held-out proposals per domain")
    parser.add_argument("--samples", type=int, default=2, help="sampling seeds per item")
    parser.add_argument("--domains", default="bargain,campsite")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    from mimesis_rl.simulator.curve import held_out_items
    from mimesis_rl.threads import set_threads

    set_threads()
    domains = args.domains.split(",")
    unknown = set(domains) - set(TEMPLATES)
    if unknown:
        raise SystemExit(f"no template for {sorted(unknown)}; known: {sorted(TEMPLATES)}")
    items = [item for item in held_out_items(args.items * len(domains), domains) if item.kind != "question"]
    previous = json.loads(RESULT.read_text()) if RESULT.exists() else {}
    same = previous.get("items") == len(items) and previous.get("samples") == args.samples \
        and previous.get("domains") == domains  # other routes measured on the same items stay
    result: dict[str, Any] = {"items": len(items), "samples": args.samples, "domains": domains,
                              "routes": previous.get("routes", {}) if same else {}}
    routes = [r.strip() for r in args.routes.split(",") if r.strip()]
    truth = card_truth(items)
    examples = [e for e in previous.get("examples", []) if same and e["route"] not in routes]
    for route in routes:
        started = time.perf_counter()
        rows = [row for sample in range(args.samples) for row in classify(route, items, truth, sample)]
        result["routes"][route] = {
            "all": anatomy(rows),
            **{domain: anatomy([r for r in rows if r["domain"] == domain]) for domain in domains},
            "seconds": round(time.perf_counter() - started, 1),
        }
        for domain in domains:  # a few replies of each domain, as they were sampled first
            examples += [r for r in rows if r["sample"] == 0 and r["domain"] == domain][:4]
        print(route, result["routes"][route], flush=True)
    result["examples"] = examples
    write_result("decision_anatomy", result)


if __name__ == "__main__":
    main()
