"""How often a coach note leaks a private slot value verbatim, per coach backend, before the guard.

    python -m benchmarks csd_leak        # or: python -m benchmarks.csd_leak --episodes 2 --model models/base

Scripted agent vs scripted user (train_mix: withholding, refusals, haggling) on every domain; the
`template` and `model` (base model prompted) coaches write a note per agent turn; the numbers are
the share of notes holding a private slot value verbatim (`agent.coach.leaks.leaks`), before and after
`redact`, and how often the model coach fell back to the template. Writes results/csd_leak.json.
"""

from __future__ import annotations

import argparse
import os
import platform
from pathlib import Path
from typing import Any

from benchmarks._common import write_result


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks csd_leak")
    parser.add_argument("--episodes", type=int, default=2, help="dialogues per domain")
    parser.add_argument("--model", default="models/base")
    parser.add_argument("--preset", default="train_mix")
    parser.add_argument("--backends", default="template,model")
    args = parser.parse_args(argv)
    import torch

    from mimesis_rl.agent.coach.context import contexts_from_state
    from mimesis_rl.agent.coach.factory import build_coach
    from mimesis_rl.agent.coach.leaks import leaks, redact
    from mimesis_rl.agent.coach.template import TemplateCoach
    from mimesis_rl.envs.loop import play
    from mimesis_rl.envs.registry import DOMAINS, make_env, scripted_agent, scripted_user
    from mimesis_rl.models.loading import load_base

    contexts = []
    for name in DOMAINS:
        states = play(
            make_env(name), scripted_agent(name), scripted_user(name, args.preset), list(range(args.episodes))
        )
        contexts += [c for s in states for c in contexts_from_state(s)]
    model, tok = load_base(args.model, dtype=torch.float32, device="cpu")
    coaches: dict[str, Any] = {
        "template": TemplateCoach(),
        "model": build_coach("model", {"batch_size": 8}, model=model, tokenizer=tok),
    }
    out: dict[str, Any] = {}
    examples: dict[str, list[str]] = {}
    for backend, coach in coaches.items():
        notes = coach.notes(contexts)
        raw = sum(1 for n, c in zip(notes, contexts, strict=True) if leaks(n, c.goal))
        guarded = [redact(n, c.goal, c.slot_labels) for n, c in zip(notes, contexts, strict=True)]
        kept = sum(1 for n, c in zip(guarded, contexts, strict=True) if leaks(n, c.goal))
        out[backend] = {
            "notes": len(notes),
            "leak_rate_raw": round(raw / len(notes), 4),
            "leak_rate_after_redact": round(kept / len(notes), 4),
            "fallback_share": round(getattr(coach, "fallbacks", 0) / len(notes), 4),
            "mean_words": round(sum(len(n.split()) for n in notes) / len(notes), 1),
        }
        examples[backend] = notes[:6]
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    write_result(
        "csd_leak",
        {
            "cpu_model": cpu,
            "load_avg_1_5_15": [round(x, 2) for x in os.getloadavg()],
            "preset": args.preset,
            "episodes_per_domain": args.episodes,
            "private_slots": sorted({s for c in contexts for s in c.goal.private}),
            "backends": out,
            "examples": examples,
        },
    )


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
