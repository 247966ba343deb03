"""New messages join the chat's map, instead of the map being made again after every reply.

Mapping a 10,000-message chat again costs seconds (offline) or a model call; a reply adds two
messages. So after a reply, each new turn joins its nearest topic, measured against the topic's
centroid (the mean of its members' vectors), when it is at least as close as the topic's own
members mostly are (the topic's 10th percentile: each topic keeps its own width) and clearly
nearer to it than to the next topic (:data:`JOIN_MARGIN`: on SGD's dev chats one new message in
four joined another subject's topic without it, one in nine with it). A standing
instruction joins the sticky topic; small talk joins the topic of the turn just before it, as
when the map is made ("Thanks, that worked" closes that exchange); a turn close to no topic, and
small talk after one, join none.

The whole map is made again (:func:`needs_full_map` says when):
- when the chat has no map with members yet, or the map's state is missing or damaged;
- when the chat has grown by a fifth since the map was made;
- when the messages the map was made through are gone (an edit or a deletion before them);
- when the assignments drift: more than half of the turns since the map, and at least its
  ``patience`` of them (:data:`DRIFT_MIN` at first), joined no topic (a new subject the map has
  no bubble for). A map made again because of drift has twice the patience of the one before
  it: a subject too small to get a bubble of its own (a long chat keeps at most eight) would
  otherwise have the whole map made again every six turns, seconds of CPU each at 10,000
  messages; a map made for any other reason starts again at :data:`DRIFT_MIN`;
- when the user asks (``smart-context topics``).

The map's state is kept on the chat file under our key (``smart_context.topic_map``):
``{"through": id of the last turn mapped or joined, "size": turns when the map was made,
"strays": turns since then that joined no topic, "patience": strays before drift is called}``.
Pure: numpy and the chat's dicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

import numpy as np
import numpy.typing as npt

from smart_context.messages import message_text
from smart_context.topics.model import STICKY_LABEL
from smart_context.topics.offline.talk import is_instruction, is_small_talk
from smart_context.topics.offline.text import MAX_MESSAGE_CHARS
from smart_context.vectors.ops import Matrix, normalize_rows

MAP_KEY = "topic_map"
GROWTH = 1.2  # the chat grown by a fifth: the map is made again
DRIFT_MIN = 6  # strays before drift can be called, for a map not made because of drift
MAX_PATIENCE = 1 << 16  # doubling stops here: a map made again after drift thirteen times
DRIFT_SHARE = 0.5
WIDTH_QUANTILE = 0.1  # how close a newcomer must be: as close as 90% of the topic's members
JOIN_MARGIN = 0.06  # how much closer to its topic than to the next one a newcomer must be
SAMPLE = 256  # members a topic's centroid and width are measured on, evenly spaced
IntArray = npt.NDArray[np.intp]


@dataclass(frozen=True)
class MapState:
    """Where the map stands (module docstring)."""

    through: str
    size: int
    strays: int = 0
    patience: int = DRIFT_MIN  # strays before drift is called (module docstring)

    def as_dict(self) -> dict[str, Any]:
        return {
            "through": self.through,
            "size": self.size,
            "strays": self.strays,
            "patience": self.patience,
        }

    def after_drift(self, through: str, size: int) -> MapState:
        """The state of a map made again because this one drifted: twice the patience."""
        return MapState(through, size, 0, min(2 * self.patience, MAX_PATIENCE))


def read_state(raw: Any) -> MapState | None:
    """The stored state, or ``None`` when it is missing or not what we wrote."""
    if not isinstance(raw, Mapping):
        return None
    through, size, strays = raw.get("through"), raw.get("size"), raw.get("strays", 0)
    patience = raw.get("patience", DRIFT_MIN)  # a map written before there was patience
    if not isinstance(through, str) or not _count(size) or not _count(strays, allow_zero=True):
        return None
    if not _count(patience) or patience > MAX_PATIENCE:
        return None
    return MapState(through, size, strays, patience)


def needs_full_map(
    state: MapState | None, topics: Sequence[Mapping[str, Any]], turn_ids: Sequence[str]
) -> bool:
    """Whether the map must be made again rather than grown (module docstring); ``turn_ids``
    are the chat's turns' ids as text, in order."""
    if state is None or len(turn_ids) >= state.size * GROWTH:
        return True
    if not any(t.get("message_ids") and not t.get("sticky") for t in topics):
        return True
    return state.through not in turn_ids  # an edit or a deletion took the map's footing


@dataclass(frozen=True)
class Grown:
    """The topics with the new turns joined, and the map's new state."""

    topics: list[dict[str, Any]]
    state: MapState
    drifted: bool


class TurnVectors(Protocol):
    """The turns' unit vectors, read by position: a matrix, or rows read when asked
    (:class:`smart_context.store.Synced`)."""

    def __getitem__(self, at: IntArray, /) -> Matrix: ...


def join_new(
    topics: Sequence[Mapping[str, Any]],
    turns: Sequence[Mapping[str, Any]],
    turn_ids: Sequence[str],
    vectors: TurnVectors,
    state: MapState,
) -> Grown:
    """Join the turns after ``state.through`` to the map (module docstring). ``vectors`` are
    the turns' unit vectors, same order; only the new turns' and a sample of each topic's
    members' are read."""
    start = turn_ids.index(state.through) + 1
    position = dict(zip(turn_ids, range(len(turn_ids)), strict=True))
    regular = [i for i, t in enumerate(topics) if not t.get("sticky")]
    new = vectors[np.arange(start, len(turns), dtype=np.intp)]
    members = [vectors[_rows(topics[i], position)] for i in regular]
    centroids, floors = _centroids(members, new.shape[1] if new.ndim == 2 else 0)
    joined: dict[int, list[str]] = {}
    sticky: list[str] = []
    strays = 0
    for k in range(start, len(turns)):
        text, role = message_text(turns[k])[:MAX_MESSAGE_CHARS], str(turns[k].get("role"))
        if role == "user" and is_instruction(text, role):
            sticky.append(turn_ids[k])
            continue
        if is_small_talk(text):
            before = _last_topic(topics, joined, regular, turn_ids[k - 1]) if k else None
            if before is not None:
                joined.setdefault(before, []).append(turn_ids[k])
            continue
        vector = new[k - start]
        if not len(centroids) or not np.any(vector):
            continue
        sims = centroids @ vector
        best = int(np.argmax(sims))
        second = float(np.partition(sims, -2)[-2]) if len(sims) > 1 else -1.0
        if sims[best] >= floors[best] and sims[best] - second >= JOIN_MARGIN:
            joined.setdefault(regular[best], []).append(turn_ids[k])
        else:
            strays += 1
    out = [_with(topic, joined.get(i, [])) for i, topic in enumerate(topics)]
    if sticky:
        out = _with_sticky(out, sticky)
    new_state = MapState(turn_ids[-1], state.size, state.strays + strays, state.patience)
    since = len(turns) - state.size
    drifted = new_state.strays >= state.patience and new_state.strays > DRIFT_SHARE * max(since, 1)
    return Grown(out, new_state, drifted)


def _last_topic(
    topics: Sequence[Mapping[str, Any]],
    joined: Mapping[int, Sequence[str]],
    regular: Sequence[int],
    turn_id: str,
) -> int | None:
    """The regular topic whose latest member is ``turn_id`` (a turn that just joined, or the
    last one the map holds): only the last member of each topic is looked at, so a long chat
    costs nothing more."""
    for i in regular:
        ids = joined.get(i) or _ids(topics[i])
        if ids and str(ids[-1]) == turn_id:
            return i
    return None


def _ids(topic: Mapping[str, Any]) -> list[Any]:
    ids = topic.get("message_ids")
    return ids if isinstance(ids, list) else []  # another writer may have erred


def _rows(topic: Mapping[str, Any], position: Mapping[str, int]) -> np.ndarray:
    """The rows of (at most :data:`SAMPLE` of) the topic's members: a big topic's centroid
    and width move by little for the rest."""
    ids = _ids(topic)
    if len(ids) > SAMPLE:
        ids = [ids[k] for k in np.linspace(0, len(ids) - 1, SAMPLE).astype(np.intp).tolist()]
    found = [position[str(m)] for m in ids if str(m) in position]
    return np.asarray(found, dtype=np.intp)


def _centroids(members: Sequence[Matrix], dim: int) -> tuple[Matrix, np.ndarray]:
    """Each topic's unit centroid and how close its members (their vectors) mostly are to it."""
    centroids = np.zeros((len(members), dim), dtype=np.float32)
    floors = np.full(len(members), np.inf, dtype=np.float32)  # a topic with no rows takes none
    for t, rows in enumerate(members):
        if len(rows):
            centroids[t] = rows.mean(axis=0)
    centroids = normalize_rows(centroids)
    for t, rows in enumerate(members):
        if len(rows):
            floors[t] = np.quantile(rows @ centroids[t], WIDTH_QUANTILE)
    return centroids, floors


def _with(topic: Mapping[str, Any], new_ids: Sequence[str]) -> dict[str, Any]:
    if not new_ids:
        return dict(topic)
    ids = [*_ids(topic), *new_ids]
    return {**topic, "message_ids": ids, "count": int(topic.get("count") or 0) + len(new_ids)}


def _with_sticky(topics: list[dict[str, Any]], new_ids: Sequence[str]) -> list[dict[str, Any]]:
    for k, topic in enumerate(topics):
        if topic.get("sticky"):
            ids = [*_ids(topic), *new_ids]
            topics[k] = {**topic, "message_ids": ids, "count": len(ids)}
            return topics
    sticky = {"label": STICKY_LABEL, "sticky": True, "message_ids": list(new_ids)}
    return [*topics, sticky | {"count": len(new_ids)}]


def _count(value: Any, allow_zero: bool = False) -> TypeGuard[int]:
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return value >= 0 if allow_zero else value > 0
