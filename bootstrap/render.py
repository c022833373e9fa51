"""A node's user data as a cloud-init document: the same for AWS (``UserData``), GCP (the
``user-data`` metadata key) and OCI (``user_data``), since each cloud's images run
cloud-init; the adapters encode it as their API wants (``providers/<cloud>/instances.py``).

The document writes the bootstrap script and the files of this node only: who it is and
what it serves (``node.env``, sourced by the script), the engine's arguments one per line,
its environment as a docker env file, where its weights may be fetched from (one URI a line,
in the order to try them) and the node's single-use report token when there is one.
Nothing else secret goes in: the cloud stores user data in clear and shows it to anyone
who may describe the instance, so the node fetches its weights with its own identity
(instance profile, service account, instance principal).

The script goes into cloud-init's per-boot scripts directory instead of ``runcmd``:
cloud-init runs user scripts and ``write_files`` once per instance, but its
``scripts_per_boot`` module (in every distribution's default final stage, after
``write_files``) runs that directory on every boot, the first included. So a node stopped
and started again (a warm pool's resume) boots again: instance-store NVMe is wiped by a stop
(coldstart.md §4), so its weights are fetched again and its engine restarted. Pure."""

from __future__ import annotations

import ast
import base64
import gzip
import re
import shlex
from dataclasses import dataclass
from importlib.resources import files

import yaml

from runtimes import Launch
from schema.types import Cloud

SCRIPT_PATH = "/var/lib/cloud/scripts/per-boot/gpucap-bootstrap.sh"  # run on every boot
FETCH_PATH = "/opt/gpucap/fetch.py"  # bootstrap/fetch.py: s3:// and gs:// weights
CONF_DIR = "/etc/gpucap"
WEIGHTS_DIR = "/mnt/gpucap/weights"  # the instance's local NVMe where it has one
# A gang's argument naming the leader's address, until the node knows it: rank 0 puts its
# own private address there at boot, a worker the address its node.env gives.
LEADER_PLACEHOLDER = "@GPUCAP_LEADER@"
# A node tries at most this many weight sources: each costs its URI in user data, and past a
# few nearby copies and the origins another one is seldom worth the wait of a failed read.
MAX_WEIGHT_SOURCES = 6
# The smallest of the three clouds' limits: EC2 takes at most 16 KB of user data (before
# its base64), OCI 32,000 bytes of metadata, GCP 256 KB per metadata value.
MAX_USER_DATA_BYTES = 16 * 1024


class UserDataTooLarge(ValueError):
    pass


@dataclass(frozen=True)
class NodeBoot:
    node_id: str
    customer: str
    model: str
    cloud: Cloud
    gpus: int  # on this node
    launch: Launch
    weights_uri: str | None = None  # None: the engine fetches the model by its own name
    # Where to fetch the weights from when ``weights_uri`` fails (missing, refused, a
    # checksum mismatch), in order; ignored without ``weights_uri``.
    weights_fallbacks: tuple[str, ...] = ()
    report_url: str | None = None  # None: no phase reports; the daemon polls health
    token: str | None = None  # the node's single-use report token
    leader: str | None = None  # a worker's leader address (rank 0: itself)
    ready_timeout_s: int = 1800
    # An image builder (``controlplane/loop/images.py``): check the driver, start the
    # container runtime, pull the engine's image, report ``baked`` with the image's digest
    # and stop, leaving no file of this boot on the disk that is imaged.
    bake: bool = False


def script() -> str:
    """``bootstrap/node.sh`` as a node gets it: without its comments (about 2 KB of the 16 KB
    EC2 allows), the shebang and shellcheck's directives kept. A trailing comment goes only
    where the code before it closes every quote it opens."""
    text = files("bootstrap").joinpath("node.sh").read_text(encoding="utf-8")
    out = []
    for i, line in enumerate(text.splitlines(keepends=True)):
        if i > 0 and line.lstrip().startswith("#") and "shellcheck " not in line:
            continue
        m = _TRAILING_COMMENT.match(line)
        if m and m["code"].count('"') % 2 == 0 and m["code"].count("'") % 2 == 0:
            line = m["code"] + "\n"
        out.append(line)
    return "".join(out)


_TRAILING_COMMENT = re.compile(r"^(?P<code>.*\S)\s{2,}# .*$", re.S)


def fetch_tool() -> str:
    """``bootstrap/fetch.py`` without its docstrings, gzipped and base64-encoded (cloud-init's
    ``gz+b64``): about 7 KB of the 16 KB EC2 allows."""
    tree = ast.parse(files("bootstrap").joinpath("fetch.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    packed = gzip.compress(ast.unparse(tree).encode(), compresslevel=9, mtime=0)
    return base64.b64encode(packed).decode()


def render(boot: NodeBoot) -> str:
    """The ``#cloud-config`` document for ``boot``. Raises :class:`UserDataTooLarge` past
    the smallest cloud's limit."""
    launch = boot.launch
    gang = launch.gang
    env = {
        "NODE_ID": boot.node_id,
        "CUSTOMER": boot.customer,
        "MODEL": boot.model,
        "CLOUD": boot.cloud.value,
        "ENGINE": launch.engine.value,
        "IMAGE": launch.image,
        "PORT": str(launch.port),
        "HEALTH_PATH": launch.health_path,
        "GPUS": str(boot.gpus),
        "WEIGHTS_DIR": WEIGHTS_DIR,
        "READY_TIMEOUT_S": str(boot.ready_timeout_s),
    }
    if boot.bake:
        env["BAKE"] = "1"
    sources = weight_sources(boot)
    if boot.report_url:
        env["REPORT_URL"] = boot.report_url
    if gang is not None:
        if gang.rank > 0 and not boot.leader:
            raise ValueError(f"node {boot.node_id}: rank {gang.rank} needs its leader's address")
        env["RANK"] = str(gang.rank)
        env["LEADER"] = "self" if gang.rank == 0 else str(boot.leader)
    files_ = [
        _file(SCRIPT_PATH, script(), "0755"),
        _file(f"{CONF_DIR}/node.env", "".join(f"{k}={shlex.quote(v)}\n" for k, v in env.items())),
        _file(f"{CONF_DIR}/engine.args", "".join(f"{a}\n" for a in launch.argv), "0644"),
        _file(f"{CONF_DIR}/engine.env", "".join(f"{k}={v}\n" for k, v in launch.env.items())),
    ]
    if sources:
        files_.append(_file(f"{CONF_DIR}/weights.sources", "".join(f"{u}\n" for u in sources)))
    if any(u.startswith(("s3://", "gs://")) for u in sources):
        files_.append({**_file(FETCH_PATH, fetch_tool(), "0755"), "encoding": "gz+b64"})
    if boot.token:
        files_.append(_file(f"{CONF_DIR}/node.token", boot.token))
    # No runcmd: the per-boot script runs on the first boot too, so it must not run twice.
    doc = {"write_files": files_}
    text = "#cloud-config\n" + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=1000)
    size = len(text.encode())
    if size > MAX_USER_DATA_BYTES:
        raise UserDataTooLarge(
            f"user data of node {boot.node_id} is {size} bytes; the limit is "
            f"{MAX_USER_DATA_BYTES} (EC2's)"
        )
    return text


def weight_sources(boot: NodeBoot) -> tuple[str, ...]:
    """The URIs ``boot`` fetches its weights from, in order. Raises ValueError past
    :data:`MAX_WEIGHT_SOURCES` or for a URI a line of ``weights.sources`` cannot hold."""
    if not boot.weights_uri:
        return ()
    sources = tuple(dict.fromkeys((boot.weights_uri, *boot.weights_fallbacks)))
    if len(sources) > MAX_WEIGHT_SOURCES:
        raise ValueError(
            f"node {boot.node_id}: {len(sources)} weight sources, at most {MAX_WEIGHT_SOURCES}"
        )
    for uri in sources:
        if not uri or uri != uri.strip() or "\n" in uri:
            raise ValueError(f"node {boot.node_id}: weight source {uri!r} is not one line")
    return sources


class _Dumper(yaml.SafeDumper):
    """Multi-line contents as literal blocks, so a rendered document reads as the files."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _file(path: str, content: str, mode: str = "0600") -> dict[str, str]:
    # (cloud-init's default owner is root:root: not said, some 20 bytes a file)
    return {"path": path, "permissions": mode, "content": content}
