"""A verl `BaseInteraction` whose user is the served simulator (multi-turn rollouts in verl).

verl config (`actor_rollout_ref.rollout.multi_turn.interaction_config_path`)::

    interaction:
      - name: mimesis_user
        class_name: mimesis_rl.serve.adapters.verl.MimesisInteraction
        config: {base_url: "http://127.0.0.1:8000", api_key_env: MIMESIS_API_KEY}

Each dataset row's `extra_info.interaction_kwargs` carries `{"name": "mimesis_user", "goal": {"text": …,
"domain": …, "persona": {…}}}`; the row's prompt holds the agent's system prompt and the user's opening
(`opening()` fetches one). verl calls `generate_response` after each agent turn with the whole
dialogue; the simulator answers, and `should_terminate_sequence` is True when the user leaves. The
turn score is 0.0: the task's verifier, not the user, rewards the agent.

verl need not be installed: without it the class derives from a stand-in with the same methods.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import httpx

from mimesis_rl.serve.adapters.client import Goal, SimulatorClient

try:  # pragma: no cover - depends on whether verl is installed
    from verl.interactions.base import BaseInteraction
except ImportError:  # the same interface, so this class is usable and testable without verl

    class BaseInteraction:  # type: ignore[no-redef]
        """Stand-in for `verl.interactions.base.BaseInteraction` (same constructor and methods)."""

        def __init__(self, config: dict[str, Any]) -> None:
            self.config = config
            self.name: str = config.get("name", "interaction_agent")

        async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
            return instance_id or str(uuid.uuid4())

        async def generate_response(self, instance_id: str, messages: list[dict[str, Any]],
                                    **kwargs: Any) -> tuple[bool, str, float, dict[str, Any]]:
            raise NotImplementedError

        async def calculate_score(self, instance_id: str, **kwargs: Any) -> float:
            return 0.0

        async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
            return None


class MimesisInteraction(BaseInteraction):
    """config: base_url, api_key (or api_key_env, default MIMESIS_API_KEY), model?, timeout?, name?."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config)
        key = config.get("api_key") or os.environ.get(config.get("api_key_env", "MIMESIS_API_KEY"))
        self.client = SimulatorClient(config.get("base_url", "http://127.0.0.1:8000"), api_key=key,
                                      model=config.get("model"), timeout=float(config.get("timeout", 120)))
        self._goals: dict[str, Goal | None] = {}
        self._left: dict[str, bool] = {}
        self._http: httpx.AsyncClient | None = None

    def _session(self) -> httpx.AsyncClient:
        if self._http is None or self._http.is_closed:
            self._http = httpx.AsyncClient(timeout=self.client.timeout)
        return self._http

    async def start_interaction(self, instance_id: str | None = None, goal: Any = None,
                                **kwargs: Any) -> str:
        """Remember the user's goal card for this rollout (`goal`: dict, text, or None = chit-chat)."""
        instance_id = instance_id or str(uuid.uuid4())
        self._goals[instance_id] = Goal.coerce(goal)
        self._left[instance_id] = False
        return instance_id

    async def opening(self, instance_id: str, seed: int | None = None) -> str:
        """The user's first message, to put in the row's prompt when the dataset has none."""
        turn = await self.client.anext_turn([], self._goal(instance_id), seed, http=self._session())
        return turn.message

    async def generate_response(self, instance_id: str, messages: list[dict[str, Any]],
                                **kwargs: Any) -> tuple[bool, str, float, dict[str, Any]]:
        """(should_terminate_sequence, the user's reply, turn score 0.0, {"user_left": bool})."""
        turn = await self.client.anext_turn(messages, self._goal(instance_id), kwargs.get("seed"),
                                            http=self._session())
        self._left[instance_id] = turn.ended
        return turn.ended, turn.message, 0.0, {"user_left": turn.ended}

    async def calculate_score(self, instance_id: str, **kwargs: Any) -> float:
        """0.0: the environment's verifier scores the outcome; the user side only talks."""
        return 0.0

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        self._goals.pop(instance_id, None)
        self._left.pop(instance_id, None)

    def _goal(self, instance_id: str) -> Goal | None:
        if instance_id not in self._goals:
            raise KeyError(f"interaction {instance_id!r} was not started (call start_interaction first)")
        return self._goals[instance_id]
