"""Vectorised label matching: a set of label maps (nodes or pods) as per-key value-code columns.

`LabelColumns.mask(requirement)` answers one requirement for every row at once with numpy; the
answers agree with `shoal.model.constraints.Requirement.matches` row by row. A key's column is
built on first use (one pass over the rows), and every answer is memoised: label maps never
change within a session.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from shoal.model.constraints import LabelSelector, NodeSelectorTerm, Requirement, parse_int64


class LabelColumns:
    """Rows of label maps; `mask(...)` -> bool array over rows. Never mutates the maps."""

    def __init__(self, labels: Sequence[dict[str, str]]) -> None:
        self._labels = labels
        self.n = len(labels)
        self._codes: dict[str, tuple[np.ndarray, dict[str, int]]] = {}
        self._ints: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._memo: dict[object, np.ndarray] = {}

    def codes(self, key: str) -> tuple[np.ndarray, dict[str, int]]:
        """(code per row, -1 where the key is absent; value -> code)."""
        hit = self._codes.get(key)
        if hit is None:
            table: dict[str, int] = {}
            codes = np.fromiter((table.setdefault(v, len(table)) if (v := lab.get(key)) is not None else -1
                                 for lab in self._labels), dtype=np.int64, count=self.n)
            hit = self._codes[key] = (codes, table)
        return hit

    def _int_column(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        hit = self._ints.get(key)
        if hit is None:
            codes, table = self.codes(key)
            values = np.zeros(len(table) + 1, dtype=np.float64)
            valid = np.zeros(len(table) + 1, dtype=bool)
            for v, c in table.items():
                n = parse_int64(v)
                if n is not None:
                    values[c], valid[c] = n, True
            hit = self._ints[key] = (values[codes], valid[codes])  # code -1 reads the last (invalid) slot
        return hit

    def requirement(self, r: Requirement) -> np.ndarray:
        hit = self._memo.get(r)
        if hit is not None:
            return hit
        codes, table = self.codes(r.key)
        if not r.valid:
            out = np.zeros(self.n, dtype=bool)
        elif r.op in ("In", "NotIn"):
            wanted = [table[v] for v in r.values if v in table]
            found = np.isin(codes, wanted) if wanted else np.zeros(self.n, dtype=bool)
            out = found if r.op == "In" else ~found
        elif r.op == "Exists":
            out = codes >= 0
        elif r.op == "DoesNotExist":
            out = codes < 0
        else:
            values, valid = self._int_column(r.key)
            bound = int(r.values[0])
            out = valid & ((values > bound) if r.op == "Gt" else (values < bound))
        self._memo[r] = out
        return out

    def selector(self, s: LabelSelector | None) -> np.ndarray:
        """Rows matching the selector (None matches none, an empty selector all)."""
        if s is None:
            return np.zeros(self.n, dtype=bool)
        hit = self._memo.get(s)
        if hit is None:
            hit = np.ones(self.n, dtype=bool)
            for r in s.requirements:
                hit = hit & self.requirement(r)
            self._memo[s] = hit
        return hit

    def node_term(self, term: NodeSelectorTerm, names: np.ndarray) -> np.ndarray:
        """Rows matching a node selector term; `names` holds each row's node name (matchFields)."""
        hit = self._memo.get(term)
        if hit is not None:
            return hit
        if not term.valid:
            out = np.zeros(self.n, dtype=bool)
        else:
            out = np.ones(self.n, dtype=bool)
            for r in term.expressions:
                out = out & self.requirement(r)
            for f in term.fields:
                same = names == f.values[0] if f.key == "metadata.name" else np.zeros(self.n, dtype=bool)
                out = out & (same if f.op == "In" else ~same)
        self._memo[term] = out
        return out
