"""A throwaway PostgreSQL cluster for the usage-store tests, from the server's own binaries.

Used by the tests (when ``LLMCHAT_TEST_POSTGRES_URL`` is unset) and by
``.ci/run``::

    python tests/support/pg_cluster.py start    # prints: DIR URL
    python tests/support/pg_cluster.py stop DIR

The cluster listens on a Unix socket in its own temporary directory only (no
TCP port to collide on), trusts local connections, and runs as the
``postgres`` user when started as root (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

USER = "llmchat"
DATABASE = "llmchat_test"
PORT = 5432  # only names the socket file; nothing listens on TCP


class ClusterUnavailable(Exception):
    """Why no cluster could be started: the message names what was missing."""


def find_binary(name: str) -> str | None:
    """`name` on PATH, else in the newest Debian server package (not on PATH there)."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    return candidates[-1] if candidates else None


def _as_server_user() -> list[str]:
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise ClusterUnavailable(
            "running as root and there is no 'postgres' user to run PostgreSQL as"
        ) from None
    runuser = shutil.which("runuser")
    if runuser is None:
        raise ClusterUnavailable("running as root and runuser (util-linux) is not installed")
    return [runuser, "-u", "postgres", "--"]


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise ClusterUnavailable(f"{what} failed: {' | '.join(tail)}")


def url_of(directory: str) -> str:
    return f"postgresql://{USER}@/{DATABASE}?host={directory}&port={PORT}"


def start() -> tuple[str, str]:
    """Init and start a cluster in a new temporary directory; return (directory, URL)."""
    initdb, pg_ctl = find_binary("initdb"), find_binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        raise ClusterUnavailable(
            "PostgreSQL's initdb/pg_ctl were not found (apt-get install postgresql)"
        )
    prefix = _as_server_user()
    directory = tempfile.mkdtemp(prefix="llmchat-pg-")
    try:
        if prefix:
            os.chmod(directory, 0o755)  # root's caller must reach the socket
            shutil.chown(directory, user="postgres")
        data = os.path.join(directory, "data")
        _run(
            [*prefix, initdb, "-D", data, "-U", USER, "--auth=trust", "-E", "UTF8", "--no-sync"],
            "initdb",
        )
        options = (
            f"-c listen_addresses='' -c unix_socket_directories='{directory}' -p {PORT} "
            "-c fsync=off -c full_page_writes=off"
        )
        log = os.path.join(directory, "server.log")
        # -w: pg_ctl itself waits until the server accepts connections.
        _run(
            [*prefix, pg_ctl, "-D", data, "-o", options, "-l", log, "-w", "-t", "60", "start"],
            "pg_ctl start",
        )
        _create_database(directory)
    except BaseException:
        stop(directory)
        raise
    return directory, url_of(directory)


def _create_database(directory: str) -> None:
    try:
        import psycopg
    except ImportError:
        raise ClusterUnavailable(
            "psycopg is not installed (pip install -e '.[postgres]')"
        ) from None
    admin = f"postgresql://{USER}@/postgres?host={directory}&port={PORT}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {DATABASE}")


def stop(directory: str) -> None:
    """Stop the cluster in `directory` (if running) and remove the directory."""
    pg_ctl = find_binary("pg_ctl")
    data = os.path.join(directory, "data")
    if pg_ctl is not None and os.path.exists(os.path.join(data, "postmaster.pid")):
        prefix = _as_server_user()
        subprocess.run(
            [*prefix, pg_ctl, "-D", data, "-m", "fast", "-w", "stop"],
            capture_output=True,
            timeout=120,
            check=False,
        )
    shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str]) -> int:
    if argv[:1] == ["start"]:
        try:
            directory, url = start()
        except ClusterUnavailable as exc:
            print(f"pg_cluster: {exc}", file=sys.stderr)
            return 1
        print(directory, url)
        return 0
    if argv[:1] == ["stop"] and len(argv) == 2:
        stop(argv[1])
        return 0
    print("usage: pg_cluster.py start | stop DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
