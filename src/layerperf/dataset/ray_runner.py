"""Configurations measured as Ray tasks: one per node at a time, results back to the driver.

``--ray ADDRESS`` joins a running cluster (every node must have layerperf and the runtimes it
measures installed); ``--ray local`` starts a Ray instance on this machine for the sweep and stops
it after. Each task runs :func:`~layerperf.dataset.measure.run_config` on a node chosen by the driver
and asks for all of that node's CPUs, so that no other task of the sweep runs beside it and disturbs
its timings; when it finishes, the node gets the next configuration. Results (the layers' records)
come back to the driver, which alone writes the store.

A local instance is kept to itself. Ray 2.60's servers listen on every interface (its runtime-env agent
on the host's address) unless the node's address is loopback, and it takes that address from the
network route (a ``_node_ip_address`` of 127.0.0.1 is turned back into the host's) unless clusters are
turned off (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``: the node is then 127.0.0.1, and so is every
server's address). So a local instance is started with that, with token authentication off
(``RAY_AUTH_MODE=disabled``: no ``~/.ray/auth_token`` written), no usage reporting, no dashboard, and
its session files in a temporary folder of its own (not ``/tmp/ray``) removed at the end. Before any
task, the sockets the instance listens on are read from ``/proc`` and a non-loopback one stops the
sweep (:func:`listening_addresses`).

Ray is an optional extra (``pip install 'layerperf[ray]'``), imported only here and only when used.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

from layerperf.dataset.config import Config
from layerperf.dataset.measure import ConfigResult, failed, run_config
from layerperf.errors import InputError, MissingDependency

INSTALL_HINT = "pip install 'layerperf[ray]'"
LOCAL = "local"
# a local instance: loopback only, no token file, no usage report
LOCAL_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
MAX_TEMP_ROOT = 40
OBJECT_STORE_BYTES = 100 * 2**20  # results are a few MB of records; Ray's default takes 30% of memory


def _last_line(exc: BaseException) -> str:
    lines = [x.strip() for x in str(exc).splitlines() if x.strip()]
    return lines[-1] if lines else type(exc).__name__


def import_ray(address: str | None = None) -> Any:
    """ray, or one line saying how to install it. For a ``local`` instance the environment it reads at
    import (and its processes inherit) is set first: a module that imported ray before would have read it."""
    if address == LOCAL:
        os.environ.update(LOCAL_ENV)
    try:
        import ray
    except ImportError:
        raise MissingDependency("Ray (ray)", INSTALL_HINT) from None
    return ray


PROBE_S = 5.0  # how long a cluster's address is given to answer before Ray is asked to join it


def checked_address(address: str) -> str:
    """``--ray``'s address, trimmed: ``local``, ``auto``, a URL (``ray://HOST:PORT``), a name Ray resolves,
    or ``HOST:PORT`` with a port number; InputError in one line for none or a malformed one (Ray would log
    its own traceback for ``:``), before anything is made."""
    text = address.strip()
    hint = "a cluster's HOST:PORT (ray start --head prints it), ray://HOST:PORT, auto, or local"
    if not text:
        raise InputError("--ray names no address", hint=hint)
    if text in (LOCAL, "auto") or "://" in text:
        return text
    host, sep, port = text.rpartition(":")
    if sep and not (host.strip("[]") and port.isdigit() and 0 < int(port) < 65536):
        raise InputError(f"--ray {text!r} is no address: HOST:PORT with a port number", hint=hint)
    return text


def _reachable(address: str) -> None:
    """InputError when nothing answers at a ``HOST:PORT`` address: Ray itself would retry for minutes,
    printing its own warnings, and not stop at a SIGTERM meanwhile. Other forms (``auto``, ``ray://``) are
    left to Ray."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "/" in address or (":" in host and not host.startswith("[")):
        return  # no port, a URL, a bare IPv6 address (``::1``): Ray's to read
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_S).close()
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise InputError(f"cannot join the Ray cluster at {address}: nothing answers there ({why})",
                         hint="give the address of the cluster's head node (ray start --head prints it)") from None


def _task(cfg: Config) -> ConfigResult:
    """What a Ray task runs: one configuration, on the node it was sent to."""
    return run_config(cfg, worker=f"ray:{socket.gethostname()}:{os.getpid()}")


class RayExecutor:
    """Configurations as Ray tasks, one per alive node at a time."""

    def __init__(self, address: str) -> None:
        self.ray = import_ray(address)
        self._temp: str | None = None
        self._in_flight: dict[Any, tuple[Config, str]] = {}  # object ref -> (config, node id)
        if address == LOCAL:
            self._start_local()
        else:
            self._connect(address)
        self._nodes = {n["NodeID"]: n for n in self.ray.nodes() if n.get("Alive")}
        if not self._nodes:
            self.close()
            raise InputError(f"the Ray cluster at {address} has no alive node")
        self._remote = self.ray.remote(_task)

    def _start_local(self) -> None:
        # Ray's socket paths (its folder + ~60 bytes of session and socket names) must fit in 107 bytes
        root = tempfile.gettempdir()
        self._temp = tempfile.mkdtemp(prefix="lp-ray-", dir=root if len(root) <= MAX_TEMP_ROOT else "/tmp")
        try:
            self.ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, _temp_dir=self._temp,
                          object_store_memory=OBJECT_STORE_BYTES, log_to_driver=False, configure_logging=False)
        except Exception as exc:  # Ray's own start-up errors: one line
            self.close()
            raise InputError(f"cannot start a local Ray instance: {_last_line(exc)}") from None
        exposed = [a for a in listening_addresses(_process_tree(os.getpid())) if not _loopback(a)]
        if exposed:
            self.close()
            raise InputError("the local Ray instance listens beyond this machine (" + ", ".join(sorted(exposed))
                             + "): refused", hint="--ray local must listen on loopback only")

    def _connect(self, address: str) -> None:
        _reachable(address)
        try:
            self.ray.init(address=address, log_to_driver=False, configure_logging=False)
        except Exception as exc:  # Ray's own connection errors: one line
            raise InputError(f"cannot join the Ray cluster at {address}: {_last_line(exc)}") from None

    def free(self) -> int:
        return len(self._nodes) - len(self._in_flight)

    def submit(self, cfg: Config) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        busy = {node for _, node in self._in_flight.values()}
        node = next(n for n in self._nodes if n not in busy)
        cpus = float(self._nodes[node].get("Resources", {}).get("CPU", 1))
        ref = self._remote.options(num_cpus=cpus, max_retries=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
            node_id=node, soft=False)).remote(cfg)
        self._in_flight[ref] = (cfg, node)

    def wait(self) -> list[ConfigResult]:
        ready, _ = self.ray.wait(list(self._in_flight), num_returns=1)
        out = []
        for ref in ready:
            cfg, node = self._in_flight.pop(ref)
            try:
                out.append(self.ray.get(ref))
            except Exception as exc:  # the task's worker or node died: the configuration failed, the sweep goes on
                reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                out.append(failed(cfg, f"the Ray task failed: {type(exc).__name__}: {reason}", worker=f"ray:{node}"))
        return out

    def close(self) -> None:
        for ref in list(self._in_flight):
            with contextlib.suppress(Exception):  # a task that ended meanwhile
                self.ray.cancel(ref, force=True)
        self._in_flight.clear()
        if self.ray.is_initialized():
            self.ray.shutdown()
        if self._temp is not None:
            shutil.rmtree(self._temp, ignore_errors=True)
            self._temp = None


# -- what a local instance listens on ------------------------------------------------------------
def _process_tree(root: int) -> set[int]:
    """``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree.add(pid)
            todo += children.get(pid, [])
    return tree


def _socket_inodes(pids: set[int]) -> set[str]:
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:  # a process that ended, or one we may not read
            continue
    return inodes


def _address(hex_addr: str) -> str:
    host, port = hex_addr.split(":")
    raw = bytes.fromhex(host)
    # /proc/net/tcp{,6} writes addresses as 32-bit words in host (little-endian) order
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    family = socket.AF_INET if len(words) == 4 else socket.AF_INET6
    return f"{socket.inet_ntop(family, words)}:{int(port, 16)}"


def listening_addresses(pids: set[int]) -> set[str]:
    """``address:port`` of every TCP socket in LISTEN state that one of ``pids`` holds (from /proc/net)."""
    inodes = _socket_inodes(pids)
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[3] == "0A" and cols[9] in inodes:  # 0A: TCP_LISTEN
                out.add(_address(cols[1]))
    return out


def _loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0]
    return host.startswith("127.") or host in {"::1", "::ffff:127.0.0.1"} or host.startswith("::ffff:127.")
