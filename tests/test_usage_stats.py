"""Usage you can see: ``smart-context stats`` and ``smart_context.usage_stats`` read the records
stored with the replies; ``smart-context memories`` exports the stored memories. Real files in
``tmp_path``; hostile and damaged data is skipped or reported, never a crash."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from smart_context.memory.db import MemoryDB, database_path
from smart_context.usage_stats import chat_usage, usage_result
from smart_context_hosts.cli import main
from tests.conftest import write_chat


def reply(
    i: int,
    sent: Any,
    full: Any,
    reported: Any = None,
    cache: Any = None,
    cached: Any = None,
    **budget: Any,
) -> dict[str, Any]:
    usage: dict[str, Any] = {"sent_tokens": sent, "full_tokens": full, "ratio": 1.0}
    usage |= {"counted_with": "o200k_base", "exact": True}
    if reported is not None:
        usage["reported_prompt_tokens"] = reported
    if cached is not None:
        usage["reported_cached_tokens"] = cached
    record: dict[str, Any] = {"mode": "full", "usage": usage}
    if budget:
        record["budget"] = budget
    if cache is not None:
        record["cache"] = cache
    return {"id": f"a{i}", "role": "assistant", "content": "ok", "smart_context": record}


def question(i: int) -> dict[str, Any]:
    return {"id": f"q{i}", "role": "user", "content": f"question {i}"}


def conversation(*replies: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, r in enumerate(replies):
        out += [question(i), r]
    return out


SECTIONS = {"system": 10, "history": 900, "summaries": 50, "message": 40}
# OpenAI at half price for a cached token: the plain client would have had 8,000 of 9,000 cached
OPENAI_CACHE = {
    "kind": "openai",
    "read": 0.5,
    "write": 1.0,
    "cached_estimate": 600,
    "plain_cached_estimate": 8000,
    "plain_tokens": 9000,
}


@pytest.fixture
def stats_vault(vault: Path) -> Path:
    write_chat(
        vault,
        "long",
        conversation(
            reply(0, 1000, 1000, 1010),
            reply(1, 1000, 5000),
            reply(
                2, 1000, 9000, 980, OPENAI_CACHE, 512, limit=1000, used=1000, by_section=SECTIONS
            ),
        ),
        title="A long one",
    )
    old = {"id": "x", "role": "assistant", "content": "before usage was kept"}
    write_chat(vault, "old", [question(0), old])
    write_chat(vault, "empty", [])
    (vault / ".memory" / "broken.json").write_text('{"messages": [')
    (vault / ".memory" / "long.embeddings.json").write_text("{}")  # not a chat: not read
    return vault


def test_stats_prints_each_chat_and_the_total_and_names_a_damaged_file(
    stats_vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["stats", str(stats_vault)]) == 1  # a file was skipped
    out, err = capsys.readouterr()
    lines = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    # the server counted 980 of the last request where we counted 1,000: the plain client's
    # 9,000 are its 8,820, 7,840 of them cached at half price: 4,900; ours 468 new and 512
    # cached as the server said: 724. The first two had no cache: billed as counted.
    bill = ["~512", "2,734", "10,910", "75%"]
    assert lines["long"][-9:] == ["3", "3,000", "15,000", "5.00x", "1,990", *bill]
    assert lines["old"][-9:] == ["0/1", "0", "0", "-", "-", "-", "-", "-", "-"]
    assert lines["empty"][-9:] == ["0", "0", "0", "-", "-", "-", "-", "-", "-"]
    assert lines["total"][-9:] == ["3/4", "3,000", "15,000", "5.00x", "1,990", *bill]
    assert out.splitlines()[0].split()[-5:] == ["cached", "billed", "plain", "bill", "saved"]
    assert "broken.json" in err and "not valid JSON" in err and "embeddings" not in out + err


def test_stats_skips_a_chat_file_nested_too_deeply_to_read(
    stats_vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = '{"messages": [' + "[" * 100_000 + "]" * 100_000 + "]}"
    (stats_vault / ".memory" / "deep.json").write_text(deep)
    assert main(["stats", str(stats_vault)]) == 1
    out, err = capsys.readouterr()
    assert "deep.json" in err and "nested too deeply" in err and "total" in out


def test_stats_json_is_machine_readable(
    stats_vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["stats", str(stats_vault), "--json"])
    result = json.loads(capsys.readouterr().out)
    by_chat = {c["chat_id"]: c for c in result["chats"]}
    assert set(by_chat) == {"long", "old", "empty"}
    assert by_chat["long"] | {"title": ""} == {
        "chat_id": "long",
        "title": "",
        "replies": 3,
        "measured": 3,
        "sent_tokens": 3000,
        "full_tokens": 15000,
        "ratio": 5.0,
        "reported_replies": 2,
        "reported_prompt_tokens": 1990,
        "cached_tokens": 512,
        "cached_reported_replies": 1,
        "billed": 2734.0,
        "plain_billed": 10910.0,
        "saved": 8176.0,
    }
    assert by_chat["old"]["ratio"] is None and result["total"]["replies"] == 4
    assert [d["file"].endswith("broken.json") for d in result["damaged"]] == [True]


def test_a_reply_that_never_went_to_a_model_sent_nothing(
    vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reference sidecar without a chat model stores a notice with the record of what would
    have been sent (View context shows it); and a plugin may stop a message (``aborted``).
    Neither reached a model: stats counts neither as a reply nor its tokens."""
    no_model = reply(1, 1777, 1777) | {"notice": "no_model", "content": "No chat model..."}
    aborted = reply(2, 900, 900) | {"notice": "aborted", "content": "A plugin stopped this"}
    write_chat(vault, "c", conversation(reply(0, 100, 400), no_model, aborted))
    assert main(["stats", str(vault)]) == 0
    lines = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:]}
    assert lines["c"][-9:] == ["1", "100", "400", "4.00x", "-", "~0", "100", "400", "75%"]
    usage = usage_result(chat_usage("c", json.loads((vault / ".memory" / "c.json").read_text())))
    assert (usage["replies"], usage["sent_tokens"]) == (1, 100)  # the panel's figures too
    assert [r["id"] for r in usage["series"]] == ["a0"]


@pytest.mark.parametrize(
    "hostile",
    ["12", None, True, -4, float("nan"), [1], {"n": 1}, "</script><img src=x onerror=alert(1)>"],
)
def test_a_figure_that_is_not_a_count_leaves_its_reply_out(hostile: Any) -> None:
    data = {
        "messages": conversation(
            reply(0, 100, 400),
            reply(1, hostile, 400),
            reply(
                2,
                100,
                800,
                hostile,
                hostile,
                hostile,
                limit=hostile,
                used=90,
                by_section={"history": hostile},
            ),
        ),
        "title": hostile,
    }
    usage = chat_usage("c", data)
    assert (usage.totals.replies, usage.totals.measured) == (3, 2)
    assert usage.totals.sent_tokens == 200 and usage.totals.reported_replies == 0
    assert usage.last == {
        "usage": {
            "id": "a2",
            "created_at": None,
            "sent_tokens": 100,
            "full_tokens": 800,
            "ratio": 8.0,
            "reported_prompt_tokens": None,
            "cache_kind": "none",
            "cached_tokens": 0,
            "cached_reported": False,
            "billed": 100.0,
            "plain_billed": 800.0,
            "saved": 700.0,
            "counted_with": "o200k_base",
            "exact": True,
        },
        "budget": None,
    }
    json.dumps(usage_result(usage), allow_nan=False)  # what the panel gets is plain JSON


def test_the_series_keeps_the_last_replies() -> None:
    data = {"messages": conversation(*(reply(i, 10, 10 * (i + 1)) for i in range(30)))}
    result = usage_result(chat_usage("c", data), max_series=5)
    assert [r["id"] for r in result["series"]] == ["a25", "a26", "a27", "a28", "a29"]
    assert result["series_omitted"] == 25 and result["series"][-1]["ratio"] == 30.0


async def test_the_command_gives_one_chat_with_its_last_budget(
    start: Any, stats_vault: Path
) -> None:
    running = await start()
    result = await running.command("usage_stats", chat_id="long")
    assert result["status"] == "success" and result["measured"] == 3
    assert result["last"]["budget"] == {
        "limit": 1000,
        "used": 1000,
        "by_section": SECTIONS,
        "counted_with": None,
        "exact": None,
    }
    assert [r["sent_tokens"] for r in result["series"]] == [1000, 1000, 1000]
    none_yet = await running.command("usage_stats", chat_id="empty")
    assert none_yet["replies"] == 0 and none_yet["last"] is None and none_yet["series"] == []
    assert (await running.command("usage_stats", chat_id="../x"))["status"] == "error"
    assert (await running.command("usage_stats", chat_id="new-chat"))["replies"] == 0


async def test_the_command_reads_what_a_real_request_recorded(start: Any, vault: Path) -> None:
    from tests.conftest import Ctx, call, read_chat

    write_chat(vault, "c", conversation(reply(0, 10, 10)))
    running = await start(settings={"token_model": "gpt-4o"})
    ctx = Ctx("c", read_chat(vault, "c")["messages"], "and now?")
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    answer = {"id": "a9", "role": "assistant", "content": "sure"}
    messages = [*read_chat(vault, "c")["messages"], question(9)]
    write_chat(vault, "c", [*messages, answer | {"smart_context": ctx.metadata["smart_context"]}])
    result = await running.command("usage_stats", chat_id="c")
    assert result["measured"] == 2
    assert (
        result["series"][-1]["sent_tokens"] == ctx.metadata["smart_context"]["usage"]["sent_tokens"]
    )


def test_memories_are_exported_as_json_and_as_a_table(
    vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with MemoryDB(vault) as db:
        db.add_memory("The user's name is Ada.\nShe prefers metric units.", None, 0.9)
        db.add_memory("Trip budget: 2,000 euros", "trip", 0.5)
    assert main(["memories", str(vault), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["memories"]
    assert [(r["content"][:20], r["chat_id"], r["importance"]) for r in rows] == [
        ("The user's name is A", None, 0.9),
        ("Trip budget: 2,000 e", "trip", 0.5),
    ]
    assert main(["memories", str(vault)]) == 0
    out = capsys.readouterr().out
    assert "(every chat)" in out and "Ada. She prefers" in out and "2 memories" in out


def test_memories_without_a_database_say_so_and_create_nothing(
    vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["memories", str(vault), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {"memories": []} and "no memory database yet" in err
    assert not database_path(vault).exists()


def test_a_damaged_database_is_reported_and_left_as_it_is(
    vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = database_path(vault)
    path.write_bytes(b"this is not a database" * 100)
    assert main(["memories", str(vault), "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "damaged" in err and ".recover" in err
    assert path.read_bytes() == b"this is not a database" * 100  # not set aside, not replaced
    assert [p.name for p in path.parent.iterdir() if "corrupt" in p.name] == []


def test_a_database_without_the_memories_table_has_none(
    vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sqlite3.connect(database_path(vault)).close()  # an empty file
    assert main(["memories", str(vault), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"memories": []}


def test_a_folder_that_is_not_a_vault_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in ("stats", "memories"):
        assert main([command, str(tmp_path / "nowhere")]) == 2
        assert "is not a vault" in capsys.readouterr().err


def test_the_docs_say_what_memories_json_prints(
    vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["memories", str(vault), "--json"]) == 0
    printed = json.dumps(json.loads(capsys.readouterr().out))  # on one line, as quoted
    docs = Path(__file__).resolve().parents[1] / "docs" / "command-line.md"
    assert f"exports `{printed}`" in " ".join(docs.read_text(encoding="utf-8").split())
