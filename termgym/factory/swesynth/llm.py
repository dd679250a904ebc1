"""A minimal client for OpenAI-compatible chat endpoints (no SDK: ``urllib`` only).

Used by the optional LLM breaker (:mod:`~termgym.factory.swesynth.inject`) and report writer
(:mod:`~termgym.factory.swesynth.report`). The procedural pipeline never needs it.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass


class LLMError(RuntimeError):
    """The endpoint could not be reached or answered something unusable."""


@dataclass
class ChatClient:
    """POSTs ``/chat/completions`` to ``base_url`` (e.g. ``http://127.0.0.1:8000/v1``).

    ``api_key`` defaults to ``$OPENAI_API_KEY`` (sent as a bearer token when set).
    """

    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 120.0
    temperature: float = 0.0
    max_tokens: int = 2048

    def __post_init__(self) -> None:
        if not re.match(r"^https?://", self.base_url or ""):
            raise ValueError(f"base_url must start with http:// or https://, got {self.base_url!r}")
        if not self.model:
            raise ValueError("model must be a non-empty model name")
        self.base_url = self.base_url.rstrip("/")
        if self.api_key is None:
            self.api_key = os.environ.get("OPENAI_API_KEY")

    def complete(self, messages: list[dict[str, str]], **overrides) -> str:
        """Send the chat and return the assistant's text (``<think>`` blocks removed)."""
        body = {"model": self.model, "messages": messages, "temperature": self.temperature,
                "max_tokens": self.max_tokens, **overrides}
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(f"{self.base_url}/chat/completions", data=json.dumps(body).encode(),
                                         headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:500]
            raise LLMError(f"{self.base_url}/chat/completions answered HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise LLMError(f"cannot reach {self.base_url}/chat/completions: {exc}") from None
        except json.JSONDecodeError as exc:
            raise LLMError(f"{self.base_url}/chat/completions did not answer JSON: {exc}") from None
        try:
            content = payload["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise LLMError(f"unexpected answer shape from {self.base_url}: {str(payload)[:300]}") from None
        return re.sub(r"<think>.*?</think>", "", content, flags=re.S).strip()


def extract_code_block(text: str) -> str | None:
    """The first fenced code block of a model answer (any language tag), or ``None``."""
    m = re.search(r"```[\w+-]*\n(.*?)```", text, re.S)
    return m.group(1) if m else None
