"""The token estimate of models without an offline tokenizer, corrected by what servers report
and kept per vault, so a restart does not forget what the vault's models taught it.

When a server reports ``usage.prompt_tokens`` for a request, :meth:`Calibration.observe` puts
the prompt's characters against the reported tokens less the chat format's framing, and moves
that model's :class:`~smart_context.budget.tokens.Estimate` (a bounded running mean; the figure
counts use moves in steps). Exact tokenizers are left alone: their disagreement with the server
is only recorded.

File: ``.memory/smart_context/calibration.json``, written atomically::

    {"version": 1, "models": {"mistral-small": {"chars_per_token": 3.41, "samples": 12}}}

It is derived data: a damaged or foreign file is logged and replaced by the next observation.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeGuard

from smart_context.atomic import write_atomic
from smart_context.budget.tokens import Estimate, counter_for, prompt_tokens
from smart_context.paths import memory_dir

log = logging.getLogger(__name__)

VERSION = 1
MAX_MODELS = 200  # a vault that met many model names keeps the latest ones


def calibration_file(vault: Path) -> Path:
    """``.memory/smart_context/calibration.json``."""
    return memory_dir(vault) / "smart_context" / "calibration.json"


class Calibration:
    """The calibrated estimates of one vault (``estimates``: model key -> estimate)."""

    def __init__(self, vault: Path) -> None:
        self.path = calibration_file(vault)
        self.estimates: dict[str, Estimate] = {}
        self._lock = threading.Lock()  # saves run in worker threads

    def load(self) -> None:
        """Read the saved calibrations; a missing file is none, a damaged one is logged."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("Smart Context: token calibration %s not read (%s)", self.path, exc)
            return
        models = data.get("models") if isinstance(data, dict) else None
        if not isinstance(data, dict) or data.get("version") != VERSION:
            log.warning("Smart Context: %s is not a calibration file; starting afresh", self.path)
            return
        for name, row in (models if isinstance(models, dict) else {}).items():
            ratio = row.get("chars_per_token") if isinstance(row, dict) else None
            samples = row.get("samples") if isinstance(row, dict) else None
            if _number(ratio) and isinstance(samples, int) and not isinstance(samples, bool):
                self.estimates.setdefault(str(name), Estimate()).restore(float(ratio), samples)

    def observe(
        self,
        model: str | None,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Any],
        reported: int,
    ) -> float | None:
        """Learn from a server's ``reported`` prompt tokens for ``messages`` and ``tools`` as
        sent to ``model``; the characters per token now used, or ``None`` when the model has an
        exact tokenizer or the report cannot be used."""
        counter = counter_for(model, self.estimates)
        if not isinstance(counter, Estimate) or reported <= 0:
            return None
        texts = [str(m.get("content") or "") for m in messages]
        characters = sum(map(len, texts)) + sum(len(_tool_json(t)) for t in tools)
        # the roles and the per-message framing are tokens the characters do not explain
        bare = [{"role": m.get("role"), "content": ""} for m in messages]
        framing = prompt_tokens(counter, bare)["total"]
        counter.calibrate(characters, reported - framing)
        return counter.chars_per_token

    def save(self) -> None:
        """Write the calibrations (atomically; a failure is logged, the next save retries)."""
        with self._lock:
            rows = {
                name: {"chars_per_token": round(e.observed, 4), "samples": e.samples}
                for name, e in list(self.estimates.items())[-MAX_MODELS:]
                if e.observed is not None
            }
            # no indent: json's C encoder (an indented file goes through its Python one, which
            # leaves a cycle of closures to collect after each reply's save)
            text = json.dumps({"version": VERSION, "models": rows}, sort_keys=True)
            try:
                write_atomic(self.path, text + "\n")
            except OSError as exc:
                log.warning("Smart Context: token calibration not saved (%s)", exc)


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _tool_json(tool: Any) -> str:
    return json.dumps(tool, ensure_ascii=False)
