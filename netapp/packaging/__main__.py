"""``python -m netapp.packaging``: build the charm and the OSM packages into one folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from netapp.packaging import PackagingError, build_all


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line; the defaults build what ``make package`` ships."""
    parser = argparse.ArgumentParser(
        prog="python -m netapp.packaging",
        description="Build dpp-netapp.charm and the OSM packages dpp-netapp_vnf.tar.gz and "
        "dpp-netapp_ns.tar.gz.",
    )
    parser.add_argument("--out", type=Path, default=Path("dist"), help="output folder (default: dist)")
    parser.add_argument(
        "--repo",
        type=Path,
        default=Path.cwd(),
        help="repository root holding vnfd/, nsd/, charms/ (default: .)",
    )
    parser.add_argument(
        "--python-version",
        metavar="X.Y",
        help="Python the charm's venv and the NetApp's wheels are for (default: the charm base's, "
        "ubuntu@24.04 -> 3.12)",
    )
    parser.add_argument(
        "--platform",
        metavar="TAG",
        help="wheel platform of the charm's venv (default: manylinux2014_<arch of the charm's platform>)",
    )
    parser.add_argument(
        "--image",
        type=Path,
        metavar="FILE",
        help="the VM image uploaded to the VIM: its SHA-256 and size go into the packaged VNFD "
        "(default: the repository's VNFD as is, with a zero hash)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Build everything; on a problem print one message naming the input and return 1."""
    args = parse_args(argv)
    try:
        written = build_all(args.repo, args.out, args.python_version, args.platform, image=args.image)
    except PackagingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    print(f"built {len(written)} artefacts in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
