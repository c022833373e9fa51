"""The simulated cloud on a state file shared by processes (``providers.sim.open_shared``):
two clouds on one file (as two daemons) and real processes see one world. One idempotency
token makes one instance, whoever races; a stop, a fault, a capacity change made through one
is what the other meets; the world outlives the process that made it; and a local node
booted by a process that was SIGKILLed is adopted by the next one, or booted again from its
disk, and ends with it: no process is left. (The contract suite runs against the file too:
tests/contract/harness_simfile.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from providers.base import InstanceStatus, NodeRequest
from providers.errors import CapacityUnavailable, QuotaExceeded, Throttled
from providers.retry import NO_RETRY
from providers.sim import SimCloud, SimProvider, SimTimings
from providers.sim.cloud import open_shared
from providers.sim.local import LocalNodes, group_alive, process_identity
from schema.types import Cloud

ROOT = Path(__file__).resolve().parents[2]
ZERO = SimTimings(boot_s=0.0, serve_s=0.0, terminate_s=0.0, start_s=0.0)
ACCOUNT = "acme/acme-aws"


def request(intent: str, user_data: str = "") -> NodeRequest:
    return NodeRequest(
        intent_id=intent,
        instance_type="p5.48xlarge",
        region="us-east-1",
        zone=None,
        tags={"gpucap-managed": "true", "gpucap-customer": "acme"},
        user_data=user_data,
    )


def provider(world: SimCloud) -> SimProvider:
    return SimProvider(Cloud.AWS, ACCOUNT, world, retry=NO_RETRY)


def until(what: str, check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(0.05)


@pytest.mark.parametrize("through", ["provider", "token"])
def test_two_clouds_on_one_file_make_one_instance_of_one_token(
    tmp_path: Path, through: str
) -> None:
    """``provider``: a daemon's create (find by intent, then launch, in one transaction);
    ``token``: the cloud's own idempotency token alone (EC2's ClientToken)."""
    path = tmp_path / "sim.db"
    worlds = [open_shared(path, timings=ZERO) for _ in range(2)]
    results: list[tuple[str, bool]] = []
    start = threading.Barrier(8)

    def create(world: SimCloud) -> None:
        start.wait()
        if through == "provider":
            made = provider(world).create_node(request("n-1"))
            results.append((made.node.instance_id, made.created))
        else:
            inst, created = world.launch(
                Cloud.AWS,
                ACCOUNT,
                intent_id="n-1",
                instance_type="p5.48xlarge",
                region="us-east-1",
                zone=None,
                tags={},
            )
            results.append((inst.instance_id, created))

    threads = [threading.Thread(target=create, args=(worlds[k % 2],)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({iid for iid, _ in results}) == 1
    assert sorted(created for _, created in results) == [False] * 7 + [True]
    assert worlds[0].live_instances_with_intent("n-1") == 1
    # Through the provider the others found it before launching; by token all launched.
    assert worlds[1].create_calls == (1 if through == "provider" else 8)


def test_two_processes_make_one_instance_of_one_token(tmp_path: Path) -> None:
    path, go = tmp_path / "sim.db", tmp_path / "go"
    script = textwrap.dedent(
        f"""
        import os, time
        from providers.sim.cloud import open_shared
        from tests.component.test_sim_state_file import ZERO, provider, request
        world = open_shared({str(path)!r}, timings=ZERO)
        while not os.path.exists({str(go)!r}):
            time.sleep(0.005)
        made = provider(world).create_node(request("n-1"))
        print(made.node.instance_id, made.created)
        """
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    time.sleep(1.0)  # (each has opened the file and waits)
    go.touch()
    answers = [p.communicate(timeout=60)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len({iid for iid, _ in answers}) == 1, answers
    assert sorted(created for _, created in answers) == ["False", "False", "True"]
    assert open_shared(path).live_instances_with_intent("n-1") == 1


def test_what_one_does_the_other_sees(tmp_path: Path) -> None:
    path = tmp_path / "sim.db"
    a, b = open_shared(path, timings=ZERO), open_shared(path, timings=ZERO)
    pa, pb = provider(a), provider(b)
    iid = pa.create_node(request("n-1")).node.instance_id

    pb.stop_node("us-east-1", iid)
    seen = pa.describe_node("us-east-1", iid)
    assert seen is not None and seen.status == InstanceStatus.STOPPED
    pa.start_node("us-east-1", iid)
    seen = pb.describe_node("us-east-1", iid)
    assert seen is not None and seen.status == InstanceStatus.RUNNING
    pb.terminate_node("us-east-1", iid)
    assert pa.describe_node("us-east-1", iid) is None
    assert pa.list_nodes("us-east-1", {}) == []
    # A token stays taken after its instance ended (a retry of it finds, never re-creates).
    again = pa.create_node(request("n-1"))
    assert (again.node.instance_id, again.created) == (iid, False)


def test_faults_capacity_and_quota_are_the_files(tmp_path: Path) -> None:
    path = tmp_path / "sim.db"
    a, b = open_shared(path, timings=ZERO), open_shared(path, timings=ZERO)
    a.inject(Cloud.AWS, ACCOUNT, "throttle")
    with pytest.raises(Throttled):
        provider(b).create_node(request("n-1"))
    made = provider(a).create_node(request("n-1"))  # (consumed once, by whoever met it)
    assert made.created
    a.set_capacity(Cloud.AWS, "us-east-1", "p5.48xlarge", 1)
    with pytest.raises(CapacityUnavailable):
        provider(b).create_node(request("n-2"))
    a.set_capacity(Cloud.AWS, "us-east-1", "p5.48xlarge", 8)
    b.set_quota(ACCOUNT, "us-east-1", "p5.48xlarge", 1)
    with pytest.raises(QuotaExceeded):
        provider(a).create_node(request("n-2"))


def test_the_world_outlives_the_process_that_made_it(tmp_path: Path) -> None:
    path = tmp_path / "sim.db"
    first = open_shared(path, timings=ZERO)
    p = provider(first)
    node = p.create_node(request("n-1", user_data="#!/bin/sh\necho hi\n")).node
    image = p.create_image("us-east-1", node.instance_id, "chat-8b-v1", {"k": "v"})
    first.put_object("s3://b/w/config.json", 2, b"{}")
    first.hang(node.instance_id)
    first.hold(node.instance_id, 3)
    assert first.state is not None
    first.state.close()

    later = open_shared(path, timings=ZERO)
    q = provider(later)
    [seen] = q.list_nodes("us-east-1", {"gpucap-customer": "acme"})
    assert (seen.instance_id, seen.intent_id, seen.tags["gpucap-intent"]) == (
        node.instance_id,
        "n-1",
        "n-1",
    )
    assert later.instances[node.instance_id].user_data == "#!/bin/sh\necho hi\n"
    assert [i.image_id for i in q.list_images("us-east-1", {"k": "v"})] == [image.image_id]
    assert [o.uri for o in q.list_objects("us-east-1", "s3://b/w/")] == ["s3://b/w/config.json"]
    assert not later.serving(node.instance_id) and later.held(node.instance_id) == 3
    # Ids go on from where the file left them: never one issued twice.
    other = q.create_node(request("n-2")).node.instance_id
    assert other not in (node.instance_id, image.image_id)


def test_memory_stays_the_default_and_never_touches_a_file(tmp_path: Path) -> None:
    world = SimCloud(timings=ZERO)
    provider(world).create_node(request("n-1"))
    assert world.instances is world.instances  # (the live table, not a copy)
    assert list(tmp_path.iterdir()) == []


# ---- local nodes across processes ------------------------------------------------------
_OWNER = """
import sys, time
from pathlib import Path
from providers.sim.cloud import open_shared
from providers.sim.local import LocalNodes
from tests.component.test_sim_state_file import ZERO, provider, request
nodes = LocalNodes(Path(sys.argv[2]), network=sys.argv[3])
world = open_shared(sys.argv[1], timings=ZERO, local_nodes=nodes)
made = provider(world).create_node(request("n-1", Path(sys.argv[4]).read_text()))
print(made.node.instance_id, flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="Linux routes 127/8 to lo")
def test_a_killed_owners_node_is_adopted_then_booted_again_and_none_is_left(
    tmp_path: Path,
) -> None:
    from tests.component.test_local_node import network, user_data

    path, root, net = tmp_path / "sim.db", tmp_path / "nodes", network()
    doc = tmp_path / "user-data"
    doc.write_text(user_data("n-1"))
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(path), str(root), net, str(doc)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert owner.stdout is not None
    iid = owner.stdout.readline().split()[0]
    home = root / iid
    first = open_shared(path, timings=ZERO).instances[iid]
    assert first.node_group is not None and first.node_owner != process_identity()
    until("its node runs", lambda: group_alive(first.node_group or 0, home))
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert group_alive(first.node_group, home)  # (a host outlives the daemon)

    groups = [first.node_group]
    try:
        with LocalNodes(root, network=net) as nodes:
            world = open_shared(path, timings=ZERO, local_nodes=nodes)
            world.sync_local_nodes()
            adopted = world.instances[iid]
            assert nodes.owns(iid) and adopted.node_owner == process_identity()
            assert adopted.node_group == first.node_group  # (adopted, not booted again)
            assert adopted.private_ip == first.private_ip

            world.release_local_nodes()  # (a clean stop: its node ends, its claim goes)
            assert not group_alive(first.node_group, home)
            released = world.instances[iid]
            assert (released.node_owner, released.node_group) == (None, None)

            world.sync_local_nodes()  # the instance still runs: its node boots again
            again = world.instances[iid]
            assert again.node_group is not None and again.node_group != first.node_group
            assert again.private_ip == first.private_ip  # (a cloud keeps the address)
            groups.append(again.node_group)
            until("its node runs again", lambda: group_alive(again.node_group or 0, home))

            provider(open_shared(path, timings=ZERO)).terminate_node("us-east-1", iid)
            world.sync_local_nodes()  # (the owner ends what another process terminated)
            assert not nodes.owns(iid)
    finally:
        if owner.poll() is None:
            owner.kill()
    assert not any(group_alive(g, home) for g in groups if g is not None)
    leftovers = [
        pid
        for pid in os.listdir("/proc")
        if pid.isdigit() and _environ_names(int(pid), f"GPUCAP_ROOT={home}")
    ]
    assert leftovers == []


def _environ_names(pid: int, mark: str) -> bool:
    try:
        return mark.encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
