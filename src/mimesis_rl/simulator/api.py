"""`UserSimulator`: a trained (or prompted) simulator as a batched user side.

    sim = UserSimulator.load("models:/mimesis-simulator@candidate")   # or a folder, or "assistant"
    sessions = sim.start([SessionSpec(goal=card, domain="shopping")])
    first = sim.opening(sessions)[0]                  # UserReply(message, reasoning, ended)
    reply = sim.respond(sessions, ["What is your budget?"])[0]

It satisfies `mimesis_rl.envs.base.UserSide`. One call = one batched `generate` over all open
sessions (left padding). Outputs go through the tolerant parser; a rejected output is re-sampled
`max_retries` times, then the session ends with an empty message and the reason in `meta`.
The same class wraps the baselines: `assistant` (the base instruct model prompted to play the
user, no fine-tuning — the simulator style the paper argues against) and `sft-only`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from mimesis_rl.envs.base import SessionSpec, UserReply
from mimesis_rl.simulator.artifact import (
    GenerationSettings,
    SimulatorManifest,
    base_reference,
    read_manifest,
    resolve_base,
)
from mimesis_rl.simulator.format import (
    END_MARKER,
    OPENING_CUE,
    ParsedTurn,
    ParseStats,
    render_target,
    system_card,
    trim_messages,
)

log = logging.getLogger(__name__)
MLFLOW_SCHEMES = ("models:/", "runs:/", "mlflow-artifacts:/")


def prompted_card(domain: str, goal: Any = None, persona: Mapping[str, Any] | None = None,
                  behaviours: Sequence[str] = ()) -> str:
    """The assistant baseline's instructions: a plain role-play prompt, no reasoning format."""
    lines = [f"You are role-playing a user who talks to an AI assistant about {domain}. "
             "Write only the user's next message."]
    if persona:
        lines.append("The user: " + "; ".join(f"{k}: {v}" for k, v in persona.items()))
    if goal is not None:
        lines.append(f"The user's goal: {goal.text}")
        if goal.slots:
            lines.append("Facts the user knows: " + "; ".join(f"{k}: {v}" for k, v in goal.slots.items()))
    lines.append(f"When the user is done, end the message with {END_MARKER}.")
    return "\n".join(lines)


@dataclass
class Session:
    """One open dialogue: the simulator's own (role-flipped) view of it."""

    spec: SessionSpec
    messages: list[dict[str, str]]
    replies: list[UserReply] = field(default_factory=list)
    ended: bool = False


def fetch(source: str | Path) -> Path:
    """A local simulator folder for a folder path or an MLflow URI (downloaded)."""
    text = str(source)
    if text.startswith(MLFLOW_SCHEMES):
        import tempfile

        import mlflow

        from mimesis_rl.tracking import tracking_uri

        mlflow.set_tracking_uri(tracking_uri())
        dest = tempfile.mkdtemp(prefix="mimesis-simulator-")
        try:
            return Path(mlflow.artifacts.download_artifacts(artifact_uri=text, dst_path=dest))
        except Exception as exc:  # MLflow raises several types for an unknown name/alias/version
            where = mlflow.get_tracking_uri()
            raise ValueError(f"cannot download {text!r} from MLflow at {where}: {exc}") from exc
    path = Path(text)
    if not path.is_dir():
        raise FileNotFoundError(f"simulator {text!r}: no such folder and not an MLflow URI")
    return path


class UserSimulator:
    """A language model playing the user; see the module docstring."""

    def __init__(self, model: Any, tokenizer: Any, manifest: SimulatorManifest, name: str = "simulator",
                 batch_size: int = 16, card_style: str | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.manifest = manifest
        self.name = name
        self.batch_size = batch_size
        self.generation = GenerationSettings(**manifest.generation)
        self.card_style = card_style or manifest.extra.get("card_style", "simulator")
        self.stats = ParseStats()
        limit = getattr(model.config, "max_position_embeddings", None) or 2048
        self.max_context = max(64, int(limit) - self.generation.max_new_tokens)
        stop = [tokenizer.eos_token_id]
        end_of_turn = tokenizer.convert_tokens_to_ids("<|im_end|>")
        if isinstance(end_of_turn, int) and end_of_turn != tokenizer.unk_token_id:
            stop.append(end_of_turn)
        self.stop_ids = sorted({s for s in stop if s is not None})

    # -- loading ---------------------------------------------------------------------------------

    @classmethod
    def load(cls, source: str | Path, name: str | None = None, device: str = "auto",
             base_model: str | Path = "models/base", merge: bool = True, dtype: str | None = None,
             **kwargs: Any) -> UserSimulator:
        """From a simulator folder, an MLflow URI, or `assistant` (the prompted base model).

        dtype: weights' dtype (e.g. `bfloat16`, faster generation on CPUs that have it); None = the
        device switch's default.
        """
        from mimesis_rl.models.loading import load_base, load_tokenizer

        if str(source) == "assistant":
            return cls.assistant(base_model, device=device, name=name or "assistant", dtype=dtype, **kwargs)
        folder = fetch(source)
        manifest = read_manifest(folder)
        weights = folder / "model" if manifest.kind == "full" else resolve_base(folder, manifest)
        model, tokenizer = load_base(weights, dtype=dtype, device=device, padding_side="left")
        if (folder / "tokenizer").is_dir():
            tokenizer = load_tokenizer(folder / "tokenizer", padding_side="left")
        if manifest.kind == "lora":
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(folder / "adapter"))
            if merge:
                model = model.merge_and_unload()
            model.eval()
        return cls(model, tokenizer, manifest, name=name or str(source), **kwargs)

    @classmethod
    def assistant(cls, base_model: str | Path, device: str = "auto", name: str = "assistant",
                  generation: GenerationSettings | None = None, dtype: str | None = None,
                  **kwargs: Any) -> UserSimulator:
        """The base instruct model, no fine-tuning, told to play the user: the assistant-style baseline."""
        from mimesis_rl.models.loading import load_base

        model, tokenizer = load_base(base_model, dtype=dtype, device=device, padding_side="left")
        manifest = SimulatorManifest(kind="prompted", base=base_reference(base_model),
                                     generation=asdict(generation or GenerationSettings()),
                                     extra={"card_style": "prompted"})
        return cls(model, tokenizer, manifest, name=name, **kwargs)

    # -- the UserSide protocol -------------------------------------------------------------------

    def card(self, spec: SessionSpec) -> str:
        persona = dict(spec.persona or {})
        behaviours = list(persona.pop("behaviours", None) or self.manifest.behaviours)
        if self.card_style == "prompted":
            return prompted_card(spec.domain, spec.goal, persona or None, behaviours)
        behaviours = behaviours[: self.manifest.max_behaviours]
        return system_card(spec.domain, spec.goal, persona or None, behaviours)

    def start(self, specs: list[SessionSpec]) -> list[Session]:
        return [Session(spec=s, messages=[{"role": "system", "content": self.card(s)}]) for s in specs]

    def opening(self, sessions: list[Session]) -> list[UserReply]:
        for session in sessions:
            session.messages.append({"role": "user", "content": OPENING_CUE})
        return self._speak(sessions)

    def respond(self, sessions: list[Session], agent_messages: list[str]) -> list[UserReply]:
        if len(sessions) != len(agent_messages):
            raise ValueError(f"{len(sessions)} sessions but {len(agent_messages)} agent messages")
        for session, message in zip(sessions, agent_messages, strict=True):
            session.messages.append({"role": "user", "content": message})
        return self._speak(sessions)

    def _speak(self, sessions: list[Session]) -> list[UserReply]:
        parsed = self.reply([s.messages for s in sessions])
        replies = []
        for session, turn in zip(sessions, parsed, strict=True):
            if turn.ok:
                reply = UserReply(message=turn.message, reasoning=turn.reasoning, ended=turn.ended,
                                  meta={"repairs": list(turn.repairs)} if turn.repairs else {})
                session.messages.append({"role": "assistant",
                                         "content": render_target(turn.reasoning, turn.message, turn.ended)})
            else:
                reply = UserReply(message="", reasoning=turn.reasoning, ended=True,
                                  meta={"error": turn.error, "note": "simulator output rejected; user left"})
            session.ended = reply.ended
            session.replies.append(reply)
            replies.append(reply)
        return replies

    # -- generation ------------------------------------------------------------------------------

    def reply(self, prompts: Sequence[Sequence[Mapping[str, str]]],
              seed: int | None = None) -> list[ParsedTurn]:
        """Parsed next user turns for role-flipped prompts; rejected outputs are re-sampled."""
        if seed is not None:
            torch.manual_seed(seed)
        results: list[ParsedTurn | None] = [None] * len(prompts)
        todo = list(range(len(prompts)))
        for attempt in range(1 + max(0, self.generation.max_retries)):
            raw = self.generate([prompts[i] for i in todo])
            retry = []
            for i, text in zip(todo, raw, strict=True):
                turn = self.stats.parse(text)
                results[i] = turn
                if not turn.ok and self.generation.do_sample:
                    retry.append(i)
            todo = retry
            if not todo:
                break
            log.info("%s: re-sampling %d rejected output(s) (attempt %d)", self.name, len(todo), attempt + 2)
        return [r for r in results if r is not None]

    def _ids(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        ids = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if isinstance(ids, Mapping) else ids)

    def _prompt_ids(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        """Chat-template ids; when too long, the oldest exchanges go (the system card stays)."""
        fitted = trim_messages(messages, lambda m: len(self._ids(m)), self.max_context)
        return self._ids(fitted)[-self.max_context:]

    @torch.inference_mode()
    def generate(self, prompts: Sequence[Sequence[Mapping[str, str]]]) -> list[str]:
        """Raw completions, in input order. Prompts are batched by length (`batch_size` per
        `generate` call), so a short context is not padded to a long one's width."""
        from tqdm.auto import tqdm

        from mimesis_rl.rollout.attention import grouped_attention

        encoded = [self._prompt_ids(p) for p in prompts]
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        out: list[str] = [""] * len(encoded)
        pad = self.tokenizer.pad_token_id
        starts = range(0, len(order), self.batch_size)
        for start in tqdm(starts, desc=f"{self.name}: generating", unit="batch", disable=len(starts) < 4):
            rows = order[start:start + self.batch_size]
            chunk = [encoded[i] for i in rows]
            width = max(len(ids) for ids in chunk)
            device = self.model.device
            input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids in chunk], device=device)
            attention = torch.zeros_like(input_ids)
            for row, ids in enumerate(chunk):
                attention[row, width - len(ids):] = 1
            with grouped_attention(self.model):  # padded batches: no per-step copy of the KV heads
                generated = self.model.generate(input_ids=input_ids, attention_mask=attention,
                                                eos_token_id=self.stop_ids, pad_token_id=pad,
                                                **self.generation.generate_kwargs())
            for i, row in zip(rows, generated[:, width:], strict=True):
                out[i] = self.tokenizer.decode(row, skip_special_tokens=True)
        return out

    @torch.inference_mode()
    def message_nll(self, prompts: Sequence[Sequence[Mapping[str, str]]], messages: Sequence[str],
                    reasonings: Sequence[str | None] = ()) -> list[tuple[float, int]]:
        """(summed negative log-likelihood, token count) of each real message given its context.

        Simulators in the `<think>` format are conditioned on the real reasoning first, so only the
        words the user actually said are scored, for trained and prompted simulators alike.
        """
        reasonings = list(reasonings) or [None] * len(messages)
        out = []
        for prompt, message, reasoning in zip(prompts, messages, reasonings, strict=True):
            context = self._prompt_ids(prompt)
            prefix = "" if self.card_style == "prompted" else render_target(reasoning, "")
            prefix_ids = self.tokenizer.encode(prefix, add_special_tokens=False) if prefix else []
            target = self.tokenizer.encode(message, add_special_tokens=False)
            if not target:
                out.append((0.0, 0))
                continue
            ids = torch.tensor([context + prefix_ids + target], device=self.model.device)
            logits = self.model(input_ids=ids).logits[0, :-1].float()
            labels = ids[0, 1:]
            nll = torch.nn.functional.cross_entropy(logits, labels, reduction="none")[-len(target):]
            out.append((float(nll.sum()), len(target)))
        return out


def load_simulator(spec: str, base_model: str | Path = "models/base", sft_dir: str | Path | None = None,
                   **kwargs: Any) -> UserSimulator:
    """`assistant` | `sft-only` (needs `sft_dir`) | a folder | an MLflow URI."""
    if spec == "sft-only":
        if sft_dir is None:
            raise ValueError("the `sft-only` baseline needs the SFT simulator folder (sim_sft.output_dir)")
        return UserSimulator.load(sft_dir, name="sft-only", base_model=base_model, **kwargs)
    return UserSimulator.load(spec, base_model=base_model, **kwargs)
