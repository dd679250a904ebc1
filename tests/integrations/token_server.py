"""The scripted OpenAI-compatible model of the evaluation tests, answering with real token logprobs.

ART trains on the logprobs a vLLM server returns with ``return_tokens_as_token_ids``: each sampled
token as ``"token_id:<id>"`` with its logprob and bytes. :class:`TokenScriptedModel` is
``tests/evaluate/scripted_model.py``'s server (same tasks, same scripts, same failure modes) whose
successful answers carry such logprobs, with ids from a real tokenizer: the assistant text
encoded, then the end-of-turn token, as a chat model samples it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from scripted_model import ScriptedModel


def logprob_of(position: int) -> float:
    """The scripted logprob of the ``position``-th sampled token (varied, so misplacements show)."""
    return -0.05 * (position % 7 + 1)


class TokenScriptedModel(ScriptedModel):
    def __init__(self, tokenizer: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tokenizer = tokenizer
        self.end_token_id = tokenizer.convert_tokens_to_ids("<|im_end|>")

    def start(self) -> TokenScriptedModel:
        super().start()
        assert self.httpd is not None
        report = self.httpd.handle_error

        def handle_error(request: Any, client_address: Any) -> None:
            # The OpenAI client drops its keep-alive connections when a test's event loop ends.
            if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
                report(request, client_address)

        self.httpd.handle_error = handle_error  # type: ignore[method-assign]
        return self

    def handle(self, handler: Any, body: dict[str, Any]) -> None:
        super().handle(_RewritingHandler(handler, self._with_token_logprobs if body.get("logprobs") else None), body)

    def _with_token_logprobs(self, data: dict[str, Any]) -> dict[str, Any]:
        for choice in data.get("choices", []):
            message = choice["message"]
            text = message.get("content") or json.dumps(message.get("tool_calls"))
            ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.end_token_id]
            choice["logprobs"] = {"content": [
                {"token": f"token_id:{token}", "logprob": logprob_of(i),
                 "bytes": list(self.tokenizer.decode([token]).encode()), "top_logprobs": []}
                for i, token in enumerate(ids)]}
            data["usage"]["completion_tokens"] = len(ids)
        return data


class _RewritingHandler:
    """The request handler as ``ScriptedModel.handle`` sees it, with 200 bodies passed through ``rewrite``."""

    def __init__(self, real: Any, rewrite: Any) -> None:
        object.__setattr__(self, "_real", real)
        object.__setattr__(self, "_rewrite", rewrite)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._real, name, value)

    def _json(self, status: int, data: Any) -> None:
        if status == 200 and self._rewrite is not None:
            data = self._rewrite(data)
        self._real._json(status, data)
