"""Chat prompts as the LLM backends take them, and their rendering into a local model's prompt text.

A chat is a list of ``{"role", "content"}`` messages. A local model renders it with its tokenizer's chat
template; a tokenizer without one gets :data:`CHAT_TEMPLATE`, the simple format the tiny planner is trained
with: ``<bos><|system|>\\n…\\n<|user|>\\n…\\n<|assistant|>\\n{completion}<eos>``.
"""

from __future__ import annotations

from typing import Any

Message = dict[str, str]

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\n' + message['content'] }}"
    "{% if message['role'] == 'assistant' %}{{ eos_token }}{% else %}{{ '\n' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)


def render_prompt(tokenizer: Any, messages: list[Message], enable_thinking: bool = False) -> str:
    """The prompt text ending where the assistant's answer starts.

    Uses the tokenizer's chat template when it has one, else :data:`CHAT_TEMPLATE`. ``enable_thinking``
    reaches templates that read it (Qwen3); others ignore it.
    """
    return tokenizer.apply_chat_template(
        messages,
        chat_template=None if getattr(tokenizer, "chat_template", None) else CHAT_TEMPLATE,
        tokenize=False,
        add_generation_prompt=True,
        enable_thinking=enable_thinking,
    )
