"""Leases: how a process that starts task containers tells every engine client it is alive.

Start-up cleanup cannot judge a run dead by its controller's pid on the same host name: a pid
means something only inside its own PID namespace, and a run in another one (a CI container
sharing the engine) would have its live containers deleted. So liveness lives on the engine
itself, where every client sees it:

- A process holds one lease per engine: a container that never runs (`pytest-super-lease-<id>`,
  labelled `pytest-super.lease-holder=<id>`, from the kernel image, never started: nothing of
  that image runs; no network),
  holding one file, `/lease.json`: when it was last renewed, in the *engine's* clock (the `Date`
  of its API answers, so hosts with skewed clocks agree), and who holds it.
- A daemon thread renews it every `RENEW_S` (one `put_archive`: the owner's side of the dead
  man's switch, `deadman.Heartbeat`); each task container carries the
  lease id in its `pytest-super.lease` label. A lease removed by someone is created again.
- The lease container's labels name its holder (`Holder`: pid, the start time of that pid in
  clock ticks after boot, the PID namespace's inode, the boot id: process_identity.py);
  the lease file repeats them (leases of earlier versions have only the file).
- Another client judges a lease by its holder where it can prove something: same kernel boot and
  same PID namespace (by inode). Then the holder's pid alive with the same start time is alive,
  however old the lease (a run stopped with Ctrl-Z for longer than `TTL_S` keeps its containers),
  and a pid gone or naming another process is dead at once. Only a holder in another namespace or
  on another host is judged by the clock: dead when its lease is gone (released at exit) or not
  renewed for `TTL_S` by the engine's clock.
- A lease holds the dead man's switch (label `LABEL_SWITCH=on`, unless its process runs with
  `PYTEST_SUPER_DEAD_MAN_SWITCH=off`): taking it, and each renewal, makes sure the engine's
  reaper runs (`reaper.py`), which removes a dead lease's task containers and the lease with no
  later run and no command. Leases without it are left to start-up cleanup and `pytest-super
  cleanup`, judged the same way.
"""

from __future__ import annotations

import atexit
import contextlib
import email.utils
import io
import json
import logging
import secrets
import tarfile
import threading
import time
from dataclasses import asdict
from typing import TYPE_CHECKING

from pytest_super.deadman import Heartbeat
from pytest_super.process_identity import Holder

if TYPE_CHECKING:
    import docker
    from docker.models.containers import Container

log = logging.getLogger(__name__)

LABEL_LEASE = "pytest-super.lease"  # on task containers: the lease they live under
LABEL_HOLDER = "pytest-super.lease-holder"  # on the lease container itself
LABEL_LEASE_RUN = "pytest-super.lease-run"  # the run of the process holding it (informational)
#: on the lease container: "on" when the engine's reaper is to remove its containers once it
#: is dead (the dead man's switch, reaper.py), "off" when its holder opted out
LABEL_SWITCH = "pytest-super.lease-switch"
LEASE_FILE = "lease.json"
#: seconds between renewals; one renewal is one small put_archive (about 10 ms on this engine)
RENEW_S = 10.0
#: a lease not renewed for this long is dead: nine missed renewals in a row, far beyond any
#: scheduling stall of a daemon thread; only a stopped (SIGSTOP) or frozen process gets there.
#: The reaper removes a dead owner's containers within TTL_S + one sweep (5 s) + the removal:
#: under the 2 minutes promised (docs/security.md, "Nothing outlives its owner")
TTL_S = 90.0


class Lease:
    """This process's lease on one engine; renewed by a daemon thread until `release`."""

    def __init__(
        self,
        client: docker.DockerClient,
        image: str,
        run_id: str = "",
        *,
        address: str | None = None,
        switch: bool = False,
    ) -> None:
        """`switch`: this lease holds the dead man's switch (label `LABEL_SWITCH=on`) and keeps
        the reaper of the engine at `address` running (`reaper.ensure_reaper`)."""
        self.client = client
        self.image = image
        self.run_id = run_id
        self.address = address
        self.switch = switch
        self.id = secrets.token_hex(8)
        self.name = f"pytest-super-lease-{self.id}"
        self.holder = Holder.of_this_process()
        #: containers of this process its engine did not remove when asked (it did not answer):
        #: removed by the renewals once it answers again (`remove_later`)
        self.pending: set[str] = set()
        self._released = False
        self._create()
        self._heartbeat = Heartbeat(RENEW_S, self._renew_once, name=self.name)

    def _create(self) -> None:
        import docker.errors

        api = self.client.api
        with contextlib.suppress(docker.errors.NotFound):
            api.remove_container(self.name, force=True)
        api.create_container(
            self.image,
            command=["true"],
            name=self.name,
            labels={
                LABEL_HOLDER: self.id,
                LABEL_LEASE_RUN: self.run_id,
                LABEL_SWITCH: "on" if self.switch else "off",
                **self.holder.labels(),
            },
            network_disabled=True,
            host_config=api.create_host_config(network_mode="none"),
        )
        self.renew()
        self.ensure_reaper()

    def ensure_reaper(self) -> None:
        """Make sure the engine's reaper runs, when this lease holds the switch (a reaper that
        cannot be started is logged: start-up cleanup still covers the engine)."""
        import docker.errors
        import requests.exceptions

        from pytest_super.errors import InfrastructureError
        from pytest_super.kernels.docker.reaper import ensure_reaper

        if not self.switch or self.address is None or self._released:
            return  # released: a beat under way when it was must not start a reaper after it
        try:
            ensure_reaper(self.client, self.address)  # its own image, never self.image
        except (
            docker.errors.APIError,
            requests.exceptions.RequestException,
            OSError,
            InfrastructureError,
        ) as exc:
            log.warning(
                "pytest-super: the reaper of %s could not be started: %s", self.address, exc
            )

    def renew(self) -> None:
        """Write the lease file with the engine's current time."""
        self.write(engine_time(self.client), self.holder)

    def write(self, renewed: float, holder: Holder) -> None:
        """Write the lease file: renewed at `renewed` (engine clock) by `holder`."""
        data = {"renewed": renewed, "ttl_s": TTL_S, "holder": asdict(holder)}
        archive = single_file_tar(LEASE_FILE, json.dumps(data).encode())
        self.client.api.put_archive(self.name, "/", archive)

    def _renew_once(self) -> None:
        """One beat of the lease's heartbeat (`deadman.Heartbeat`, every `RENEW_S`)."""
        import docker.errors
        import requests.exceptions

        try:
            self.renew()
        except docker.errors.NotFound:  # someone removed it: take it again
            if self._heartbeat.stopped:
                return  # released while this renewal was under way: not taken again
            # (the engine may go between the two calls: its socket removed, a
            # ConnectionError, the next renewal's to report)
            with contextlib.suppress(docker.errors.APIError, requests.exceptions.RequestException):
                self._create()
            return
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            log.warning("pytest-super: renewing lease %s failed: %s", self.name, exc)
            return
        self.ensure_reaper()  # a reaper that left or was removed is back within RENEW_S
        self.remove_pending()

    def remove_pending(self) -> None:
        """Remove the containers the engine did not remove when asked (`remove_later`): while
        this process lives, its lease keeps them from the reaper, so it removes them itself."""
        import docker.errors
        import requests.exceptions

        for container_id in list(self.pending):
            try:
                self.client.api.remove_container(container_id, force=True, v=True)
            except docker.errors.NotFound:
                pass
            except (docker.errors.APIError, requests.exceptions.RequestException):
                continue  # not yet: the next renewal
            self.pending.discard(container_id)

    def stop_renewing(self) -> None:
        self._heartbeat.stop()

    def release(self) -> None:
        """Stop renewing and remove the lease (its containers are then judged dead)."""
        import docker.errors
        import requests.exceptions

        self._released = True
        self.stop_renewing()
        # a beat under way finishes first (RENEW_S at most: a beat's calls are short), so that
        # nothing of it comes after the removal (it took the lease or a reaper again)
        self._heartbeat.join(RENEW_S)
        with contextlib.suppress(docker.errors.APIError, requests.exceptions.RequestException):
            self.client.api.remove_container(self.name, force=True)


_leases: dict[str, Lease] = {}
_leases_lock = threading.Lock()


def lease_for(client: docker.DockerClient, address: str, image: str, run_id: str) -> Lease:
    """This process's lease on the engine at `address`, taken on first use."""
    with _leases_lock:
        lease = _leases.get(address)
        if lease is None:
            from pytest_super.process_identity import switch_wanted

            lease = Lease(client, image, run_id, address=address, switch=switch_wanted())
            _leases[address] = lease
        return lease


def remove_later(address: str, container_id: str) -> bool:
    """A container of this process that the engine at `address` did not remove (it did not
    answer: killed, restarting): removed by the lease's renewals once the engine answers again,
    within RENEW_S of its return. False if this process holds no lease there."""
    with _leases_lock:
        lease = _leases.get(address)
    if lease is None:
        return False
    lease.pending.add(container_id)
    return True


def release_lease(address: str) -> None:
    """Release this process's lease on the engine at `address`, if it holds one (its containers
    are then judged dead)."""
    with _leases_lock:
        lease = _leases.pop(address, None)
    if lease is not None:
        lease.release()


@atexit.register
def release_leases() -> None:
    """Release every lease this process holds (at exit; tests call it too)."""
    with _leases_lock:
        leases = list(_leases.values())
        _leases.clear()
    for lease in leases:
        lease.release()


# -- judging ---------------------------------------------------------------------------------------
def live_leases(
    client: docker.DockerClient, *, run_id: str | None = None
) -> tuple[set[str], list[Container]]:
    """(ids of the leases on this engine that are alive, lease containers that are dead); with
    `run_id`, only the leases of that run's processes are read."""
    alive: set[str] = set()
    dead: list[Container] = []
    now = engine_time(client)
    labels = [LABEL_HOLDER] + ([f"{LABEL_LEASE_RUN}={run_id}"] if run_id else [])
    holders = client.containers.list(all=True, filters={"label": labels}, ignore_removed=True)
    for container in holders:
        lease_id = (container.labels or {}).get(LABEL_HOLDER, "")
        (alive.add(lease_id) if _alive(client, container, now) else dead.append(container))
    return alive, dead


def _alive(client: docker.DockerClient, container: Container, now: float) -> bool:
    data = _read_lease(client, container)
    holder = _holder(container, data)
    if holder is not None and holder.provably_alive():
        return True  # however old the lease: a stopped process renews nothing, and lives
    if holder is not None and holder.provably_gone():
        return False
    if data is None:  # created but not written yet (a start-up race): judge by creation time
        created = container.attrs.get("Created", "")
        return now - _parse_iso(created) <= TTL_S
    try:
        return now - _seconds(data.get("renewed", 0)) <= _seconds(data.get("ttl_s", TTL_S))
    except (TypeError, ValueError):  # not a lease file of ours: judged by the clock, it is dead
        return False


def _holder(container: Container, data: dict[str, object] | None) -> Holder | None:
    """Who holds a lease: as its file says, else (not written yet, or being removed) as its
    container's labels say."""
    fields = (data or {}).get("holder")
    if isinstance(fields, dict):
        with contextlib.suppress(TypeError, ValueError):
            return Holder(**fields)
    return Holder.from_labels(container.labels or {})


def _read_lease(client: docker.DockerClient, container: Container) -> dict[str, object] | None:
    import docker.errors

    try:
        stream, _ = client.api.get_archive(str(container.id), f"/{LEASE_FILE}")
        raw = b"".join(stream)
        with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
            member = tar.extractfile(LEASE_FILE)
            data = json.loads(member.read()) if member else None
            return data if isinstance(data, dict) else None
    except (docker.errors.APIError, tarfile.TarError, ValueError, KeyError):
        return None  # gone, or being removed right now ("RWLayer ... is unexpectedly nil")


def _seconds(value: object) -> float:
    """A number of the lease file (`float()`'s own TypeError or ValueError for anything else)."""
    if isinstance(value, int | float | str):
        return float(value)
    raise TypeError(f"not a number: {value!r}")


def engine_time(client: docker.DockerClient) -> float:
    """The engine's clock (epoch seconds) from the `Date` header of its `/_ping` answer."""
    response = client.api.get(f"{client.api.base_url}/_ping", timeout=30)
    date = response.headers.get("Date")
    if not date:
        return time.time()
    return email.utils.parsedate_to_datetime(date).timestamp()


def _parse_iso(text: str) -> float:
    from datetime import datetime

    try:  # docker: 2026-11-22T04:28:20.123456789Z (nanoseconds: keep microseconds)
        head, _, frac = text.rstrip("Z").partition(".")
        return datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}+00:00").timestamp()
    except ValueError:
        return 0.0


def single_file_tar(name: str, data: bytes) -> bytes:
    """A tar archive holding one file `name` (for `put_archive`)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        member = tarfile.TarInfo(name)
        member.size = len(data)
        member.mode = 0o644
        member.mtime = int(time.time())
        tar.addfile(member, io.BytesIO(data))
    return buffer.getvalue()
