"""The most a gateway request can spend, and the completion cap that holds it to what was reserved.

An OpenAI-compatible server answers one request with many completions: ``n`` (and ``best_of``, which it
generates and then filters) per prompt, and one set per prompt when a completion's ``prompt`` is a list.
Each completion may use the whole ``max_tokens``, so the gateway reserves ``completions * max_tokens`` and
sends each completion its share of the room it got.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from metasearch.llm.usage import prompt_bound

CAP_KEYS = ("max_tokens", "max_completion_tokens")
COPY_KEYS = ("n", "best_of")


@dataclass(frozen=True)
class WorstCase:
    """An upper bound of a request's prompt tokens, how many completions it asks for, and the completion
    cap it asked for (None: none)."""

    prompt_tokens: int
    completions: int
    max_completion: int | None

    def reservation(self) -> tuple[int, int | None]:
        """``TokenMeter.reserve``'s prompt and completion arguments. One token per completion is reserved
        with the prompt, so the meter refuses a call without room for each; the rest is the completion
        cap the meter clips to the room left."""
        extra = self.completions - 1
        total = None if self.max_completion is None else self.max_completion * self.completions
        return self.prompt_tokens + extra, None if total is None else total - extra

    def per_completion(self, granted: int) -> int:
        """Each completion's ``max_tokens`` given the completion tokens the meter ``granted``: together at
        most ``granted`` plus the one token each reserved with the prompt, and at least one each."""
        return (granted + self.completions - 1) // self.completions


def worst_case(route: str, request: dict[str, Any]) -> WorstCase:
    """Measure a chat (``/chat/completions``) or completion (``/completions``) request. Raises ValueError,
    naming the field, for a count or cap that is not a positive integer (a server would coerce ``"50"``)."""
    copies = max(_positive_int(request, key) or 1 for key in COPY_KEYS)
    caps = [cap for cap in (_positive_int(request, key) for key in CAP_KEYS) if cap is not None]
    if route.endswith("chat/completions"):
        return WorstCase(prompt_bound(request), copies, max(caps, default=None))
    # A completion request is measured by its prompt only: a server ignores the chat fields there.
    prompt = request.get("prompt")
    plain = {key: value for key, value in request.items() if key != "messages"}
    return WorstCase(prompt_bound(plain), copies * _prompt_count(prompt), max(caps, default=None))


def cap_completions(request: dict[str, Any], tokens: int) -> None:
    """Set each completion cap the request names to ``tokens`` (a server may read either: vLLM falls back
    from one to the other), or ``max_tokens`` when it names none."""
    for key in [key for key in CAP_KEYS if key in request] or ["max_tokens"]:
        request[key] = tokens


def _positive_int(request: dict[str, Any], key: str) -> int | None:
    value = request.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{key} must be a positive integer, not {value!r}")
    return value


def _prompt_count(prompt: Any) -> int:
    """Prompts in a completion request's ``prompt``: a list of token ids is one, any other list one each."""
    if not isinstance(prompt, list) or not prompt:
        return 1
    if all(isinstance(item, int) and not isinstance(item, bool) for item in prompt):
        return 1
    return len(prompt)
