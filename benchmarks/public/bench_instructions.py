"""How often the standing-instruction check fires on public chats that hold (almost) none.

Neither public set labels standing instructions, so this measures the other side: messages
flagged that should not be. Schema-Guided Dialogue's user turns (task talk: "I would prefer a
moderate price range", "let's keep looking") and REALTALK's messages (two people chatting) are
read; each is checked by the rule for a whole message and by the product's rule (which also
finds a wish said beside a question), and the extra flags are printed to be read.

Tuned on: SGD train, the first 15 dialogue files. Reported: SGD dev (never tuned on) and
REALTALK. Our own labelled set (both sides): ``benchmarks/bench_topic_filter.py``.

    python -m benchmarks.public.bench_instructions --sgd DIR --realtalk DIR
"""

from __future__ import annotations

import argparse

from benchmarks.public.bench_history import load
from benchmarks.public.snapshot import Snapshot, reported, snapshot
from smart_context.topics.offline.talk import is_instruction, is_whole_instruction

TUNE_FILES = 15


def sgd_user_turns(data: Snapshot, split: str, first: int | None = None) -> list[str]:
    files = [f for f in data.files(f"{split}/") if "/dialogues_" in f][:first]
    return [
        turn["utterance"]
        for path in files
        for dialogue in data.json(path)
        for turn in dialogue["turns"]
        if turn["speaker"] == "USER"
    ]


def report(name: str, texts: list[str], show: int) -> None:
    whole = {t for t in texts if is_whole_instruction(t)}
    flagged = [t for t in texts if is_instruction(t)]
    extra = [t for t in flagged if t not in whole]
    print(
        f"{name}: {len(texts):,} messages; flagged by the whole-message rule {len(whole)} "
        f"({len(whole) / len(texts):.2%}), by the product {len(flagged)} "
        f"({len(flagged) / len(texts):.2%}); the extra ones:"
    )
    for text in extra[:show]:
        print(f"    {text[:140]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sgd", help="a Schema-Guided Dialogue snapshot (checkout or mirror)")
    parser.add_argument("--realtalk", help="a REALTALK snapshot (checkout or mirror)")
    parser.add_argument("--show", type=int, default=20, help="extra flags printed per set")
    args = parser.parse_args()
    sgd = snapshot("sgd", args.sgd)
    if sgd is not None:
        report("SGD train, tune part", sgd_user_turns(sgd, "train", TUNE_FILES), args.show)
        report("SGD dev, report part", sgd_user_turns(sgd, "dev"), args.show)
    realtalk = snapshot("realtalk", args.realtalk)
    if realtalk is not None:
        texts = [str(m["content"]) for chat in load(realtalk, "both") for m in chat.messages]
        report("REALTALK, report part", texts, args.show)


if __name__ == "__main__":
    with reported():
        main()
