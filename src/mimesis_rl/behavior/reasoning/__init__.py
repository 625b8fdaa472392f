"""Private reasoning traces for user turns: one interface, three backends (template, model, llm).

`build_rationalizer(section, seed)` turns the `rationalize:` section of params.yaml into a backend;
`repetition_problem` is the one rule that says whether a trace merely repeats its message.
"""

from mimesis_rl.behavior.reasoning.base import BatchRationalizer, Rationalizer, RationalizeStats
from mimesis_rl.behavior.reasoning.checks import repeats_message, repetition_problem
from mimesis_rl.behavior.reasoning.context import TurnContext, iter_contexts
from mimesis_rl.behavior.reasoning.template import TemplateRationalizer

__all__ = [
    "BatchRationalizer",
    "RationalizeStats",
    "Rationalizer",
    "TemplateRationalizer",
    "TurnContext",
    "iter_contexts",
    "repeats_message",
    "repetition_problem",
]
