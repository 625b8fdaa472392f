"""Does a user side decide like its card? Decision agreement and answer rate on the decision items.

    python -m benchmarks.decisions [--user SPEC ...] [--per-domain 16] [--episodes 8] [--seed 0]

The items (`mimesis_rl.simulator.decisions`): per domain, pending proposals at, within and beyond
the card's limit and questions about its slots, on seeded episodes of the scripted agent against
the card user. Each user side (any user spec: `scripted:PRESET`, `learned:models:/…`,
`prompted:…`, `openai:…`; default: the scripted training and baseline presets) is replayed over
the items' agent messages; `decision_accuracy` is the share of proposals it decides as the card
does (as the environment reads the reply), `answer_rate` the share of questions whose asked slots
it states. The card user itself is the first row (100% by construction: the check of the
measurement). Pure Python for scripted users; a learned one costs a generation per agent message.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from benchmarks._common import write_result
from mimesis_rl.envs.specs import make_user, split_user_spec
from mimesis_rl.eval.decisions import decision_accuracy
from mimesis_rl.simulator.decisions import card_user, domain_items

DEFAULT_USERS = ("scripted:cooperative", "scripted:train_mix", "scripted:tell_all", "scripted:hard_bargainer")


def measure(users: list[str], per_domain: int, episodes: int, seed: int) -> dict[str, Any]:
    """{user: decision_accuracy(...)} with the card user first, on one shared item set."""
    if any(split_user_spec(u)[0] != "scripted" for u in users):
        from mimesis_rl.cli.envs import load_resolvers

        load_resolvers()  # the learned/prompted/openai kinds, on params.yaml's rollout settings
    items = domain_items(None, per_domain, seed, episodes)
    rows: dict[str, Any] = {"card": decision_accuracy(card_user, items)}
    for spec in users:
        start = time.perf_counter()
        rows[spec] = decision_accuracy(lambda domain, spec=spec: make_user(spec, domain), items)
        rows[spec]["seconds"] = round(time.perf_counter() - start, 2)
    return {"items": len(items), "per_domain": per_domain, "episodes_per_domain": episodes, "seed": seed,
            "users": rows}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--user", action="append", help="a user spec (repeatable); default: scripted presets")
    parser.add_argument("--per-domain", type=int, default=16, help="items per domain (half proposals)")
    parser.add_argument("--episodes", type=int, default=8, help="seeded episodes per domain to draw from")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    result = measure(list(args.user or DEFAULT_USERS), args.per_domain, args.episodes, args.seed)
    write_result("decisions", result)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
