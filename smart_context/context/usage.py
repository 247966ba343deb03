"""What a request cost against what the chat's whole history would have cost (the usage you can see:
usage analytics, compression ratio), kept in the record as ``usage``:

- ``sent_tokens``: the request as sent (system, memory, knowledge, tools, history, summaries,
  current message); with a budget, the budget's ``used``;
- ``full_tokens``: the same request with the whole history instead (no topic filter, no budget,
  no summaries), counted the same way;
- ``ratio``: ``full_tokens / sent_tokens`` (1.0 when everything was sent; 25.0: a 25th of it);
- ``counted_with`` and ``exact``: the counter, as in ``budget``;
- ``reported_prompt_tokens``: added after the reply when the host reports the server's
  ``usage.prompt_tokens`` in ``ctx.metadata["usage"]`` (the reference sidecar does), so our count
  and the server's stand side by side. Where our count is an estimate, the report also
  calibrates it (:mod:`smart_context.budget.calibration`);
- ``reported_cached_tokens`` and ``reported_cache_write_tokens``: the prompt tokens the server
  says it read from its prompt cache and wrote to it, in any provider's shape
  (:mod:`smart_context.server_usage`), when it said; :mod:`smart_context.usage_bill` bills
  the request by them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from smart_context.background import to_thread
from smart_context.budget.budgeter import Budgeter
from smart_context.budget.cache_seen import CacheSeen
from smart_context.budget.calibration import Calibration
from smart_context.budget.facts import Facts
from smart_context.budget.parts import Fitted, chat_model
from smart_context.budget.tokens import Counter, Estimate, prompt_tokens
from smart_context.context.topic_filter import Decision
from smart_context.messages import History
from smart_context.paths import ChatId
from smart_context.server_usage import cache_report, token_count
from smart_context.usage_stats import ratio

log = logging.getLogger(__name__)


def usage_record(sent: int, full: int, counter: Counter) -> dict[str, Any]:
    """The record's ``usage`` (see the module docstring)."""
    return {
        "sent_tokens": sent,
        "full_tokens": full,
        "ratio": ratio(full, sent),
        "counted_with": counter.name,
        "exact": counter.exact,
    }


class UsageMeter:
    """Counts a request's history against the whole history, reusing the budget's per-chat
    token counts (kept for the whole history, filtered or not)."""

    def __init__(self, budget: Budgeter) -> None:
        self.budget = budget

    def measure(
        self,
        chat_id: ChatId,
        decision: Decision,
        counter: Counter,
        fixed_tokens: int = 0,
        fitted: Fitted | None = None,
    ) -> dict[str, Any]:
        """``usage`` of one request. ``fitted``: the budget's result, when there is a budget;
        else ``fixed_tokens`` is what goes besides the history (system, tools, the message)."""
        whole = self._whole_facts(chat_id, decision, counter)
        whole_history = int(whole.tokens.sum())
        if fitted is not None:
            budget = fitted.record["budget"]
            sections = budget["by_section"]
            sent = int(budget["used"])
            fixed = sent - int(sections["history"]) - int(sections["summaries"])
        else:
            fixed = fixed_tokens
            sent = fixed + _history_tokens(whole, decision, whole_history)
        return usage_record(sent, fixed + whole_history, counter)

    def _whole_facts(self, chat_id: ChatId, decision: Decision, counter: Counter) -> Facts:
        """The budget's own counts of the whole history the decision chose from."""
        whole = decision.full or decision.source or History(decision.history)
        return self.budget.facts(chat_id, counter).update(whole)


def _history_tokens(whole: Facts, decision: Decision, whole_history: int) -> int:
    """What the decision's history costs, from the counts of the whole one it is part of."""
    if decision.full is None or decision.positions is None:
        return whole_history
    return int(whole.tokens[decision.positions].sum())  # the whole one is ``decision.full``


def fixed_tokens(
    counter: Counter, system: Sequence[Mapping[str, Any]], message: str, tools: Sequence[Any]
) -> int:
    """What a request costs besides its history: the system messages, the tools, the message."""
    return prompt_tokens(counter, [*system, {"role": "user", "content": message}], tools)["total"]


def reported_prompt_tokens(metadata: Mapping[str, Any]) -> int | None:
    """The server's ``usage.prompt_tokens`` as the host reports it, when it is a count."""
    usage = metadata.get("usage")
    value = usage.get("prompt_tokens") if isinstance(usage, Mapping) else None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


async def take_report(
    budget: Budgeter,
    calibration: Calibration,
    metadata: dict[str, Any],
    sent: Sequence[Mapping[str, Any]],
    model: str | None,
    seen: CacheSeen | None = None,
) -> None:
    """After the reply: put the server's prompt tokens and what it says its cache did next to
    ours in the record, tell ``seen`` what the cache did against what the layout expected, and,
    where our count is an estimate, calibrate it by them (saved off the loop). ``sent``: the
    messages of the request as the plugin left them (history and current message)."""
    reported = reported_prompt_tokens(metadata)
    record = metadata.get("smart_context")
    usage = record.get("usage") if isinstance(record, dict) else None
    if not isinstance(usage, dict):
        return
    if reported is not None:
        usage["reported_prompt_tokens"] = reported
    report = cache_report(metadata.get("usage"))
    for key, value in report.as_dict().items():
        usage[f"reported_{key}"] = value  # reported_cached_tokens, reported_cache_write_tokens
    if seen is not None:
        layout = record.get("cache") if isinstance(record, dict) else None
        expected = token_count(layout.get("cached_estimate")) if isinstance(layout, dict) else 0
        seen.observe(chat_model(budget.settings, model) or "", expected or 0, report)
    if reported is None or not isinstance(budget.counter(model), Estimate):
        return  # nothing to calibrate by; or exact: the disagreement shows in the record
    tools = metadata.get("tools")
    figure = calibration.observe(
        chat_model(budget.settings, model),
        sent,
        tools if isinstance(tools, list) else [],
        reported,
    )
    if figure is not None:
        usage["chars_per_token"] = round(figure, 3)
        await to_thread(calibration.save)
