"""scripts/with-test-services, which `make test` runs the suite through: asked for a
throwaway PostgreSQL, it starts one the command can use, says so, and removes it after."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "with-test-services"

PROBE = """
import os, sqlalchemy as sa
url = os.environ["GPUCAP_TEST_PG"]
with sa.create_engine(url).connect() as c:
    print("ANSWER", c.execute(sa.text("select current_database()")).scalar(), url)
"""


def _initdb_installed() -> bool:
    return any(Path("/usr/lib/postgresql").glob("*/bin/initdb"))


def test_a_throwaway_postgresql_serves_the_command_and_is_removed_after() -> None:
    if not _initdb_installed() and os.environ.get("CI") != "true":
        pytest.skip("Debian's postgresql package is not installed")
    env = {**os.environ, "GPUCAP_TEST_PG_THROWAWAY": "1"}
    done = subprocess.run(
        [str(SCRIPT), sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("ANSWER ")]
    _, database, url = line.split()
    assert database == "test"
    port = make_url(url).port
    assert port is not None and port != 5432  # its own cluster, not the machine's
    said = re.search(r"started a throwaway cluster on 127\.0\.0\.1:(\d+) in (\S+) ", done.stderr)
    assert said, done.stderr
    assert int(said.group(1)) == port
    assert not Path(said.group(2)).exists()  # its data directory is gone
    with pytest.raises(OSError):  # and nothing listens there any more
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_the_commands_exit_status_comes_through() -> None:
    env = dict(os.environ)
    done = subprocess.run(
        [str(SCRIPT), sys.executable, "-c", "raise SystemExit(7)"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 7, done.stderr


def test_a_users_own_server_that_does_not_answer_is_named_not_replaced() -> None:
    if shutil.which("pg_isready") is None:
        pytest.skip("pg_isready is not installed")
    url = "postgresql+psycopg://postgres@127.0.0.1:9/test"  # nothing listens on port 9
    env = {**os.environ, "GPUCAP_TEST_PG": url}
    done = subprocess.run(
        [str(SCRIPT), sys.executable, "-c", "import os; print(os.environ['GPUCAP_TEST_PG'])"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == url
    assert "nothing answers at 127.0.0.1:9 (GPUCAP_TEST_PG)" in done.stderr
