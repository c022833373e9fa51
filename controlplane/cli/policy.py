"""``gpucap policy``: validate a policy file offline, apply it through the daemon, show the
active one, print the JSON Schema for editors.

Problems print one per line as ``file:line:col: field.path: reason`` (the format editors and
CI annotate), to stderr, with a non-zero exit; ``validate`` and ``apply`` print the same
lines for the same file, whether the check ran locally or in the daemon."""

from __future__ import annotations

import getpass
import json
import socket
import sys
from pathlib import Path
from typing import Annotated

import typer

from controlplane.cli.output import print_data, to_data
from controlplane.cli.remote import (
    DEFAULT_ADDR,
    DEFAULT_TIMEOUT_S,
    EXIT_REJECTED,
    AddrOption,
    CaOption,
    Output,
    OutputOption,
    TimeoutOption,
    TokenOption,
    daemon,
    fail,
)
from controlplane.grpc.client import format_problem
from schema.gen.gpucap.v1 import control_plane_pb2 as pb
from schema.policy import Problem, json_schema
from schema.policy_file import LoadedPolicy, PolicyError, load_policy_file, parse_policy
from schema.policy_includes import read_policy_text

policy_app = typer.Typer(
    name="policy",
    help="Customer policy files: validate, apply, show, schema.",
    no_args_is_help=True,
)

AllowDeletesOption = Annotated[
    bool,
    typer.Option(
        "--allow-deletes",
        help="Let this apply delete models or drain replicas (as 'allow_deletes: true' in the "
        "file does).",
    ),
]
FileArgument = Annotated[
    Path, typer.Argument(help="Policy YAML file ('-' reads standard input).", show_default=False)
]


def register(app: typer.Typer) -> None:
    app.add_typer(policy_app)


def _read(file: Path) -> tuple[str, str]:
    """(text, source name) of a file or stdin; unreadable files exit with the reason."""
    if str(file) == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        # Account includes expanded here, so the daemon gets a self-contained policy.
        return read_policy_text(file), str(file)
    except PolicyError as exc:
        fail("\n".join(str(p) for p in exc.problems))


def _load(file: Path) -> LoadedPolicy:
    if str(file) == "-":
        text, source = _read(file)
        return parse_policy(text, source=source)
    return load_policy_file(file)


def _problem_json(p: Problem) -> dict[str, object]:
    return {
        "file": p.file,
        "line": p.line,
        "column": p.column,
        "field": p.field,
        "reason": p.reason,
    }


@policy_app.command("validate")
def validate(
    files: Annotated[
        list[Path], typer.Argument(help="Policy YAML files ('-' reads standard input).")
    ],
    output: OutputOption = Output.TABLE,
) -> None:
    """Check policy files offline (no daemon needed): every problem with file, line, field
    path and reason; exit 1 if any file has one."""
    results: list[dict[str, object]] = []
    failed = False
    for file in files:
        try:
            loaded = _load(file)
        except PolicyError as exc:
            failed = True
            results.append(
                {
                    "file": str(file),
                    "valid": False,
                    "problems": [_problem_json(p) for p in exc.problems],
                }
            )
            if not output.structured:
                for problem in exc.problems:
                    typer.echo(str(problem), err=True)
            continue
        policy = loaded.policy
        results.append(
            {
                "file": str(file),
                "valid": True,
                "customer": policy.customer,
                "sha256": loaded.sha256,
                "warnings": list(loaded.warnings),
            }
        )
        if not output.structured:
            for warning in loaded.warnings:
                typer.echo(warning, err=True)
            typer.echo(
                f"{loaded.source}: ok (customer {policy.customer}, {len(policy.accounts)} "
                f"accounts, {len(policy.models)} models)"
            )
    if output.structured:
        print_data(results, output)
    if failed:
        raise typer.Exit(EXIT_REJECTED)


@policy_app.command("apply")
def apply(
    file: FileArgument,
    applied_by: Annotated[
        str | None,
        typer.Option(
            "--as", help="Who is applying (recorded with the version); default user@host."
        ),
    ] = None,
    allow_deletes: AllowDeletesOption = False,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    """Apply a policy through the daemon. A rejected policy changes nothing: the daemon keeps
    the active one and this prints every problem. One that would delete models or drain
    replicas is refused unless the file says allow_deletes: true or --allow-deletes is given
    (see `gpucap policy diff`)."""
    text, source = _read(file)
    who = applied_by or f"{getpass.getuser()}@{socket.gethostname()}"
    request = pb.ApplyPolicyRequest(
        yaml=text, source=source, applied_by=who, allow_deletes=allow_deletes
    )
    with daemon(addr, token, ca, timeout) as c:
        resp: pb.ApplyPolicyResponse = c.stub.ApplyPolicy(request, timeout=c.timeout)
    if output.structured:
        data = to_data(resp)
        data["policy"].pop("yaml", None)  # the caller has the file
        print_data(data, output)
        return
    v = resp.policy
    if resp.changed:
        typer.echo(f"applied: {v.customer} policy v{v.version} (sha256 {v.sha256[:12]})")
    else:
        typer.echo(f"unchanged: {v.customer} policy v{v.version} is already active")


# `gpucap policy diff`: its exit status for a bad file (diff's "trouble"), and how a change
# shows, diff-style.
EXIT_INVALID_FILE = 2
_MARKS = {"create": "+", "change": "~", "delete": "-", "adopt": "~", "conflict": "!"}


@policy_app.command("diff")
def diff(
    file: FileArgument,
    allow_deletes: AllowDeletesOption = False,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    """What applying FILE would change against the active policy: models and accounts
    created, changed (field by field) and deleted, pools added and drained, and why the
    apply would be refused. Changes nothing. Exit 0: no differences; 1: differences; 2: the
    file has problems (printed as `validate` prints them)."""
    text, source = _read(file)
    try:
        parse_policy(text, source=source)  # (a bad file is trouble, not a difference)
    except PolicyError as exc:
        for problem in exc.problems:
            typer.echo(str(problem), err=True)
        raise typer.Exit(EXIT_INVALID_FILE) from exc
    request = pb.ApplyPolicyRequest(
        yaml=text, source=source, allow_deletes=allow_deletes, dry_run=True
    )
    with daemon(addr, token, ca, timeout) as c:
        resp: pb.ApplyPolicyResponse = c.stub.ApplyPolicy(request, timeout=c.timeout)
    if output.structured:
        print_data(resp, output)
    else:
        for change in resp.diff.changes:
            line = f"{_MARKS.get(change.action, '?')} {change.action} {change.kind} {change.name}"
            notes = [change.detail] if change.detail else []
            if change.drains:
                notes.append("needs allow_deletes")
            typer.echo(f"{line} ({'; '.join(notes)})" if notes else line)
            for f in change.fields:
                typer.echo(f"    {f.path}: {f.before or '(unset)'} -> {f.after or '(unset)'}")
        if not resp.diff.changes:
            typer.echo(f"{source}: no differences from the active policy")
        for p in resp.refusals:
            typer.echo(format_problem(p), err=True)
        if resp.refusals:
            typer.echo("error: the daemon would refuse this apply", err=True)
    if resp.diff.changes:
        raise typer.Exit(EXIT_REJECTED)


@policy_app.command("show")
def show(
    customer: Annotated[
        str | None,
        typer.Argument(
            help="Customer (optional when the daemon has only one).", show_default=False
        ),
    ] = None,
    version: Annotated[
        int | None, typer.Option("--version", min=1, help="An older version (default: active).")
    ] = None,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    """Print a customer's active (or an older) policy exactly as it was applied; who applied
    it and when go to stderr, so the YAML on stdout can be saved as-is."""
    request = pb.GetPolicyRequest(customer=customer or "", version=version)
    with daemon(addr, token, ca, timeout) as c:
        v: pb.PolicyVersion = c.stub.GetPolicy(request, timeout=c.timeout)
    if output.structured:
        print_data(v, output)
        return
    at = v.applied_at.ToDatetime().strftime("%Y-%m-%d %H:%M:%S UTC")
    state = "active" if v.active else "inactive"
    typer.echo(
        f"# {v.customer} policy v{v.version} ({state}), applied by {v.applied_by} at {at} "
        f"from {v.source or '-'}, sha256 {v.sha256}",
        err=True,
    )
    typer.echo(v.yaml, nl=not v.yaml.endswith("\n"))


@policy_app.command("schema")
def schema() -> None:
    """Print the policy file's JSON Schema (for editor validation)."""
    typer.echo(json.dumps(json_schema(), indent=2))
