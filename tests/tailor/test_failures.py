"""What goes wrong inside Tailor is reported and Tailor keeps running, the message untouched:
a bad setting, our package or one of its dependencies missing from Tailor's Python, a model
category Tailor has not configured."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from smart_context.panel import PANEL_ID
from smart_context_hosts.install.tailor_files import pip_target
from tests.tailor.conftest import STANDIN, StartTailor, generated_main

REPO = Path(__file__).resolve().parents[2]
HISTORY = ["How do I cancel an asyncio task in Python?", "What should I see in Paris?"]


async def test_a_bad_setting_is_reported_and_the_pipeline_left_alone(
    start_tailor: StartTailor,
) -> None:
    tailor = await start_tailor({"similarity_threshold": "high"})
    ours = tailor.ours
    assert ours.error is None and "similarity_threshold" in (ours.config_error or "")
    [toast] = tailor.brain.events_named("NOTIFY")
    assert toast["severity"] == "error" and "similarity_threshold" in toast["message"]
    logged = tailor.brain.plugins["smart_context"].logger.lines
    assert any(level == "ERROR" and "similarity_threshold" in text for level, text in logged)
    panel = [d for d in tailor.brain.events_named("UI_COMMAND") if d["action"] == "set_panel"]
    assert "similarity_threshold" in panel[0]["html"]
    for text in HISTORY:
        await tailor.send("c1", text)
    ctx = await tailor.send("c1", "And now?")
    assert "smart_context" not in ctx.metadata
    assert len([m for m in tailor.last_chat_prompt() if m["role"] == "user"]) == 3
    assert len(tailor.chat_file("c1")["messages"]) == 6  # Tailor's memory plugin saved it all
    topics = await tailor.brain.execute_command("smart_context.get_topics", chat_id="c1")
    assert topics["status"] == "success"  # the commands still answer


async def test_no_embedding_model_keeps_the_history_and_says_why(start_tailor: StartTailor) -> None:
    tailor = await start_tailor(categories={"fast": "standin/fast"})
    for text in HISTORY:
        await tailor.send("c1", text)
    clicked = await tailor.brain.execute_command(
        "smart_context.set_filter", topics=["Paris Trip"], chat_id="c1"
    )
    # the click's answer (what Tailor's panel shows) must not read as a filter
    assert clicked["status"] == "success" and clicked["mode"] == "full"
    assert clicked["note"].startswith("Embeddings failed") and "whole history" in clicked["note"]
    assert clicked["included_ids"] == [m["id"] for m in tailor.chat_file("c1")["messages"]]
    ctx = await tailor.send("c1", "Anything else?")
    record = ctx.metadata["smart_context"]
    assert record["mode"] == "full" and record["error"] == clicked["note"]
    assert len([m for m in tailor.last_chat_prompt() if m["role"] == "user"]) == 3
    assert ctx.response.startswith("Noted:")


async def test_no_fast_model_saves_every_reply_and_maps_topics_offline(
    start_tailor: StartTailor,
) -> None:
    tailor = await start_tailor(categories={"chat": "standin/chat", "embedding": "standin/bow"})
    for text in HISTORY:  # the chat itself uses another category than our "fast"
        ctx = await tailor.brain.pipeline.run(
            text, [], metadata={"chat_id": "c1", "category": "chat"}
        )
        await tailor.settle()
        assert ctx.response.startswith("Noted:")
    stored = tailor.chat_file("c1")
    assert len(stored["messages"]) == 4
    assert "Paris" in [t["label"] for t in stored["topics"]]  # the offline extractor's


def run_tailor_in(tmp_path: Path, hidden_module: str) -> dict[str, Any]:
    """Start the stand-in Tailor in a fresh Python where ``hidden_module`` cannot be imported,
    send one message, and report what happened (as JSON on stdout)."""
    script = textwrap.dedent(
        f"""
        import asyncio, json, sys
        from pathlib import Path
        sys.modules[{hidden_module!r}] = None  # as if not installed in Tailor's Python
        sys.path.insert(0, {str(STANDIN)!r})
        from tests.tailor.conftest import make_vault, responder
        from sidecar.services.llm_service import LLMService
        from sidecar.vault_brain import VaultBrain

        async def main():
            vault = make_vault(Path({str(tmp_path)!r}), {{}}, main={generated_main()!r})
            brain = VaultBrain(vault, LLMService(responder))
            await brain.initialize()
            await brain.client_ready()
            ctx = await brain.chat_send("Hello there", "c1")
            ours = brain.plugins.get("smart_context")
            answer = None
            if "smart_context.set_filter" in brain.commands:
                answer = await brain.execute_command("smart_context.set_filter", topics=[])
            stored = json.loads((vault / ".memory" / "c1.json").read_text())
            print(json.dumps({{
                "loaded": sorted(brain.plugins),
                "load_errors": {{k: repr(v) for k, v in brain.load_errors.items()}},
                "error": ours.smart_context.error if hasattr(ours, "smart_context") else None,
                "logged": getattr(getattr(ours, "logger", None), "lines", []),
                "set_filter": answer,
                "reply": ctx.response,
                "saved": len(stored["messages"]),
                "frontend": brain.frontend,
            }}))
            for name in list(brain.plugins):
                await brain.unload_plugin(name)

        asyncio.run(main())
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_a_missing_dependency_is_reported_with_the_python_to_install_into(tmp_path: Path) -> None:
    report = run_tailor_in(tmp_path, "numpy")
    assert report["loaded"] == ["memory", "smart_context"]
    error = report["error"]
    assert (
        "numpy" in error
        and sys.executable in error
        and f"pip install {shlex.quote(pip_target())}" in error
    )
    assert report["set_filter"] == {"status": "error", "error": error}
    assert report["reply"] == "Noted: Hello there" and report["saved"] == 2
    shown = [data for event, data in report["frontend"] if event in ("NOTIFY", "UI_COMMAND")]
    assert any(d.get("message") == error for d in shown)
    assert any(d.get("action") == "set_panel" and d["id"] == PANEL_ID for d in shown)


def test_our_package_missing_leaves_tailor_running(tmp_path: Path) -> None:
    report = run_tailor_in(tmp_path, "smart_context_hosts")
    # the generated main.py loads a stand-in that registers nothing and says what to install
    assert report["loaded"] == ["memory", "smart_context"] and report["set_filter"] is None
    missing = "Smart Context is not installed in the Python that runs Tailor's sidecar"
    [(level, logged)] = [(lv, text) for lv, text in report["logged"] if missing in text]
    assert level == "ERROR" and f"pip install '{pip_target()}'" in logged
    shown = [d.get("message") for e, d in report["frontend"] if e == "NOTIFY"]
    assert shown == [logged]
    assert report["reply"] == "Noted: Hello there" and report["saved"] == 2
