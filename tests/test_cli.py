"""The command line, run in-process on a real vault with the embedded offline default."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from smart_context_hosts.cli import build_parser, main
from tests.conftest import read_chat, write_chat
from tests.fakes import make_messages

TEXTS = [
    "How do I cancel a running asyncio task in Python?",
    "Call task.cancel(), then await the task and catch asyncio.CancelledError.",
    "Keep answers short.",
    "Noted.",
    "What is a good sourdough hydration for a beginner?",
    "Start around 70% hydration: the dough is easy to shape.",
    "How do asyncio timeouts work in Python 3.11?",
    "Wrap the await in `async with asyncio.timeout(5):`.",
    "My sourdough starter smells like acetone, is it dead?",
    "It is hungry, not dead: feed it twice a day at room temperature.",
]


@pytest.fixture
def cli_vault(vault: Path) -> Path:
    (vault / ".vault.toml").write_text("[plugins.smart_context]\nsimilarity_threshold = 0.3\n")
    write_chat(
        vault,
        "c1",
        make_messages(TEXTS),
        topics=[
            {"label": "Python Asyncio", "count": 4},
            {"label": "Sourdough Baking", "count": 4},
            {
                "label": "Instructions & Preferences",
                "sticky": True,
                "message_ids": ["m2"],
                "count": 1,
            },
        ],
    )
    return vault


def test_context_shows_what_would_be_sent_and_why(
    cli_vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["context", str(cli_vault), "c1", "--topics", "Python Asyncio"]) == 0
    out = capsys.readouterr().out
    assert "mode filtered" in out and "Python Asyncio" in out
    lines = {line.split()[1]: line for line in out.splitlines() if line[:2] in ("+ ", "- ")}
    assert lines["m0"].startswith("+") and lines["m6"].startswith("+")
    assert lines["m4"].startswith("-") and lines["m5"].startswith("-")
    assert lines["m8"].startswith("+") and lines["m9"].startswith("+")  # the last turn goes
    assert lines["m2"].startswith("+") and "sticky" in lines["m2"]
    assert read_chat(cli_vault, "c1").get("smart_context") is None  # inspecting changes nothing


def test_context_without_topics_sends_everything(
    cli_vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["context", str(cli_vault), "c1"]) == 0
    out = capsys.readouterr().out
    assert "mode full" in out and "10 of 10 messages in context" in out


def test_a_click_that_keeps_nothing_says_so_in_words(
    cli_vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (cli_vault / ".vault.toml").write_text("[plugins.smart_context]\nsimilarity_threshold = 0.9\n")
    chat = read_chat(cli_vault, "c1")  # a topic whose messages are gone: its label scored alone
    chat["topics"].append({"label": "Medieval Tapestry", "count": 0, "message_ids": []})
    write_chat(cli_vault, "c1", **chat)
    assert main(["context", str(cli_vault), "c1", "--topics", "Medieval Tapestry"]) == 0
    out = capsys.readouterr().out
    assert "mode fallback" in out
    assert "no message is close enough to 'Medieval Tapestry': the full history is sent" in out
    assert "of 10 messages in context" not in out  # never "N of N" for a click that did nothing


def test_topics_runs_the_offline_extractor_without_a_model(
    cli_vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["topics", str(cli_vault), "c1", "--save"]) == 0
    out = capsys.readouterr().out
    assert "[sticky] Instructions & Preferences: m2" in out
    stored = read_chat(cli_vault, "c1")["topics"]
    assert any(t.get("sticky") and t["message_ids"] == ["m2"] for t in stored)
    assert len(stored) >= 2


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["context", "{vault}", "../../etc"], "not valid"),
        (["context", "{vault}/nowhere", "c1"], "not a vault"),
    ],
)
def test_bad_arguments_are_clear_errors(
    cli_vault: Path, capsys: pytest.CaptureFixture[str], args: list[str], fragment: str
) -> None:
    assert main([a.format(vault=cli_vault) for a in args]) == 2
    assert fragment in capsys.readouterr().err


def test_an_unknown_chat_is_refused_naming_the_vaults_chats(
    cli_vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in ("context", "topics"):
        assert main([command, str(cli_vault), "no-such-chat"]) == 2
        captured = capsys.readouterr()
        assert "has no chat no-such-chat. Its chats: c1." in captured.err
        assert "of 0 messages" not in captured.out
    assert not (cli_vault / ".memory" / "no-such-chat.json").exists()


def test_a_long_list_of_chats_is_cut_short(
    cli_vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for number in range(24):
        write_chat(cli_vault, f"chat{number:02}", make_messages(["Hello"]))
    assert main(["context", str(cli_vault), "typo"]) == 2
    err = capsys.readouterr().err
    assert "Its chats: c1, chat00, chat01," in err and "chat18 and 5 more." in err
    assert "chat19" not in err


def test_a_damaged_chat_is_named_and_left_as_it_is(
    cli_vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (cli_vault / ".memory" / "broken.json").write_text('{"messages": [', encoding="utf-8")
    assert main(["context", str(cli_vault), "broken"]) == 2
    assert "the file of chat broken is damaged" in capsys.readouterr().err
    assert (cli_vault / ".memory" / "broken.json").read_text(encoding="utf-8") == '{"messages": ['
    assert not list((cli_vault / ".memory").glob("broken.json.corrupt-*"))


def test_a_chat_set_aside_earlier_names_the_file(
    cli_vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aside = cli_vault / ".memory" / "broken.json.corrupt-20260101T000000Z"
    aside.write_text('{"messages": [', encoding="utf-8")
    assert main(["context", str(cli_vault), "broken"]) == 2
    assert f"set aside as .memory/{aside.name}" in capsys.readouterr().err


def test_an_unknown_topic_is_refused_naming_the_chats_topics(
    cli_vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["context", str(cli_vault), "c1", "--topics", "Python Asyncio,Nonexistent"]) == 2
    captured = capsys.readouterr()
    assert "chat c1 has no topic 'Nonexistent'." in captured.err
    assert "Its topics: 'Python Asyncio', 'Sourdough Baking'." in captured.err
    assert "Instructions" not in captured.err  # the sticky topic is no filter
    assert "messages in context" not in captured.out
    write_chat(cli_vault, "fresh", make_messages(TEXTS))
    assert main(["context", str(cli_vault), "fresh", "--topics", "Nonexistent"]) == 2
    said = capsys.readouterr().err
    assert "It has no topics yet: smart-context topics VAULT fresh --save maps it." in said
    # the advice works: once mapped and saved, the error names the chat's topics instead
    assert main(["topics", str(cli_vault), "fresh", "--save"]) == 0
    capsys.readouterr()
    assert main(["context", str(cli_vault), "fresh", "--topics", "Nonexistent"]) == 2
    assert "Its topics: " in capsys.readouterr().err


def test_bad_setting_is_reported_by_key(
    cli_vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (cli_vault / ".vault.toml").write_text(
        '[plugins.smart_context]\nsimilarity_threshold = "high"\n'
    )
    assert main(["context", str(cli_vault), "c1"]) == 2
    assert "similarity_threshold" in capsys.readouterr().err


def test_context_with_a_message_shows_its_rules_references_and_tools(
    cli_vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    (cli_vault / "rules").mkdir()
    (cli_vault / "rules" / "grams.md").write_text(
        "---\ninclude: always\npriority: 3\n---\nWeigh flour in grams.\n", encoding="utf-8"
    )
    (cli_vault / "references").mkdir()
    (cli_vault / "references" / "starter.md").write_text(
        "---\ninclude: agent\n---\nFeed the sourdough starter twice a day.\n", encoding="utf-8"
    )
    message = "My sourdough starter smells like acetone. What should I feed it?"
    assert main(["context", str(cli_vault), "c1", "--message", message]) == 0
    out = capsys.readouterr().out.split("sent with, for")[1]
    assert "003 always    grams" in out and "agent     starter" in out
    # no vault tools, but the memory tools are sent (and counted): listed, not "none"
    assert "tools: none" not in out
    assert "built in  smart_context.retrieve_context" in out
    assert "built in  smart_context.store_memory" in out
    assert main(["context", str(cli_vault), "c1", "--message", message, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["messages"][0]["role"] == "system" and "grams" in shown["messages"][0]["content"]
    assert shown["messages"][-1] == {"role": "user", "content": message}
    assert {i["name"] for i in shown["request_context"]["items"]} == {"grams", "starter"}
    assert shown["smart_context"]["mode"] == "full"
    assert [t["function"]["name"] for t in shown["tools"]] == [  # no vault tools: the memory ones
        "smart_context__retrieve_context",
        "smart_context__store_memory",
    ]
    # the chat's session, marked in `items --chat`
    assert main(["items", str(cli_vault), "--chat", "c1"]) == 0
    listing = capsys.readouterr().out
    assert "* grams" in listing and "* starter" not in listing
    assert main(["items", str(cli_vault), "--chat", "../../etc"]) == 2
    capsys.readouterr()
    # a chat the vault does not have is refused, as context and topics refuse it
    assert main(["items", str(cli_vault), "--chat", "no-such-chat"]) == 2
    assert "has no chat no-such-chat. Its chats: c1" in capsys.readouterr().err


def test_context_json_sends_what_the_sidecar_would_and_no_stored_notices(
    vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    messages = make_messages(["Hello?", "No model is configured: add an [llm] table."])
    messages[1]["notice"] = "no_model"
    write_chat(vault, "n1", messages)
    assert main(["context", str(vault), "n1", "--message", "Again?", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["messages"]
    assert shown == [{"role": "user", "content": "Hello?"}, {"role": "user", "content": "Again?"}]


def test_the_help_is_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "``" not in out
    assert "smart-context: inspect what a chat would send" in out


def test_every_vault_and_chat_argument_has_a_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    commands = next(
        action.choices
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    positionals = [
        (name, action)
        for name, command in commands.items()
        for action in command._actions
        if action.dest in ("vault", "chat_id")
    ]
    assert {name for name, _ in positionals} == set(commands)  # every command names a vault
    assert [f"{name} {action.dest}" for name, action in positionals if not action.help] == []
