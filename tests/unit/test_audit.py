"""The audit's pure comparison (``controlplane.audit``): store rows + cloud listings + now ->
per-site counts and findings, for every category and the cases that are neither right nor
wrong yet (mid-create, not yet visible, ended within the grace)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controlplane.audit import (
    BUILDER,
    NODE,
    AuditReport,
    Category,
    Expect,
    Intent,
    Listing,
    Reason,
    Site,
    audit,
    builder_expect,
    node_expect,
)
from providers.base import CloudNode, InstanceStatus, ownership_tags

NOW = 1_000_000.0
GRACE = 600.0
SITE = Site("aws", "acme-aws", "us-east-1", "customer", frozenset({"acme"}), "acme")
OTHER = Site("aws", "acme-aws", "us-west-2", "customer", frozenset({"acme"}), "acme")


def row(
    intent: str,
    state: str = "ready",
    instance: str | None = None,
    *,
    age: float = 3600.0,
    in_state: float = 1800.0,
    accepted: float | None = 3000.0,
    region: str = "us-east-1",
    kind: str = NODE,
    expect: Expect | None = None,
) -> Intent:
    """A node row recorded ``age`` s ago, in ``state`` for ``in_state`` s, accepted by the
    cloud ``accepted`` s ago (None: not yet)."""
    instance = instance if instance is not None else f"i-{intent}"
    if state == "pending":
        instance = None
    return Intent(
        id=intent,
        kind=kind,
        customer="acme",
        cloud="aws",
        account="acme-aws",
        region=region,
        state=state,
        instance_id=instance,
        expect=expect or node_expect(state, instance),
        recorded_at=NOW - age,
        since=NOW - in_state,
        accepted_at=None if accepted is None else NOW - accepted,
    )


def inst(
    intent: str,
    instance: str | None = None,
    status: InstanceStatus = InstanceStatus.RUNNING,
    region: str = "us-east-1",
) -> CloudNode:
    return CloudNode(
        instance_id=instance or f"i-{intent}",
        intent_id=intent,
        instance_type="p5.48xlarge",
        region=region,
        zone=f"{region}a",
        status=status,
        tags=ownership_tags(intent, "acme", "pool-1", "llama-70b"),
    )


def run(nodes: list[CloudNode], rows: list[Intent], site: Site = SITE) -> AuditReport:
    return audit([Listing(site, tuple(nodes))], rows, NOW, GRACE)


def kinds(report: AuditReport) -> list[tuple[str, str, str]]:
    return [(f.category, f.reason, f.intent_id) for s in report.sites for f in s.findings]


def test_a_consistent_fleet_is_clean_and_counted() -> None:
    rows = [row("n1"), row("n2", "draining"), row("n3", "stopped")]
    nodes = [inst("n1"), inst("n2"), inst("n3", status=InstanceStatus.STOPPED)]
    report = run(nodes, rows)
    [site] = report.sites
    assert (site.tracked, site.in_cloud, site.stopped, site.settling) == (3, 3, 1, 0)
    assert report.clean and not site.findings
    assert report.totals == {
        "tracked": 3,
        "in_cloud": 3,
        "stopped": 1,
        "settling": 0,
        "leaked": 0,
        "lost": 0,
        "duplicated": 0,
        "unreachable": 0,
    }


def test_a_warm_node_still_stopping_counts_as_stopped_and_tracked() -> None:
    report = run([inst("w1", status=InstanceStatus.STOPPING)], [row("w1", "stopping")])
    assert (report.sites[0].tracked, report.sites[0].stopped) == (1, 1)
    assert report.clean


def test_an_instance_no_row_knows_is_leaked_with_the_ids_on_call_needs() -> None:
    report = run([inst("ghost", "i-0ghost"), inst("n1")], [row("n1")])
    assert kinds(report) == [("leaked", "untracked", "ghost")]
    [f] = report.sites[0].findings
    assert [n.instance_id for n in f.instances] == ["i-0ghost"]
    assert (f.customer, f.site.account, f.site.region) == ("acme", "acme-aws", "us-east-1")
    assert f.intent is None and f.age_s is None  # the listing says nothing of its age
    assert (report.sites[0].tracked, report.sites[0].in_cloud) == (1, 2)
    assert not report.clean and report.totals["leaked"] == 1


def test_an_instance_without_an_intent_tag_is_leaked() -> None:
    report = run([inst("", "i-0bare")], [])
    assert kinds(report) == [("leaked", "untracked", "")]


@pytest.mark.parametrize("state", ["terminated", "failed"])
def test_an_ended_row_whose_instance_still_runs_is_leaked_past_the_grace(state: str) -> None:
    late = run([inst("n1")], [row("n1", state, in_state=GRACE + 1)])
    assert kinds(late) == [("leaked", "released", "n1")]
    [f] = late.sites[0].findings
    assert f.intent is not None and f.intent.state == state
    assert f.state_age_s == pytest.approx(GRACE + 1) and f.age_s == pytest.approx(3600)
    # Within the grace the cloud may still be letting it go: neither wrong nor tracked.
    early = run([inst("n1")], [row("n1", state, in_state=GRACE - 1)])
    assert early.clean and (early.sites[0].settling, early.sites[0].tracked) == (1, 0)


def test_a_termination_that_never_ends_is_leaked_past_the_grace() -> None:
    assert kinds(run([inst("n1")], [row("n1", "terminating", in_state=2 * GRACE)])) == [
        ("leaked", "terminating", "n1")
    ]
    assert run([inst("n1")], [row("n1", "terminating", in_state=60)]).clean
    # ... and once gone, a terminating row is done, not lost.
    assert run([], [row("n1", "terminating", in_state=2 * GRACE)]).clean


@pytest.mark.parametrize("state", ["provisioning", "running", "ready", "draining", "stopped"])
def test_a_live_row_gone_from_the_cloud_is_lost(state: str) -> None:
    report = run([], [row("n1", state, "i-0abc")])
    assert kinds(report) == [("lost", "gone", "n1")]
    [f] = report.sites[0].findings
    assert f.instances == () and f.intent is not None and f.intent.instance_id == "i-0abc"
    assert report.totals["lost"] == 1 and not report.clean


def test_an_instance_not_yet_visible_is_settling_within_the_grace() -> None:
    fresh = row("n1", "provisioning", "i-0new", age=GRACE / 2, in_state=10, accepted=10)
    report = run([], [fresh])
    assert report.clean and report.sites[0].settling == 1
    # Its grace runs from the cloud's accept, not from the state it is in.
    old = replace(fresh, accepted_at=NOW - GRACE - 1)
    assert kinds(run([], [old])) == [("lost", "gone", "n1")]


def test_a_node_mid_create_with_no_instance_id_is_neither_lost_nor_leaked() -> None:
    pending = row("n1", "pending", age=3 * GRACE, accepted=None)
    assert pending.instance_id is None and pending.expect == Expect.MAYBE
    nothing_yet = run([], [pending])
    assert nothing_yet.clean and nothing_yet.sites[0].settling == 1
    # The create went through and its answer is not recorded yet: the instance is its.
    landed = run([inst("n1", "i-0landed")], [pending])
    assert landed.clean and landed.sites[0].tracked == 1


def test_two_instances_for_one_intent_are_one_duplicated_finding() -> None:
    nodes = [inst("n1", "i-01"), inst("n1", "i-02"), inst("n2")]
    report = run(nodes, [row("n1", instance="i-01"), row("n2")])
    assert kinds(report) == [("duplicated", "duplicated", "n1")]
    [f] = report.sites[0].findings
    assert [n.instance_id for n in f.instances] == ["i-01", "i-02"]
    assert f.intent is not None and f.intent.instance_id == "i-01"
    site = report.sites[0]
    assert (site.tracked, site.in_cloud, report.totals["duplicated"]) == (1, 3, 1)


def test_duplicates_of_an_untracked_intent_are_duplicated_not_leaked_twice() -> None:
    report = run([inst("x", "i-01"), inst("x", "i-02")], [])
    assert kinds(report) == [("duplicated", "duplicated", "x")]


def test_an_instance_other_than_the_one_its_row_names_is_stray_and_the_row_lost() -> None:
    # Same intent, another id: the row's own instance is gone (it shows in no listing).
    report = run([inst("n1", "i-02")], [row("n1", instance="i-01")])
    assert kinds(report) == [("leaked", "stray", "n1")]
    # Where the row names an instance that another site lists under its intent, that site
    # reports the stray and the row's own site the loss.
    both = audit(
        [Listing(SITE, ()), Listing(OTHER, (inst("n1", "i-01", region="us-west-2"),))],
        [row("n1", instance="i-01")],
        NOW,
        GRACE,
    )
    assert [(s.site.region, [f.reason.value for f in s.findings]) for s in both.sites] == [
        ("us-east-1", ["gone"]),
        ("us-west-2", ["stray"]),
    ]


def test_a_terminated_instance_in_a_listing_is_not_counted() -> None:
    report = run([inst("n1", status=InstanceStatus.TERMINATED)], [row("n1", "terminated")])
    assert report.clean and report.sites[0].in_cloud == 0


def test_a_site_that_could_not_be_listed_compares_nothing_and_is_not_clean() -> None:
    report = audit(
        [Listing(SITE, error="throttled: slow down"), Listing(OTHER, ())],
        [row("n1")],
        NOW,
        GRACE,
    )
    assert kinds(report) == []  # n1's site was not seen: not lost
    assert [s.error for s in report.sites] == ["throttled: slow down", None]
    assert report.totals["unreachable"] == 1 and not report.clean


def test_a_shared_site_holds_the_rows_of_the_customers_it_lists_for() -> None:
    shared = Site("aws", "gpucap-aws", "us-east-1", "shared", frozenset({"acme", "beta"}))
    rows = [
        replace(row("a1"), account="gpucap-aws"),
        replace(row("b1"), account="gpucap-aws", customer="beta"),
        replace(row("c1"), account="gpucap-aws", customer="gamma"),  # not a user of it
    ]
    report = run([inst("a1"), inst("b1")], rows, shared)
    assert report.clean and report.sites[0].tracked == 2


def test_an_image_builder_is_tracked_while_its_build_needs_it() -> None:
    building = row("b1", "building", "i-0b", kind=BUILDER, expect=builder_expect(True, False))
    assert run([inst("b1", "i-0b")], [building]).clean
    assert run([], [building]).clean  # the image job times a build out, not the audit
    over = replace(building, state="ready", expect=builder_expect(False, True))
    report = run([inst("b1", "i-0b")], [over])
    assert kinds(report) == [("leaked", "released", "b1")]
    assert report.sites[0].findings[0].detail.startswith("its builder row is ready")


def test_node_expectations() -> None:
    assert node_expect("pending", None) == Expect.MAYBE
    assert node_expect("provisioning", None) == Expect.MAYBE
    assert node_expect("resuming", "i-1") == Expect.LIVE
    assert node_expect("stopped", "i-1") == Expect.LIVE
    assert node_expect("terminating", "i-1") == Expect.ENDING
    assert node_expect("failed", None) == Expect.ENDED
    assert builder_expect(True, True) == Expect.ENDED
    assert Category.LEAKED == "leaked" and Reason.GONE == "gone"
