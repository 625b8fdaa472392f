"""Model-level inference shared by every party: batched generation with per-token log-probs,
per-dialogue KV reuse, grouped-query attention under padding, seeded per-row sampling, chat-template
token arithmetic, one base model shared by several adapters (`ModelPool`).

The simulator (`mimesis_rl.simulator.UserSimulator`) and the rollout engine both stand on this
package; it imports neither.
"""

from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.inference.chat import ChatFormat
from mimesis_rl.models.inference.generation import Generation
from mimesis_rl.models.inference.runner import ModelRunner, derive_seed
from mimesis_rl.models.inference.scheduler import generate_batch
from mimesis_rl.models.inference.track import ChatTrack

__all__ = ["ChatFormat", "ChatTrack", "Generation", "ModelRunner", "SamplingParams", "derive_seed",
           "generate_batch"]
