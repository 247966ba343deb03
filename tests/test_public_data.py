"""The public-data reader: checkouts and bare mirrors read alike, the kept-back split refused,
and a missing snapshot a clear skip rather than a figure."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from benchmarks.public.baselines import BM25, fill_by_rank, rank, rrf
from benchmarks.public.snapshot import SOURCES, Snapshot, SnapshotError, reported, snapshot


def _repo(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "train").mkdir(parents=True)
    (work / "test").mkdir()
    (work / "train" / "a.json").write_text('{"x": 1}', encoding="utf-8")
    (work / "test" / "b.json").write_text('{"x": 2}', encoding="utf-8")
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "data"], check=True)
    return work


def test_a_checkout_and_a_bare_mirror_read_alike(tmp_path: Path) -> None:
    work = _repo(tmp_path)
    bare = tmp_path / "mirror"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    for root in (work, bare):
        data = Snapshot(SOURCES["sgd"], root)
        assert data.files("train/") == ["train/a.json"]
        assert data.json("train/a.json") == {"x": 1}


def test_a_file_a_mirror_lists_but_does_not_hold_is_left_out_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = _repo(tmp_path)
    (work / "train" / "big.json").write_text('{"x": 3}', encoding="utf-8")
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "big"], check=True)
    bare = tmp_path / "mirror"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    subprocess.run([*git, "push", "-q", str(bare), "HEAD:refs/heads/main"], check=True)
    subprocess.run(
        ["git", f"--git-dir={bare}", "symbolic-ref", "HEAD", "refs/heads/main"], check=True
    )
    blob = subprocess.run(
        ["git", "-C", str(work), "rev-parse", "HEAD:train/big.json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (bare / "objects" / blob[:2] / blob[2:]).unlink()  # a few objects are pushed loose
    data = Snapshot(SOURCES["sgd"], bare)
    assert data.files("train/") == ["train/a.json"]
    assert "train/big.json" in capsys.readouterr().out


def test_the_kept_back_split_is_never_read(tmp_path: Path) -> None:
    data = Snapshot(SOURCES["sgd"], _repo(tmp_path))
    with pytest.raises(PermissionError, match="independent check"):
        data.text("test/b.json")
    with pytest.raises(PermissionError):
        data.files("test/")
    # however the path is spelled, and in a mirror too
    bare = tmp_path / "mirror"
    subprocess.run(["git", "clone", "-q", "--bare", str(tmp_path / "work"), str(bare)], check=True)
    for root in (tmp_path / "work", bare):
        data = Snapshot(SOURCES["sgd"], root)
        for path in ("./test/b.json", "train/../test/b.json", "train//../test/b.json"):
            with pytest.raises(PermissionError, match="independent check"):
                data.text(path)
        for path in ("../work/test/b.json", "/etc/hostname", "train/../../x"):
            with pytest.raises(PermissionError, match="outside the snapshot"):
                data.text(path)
        assert data.json("./train/a.json") == {"x": 1}  # a plain file spelled oddly is read


def test_an_absent_or_damaged_file_is_named_and_ends_the_run_plainly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = _repo(tmp_path)
    (work / "train" / "cut.json").write_text('{"x": [1, 2', encoding="utf-8")
    bare = tmp_path / "mirror"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    for root in (work, bare):
        data = Snapshot(SOURCES["sgd"], root)
        with pytest.raises(SnapshotError, match=r"train/gone\.json could not be read"):
            data.json("train/gone.json")
        if root == work:  # the cut file was never committed: only the checkout has it
            with pytest.raises(SnapshotError, match=r"train/cut\.json is damaged"):
                data.json("train/cut.json")
    with pytest.raises(SystemExit) as ended, reported():
        Snapshot(SOURCES["sgd"], work).json("train/cut.json")
    assert ended.value.code == 1
    said = capsys.readouterr().err
    assert "Schema-Guided Dialogue: train/cut.json is damaged" in said and "again" in said


def test_no_snapshot_is_a_skip_that_says_where_to_get_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SMART_CONTEXT_REALTALK", raising=False)
    assert snapshot("realtalk", None) is None
    assert snapshot("realtalk", str(tmp_path / "absent")) is None
    said = capsys.readouterr().out
    assert "github.com/danny911kr/REALTALK" in said and "SMART_CONTEXT_REALTALK" in said


def test_a_directory_that_is_not_the_set_is_a_skip_that_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = tmp_path / "broken"
    subprocess.run(["git", "init", "-q", "--bare", str(broken)], check=True)  # no HEAD yet
    other = _repo(tmp_path)  # a repository of something else: no data/ folder
    for where in (empty, broken, other):
        assert snapshot("realtalk", str(where)) is None
        assert f"{where} holds no data/" in capsys.readouterr().out


def test_the_baselines_rank_and_fill() -> None:
    bm25 = BM25(["sourdough starter feeding", "train to Kyoto", "oven spring in sourdough"])
    assert rank(bm25.scores("sourdough oven"))[0] == 2
    assert not bm25.scores("zzz").any()
    fused = rrf(np.array([3.0, 2.0, 1.0]), np.array([1.0, 2.0, 3.0]))
    assert fused[1] == pytest.approx(2 / 62)
    tokens = np.array([10, 10, 10, 10])
    assert fill_by_rank([2], tokens, 30, neighbours=1) == {1, 2, 3}
    assert fill_by_rank([2, 0], tokens, 35, neighbours=1) == {1, 2, 3}
