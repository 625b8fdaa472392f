"""Can the simulator's model compare the two numbers its bargain decision turns on? (issue 27)

    python -m benchmarks.verdict_probe [--routes sft_decision_focus,sft_grounded_fit] [--drill-steps 50]
                                       [--context-steps 50] [--threads N]

Every route of `benchmarks.sim_routes` left decision accuracy at chance while its model learned to
write the grounded reasoning ("They offer $O; I'd pay at most $L, so $O is within/over my limit").
This isolates the one token that carries the decision, the verdict after "so $O is", scored
teacher-forced (" within" against " over", no sampling):

- `probe`: on 200 random (limit, offer) pairs in the bare reasoning line, for the base and each
  route's saved adapter (models/routes/<route>), both orders of the line; accuracy, and the share a
  constant answer would get;
- `drill`: can the base learn the comparison at all? A fresh LoRA (the routes' setting: r16 on
  q/k/v/o) trained on the bare line alone, loss on the verdict only, 32 pairs a step; held-out
  accuracy at fixed steps;
- `in_context`: the same verdict inside the simulator's own bargain decision windows (card, the
  agent's offer, the card user's grounded reasoning: `env_data.decision_dialogues`, as `sim_sft`
  trains them), from the first route's adapter, 16 windows a step; accuracy on windows of other seeds.

`--score-only` trains nothing: each route's adapter on the bare line and on the held-out windows.
`--act` scores adapters trained verdict first (`sim_sft.env.verdict_first`) on the act their reply
opens with instead: after "<think>I'll", " take" against " counter" (bargain, campsite), " book"
against " turn" (travel), " watch" against " turn" / " say" (content), on held-out decision windows
of all four proposal domains, their reasoning act first.

Needs models/base and the routes' adapters (`python -m benchmarks.sim_routes`). JSON in
benchmarks/results/verdict_probe.json.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks._common import RESULTS_DIR, machine, write_result

RUN_BY_DEFAULT = False  # ~20 min on 2 cores; needs models/base and models/routes (benchmarks.sim_routes)
ROOT = Path(__file__).resolve().parents[1]
RESULT = RESULTS_DIR / "verdict_probe.json"
LINES = {"offer_first": "They offer ${O}; I'd pay at most ${L}, so ${O} is",
         "limit_first": "I'd pay at most ${L}; they offer ${O}, so ${O} is"}
Pair = tuple[int, int]


def pairs(n: int, seed: int) -> list[Pair]:
    """(limit, offer): a tenth at the limit, the rest under or over it by 1-300, evenly."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        limit, r = rng.randint(100, 999), rng.random()
        offer = limit if r < 0.1 else limit - rng.randint(1, 300) if r < 0.55 else limit + rng.randint(1, 300)
        out.append((limit, max(1, offer)))
    return out


VERDICT_WORDS = {"bargain": (" within", " over"), "campsite": (" enough", " short")}  # (accept, decline)


class Verdicts:
    """Teacher-forced verdicts: prompts that end right before the accepting word (" within") or the
    declining one (" over"); campsite's are " enough" / " short" (`VERDICT_WORDS`)."""

    def __init__(self, tokenizer: Any, domain: str = "bargain") -> None:
        self.tok, self.domain = tokenizer, domain
        yes, no = VERDICT_WORDS[domain]
        self.within = tokenizer(yes, add_special_tokens=False).input_ids[0]
        self.over = tokenizer(no, add_special_tokens=False).input_ids[0]

    def logits(self, model: Any, prompts: list[str]) -> torch.Tensor:
        enc = self.tok(prompts, return_tensors="pt", padding=True, padding_side="left",
                       add_special_tokens=False)
        return model(**enc).logits[:, -1].float()

    def accuracy(self, model: Any, items: list[tuple[str, int]], chunk: int = 16) -> float:
        was = model.training
        model.eval()
        right = 0
        with torch.no_grad():
            for i in range(0, len(items), chunk):
                part = items[i : i + chunk]
                logits = self.logits(model, [p for p, _ in part])
                says = torch.where(logits[:, self.within] > logits[:, self.over], self.within, self.over)
                right += int((says == torch.tensor([t for _, t in part])).sum())
        model.train(was)
        return round(right / len(items), 3)

    def separation(self, model: Any, items: list[tuple[str, int]], chunk: int = 16) -> dict[str, float]:
        """How far the model tells the two verdicts apart, whatever its bias: the mean margin
        logit(" within") - logit(" over") on items whose truth is " within" and on those whose truth
        is " over", and the AUC of that margin (0.5: no separation; accuracy can sit at a constant
        answer's while the AUC rises)."""
        was = model.training
        model.eval()
        within: list[float] = []
        over: list[float] = []
        with torch.no_grad():
            for i in range(0, len(items), chunk):
                part = items[i : i + chunk]
                logits = self.logits(model, [p for p, _ in part])
                for (_, truth), row in zip(part, logits, strict=True):
                    margin = float(row[self.within] - row[self.over])
                    (within if truth == self.within else over).append(margin)
        model.train(was)
        pairs_won = sum((a > b) + 0.5 * (a == b) for a in within for b in over)
        return {"margin_within": round(sum(within) / max(1, len(within)), 3),
                "margin_over": round(sum(over) / max(1, len(over)), 3),
                "auc": round(pairs_won / max(1, len(within) * len(over)), 3)}

    def train(self, model: Any, items: list[tuple[str, int]], test: list[tuple[str, int]], steps: int,
              batch: int, checkpoints: set[int], lr: float = 5e-4, seed: int = 0) -> list[dict[str, Any]]:
        """Cross-entropy on the verdict token only; the held-out accuracy at `checkpoints`."""
        rng = random.Random(seed)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
        curve = [{"step": 0, "accuracy": self.accuracy(model, test)}]
        started = time.perf_counter()
        model.train()
        for step in range(1, steps + 1):
            part = rng.sample(items, batch) if len(items) >= batch else rng.choices(items, k=batch)
            loss = torch.nn.functional.cross_entropy(self.logits(model, [p for p, _ in part]),
                                                     torch.tensor([t for _, t in part]))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            if step in checkpoints or step == steps:
                seconds = round(time.perf_counter() - started, 1)
                curve.append({"step": step, "accuracy": self.accuracy(model, test),
                              "loss": round(loss.item(), 3), "seconds": seconds})
                print(curve[-1], flush=True)
        return curve

    def line_items(self, line: str, chosen: list[Pair]) -> list[tuple[str, int]]:
        return [(line.format(L=limit, O=offer), self.within if offer <= limit else self.over)
                for limit, offer in chosen]


def context_items(verdicts: Verdicts, per_domain: int, seed: int) -> list[tuple[str, int]]:
    """The simulator's decision windows of the verdicts' domain (chat template), cut right before the
    verdict word."""
    from mimesis_rl.simulator.env_data import decision_dialogues, env_windows

    out = []
    yes, no = VERDICT_WORDS[verdicts.domain]
    windows = env_windows(decision_dialogues([verdicts.domain], per_domain, seed=seed), decision_focus=True)
    for window in windows:
        messages = window["messages"]
        target = messages[-1]["content"]
        prompt = verdicts.tok.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True)
        for word, token in ((" is" + yes, verdicts.within), (" is" + no, verdicts.over)):
            cut = target.find(word)
            if cut >= 0:
                out.append((prompt + target[: cut + 3], token))
                break
    return out


ACT_WORDS = {"bargain": (" take", (" counter",)), "campsite": (" take", (" counter",)),
             "travel": (" book", (" turn",)), "content": (" watch", (" turn", " say"))}  # after "I'll"


def act_items(tok: Any, domain: str, per_domain: int, seed: int) -> list[tuple[str, bool]]:
    """Held-out proposal windows of `domain` (chat template) cut after "<think>I'll", and whether the
    card accepts."""
    from mimesis_rl.simulator.decision_windows import ACT_OPEN, PROPOSAL, leading_act, with_act_first
    from mimesis_rl.simulator.env_data import decision_dialogues, env_windows
    from mimesis_rl.simulator.format import THINK_OPEN

    opening = ACT_OPEN.rstrip()  # "I'll": the act's word comes next
    items = with_act_first(decision_dialogues([domain], per_domain, seed=seed))
    out = []
    for conv, window in zip(items, env_windows(items, decision_focus=True), strict=True):
        reply = conv.turns[-1]
        act = leading_act(reply.reasoning or "") if reply.meta.get("decision") == PROPOSAL else None
        if act is None:
            continue
        prompt = tok.apply_chat_template(window["messages"][:-1], tokenize=False, add_generation_prompt=True)
        accepts = act.removeprefix(opening).startswith(ACT_WORDS[domain][0])
        out.append((prompt + THINK_OPEN + opening, accepts))
    return out


def act_separation(model: Any, tok: Any, domain: str, items: list[tuple[str, bool]],
                   chunk: int = 16) -> dict[str, float]:
    """Accuracy and AUC of the margin logit(accepting act) - max logit(declining acts) at the act's
    first word."""
    yes_word, no_words = ACT_WORDS[domain]
    yes = tok(yes_word, add_special_tokens=False).input_ids[0]
    nos = [tok(w, add_special_tokens=False).input_ids[0] for w in no_words]
    margins: list[tuple[float, bool]] = []
    model.eval()
    with torch.no_grad():
        for i in range(0, len(items), chunk):
            part = items[i : i + chunk]
            enc = tok([p for p, _ in part], return_tensors="pt", padding=True, padding_side="left",
                      add_special_tokens=False)
            logits = model(**enc).logits[:, -1].float()
            for (_, accepts), row in zip(part, logits, strict=True):
                margins.append((float(row[yes] - row[nos].max()), accepts))
    pos = [m for m, a in margins if a]
    neg = [m for m, a in margins if not a]
    won = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg)
    right = sum((m > 0) == a for m, a in margins)
    return {"items": len(margins), "accepting": len(pos), "accuracy": round(right / max(1, len(margins)), 3),
            "constant": round(max(len(pos), len(neg)) / max(1, len(margins)), 3),
            "auc": round(won / max(1, len(pos) * len(neg)), 3)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--routes", default="sft_decision_focus,sft_grounded_fit",
                        help="routes (models/routes/<route>/adapter) or adapter folders (with a /)")
    parser.add_argument("--drill-steps", type=int, default=50)
    parser.add_argument("--context-steps", type=int, default=50)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--score-only", action="store_true",
                        help="no training: each route's verdict accuracy, bare line and in context "
                             "(results under `scored`, the rest of the JSON kept)")
    parser.add_argument("--act", action="store_true",
                        help="no training: each adapter's act-first decision (results under `act_scored`)")
    args = parser.parse_args(argv)
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mimesis_rl.threads import set_threads

    threads = set_threads(args.threads)
    base_dir = ROOT / "models" / "base"
    routes = [r for r in args.routes.split(",") if r]

    def adapter_dir(route: str) -> Path:  # a route's saved adapter, or any adapter folder (a checkpoint)
        return Path(route) if "/" in route else ROOT / "models" / "routes" / route / "adapter"

    missing = [r for r in routes if not adapter_dir(r).exists()]
    if not (base_dir / "config.json").exists() or missing:
        raise SystemExit(f"needs models/base and models/routes/<route>/adapter (missing: "
                         f"{missing or 'base'}): run python -m benchmarks.sim_routes first")
    verdicts = Verdicts(AutoTokenizer.from_pretrained(base_dir))

    def load(adapter: str | None, trainable: bool = False) -> Any:
        model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.bfloat16)
        if adapter is None:
            return model
        return PeftModel.from_pretrained(model, adapter_dir(adapter), is_trainable=trainable)

    if args.act:
        tests = {d: act_items(verdicts.tok, d, 64, seed=99) for d in ACT_WORDS}
        scored = {}
        for name in routes:
            model = load(name)
            scored[name] = {f"act.{d}": act_separation(model, verdicts.tok, d, items)
                            for d, items in tests.items()}
            print(name, scored[name], flush=True)
        previous = json.loads(RESULT.read_text()) if RESULT.exists() else {}
        kept = {k: v for k, v in previous.items() if k not in ("benchmark", "time")}  # their machine stays
        write_result("verdict_probe", {**kept, "act_machine": machine(),
                                       "act_scored": {**previous.get("act_scored", {}), **scored}})
        return
    if args.score_only:
        by_domain = {d: Verdicts(verdicts.tok, d) for d in VERDICT_WORDS}
        tests = {d: context_items(v, 64, seed=99) for d, v in by_domain.items()}
        lines = {order: verdicts.line_items(line, pairs(200, seed=0)) for order, line in LINES.items()}
        scored = {}
        for name in ["base", *routes]:
            model = load(None if name == "base" else name)
            scored[name] = {order: verdicts.accuracy(model, items) for order, items in lines.items()}
            for domain, v in by_domain.items():
                scored[name][f"in_context.{domain}"] = {"accuracy": v.accuracy(model, tests[domain]),
                                                        **v.separation(model, tests[domain])}
            print(name, scored[name], flush=True)
        previous = json.loads(RESULT.read_text()) if RESULT.exists() else {}
        kept = {k: v for k, v in previous.items() if k not in ("benchmark", "time", "machine")}
        write_result("verdict_probe", {**kept, "trained_machine": previous.get("trained_machine",
                                                                             previous.get("machine")),
                                       "scored": {**previous.get("scored", {}), **scored},
                                       "scored_test_windows": {d: len(t) for d, t in tests.items()}})
        return
    result: dict[str, Any] = {"threads": threads, "dtype": "bfloat16"}
    probe_pairs = pairs(200, seed=0)
    within = sum(offer <= limit for limit, offer in probe_pairs) / len(probe_pairs)
    result["probe"] = {"pairs": len(probe_pairs), "constant_within": round(within, 3)}
    for name in [None, *routes]:
        model = load(name)
        scored = {order: verdicts.line_items(line, probe_pairs) for order, line in LINES.items()}
        accuracy = {order: verdicts.accuracy(model, items) for order, items in scored.items()}
        result["probe"][name or "base"] = accuracy
        print(name or "base", accuracy, flush=True)
    write_result("verdict_probe", result)

    line = LINES["offer_first"]  # the order main's scripted users write
    drill = get_peft_model(load(None), LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0,
                                                  target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
    result["drill"] = {"line": line, "batch": 32, "curve": verdicts.train(
        drill, verdicts.line_items(line, pairs(args.drill_steps * 32, seed=1)),
        verdicts.line_items(line, pairs(200, seed=2)), args.drill_steps, 32, {10, 25})}
    write_result("verdict_probe", result)

    train, test = context_items(verdicts, 256, seed=11), context_items(verdicts, 64, seed=99)
    result["in_context"] = {
        "from": routes[0], "train_windows": len(train), "test_windows": len(test), "batch": 16,
        "constant_within": round(sum(t == verdicts.within for _, t in test) / max(1, len(test)), 3),
        "curve": verdicts.train(load(routes[0], trainable=True), train, test, args.context_steps, 16,
                                {10, 25})}
    write_result("verdict_probe", result)


if __name__ == "__main__":
    main()
