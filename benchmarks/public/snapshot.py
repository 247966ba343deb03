"""Public data sets for the quality benchmarks: fetched beforehand, read in place, never committed.

Each set is a snapshot of a public repository, given as a checkout or as a bare git directory
(a mirror, read with ``git show``), by a flag or an environment variable. When none is given,
the benchmark says where to get it and exits without a figure: a figure on data we wrote
ourselves is no substitute.

Parts a set must never be read from are refused here, whatever the caller asks: Schema-Guided
Dialogue's test split is kept for an independent check.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GIT = shutil.which("git") or "git"


@dataclass(frozen=True)
class Source:
    """Where a public set comes from and how a benchmark is told where its snapshot is."""

    name: str
    url: str
    env: str
    holds: str  # a folder every snapshot of the set has: how a wrong directory is told
    never: tuple[str, ...] = ()  # path prefixes no benchmark may read


SOURCES = {
    "realtalk": Source(
        "REALTALK", "https://github.com/danny911kr/REALTALK", "SMART_CONTEXT_REALTALK", "data/"
    ),
    "sgd": Source(
        "Schema-Guided Dialogue",
        "https://github.com/google-research-datasets/dstc8-schema-guided-dialogue",
        "SMART_CONTEXT_SGD",
        "train/",
        never=("test/",),
    ),
    "toollens": Source(
        "ToolLens (COLT)",
        "https://github.com/quchangle1/COLT",
        "SMART_CONTEXT_COLT",
        "datasets/ToolLens/",
    ),
}


class Snapshot:
    """A checkout or a bare git directory of one public repository, read-only."""

    def __init__(self, source: Source, root: Path) -> None:
        self.source, self.root = source, root
        self.bare = not (root / ".git").exists() and (root / "objects").is_dir()
        self._said: set[str] = set()  # the folders whose absent files were named once

    def files(self, prefix: str) -> list[str]:
        """The paths under ``prefix`` (a folder, with its slash), sorted."""
        self._allowed(prefix)
        if self.bare:
            paths, absent = [], []
            for line in self._git("ls-tree", "-r", "-l", "HEAD", "--", prefix).splitlines():
                meta, _, path = line.partition("\t")
                # a mirror may list a large file without holding it (its size reads "BAD")
                (paths if meta.split()[-1].isdigit() else absent).append(path)
            if absent and prefix not in self._said:
                self._said.add(prefix)
                print(
                    f"{self.source.name}: {len(absent)} files under {prefix} are absent from "
                    f"this snapshot and left out: {', '.join(sorted(absent)[:5])}"
                )
        else:
            base = self.root / prefix
            paths = [p.relative_to(self.root).as_posix() for p in base.rglob("*") if p.is_file()]
        return sorted(p for p in paths if p.startswith(prefix) and not self._kept_back(p))

    def holds_data(self) -> bool:
        """Whether this looks like a snapshot of its set: its telltale folder has files."""
        try:
            return bool(self.files(self.source.holds))
        except (subprocess.CalledProcessError, OSError):  # a broken or empty repository
            return False

    def text(self, path: str) -> str:
        self._allowed(path)
        if self.bare:
            return self._git("show", f"HEAD:{path}")
        return (self.root / path).read_text(encoding="utf-8")

    def json(self, path: str) -> Any:
        return json.loads(self.text(path))

    def _kept_back(self, path: str) -> bool:
        return any(path.startswith(p) for p in self.source.never)

    def _allowed(self, path: str) -> None:
        if self._kept_back(path):
            raise PermissionError(f"{self.source.name}: {path} is kept for an independent check")

    def _git(self, *args: str) -> str:
        done = subprocess.run(
            [GIT, f"--git-dir={self.root}", *args],
            capture_output=True,
            text=True,
            encoding="utf-8",
            check=True,
        )
        return done.stdout


def snapshot(key: str, given: str | None) -> Snapshot | None:
    """The snapshot of set ``key`` at ``given`` (else the set's environment variable); ``None``,
    after printing how to get one, when there is none."""
    source = SOURCES[key]
    where = given or os.environ.get(source.env)
    why = "no snapshot given" if not where else f"{where} is not a directory"
    if where and Path(where).is_dir():
        data = Snapshot(source, Path(where))
        if data.holds_data():
            return data
        why = f"{where} holds no {source.holds}: not a snapshot of {source.name}"
    print(
        f"{source.name}: skipped ({why}). Clone {source.url} (or a mirror of it) and pass "
        f"its directory, or set {source.env}."
    )
    return None
