"""The Docker backend's own commands: `pytest-super image build|push|lock` (the kernel image), added
to the `pytest-super` command through the backend contract (`DockerBackend.add_commands`,
`kernels.backend_commands`). What the command line is made of above the kernels (the settings'
options, the executors' clusters) comes through `base.CommandTools`."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from pytest_super.errors import SuperError
from pytest_super.kernels.base import CommandTools, Subparsers
from pytest_super.kernels.docker.image import COLAB_LOCK, DEFAULT_BASE, PROFILES


def add_commands(sub: Subparsers, tools: CommandTools) -> None:
    """`image build|push|lock`: the kernel image."""
    image = sub.add_parser("image", help="the kernel image").add_subparsers(
        dest="image_cmd", required=True
    )
    p = image.add_parser("build", help="build the kernel image (skipped when up to date)")
    p.add_argument("--profile", choices=PROFILES, default="default", help="package set")
    p.add_argument("--base", default=None, help=f"base image (default {DEFAULT_BASE})")
    p.add_argument("--tag", default=None, help="image tag (default: from the build inputs)")
    p.add_argument("--requirements", type=Path, default=None, help="extra pip requirements file")
    p.add_argument(
        "--offline",
        action="store_true",
        help="no registry: bootstrap the base from Debian's archive with debootstrap",
    )
    tools.add_setting_argument(p, "docker_host")
    p.add_argument(
        "--print-tag", action="store_true", help="print the default tag and exit (no engine needed)"
    )
    tools.add_cluster_arguments(
        p, "build it on every live node of that executor's cluster (default: here)"
    )
    p.set_defaults(func=lambda args: _image_build(args, tools))
    p = image.add_parser(
        "push",
        help="push the kernel image to a registry as HOST:PORT/<its tag> (nodes pull it with "
        "--super-registry)",
    )
    p.add_argument("--registry", required=True, metavar="HOST:PORT", help="the registry")
    p.add_argument("--profile", choices=PROFILES, default="default", help="package set")
    p.add_argument("--tag", default=None, help="the image to push (default: the profile's tag)")
    tools.add_setting_argument(p, "docker_host")
    p.set_defaults(func=_image_push)
    p = image.add_parser(
        "lock",
        help=f"resolve the colab profile again into {COLAB_LOCK} (needs uv)",
    )
    p.set_defaults(func=_image_lock)


def _image_build(args: argparse.Namespace, tools: CommandTools) -> int:
    from pytest_super.kernels.docker.image import build_image, build_inputs

    if args.print_tag:
        print(
            build_inputs(profile=args.profile, requirements=args.requirements, base=args.base).tag()
        )
        return 0
    cluster = tools.cluster(args)
    if cluster is not None:
        nodes, address = cluster
        built = nodes.build_on_nodes(
            address, profile=args.profile, base=args.base, offline=args.offline, tag=args.tag
        )
        for node, tag in built:
            print(f"{node}: {tag}")
        return 0
    try:
        tag = build_image(
            base=args.base,
            tag=args.tag,
            requirements=args.requirements,
            offline=args.offline,
            profile=args.profile,
            docker_host=args.docker_host,
        )
    except SuperError as exc:
        print(f"pytest-super image build: {exc}", file=sys.stderr)
        return 1
    print(tag)
    return 0


#: an image name Docker takes (its reference grammar, without a registry): NAME[:TAG]
_NAME_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_NAME = re.compile(
    rf"(?=.{{1,255}}(?::|$)){_NAME_PART}(?:/{_NAME_PART})*(?::\w[\w.-]{{0,127}})?"
)


def _image_push(args: argparse.Namespace) -> int:
    from pytest_super.kernels.docker.engine import docker_client_for
    from pytest_super.kernels.docker.image import default_image_tag
    from pytest_super.kernels.docker.registry import push_image, registry_address

    try:
        registry = registry_address(args.registry)
    except ValueError as exc:
        print(f"pytest-super image push: --registry {args.registry!r}: {exc}", file=sys.stderr)
        return 2
    if args.tag is not None and not IMAGE_NAME.fullmatch(args.tag):
        print(
            f"pytest-super image push: --tag {args.tag!r}: not an image name; name an image of "
            "the engine as NAME[:TAG] (NAME lower-case letters, digits and . _ - /, not first; "
            "TAG letters, digits, . _ -), e.g. pytest-super-kernel:default-<hash>",
            file=sys.stderr,
        )
        return 2
    tag = args.tag or default_image_tag(args.profile)
    try:
        remote = push_image(docker_client_for(args.docker_host), tag, registry)
    except SuperError as exc:
        print(f"pytest-super image push: {exc}", file=sys.stderr)
        return 1
    print(remote)
    return 0


def _image_lock(args: argparse.Namespace) -> int:
    from pytest_super.kernels.docker.image import lock_colab

    print(lock_colab())
    return 0
