"""Objects the scheduler refused: what is recorded about each, and how a failure becomes a message.

A bad object (a malformed annotation, an odd capacity, a value no decoder foresaw) is skipped and
reported once per distinct message (`kube.applier` writes an event, and a condition where the kind
has one); it never stops the informer or the cycle. `ConvertError` messages are already written
for users; any other exception is a decoding gap, named with its type so it can be fixed.
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.kai.objects import JSON, meta
from shoal.kai.units import ConvertError


@dataclass(slots=True)
class Problem:
    """An object the scheduler refused: where it is and why (reported once per message)."""

    kind: str
    namespace: str
    name: str
    uid: str
    message: str


def why(error: Exception) -> str:
    """The user-facing reason for a failed conversion."""
    if isinstance(error, ConvertError):
        return str(error)
    return f"cannot be read ({type(error).__name__}: {error})"[:500]


def problem_of(kind: str, obj: JSON, error: Exception) -> Problem:
    """A Problem naming `obj` (whatever shape its metadata has) and `error`."""
    m = meta(obj) if isinstance(obj, dict) else {}
    m = m if isinstance(m, dict) else {}
    return Problem(kind, str(m.get("namespace") or ""), str(m.get("name") or ""), str(m.get("uid") or ""),
                   why(error))
