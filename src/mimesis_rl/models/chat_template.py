"""The ChatML chat template shared by every base model, with TRL's `{% generation %}` markers.

Each assistant turn's content *and* its `<|im_end|>` sit inside `{% generation %}...{% endgeneration %}`,
so `apply_chat_template(..., return_assistant_tokens_mask=True)` marks exactly the tokens the model
must produce, including the one that stops it (TRL's `assistant_only_loss` and its stop-token check
rely on this). Every message renders independently of what follows, so the template is prefix
preserving, which multi-turn rollouts need to extend a conversation token by token.
"""

from __future__ import annotations

BOS = "<|im_start|>"
END_OF_TURN = "<|im_end|>"
END_OF_TEXT = "<|endoftext|>"
# Same order (ids 0, 1, 2) as SmolLM2's vocabulary, so tiny and demo models agree on special ids.
SPECIAL_TOKENS = (END_OF_TEXT, BOS, END_OF_TURN)

SMOLLM2_DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def _jinja_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def chatml_template(default_system: str | None = None) -> str:
    """ChatML with generation markers; `default_system` is rendered when the chat has no system turn."""
    default = ""
    if default_system:
        default = ("{%- if loop.first and message['role'] != 'system' %}"
                   "{{ " + _jinja_string(f"{BOS}system\n{default_system}{END_OF_TURN}\n") + " }}"
                   "{%- endif %}")
    return (
        "{%- for message in messages %}"
        + default
        + "{%- if message['role'] == 'assistant' %}"
        "{{ '" + BOS + "assistant\n' }}"
        "{%- generation %}{{ message['content'] + '" + END_OF_TURN + "' }}{%- endgeneration %}"
        "{{ '\n' }}"
        "{%- else %}"
        "{{ '" + BOS + "' + message['role'] + '\n' + message['content'] + '" + END_OF_TURN + "\n' }}"
        "{%- endif %}"
        "{%- endfor %}"
        "{%- if add_generation_prompt %}{{ '" + BOS + "assistant\n' }}{%- endif %}"
    )
