"""Training and evaluation users for the agent stages, built on the policy's own model.

Why not the process-wide `ModelPool`: during agent training the base weights already sit in memory
under the policy (a PeftModel), so a model user is one more *frozen* adapter on that same base (a
learned simulator) or the base with adapters switched off (the assistant-prompted user). Each party
is a `ModelRunner` over the one model; the user is always a `UserSimulator` (the one LM user runtime),
so user randomness is keyed by (domain, episode seed, turn): the k copies of a seed in a GRPO group
meet the same user randomness, and the spread inside a group comes from the agent.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from peft import PeftModel

from mimesis_rl.envs.base import UserSide
from mimesis_rl.envs.specs import make_user, split_user_spec
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.inference.runner import ModelRunner
from mimesis_rl.simulator.api import UserSimulator

log = logging.getLogger(__name__)
USER_ADAPTER = "user"


class UserFactory:
    """`factory(domain) -> UserSide` for one user spec, sharing the policy's model for model users.

    spec: `scripted:<preset>` | `prompted:<persona>` | `learned:<folder | models:/…>` |
    `openai:http://HOST:PORT/v1#MODEL` (a served simulator: its turns come from the server, the
    runtime's checks, re-samples and leaving stay here; `sampling` is its decoding).
    """

    def __init__(
        self,
        spec: str,
        model: Any,
        tokenizer: Any,
        sampling: SamplingParams,
        *,
        seed: int = 0,
        base_model: str | Path = "models/base",
        max_context_tokens: int | None = 512,
    ) -> None:
        self.spec, self.kind = spec, split_user_spec(spec)[0]
        self._side: UserSimulator | None = None
        body = split_user_spec(spec)[1]
        if self.kind == "prompted":
            from mimesis_rl.envs.personas import PERSONAS

            if body not in PERSONAS:
                raise ValueError(
                    f"user spec {spec!r}: unknown persona {body!r}; known: {', '.join(PERSONAS)}"
                )
            runner = ModelRunner(model, tokenizer, sampling, adapter=None, seed=seed)
            self._side = UserSimulator(
                runner,
                name=spec,
                card_style="prompted",
                persona={"persona": PERSONAS[body]},
                max_context_tokens=max_context_tokens,
            )
        elif self.kind == "openai":
            self._side = UserSimulator.remote(spec, sampling=sampling, seed=seed,
                                              max_context_tokens=max_context_tokens)
        elif self.kind == "learned":
            self._side = _learned(spec, body, model, tokenizer, seed, base_model, max_context_tokens)

    @property
    def simulator(self) -> UserSimulator | None:
        """The model user (None for scripted users)."""
        return self._side

    def __call__(self, domain: str) -> UserSide:
        return self._side if self._side is not None else make_user(self.spec, domain)


def _learned(
    spec: str,
    body: str,
    model: Any,
    tokenizer: Any,
    seed: int,
    base_model: str | Path,
    max_context_tokens: int | None,
) -> UserSimulator:
    """A trained simulator as a frozen adapter on the policy's base (its own decoding settings)."""
    from mimesis_rl.models.inference.sources import resolve_source
    from mimesis_rl.simulator.format import FORMAT_VERSION

    source = resolve_source(body, base_model)
    manifest = source.manifest
    if manifest is None or manifest.role != "simulator":
        raise ValueError(
            f"user spec {spec!r}: {body} is not a simulator folder (mimesis.json role simulator)"
        )
    if manifest.kind != "lora" or source.adapter is None:
        raise ValueError(
            f"user spec {spec!r}: a {manifest.kind} simulator cannot share the agent's base; "
            "agent training needs a LoRA simulator over the same base"
        )
    if manifest.format.get("version") != FORMAT_VERSION:
        raise ValueError(
            f"user spec {spec!r}: turn format {manifest.format.get('version')!r}, expected {FORMAT_VERSION!r}"
        )
    if not isinstance(model, PeftModel):
        raise ValueError("a learned user needs the policy to be a PeftModel (LoRA agent)")
    if Path(source.base).resolve() != Path(base_model).resolve():
        log.warning("%s was trained on base %s; the agent's base is %s", spec, source.base, base_model)
    if USER_ADAPTER not in model.peft_config:
        model.load_adapter(str(source.adapter), adapter_name=USER_ADAPTER, is_trainable=False)
    runner = ModelRunner(model, tokenizer, manifest.sampling, adapter=USER_ADAPTER, seed=seed)
    style = manifest.extra.get("card_style") or "simulator"
    return UserSimulator(
        runner,
        name=spec,
        card_style=style,
        behaviours=manifest.behaviours,
        max_behaviours=manifest.max_behaviours,
        manifest=manifest,
        max_context_tokens=max_context_tokens,
    )
