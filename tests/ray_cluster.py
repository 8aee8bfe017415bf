"""A real Ray cluster on this machine for the tests: a head node and worker nodes, each a separate ``ray start
--block`` process in its own session, on loopback addresses and free ports, with its own temporary folder.

Nothing here calls ``ray stop`` (it would stop every Ray process of the user, including other people's clusters):
each node is stopped by signalling its own process group, so only what this module started ends.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Ray rewrites 127.0.0.1 (as --node-ip-address or in --address) to the machine's outward address unless this
#: variable is 0, and a node started with it at 0 refuses to join a head ("multi-node clusters are not supported
#: on Windows and OSX"). So the head and every driver run with it at 0, and a worker node runs through
#: :data:`LOOPBACK_WORKER`, which keeps loopback addresses as given; the worker then takes its own address from
#: the route to the head's, 127.0.0.1. Nothing listens beyond loopback.
LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
RAY_START = [str(Path(sys.executable).with_name("ray")), "start"]
LOOPBACK_WORKER = [
    sys.executable,
    "-c",
    "import sys; import ray._private.services as services; "
    "services.resolve_ip_for_localhost = lambda host: host; "
    "from ray.scripts.scripts import main; sys.argv[0] = 'ray'; main()",
    "start",
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def pids_naming(folder: Path) -> list[int]:
    """The processes whose command line names ``folder`` (a node's own temporary folder: only its processes)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if str(folder) in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:  # ended meanwhile, or not ours to read
                continue
    return found


class Node:
    """One ``ray start --block`` process group; :meth:`kill` ends it (SIGKILL: a lost machine)."""

    def __init__(
        self, name: str, command: list[str], arguments: list[str], environment: dict[str, str], temp_root: Path
    ):
        self.name = name
        self.temp_dir = Path(tempfile.mkdtemp(prefix=f"r{name[0]}", dir=temp_root))
        self.log = open(self.temp_dir / "ray-start.log", "wb")
        self.process = subprocess.Popen(
            [
                *command,
                "--block",
                "--disable-usage-stats",
                f"--temp-dir={self.temp_dir}",
                f"--dashboard-agent-listen-port={free_port()}",
                f"--metrics-export-port={free_port()}",
                "--min-worker-port=0",
                "--max-worker-port=0",
                *arguments,
            ],
            env=environment,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    @property
    def killed(self) -> bool:
        return self.log.closed

    def log_tail(self, lines: int = 30) -> str:
        if not self.log.closed:
            self.log.flush()
        text = (self.temp_dir / "ray-start.log").read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal every process of this node: its session's process group, and the Ray workers (which start
        sessions of their own) found by this node's temporary folder on their command line; reap ``ray start``."""
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass
        for pid in pids_naming(self.temp_dir):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=20)
        self.log.close()  # also marks the node as killed on purpose


class Cluster:
    """A head node on 127.0.0.1 plus ``add_worker`` nodes; :meth:`shutdown` ends them all and removes their folders.

    ``environment`` is what every node's processes inherit (e.g. ``CALIBMED_DATA_DIR``): Ray tasks see the
    environment of the node they run on."""

    def __init__(self, environment: dict[str, str], num_cpus: int = 1, object_store_bytes: int = 80_000_000):
        # a token of its own (Ray's token authentication), so neither a token file in the home folder nor
        # another cluster on this machine decides whether the nodes and the driver accept each other
        self.auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
        self.environment = {**environment, **self.auth}
        self.num_cpus = num_cpus
        self.object_store_bytes = object_store_bytes
        self.temp_root = Path(tempfile.mkdtemp(prefix="calibmed-ray-", dir="/tmp"))  # socket paths must be short
        self.nodes: list[Node] = []
        self.port = 0
        self.address = ""
        try:
            self._start("head", RAY_START, self._head_arguments)
        except BaseException:
            self.shutdown()
            raise

    def _head_arguments(self) -> list[str]:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        return [
            "--head",
            "--include-dashboard=false",
            "--node-ip-address=127.0.0.1",
            f"--port={self.port}",
            f"--dashboard-port={free_port()}",
        ]

    def _start(self, name: str, command: list[str], arguments, attempts: int = 3) -> Node:
        """Start a node and wait until it is up; start it again (at most ``attempts`` times) when it dies on the
        way: on a busy machine a node's agents can miss the raylet's fixed 15 s start-up wait, and the raylet
        then aborts (ray-project/ray#65983)."""
        environment = {**os.environ, **self.environment, LOOPBACK_ONLY: "0" if command == RAY_START else "1"}
        for attempt in range(1, attempts + 1):
            node = Node(
                name,
                command,
                [
                    f"--num-cpus={self.num_cpus}",
                    "--num-gpus=0",
                    f"--object-store-memory={self.object_store_bytes}",
                    *arguments(),
                ],
                environment,
                self.temp_root,
            )
            try:
                self._wait(node)
            except RuntimeError:
                node.kill()
                if attempt == attempts:
                    raise
                continue
            self.nodes.append(node)
            return node

    def add_worker(self) -> Node:
        return self._start(f"worker{len(self.nodes)}", LOOPBACK_WORKER, lambda: [f"--address={self.address}"])

    @staticmethod
    def _wait(node: Node, timeout: float = 120.0) -> None:
        """Until ``ray start --block`` says the node is up (it prints that it now blocks)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not node.alive():
                raise RuntimeError(f"ray node {node.name} exited during start:\n{node.log_tail()}")
            if "block forever" in node.log_tail(200):
                return
            time.sleep(0.5)
        node.kill()
        raise TimeoutError(f"ray node {node.name} not ready after {timeout:.0f} s:\n{node.log_tail()}")

    def wait_for_nodes(self, count: int, timeout: float = 90.0) -> None:
        """Wait until ``count`` nodes are alive in the cluster (the calling process must be connected)."""
        import ray

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            alive = [node for node in ray.nodes() if node["Alive"]]
            if len(alive) >= count:
                return
            for node in self.nodes:
                if not node.killed and not node.alive():
                    raise RuntimeError(f"ray node {node.name} exited:\n{node.log_tail()}")
            time.sleep(0.5)
        raise TimeoutError(f"only {len([n for n in ray.nodes() if n['Alive']])} of {count} ray nodes joined")

    def shutdown(self) -> None:
        for node in reversed(self.nodes):  # SIGKILL: a graceful stop drains for up to 30 s, and nothing is kept
            node.kill(signal.SIGKILL)
        deadline = time.monotonic() + 20
        while (left := pids_naming(self.temp_root)) and time.monotonic() < deadline:
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)
        if left:
            raise RuntimeError(f"ray processes {left} of {self.temp_root} outlived the cluster")
        shutil.rmtree(self.temp_root, ignore_errors=True)
