"""Public data sets for the quality benchmarks: fetched beforehand, read in place, never committed.

Each set is a snapshot of a public repository, given as a checkout or as a bare git directory
(a mirror, read with ``git show``), by a flag or an environment variable. When none is given,
the benchmark says where to get it and exits without a figure: a figure on data we wrote
ourselves is no substitute.

Parts a set must never be read from are refused here, whatever the caller asks and however the
path is spelled: Schema-Guided Dialogue's test split is kept for an independent check. A file
that is absent or damaged is a :class:`SnapshotError` naming it; a benchmark run inside
:func:`reported` ends on that message instead of a traceback.
"""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
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


class SnapshotError(Exception):
    """A file of a snapshot that is absent or damaged; the message names it and says why."""


@contextmanager
def reported() -> Iterator[None]:
    """Where a benchmark reads its snapshot: a damaged or incomplete one ends the run with the
    file and the reason (exit status 1), not a traceback."""
    try:
        yield
    except SnapshotError as exc:
        print(f"{exc} Fetch the snapshot again.", file=sys.stderr)
        raise SystemExit(1) from None


class Snapshot:
    """A checkout or a bare git directory of one public repository, read-only."""

    def __init__(self, source: Source, root: Path) -> None:
        self.source, self.root = source, root
        self.bare = not (root / ".git").exists() and (root / "objects").is_dir()
        self._said: set[str] = set()  # the folders whose absent files were named once

    def files(self, prefix: str) -> list[str]:
        """The paths under ``prefix`` (a folder, with its slash), sorted."""
        prefix = self._allowed(prefix)
        if self.bare:
            paths: list[str] = []
            absent: list[str] = []
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
        path = self._allowed(path)
        try:
            if self.bare:
                return self._git("show", f"HEAD:{path}")
            return (self.root / path).read_text(encoding="utf-8")
        except subprocess.CalledProcessError as exc:
            why = (exc.stderr or "").strip() or f"git exited with {exc.returncode}"
            raise SnapshotError(f"{self.source.name}: {path} could not be read ({why}).") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise SnapshotError(f"{self.source.name}: {path} could not be read ({exc}).") from exc

    def json(self, path: str) -> Any:
        text = self.text(path)
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise SnapshotError(f"{self.source.name}: {path} is damaged ({exc}).") from exc

    def _kept_back(self, path: str) -> bool:
        return any(path.startswith(p) for p in self.source.never)

    def _allowed(self, path: str) -> str:
        """``path`` spelled plainly (a folder keeps its slash), once it is inside the snapshot
        and not kept back: ``./test/x`` and ``train/../test/x`` are the test split too."""
        clean = posixpath.normpath(path) + ("/" if path.endswith("/") else "")
        if posixpath.isabs(clean) or clean == ".." or clean.startswith("../"):
            raise PermissionError(f"{self.source.name}: {path} is outside the snapshot")
        if self._kept_back(clean):
            raise PermissionError(f"{self.source.name}: {path} is kept for an independent check")
        return clean

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
