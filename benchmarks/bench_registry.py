"""Pull against build for the kernel image (issue 33 item 3): what a node without the image pays
with `--super-registry` (a pull) and without (a build).

    .venv/bin/python benchmarks/bench_registry.py [--repeat N] [--skip-build]

- A real registry (Debian's docker-registry, tests/support/registry_server.py) on 127.0.0.1.
- push: `pytest_super.kernels.docker.registry.push_image` of the default image from this host's
  engine (the one-off cost of a run).
- pull: into a fresh, empty Docker engine started here (its own dockerd, socket and data root on
  disk under /var/tmp, a bridge of its own, no iptables rules), `pull_image` as a node does it, N times
  (the image removed between pulls), so every layer travels and is unpacked.
- build: `build_image` of the default profile into this host's engine under a throwaway tag (a CA
  bundle with one comment line more is another build input, so no layer after the bundle's COPY is
  cached: apt, the venv, pip's ipykernel all run again), from the cached Debian base
  (pytest-super-base:bookworm; its debootstrap, about a minute, is not counted). The tag is
  removed afterwards.
- colab: not pulled here; estimated from its size (8.45 GB, docs/environment.md) at the measured
  pull throughput (unpacked bytes per second: the image's size over the pull's time).

Needs root (dockerd) and the docker-registry package (scripts/ensure-registry.sh).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_super.kernels.docker.image import (  # noqa: E402
    build_image,
    default_image_tag,
    host_ca_bundle,
    image_exists,
)
from pytest_super.kernels.docker.registry import pull_image, push_image  # noqa: E402
from tests.support.registry_server import running_registry  # noqa: E402

COLAB_BYTES = 8.45e9  # docs/environment.md: the colab image's size


@contextlib.contextmanager
def fresh_engine() -> Iterator[docker.DockerClient]:
    """An empty dockerd of our own with a bridge of its own and no iptables: for pulls only.
    Never `--bridge=none`: dockerd then deletes the host's docker0, the main engine's bridge."""
    name = f"psr-bench-reg-{os.getpid()}"
    bridge = f"psrbr{os.getpid() % 100000}"
    for step in (
        ("link", "add", "name", bridge, "type", "bridge"),
        ("addr", "add", "10.250.250.1/24", "dev", bridge),
        ("link", "set", bridge, "up"),
    ):
        subprocess.run(["ip", *step], check=True)
    data = Path("/var/tmp", name)
    sock = f"/tmp/{name}.sock"
    log = open(f"/tmp/{name}.log", "ab")  # noqa: SIM115 - closed below
    daemon = subprocess.Popen(
        [
            "dockerd",
            f"--host=unix://{sock}",
            f"--data-root={data}",
            f"--exec-root=/tmp/{name}-x",
            f"--pidfile=/tmp/{name}.pid",
            f"--bridge={bridge}",
            "--iptables=false",
            "--ip-masq=false",
            # never without: a dockerd that finds its default network of an earlier start in its
            # data root and has --default-address-pool deletes the host's docker0 (moby's
            # configureNetworking: "Clear stale bridge network", skipped with live restore)
            "--live-restore",
            "--default-address-pool=base=10.251.0.0/16,size=24",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    client: docker.DockerClient | None = None
    try:
        deadline = time.monotonic() + 60
        while client is None:
            try:
                client = docker.DockerClient(base_url=f"unix://{sock}")
                client.ping()
            except Exception:
                client = None
                if daemon.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(Path(f"/tmp/{name}.log").read_text()[-1500:]) from None
                time.sleep(0.3)
        yield client
    finally:
        if client is not None:
            client.close()
        daemon.terminate()
        try:
            daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        log.close()
        subprocess.run(["ip", "link", "delete", bridge], check=False)
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(f"/tmp/{name}-x", ignore_errors=True)
        for leftover in (sock, f"/tmp/{name}.pid", f"/tmp/{name}.log"):
            with contextlib.suppress(OSError):
                os.unlink(leftover)


def measure_pulls(tag: str, registry: str, repeat: int) -> list[float]:
    seconds = []
    with fresh_engine() as engine:
        for _ in range(repeat):
            started = time.monotonic()
            problem = pull_image(engine, tag, registry, log=lambda line: None)
            seconds.append(time.monotonic() - started)
            if problem is not None:
                raise RuntimeError(f"the pull failed: {problem}")
            engine.images.remove(tag)
            engine.images.prune(filters={"dangling": False})
    return seconds


def measure_build() -> tuple[float, str]:
    """Seconds of a build of the default profile whose layers after the CA bundle are not cached."""
    bundle = host_ca_bundle()
    assert bundle is not None, "no CA bundle on this host"
    folder = Path(tempfile.mkdtemp(prefix="bench-registry-"))
    other = folder / "ca.pem"
    other.write_bytes(bundle.read_bytes() + f"\n# bench_registry {time.time()}\n".encode())
    saved = os.environ.get("SSL_CERT_FILE")
    os.environ["SSL_CERT_FILE"] = str(other)
    client = docker.from_env()
    try:
        tag = default_image_tag()
        started = time.monotonic()
        build_image(offline=True, tag=tag, log=lambda line: None)
        took = time.monotonic() - started
        return took, tag
    finally:
        if saved is None:
            os.environ.pop("SSL_CERT_FILE", None)
        else:
            os.environ["SSL_CERT_FILE"] = saved
        with contextlib.suppress(Exception):
            if image_exists(client, tag):
                client.images.remove(tag)
        shutil.rmtree(folder, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2, help="pulls into the fresh engine (2)")
    parser.add_argument("--skip-build", action="store_true", help="measure pulls only")
    args = parser.parse_args()
    client = docker.from_env()
    tag = default_image_tag()
    size = client.images.get(tag).attrs["Size"]
    print(f"image {tag}: {size / 1e9:.2f} GB; load average {os.getloadavg()[0]:.1f}")
    with running_registry() as registry:
        started = time.monotonic()
        push_image(client, tag, registry.address, log=lambda line: None)
        push_s = time.monotonic() - started
        print(f"push to {registry.address}: {push_s:.1f} s (once per image)")
        pulls = measure_pulls(tag, registry.address, args.repeat)
    pull_s = statistics.median(pulls)
    rate = size / pull_s
    print(
        f"pull into a fresh engine: {', '.join(f'{s:.1f}' for s in pulls)} s "
        f"(median {pull_s:.1f} s, {rate / 1e6:.0f} MB/s unpacked)"
    )
    if not args.skip_build:
        build_s, _ = measure_build()
        print(
            f"build (no layer cached after the base; load average {os.getloadavg()[0]:.1f}): "
            f"{build_s:.1f} s; "
            f"build / pull = {build_s / pull_s:.1f}x"
        )
    print(
        f"colab (8.45 GB, estimated at {rate / 1e6:.0f} MB/s): pull ~{COLAB_BYTES / rate:.0f} s; "
        "build from scratch measured 2 min 27 s on a quiet machine, 18 min under load "
        "(docs/environment.md)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
