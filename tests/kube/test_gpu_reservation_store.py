"""ReservationStore: a reservation pod whose DELETE is in flight is never handed out as a device.

The race this guards (seen once in CI's e2e `test_no_device_in_time_releases_the_group_and_says_why`):
the reconciler deletes the reservation pod of a group that a released bind left unused; the next
cycle binds the same pod to the same group at once; the device agent annotates the old pod before
the DELETE lands. Taking that device binds the pod, then the reservation pod vanishes and the
reconciler evicts the running pod as unaccounted for.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from shoal.kai.sharing import RESERVED_DEVICE_ANNOTATION, ReservationSpec, reservation_pod
from shoal.kube.client import ApiError
from shoal.kube.gpusharing.reservations import ReservationStore

NODE, GROUP = "n1", "0"


class HeldClient:
    """A client whose DELETE waits for `release_delete`, and which records creates."""

    def __init__(self, delete_error: int | None = None) -> None:
        self.release_delete = asyncio.Event()
        self.delete_error = delete_error
        self.deletes: list[str] = []
        self.created: list[dict[str, Any]] = []

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        assert method == "DELETE"
        self.deletes.append(path)
        await self.release_delete.wait()
        if self.delete_error is not None:
            raise ApiError(self.delete_error, "refused")
        return {}

    async def create(self, resource: Any, obj: dict[str, Any], namespace: str) -> Any:
        self.created.append(obj)
        return obj


def pod(uid: str, device: str | None) -> dict[str, Any]:
    obj = reservation_pod(NODE, GROUP, ReservationSpec())
    obj["metadata"]["uid"] = uid
    if device:
        obj["metadata"].setdefault("annotations", {})[RESERVED_DEVICE_ANNOTATION] = device
    return obj


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_bind_during_the_delete_waits_for_a_new_pod() -> None:
    async def scenario() -> tuple[str, list[dict[str, Any]]]:
        client = HeldClient()
        store = ReservationStore(client, ReservationSpec())  # type: ignore[arg-type]
        old = pod("uid-old", None)
        store.on_pod("ADDED", None, old)
        deleting = asyncio.create_task(store.delete(old))
        await _settle()
        assert client.deletes, "the DELETE is in flight"
        acquiring = asyncio.create_task(store.acquire(NODE, GROUP, time.monotonic() + 5, lambda: None))
        await _settle()
        # The agent answers on the old pod before the DELETE lands.
        store.on_pod("MODIFIED", old, pod("uid-old", "GPU-old"))
        await _settle()
        assert not acquiring.done(), "the device of a pod being deleted was handed out"
        assert not client.created, "a second pod of the same name while the first still exists"
        client.release_delete.set()
        await deleting
        store.on_pod("DELETED", pod("uid-old", "GPU-old"), None)
        await _settle()
        assert len(client.created) == 1, "the group gets a new reservation pod once the old one is gone"
        store.on_pod("ADDED", None, pod("uid-new", "GPU-new"))
        return await asyncio.wait_for(acquiring, 5), client.created

    device, created = asyncio.run(scenario())
    assert device == "GPU-new"
    assert created[0]["metadata"]["name"] == reservation_pod(NODE, GROUP, ReservationSpec())["metadata"]["name"]


def test_a_failed_delete_makes_the_pod_live_again() -> None:
    async def scenario() -> str | None:
        client = HeldClient(delete_error=500)
        store = ReservationStore(client, ReservationSpec())  # type: ignore[arg-type]
        kept = pod("uid-kept", "GPU-kept")
        store.on_pod("ADDED", None, kept)
        deleting = asyncio.create_task(store.delete(kept))
        await _settle()
        assert store.device((NODE, GROUP)) is None
        client.release_delete.set()
        await deleting
        return store.device((NODE, GROUP))

    assert asyncio.run(scenario()) == "GPU-kept"


def test_a_pod_already_gone_stays_doomed_until_its_deleted_event() -> None:
    async def scenario() -> tuple[str | None, str | None]:
        client = HeldClient(delete_error=404)
        store = ReservationStore(client, ReservationSpec())  # type: ignore[arg-type]
        gone = pod("uid-gone", "GPU-gone")
        store.on_pod("ADDED", None, gone)
        client.release_delete.set()
        await store.delete(gone)
        during = store.device((NODE, GROUP))
        store.on_pod("DELETED", gone, None)
        store.on_pod("ADDED", None, pod("uid-next", "GPU-next"))
        return during, store.device((NODE, GROUP))

    assert asyncio.run(scenario()) == (None, "GPU-next")
