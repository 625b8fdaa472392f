"""Training and evaluation users for the agent stages, built on the policy's own model.

Why not the process-wide `ModelPool`: during agent training the base weights already sit in memory
under the policy (a PeftModel), so a model user is one more *frozen* adapter on that same base (a
learned simulator) or the base with adapters switched off (the assistant-prompted user): the
`PolicyBackend` of `simulator.build.build_user`, the one place a user spec becomes a user. The user is
always a `UserSimulator` (the one LM user runtime), so user randomness is keyed by (domain, episode
seed, turn): the k copies of a seed in a GRPO group meet the same user randomness, and the spread
inside a group comes from the agent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from mimesis_rl.envs.protocols import UserSide
from mimesis_rl.envs.specs import make_user, split_user_spec
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.simulator.build import PolicyBackend, UserDecoding, build_user
from mimesis_rl.simulator.runtime import UserSimulator


class UserFactory:
    """`factory(domain) -> UserSide` for one user spec, sharing the policy's model for model users.

    spec: `scripted:<preset>` | `prompted:<persona>` | `learned:<folder | models:/…>` |
    `openai:http://HOST:PORT/v1#MODEL` (a served simulator: its turns come from the server, the
    runtime's checks, re-samples and leaving stay here; `sampling` is its decoding).
    sampling: the decoding of prompted and `openai:` users; a learned simulator decodes with its
    folder's own, its budget capped at `max_new_tokens` when given.
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
        max_new_tokens: int | None = None,
    ) -> None:
        self.spec, self.kind = spec, split_user_spec(spec)[0]
        self._side: UserSimulator | None = None
        if self.kind != "scripted":
            decoding = UserDecoding(sampling, max_new_tokens=max_new_tokens, seed=seed,
                                    max_context_tokens=max_context_tokens)
            backend = PolicyBackend(model, tokenizer, Path(base_model))
            # a model spec: always a `UserSimulator`
            self._side = cast(UserSimulator, build_user(spec, backend, decoding))

    @property
    def simulator(self) -> UserSimulator | None:
        """The model user (None for scripted users)."""
        return self._side

    def __call__(self, domain: str) -> UserSide:
        return self._side if self._side is not None else make_user(self.spec, domain)
