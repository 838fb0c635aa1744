"""A prompt as chat messages: one user message, or a conversation (the user's turns and the
model's answers, alternating), in the form chat templates and chat-completion requests read; and
the same as plain text, for a model without a chat template.
What it does not own: applying a template (models/loading.py for Hugging Face tokenizers,
models/llama_files.py for GGUF files) or which answers a conversation holds (harness/conversation.py).
"""

from __future__ import annotations

from typing import Sequence, Union

Message = dict[str, str]  # {"role": "user" | "assistant", "content": text}
PromptInput = Union[str, Sequence[Message]]  # what Runtime.encode takes


def messages(prompt: PromptInput) -> list[Message]:
    """A prompt text as one user message; messages as they are."""
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]


def plain(prompt: PromptInput) -> str:
    """The messages' texts one after another, a blank line between (no template to mark the roles)."""
    return prompt if isinstance(prompt, str) else "\n\n".join(m["content"] for m in prompt)
