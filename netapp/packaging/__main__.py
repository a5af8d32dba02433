"""``python -m netapp.packaging``: build the charm and the OSM packages into one folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from netapp.packaging import PackagingError, build_all
from netapp.packaging.csar import DEFAULT_DIGEST, DIGESTS, build_csar, check_csar_sources
from netapp.packaging.image import ImageFacts
from netapp.packaging.osm import Sources, juju_charms, load_vnfd


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line; the defaults build what ``make package`` ships."""
    parser = argparse.ArgumentParser(
        prog="python -m netapp.packaging",
        description="Build dpp-netapp.charm, the OSM packages dpp-netapp_vnf.tar.gz and "
        "dpp-netapp_ns.tar.gz, and the SOL004 CSAR dpp-netapp.csar (ONAP).",
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
    parser.add_argument(
        "--csar-digest",
        choices=[name.lower() for name in DIGESTS],
        default=DEFAULT_DIGEST.lower(),
        help=f"digest of every file in the CSAR's manifest (default: {DEFAULT_DIGEST.lower()})",
    )
    return parser.parse_args(argv)


def build_onap_csar(args: argparse.Namespace, out_dir: Path) -> Path:
    """The SOL004 CSAR from the same VNFD, with the charms build_all has just written."""
    src = Sources(args.repo)
    charms = {name: out_dir / f"{name}.charm" for name in juju_charms(load_vnfd(src))}
    image = ImageFacts.of(args.image) if args.image is not None else None
    return build_csar(src, charms, out_dir, image=image, digest=args.csar_digest)


def main(argv: list[str] | None = None) -> int:
    """Build everything; on a problem print one message naming the input and return 1."""
    args = parse_args(argv)
    try:
        check_csar_sources(Sources(args.repo))  # before build_all's slow step
        written = build_all(args.repo, args.out, args.python_version, args.platform, image=args.image)
        written.append(build_onap_csar(args, args.out))
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
