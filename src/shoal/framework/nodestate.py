"""Per-node resource matrices and shared-GPU group accounting (kai-spec §3.4).

`idle`, `releasing`, `used` and `alloc` are `[n_nodes, n_resources]` int64 matrices in core
units. Whole GPUs live in the GPU column (milli); a shared GPU group (fraction / GPU-memory pods
on one device) takes one whole device out of `idle` while any pod uses it, and counts as
`releasing` while every pod on it is releasing. Group amounts are MiB of device memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shoal.model.node import Node
from shoal.model.resources import GPU_COL, MILLI, ResourceSpace, Vector
from shoal.model.status import PodStatus


@dataclass(slots=True)
class GpuGroup:
    """Memory (MiB) of one shared device: used by any pod, allocated (not pipelined), releasing."""

    used: int = 0
    allocated: int = 0
    releasing: int = 0

    @property
    def taken(self) -> bool:
        """Holds a device out of the node's idle GPUs (some pod on it is not pipelined)."""
        return self.allocated > 0

    @property
    def releasing_delta(self) -> int:
        """Devices this group adds to the node's releasing GPUs: +1 while every pod on it is
        releasing, -1 while only pipelined pods use it (they wait for a releasing device)."""
        if self.used > 0 and self.used == self.releasing:
            return 1
        if self.allocated == 0 and self.used > 0:
            return -1
        return 0


#: At most this many remembered node changes per session (`NodeState.settle`): about 220 bytes
#: each, so up to ~220 MB.
_MAX_MOVES = 1_000_000


class NodeState:
    """Mutable resource state of all nodes of a session. Nodes are kept in name order."""

    def __init__(self, nodes: list[Node], space: ResourceSpace) -> None:
        self.nodes = sorted(nodes, key=lambda n: n.name)
        self.names = [n.name for n in self.nodes]
        self.index = {name: i for i, name in enumerate(self.names)}
        self.space = space
        n, r = len(self.nodes), space.size
        self.alloc = np.zeros((n, r), dtype=np.int64)
        for i, node in enumerate(self.nodes):
            for res, amount in node.allocatable.items():
                col = space.index.get(res)
                if col is None:
                    continue
                self.alloc[i, col] = amount * MILLI if col == GPU_COL else amount
        self.idle = self.alloc.copy()
        self.used = np.zeros_like(self.alloc)
        self.releasing = np.zeros_like(self.alloc)
        self.gpu_memory = np.array([nd.gpu_memory_mib for nd in self.nodes], dtype=np.int64)
        self.gpu_count = np.array([nd.gpu_count for nd in self.nodes], dtype=np.int64)
        self.groups: list[dict[str, GpuGroup]] = [{} for _ in self.nodes]
        #: Bumped on every change of a node, so cached per-node scores know when to refresh.
        self.version = np.zeros(n, dtype=np.int64)
        #: The node of every version bump, in order: what changed since a reader last looked is
        #: the tail of this list (see `changed_since`). Bump only through `bump` / `bump_many`.
        self.changes: list[int] = []
        #: Names each node's state: a change gives the node a token never used before, unless
        #: the node went through the same change from the same state before, or undid it
        #: (`settle`). So two equal tokens always name the same state of the same node, and a
        #: per-node answer cached under a token stays valid for it (`version` only grows).
        self.token: list[int] = list(range(n))
        self._next_token = n
        #: (token before, change, status, devices) -> token after (see `settle`).
        self._moves: dict[tuple[int, int, int, tuple[str, ...]], int] = {}

    def __len__(self) -> int:
        return len(self.names)

    def bump(self, i: int) -> None:
        self.version[i] += 1
        self.token[i] = self._next_token
        self._next_token += 1
        self.changes.append(i)

    def bump_many(self, idx: np.ndarray) -> None:
        """`bump` every node of `idx` (repeats bump again)."""
        np.add.at(self.version, idx, 1)
        rows = idx.tolist()
        token, nxt = self.token, self._next_token
        for i in rows:
            token[i] = nxt
            nxt += 1
        self._next_token = nxt
        self.changes.extend(rows)

    def settle(self, i: int, before: int, change: int, status: int, devices: tuple[str, ...]) -> None:
        """Node i, in the state token `before` named, just went through a change: `change` >= 0
        took task ordinal `change` onto it with `status` and GPU `devices`, `-1 - change` took
        it off (`status`: -1 for the pod alone leaving or coming back, resources kept; see
        `Statement`). That is all the node's new state depends on besides its old one, so a node
        that went through the same change from the same state before is in that same state
        again and gets its token. The first time, the new token is remembered, and so is the way
        back: undoing the change (`-1 - change`) from the new state gives `before` again. So a
        statement rolled back gives the nodes their tokens from before, and a scenario simulated
        again after it gives them the tokens they had in it."""
        moves = self._moves
        key = (before, change, status, devices)
        t = moves.get(key)
        if t is None:
            if len(moves) >= _MAX_MOVES:
                moves.clear()  # only a memory bound: forgetting costs recomputations, no more
            t = self.token[i]
            moves[key] = t
            moves[(t, -1 - change, status, devices)] = before
        else:
            self.token[i] = t

    def changed_since(self, mark: int, limit: int) -> list[int] | None:
        """The nodes bumped since `len(changes)` was `mark`, ascending; None when more than `limit`
        bumps happened (comparing tokens is then cheaper)."""
        if len(self.changes) - mark > limit:
            return None
        if len(self.changes) == mark:
            return []
        return sorted(set(self.changes[mark:]))

    # -- whole resources -------------------------------------------------------------------
    def add(self, i: int, vec: Vector, status: PodStatus) -> None:
        """Account a pod's regular resources (GPU column = whole GPUs only) on node i."""
        if status == PodStatus.PIPELINED:
            self.used[i] += vec
            self.releasing[i] -= vec
        elif status == PodStatus.RELEASING:
            self.used[i] += vec
            self.idle[i] -= vec
            self.releasing[i] += vec
        else:
            self.used[i] += vec
            self.idle[i] -= vec
        self.bump(i)

    def remove(self, i: int, vec: Vector, status: PodStatus) -> None:
        """Exact inverse of `add` with the same status."""
        if status == PodStatus.PIPELINED:
            self.used[i] -= vec
            self.releasing[i] += vec
        elif status == PodStatus.RELEASING:
            self.used[i] -= vec
            self.idle[i] += vec
            self.releasing[i] -= vec
        else:
            self.used[i] -= vec
            self.idle[i] += vec
        self.bump(i)

    # -- shared GPU groups -----------------------------------------------------------------
    def add_shared(self, i: int, group: str, mib: int, status: PodStatus, sign: int = 1) -> None:
        """Account `mib` of device memory on shared group `group` of node i (sign -1 removes)."""
        groups = self.groups[i]
        g = groups.get(group)
        if g is None:
            g = groups[group] = GpuGroup()
        before = (g.taken, g.releasing_delta)
        d = sign * mib
        if status == PodStatus.PIPELINED:
            g.used += d
            g.releasing -= d
        elif status == PodStatus.RELEASING:
            g.used += d
            g.allocated += d
            g.releasing += d
        else:
            g.used += d
            g.allocated += d
        after = (g.taken, g.releasing_delta)
        self.idle[i, GPU_COL] -= MILLI * (int(after[0]) - int(before[0]))
        self.releasing[i, GPU_COL] += MILLI * (int(after[1]) - int(before[1]))
        if g.used == 0 and g.allocated == 0 and g.releasing == 0:
            del groups[group]
        self.bump(i)

    def group_fits(self, i: int, group: str, mib: int) -> bool:
        """A share of `mib` fits group `group` counting releasing memory (can at least pipeline)."""
        g = self.groups[i].get(group)
        if g is None or g.used == 0 or g.allocated == g.releasing:
            return False
        return int(self.gpu_memory[i]) - g.allocated + g.releasing - mib >= 0

    def group_fits_idle(self, i: int, group: str, mib: int) -> bool:
        """A share of `mib` fits group `group` now (no releasing memory needed)."""
        g = self.groups[i].get(group)
        return g is not None and g.allocated > 0 and int(self.gpu_memory[i]) - g.allocated - mib >= 0

    def fresh_group_name(self, i: int, taken: set[str]) -> str:
        """A deterministic new group id on node i: the smallest device index not in use."""
        existing = set(self.groups[i]) | taken
        k = 0
        while str(k) in existing:
            k += 1
        return str(k)

    def whole_free(self, i: int) -> tuple[int, int]:
        """(idle, releasing) whole devices on node i."""
        return int(self.idle[i, GPU_COL]) // MILLI, int(self.releasing[i, GPU_COL]) // MILLI
