"""A real Ray cluster on this machine: a head node and worker nodes as separate `ray start` processes.

For tests and benchmarks. Every node gets its own loopback address (127.0.0.2, 127.0.0.3, ...):
Ray rewrites a literal 127.0.0.1 to the machine's routable address, any other 127.x address is
kept, so node addresses never leave the loopback interface. Nodes run `ray start --block`, so
each node's processes are children of a process we started; `stop()` SIGTERMs those (Ray drains
the node and stops its processes) and kills by id whatever is left, never by name (`ray stop`
would stop every Ray process of this user on the machine). The cluster uses Ray's token
authentication with a fresh token in its own folder (never ~/.ray): drivers need `driver_env`.
"""
from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import psutil

HEAD_HOST = "127.0.0.2"  # 127.0.0.1 itself is rewritten by Ray to the routable address; see the docstring
OBJECT_STORE_BYTES = 128 * 2**20  # per node; enough for batches of file paths and records
START_TIMEOUT_S = 180.0  # a busy 2-core machine can take a minute to start two nodes


@dataclass(frozen=True)
class NodeSpec:
    """One node of the local cluster."""

    num_cpus: int  # logical CPUs the node offers to tasks and actors

    def __post_init__(self) -> None:
        if self.num_cpus < 1:
            raise ValueError(f"a node needs at least 1 CPU, got {self.num_cpus}")


class LocalRayCluster:
    """`with LocalRayCluster([NodeSpec(1), NodeSpec(1)]) as cluster:` -> `cluster.address` ('127.0.0.2:PORT').

    The first spec is the head node; each further spec is a worker node in its own process tree.
    Logs and sockets live in a fresh temporary folder under /tmp, removed on stop.
    """

    def __init__(self, nodes: list[NodeSpec], temp_root: Path | None = None) -> None:
        if not nodes:
            raise ValueError("a cluster needs at least a head node")
        self.nodes = nodes
        # Ray's socket paths must stay short (AF_UNIX limit of 107 bytes): a short folder under /tmp
        self.temp_dir = Path(tempfile.mkdtemp(prefix="lsray", dir=temp_root or "/tmp"))
        self.port = _free_port(HEAD_HOST)
        self.address = f"{HEAD_HOST}:{self.port}"
        self._processes: list[subprocess.Popen[bytes]] = []
        token = self.temp_dir / "auth_token"
        token.write_text(secrets.token_hex(32))  # 256 bits, as `ray get-auth-token --generate` makes
        token.chmod(0o600)
        # what a driver (ray.init, leanseg batch --ray) needs in its environment to join this cluster
        self.driver_env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}

    def __enter__(self) -> LocalRayCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        """Start the head, wait for its GCS, start the workers; return once every node is alive."""
        head = ["--head", "--port", str(self.port), "--include-dashboard", "false"]
        self._start_node(0, HEAD_HOST, head)
        _wait_for(lambda: self._started(0), self._processes, "the head node", self.log_tail)
        for index in range(1, len(self.nodes)):
            self._start_node(index, f"127.0.0.{2 + index}", ["--address", self.address])
        _wait_for(lambda: all(self._started(i) for i in range(len(self.nodes))), self._processes,
                  f"{len(self.nodes) - 1} worker node(s) to join", self.log_tail)

    def _start_node(self, index: int, host: str, role: list[str]) -> None:
        command = [
            str(Path(sys.executable).with_name("ray")), "start", *role, "--block",
            "--node-ip-address", host, "--num-cpus", str(self.nodes[index].num_cpus),
            "--temp-dir", str(self.temp_dir), "--disable-usage-stats",
            "--object-store-memory", str(OBJECT_STORE_BYTES),
            # ports Ray would otherwise give every node the same fixed default for
            "--dashboard-agent-listen-port", str(_free_port(host)),
            "--metrics-export-port", str(_free_port(host)),
            "--runtime-env-agent-port", str(_free_port(host)),
        ]
        log = open(self.temp_dir / f"node{index}.log", "wb")  # noqa: SIM115 (kept open by the child)
        # no drain on SIGTERM (it waits up to 30 s, for Ray Serve's sake): stop() tears the node down at once
        env = {**os.environ, **self.driver_env, "RAY_USAGE_STATS_ENABLED": "0",
               "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
        self._processes.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                                start_new_session=True))
        log.close()

    def _started(self, index: int) -> bool:
        """`ray start` says so once the node's raylet is registered with the head."""
        log = self.temp_dir / f"node{index}.log"
        return log.exists() and "Ray runtime started" in log.read_text(errors="replace")

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of each node's `ray start` output (for error messages)."""
        parts = []
        for path in sorted(self.temp_dir.glob("node*.log")):
            parts.append(f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(parts)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop every node we started (workers first), then remove the temporary folder."""
        for process in reversed(self._processes):
            _stop_tree(process, timeout_s)
        self._processes.clear()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _stop_tree(process: subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGTERM `ray start --block` (it drains the node and stops its processes); kill what stays."""
    try:
        tree = [psutil.Process(process.pid)]
        tree += tree[0].children(recursive=True)
    except psutil.NoSuchProcess:
        process.wait()
        return
    tree[0].terminate()
    _, alive = psutil.wait_procs(tree, timeout=timeout_s)
    for leftover in alive:
        try:
            leftover.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=10)
    process.wait()


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _wait_for(ready: Callable[[], bool], processes: list[subprocess.Popen[bytes]], what: str,
              logs: Callable[[], str]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        dead = [p for p in processes if p.poll() is not None]
        if dead:
            raise RuntimeError(f"a ray node exited (code {dead[0].returncode}) while waiting for {what}:\n{logs()}")
        if ready():
            return
        time.sleep(0.2)
    raise TimeoutError(f"waited {START_TIMEOUT_S:.0f} s for {what}:\n{logs()}")
