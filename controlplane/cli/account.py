"""``gpucap account check NAME|FILE``: an on-call preflight for one cloud account.

It runs locally, through the same provider adapters the daemon uses (no daemon needed),
and checks, per cloud: the credentials work (assume role / impersonation / profile),
the regions are reachable, the H100/H200 shapes are offered there, the quota has room for
at least one 8-GPU node where the API exposes it, and the base or baked image is present
per region. Every failed check prints its reason; the exit status is 1 if any failed.

FILE is an account file (``examples/accounts/*.yaml``; ``schema/account_file.py``). NAME
is looked up as ``NAME.yaml`` (or ``.yml``) in the accounts directory: ``--accounts-dir``,
else ``$GPUCAP_ACCOUNTS_DIR``, else ``<state dir>/accounts`` (``controlplane/settings.py``).

For a customer-owned AWS account the ExternalId is the daemon's (``providers.credentials``):
the check reads ``$GPUCAP_EXTERNAL_ID_SECRET`` or the daemon's state directory, and never
invents a key, which would yield an id no trust policy knows.

Each cloud's own checks live in ``providers/<cloud>/check.py`` as
``preflight(provider, regions[, *, images]) -> list[Finding]`` where a finding has
``check``, ``target``, ``ok`` and ``detail``; a cloud without one gets the generic checks
over the Provider interface (``providers/preflight.py``).
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from controlplane.cli.output import print_data
from controlplane.cli.remote import EXIT_REJECTED, Output, OutputOption, console, err_console
from controlplane.settings import state_dir
from controlplane.telemetry import configure_logging
from providers.credentials import ExternalIdGenerator
from schema.account_file import LoadedAccount, load_account_file
from schema.policy_file import PolicyError
from schema.types import Cloud, Owner

ACCOUNTS_DIR_ENV = "GPUCAP_ACCOUNTS_DIR"
SHARED_CUSTOMER = "gpucap"  # the "customer" of gpucap's own shared accounts (session names)
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")

account_app = typer.Typer(
    name="account", help="Cloud accounts: preflight checks.", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    app.add_typer(account_app)


@dataclass(frozen=True)
class Finding:
    check: str
    target: str
    ok: bool
    detail: str


def accounts_dir(explicit: Path | None = None) -> Path:
    if explicit is not None:
        return explicit
    from_env = os.environ.get(ACCOUNTS_DIR_ENV)
    return Path(from_env).expanduser() if from_env else state_dir() / "accounts"


def resolve_account_file(target: str, directory: Path) -> Path:
    """A path to an existing file is used as is; a bare NAME is looked up in ``directory``."""
    as_path = Path(target)
    if as_path.is_file():
        return as_path
    if _NAME.match(target):
        for suffix in (".yaml", ".yml"):
            candidate = directory / f"{target}{suffix}"
            if candidate.is_file():
                return candidate
        raise LookupError(
            f"no account file {target}.yaml in {directory} "
            f"(set --accounts-dir or ${ACCOUNTS_DIR_ENV}, or pass a file path)"
        )
    raise LookupError(f"{target}: no such file")


def run_check(
    loaded: LoadedAccount,
    *,
    endpoint_url: str | None,
    customer: str | None = None,
) -> tuple[list[Finding], str | None]:
    """Build the account's provider and run its cloud's preflight. Returns the findings and
    the ExternalId used (AWS customer-owned accounts), for display."""
    from providers.registry import ProviderUnavailable, build_provider

    spec = loaded.spec
    who = customer or spec.customer or SHARED_CUSTOMER
    external_id: str | None = None
    try:
        if spec.cloud == Cloud.AWS and spec.owner == Owner.CUSTOMER:
            external_id = ExternalIdGenerator.from_environment(
                state_dir(), create=False
            ).for_customer(who)
        provider = build_provider(
            spec.account(), customer=who, external_id=external_id, endpoint_url=endpoint_url
        )
    except (ValueError, ProviderUnavailable) as exc:
        return [Finding("setup", spec.name, False, str(exc))], external_id
    return _preflight(spec.cloud, provider, spec.regions, spec.images), external_id


def _preflight(
    cloud: Cloud, provider: Any, regions: Sequence[str], images: Mapping[str, str]
) -> list[Finding]:
    """The cloud's own preflight when its adapter has one, else the generic one over the
    Provider interface; images the cloud's check does not take are checked generically."""
    from providers.preflight import generic_preflight, image_findings

    modname = f"providers.{cloud.value}.check"
    try:
        module = importlib.import_module(modname)
    except ModuleNotFoundError as exc:
        if exc.name != modname:
            raise
        found = generic_preflight(provider, list(regions), images=images)
    else:
        fn = module.preflight
        if "images" in inspect.signature(fn).parameters:
            found = list(fn(provider, list(regions), images=dict(images)))
        else:
            found = list(fn(provider, list(regions))) + image_findings(provider, images)
    return [Finding(str(f.check), str(f.target), bool(f.ok), str(f.detail)) for f in found]


AccountArgument = Annotated[
    str,
    typer.Argument(
        help="Account NAME (looked up in the accounts directory) or an account FILE.",
        metavar="NAME|FILE",
        show_default=False,
    ),
]


@account_app.command("check")
def check(
    target: AccountArgument,
    endpoint_url: Annotated[
        str | None,
        typer.Option(
            "--endpoint-url",
            show_default=False,
            help="Point the cloud SDK at this endpoint (an emulator) instead of the real API.",
        ),
    ] = None,
    output: OutputOption = Output.TABLE,
    accounts_directory: Annotated[
        Path | None,
        typer.Option(
            "--accounts-dir",
            envvar=ACCOUNTS_DIR_ENV,
            show_default=False,
            help="Where NAME.yaml account files live (default: <state dir>/accounts).",
        ),
    ] = None,
    customer: Annotated[
        str | None,
        typer.Option(
            "--customer", show_default=False, help="Override the account file's customer."
        ),
    ] = None,
) -> None:
    """Preflight an account: credentials, regions, H100/H200 offerings, quota, images."""
    # Adapters log through structlog; send it to stderr so `--output json` stays pure JSON.
    configure_logging("warning", json=True)
    try:
        path = resolve_account_file(target, accounts_dir(accounts_directory))
        loaded = load_account_file(path)
    except LookupError as exc:
        err_console().print(f"account check: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_REJECTED) from None
    except PolicyError as exc:
        for p in exc.problems:
            err_console().print(str(p), markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_REJECTED) from None

    findings, external_id = run_check(loaded, endpoint_url=endpoint_url, customer=customer)
    ok = bool(findings) and all(f.ok for f in findings)
    spec = loaded.spec
    if output.structured:
        doc = {
            "account": spec.name,
            "cloud": spec.cloud.value,
            "owner": spec.owner.value,
            "source": loaded.source,
            "credentials": spec.credentials.model_dump(mode="json", exclude_none=True),
            "external_id": external_id,
            "ok": ok,
            "findings": [f.__dict__ for f in findings],
        }
        print_data(doc, output)
    else:
        _print_table(loaded, findings, external_id, ok)
    if not ok:
        failed = [f for f in findings if not f.ok]
        reasons = "; ".join(f"{f.check} {f.target}: {f.detail}" for f in failed)
        err_console().print(
            f"account check failed for {spec.name}: {reasons}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_REJECTED)


def _print_table(
    loaded: LoadedAccount, findings: list[Finding], external_id: str | None, ok: bool
) -> None:
    spec = loaded.spec
    out = console()
    refs = ", ".join(f"{k}={v}" for k, v in spec.credentials.model_dump(exclude_none=True).items())
    out.print(
        f"account {spec.name} ({spec.cloud.value}, {spec.owner.value}) from {loaded.source}",
        markup=False,
        highlight=False,
    )
    out.print(
        f"credentials: {refs or 'default chain'}", markup=False, highlight=False, soft_wrap=True
    )
    if external_id:
        out.print(
            f"external id (for the customer's trust policy): {external_id}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    table = Table("CHECK", "TARGET", "RESULT", "DETAIL")
    for f in findings:
        # Text(): details quote cloud messages, which may contain [brackets] rich would eat.
        table.add_row(Text(f.check), Text(f.target), "ok" if f.ok else "FAIL", Text(f.detail))
    out.print(table)
    out.print(
        "all checks passed" if ok else "some checks FAILED",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
