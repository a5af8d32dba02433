"""Validate OSM descriptors the way OSM onboards them, and strictly against SOL006.

Two validators over the YANG in ``../shared/specs/yang`` (SOL006 v2.6.1 as OSM IM patches it,
OSM IM's augment modules, ietf types):

* ``NbiValidator``: pyang's pybind plugin (pyang 2.5.3 + pyangbind 0.8.3.post1, the versions
  OSM IM pins) generates Python bindings; descriptors are loaded with
  ``pybindJSONDecoder.load_ietf_json(..., skip_unknown=False)`` as osm_nbi's
  ``pyangbind_validation`` does, so unknown keys and bad enum/type values are errors. pyangbind
  checks neither mandatory nodes nor leafrefs; ``nbi_cross_checks`` adds what the NBI checks
  on top (unique ids, references, cloud-init files, charms).
* ``StrictValidator``: yangson over the same modules (mandatory nodes, min-elements, leafrefs,
  must). yangson cannot compile XPath ``deref()``, so those leafrefs become strings, and bare
  identityref values (OSM writes ``ipv4``, pyangbind rejects ``etsi-nfv-descriptors:ipv4``) are
  qualified with their module before validation.

Generated bindings and the rewritten modules go to a directory the caller chooses (a pytest
tmp/cache dir), never into the repository.
"""

from __future__ import annotations

import copy
import importlib
import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
SPECS_DIR = REPO_ROOT.parent / "shared" / "specs"
YANG_DIR = SPECS_DIR / "yang"

# What OSM IM's setup.py / requirements pin: bindings differ between pyangbind releases.
PINNED = {"pyang": "2.5.3", "pyangbind": "0.8.3.post1"}

VNFD_MODULE = "etsi-nfv-vnfd"
NSD_MODULE = "etsi-nfv-nsd"


class DescriptorError(ValueError):
    """A descriptor is not valid; the message names the offending path."""


def yang_dirs() -> list[Path]:
    """The folders holding the YANG modules (ietf, SOL006, OSM augments)."""
    return [YANG_DIR / "ietf", YANG_DIR / "sol006-v2.6.1-osm-patched", YANG_DIR / "osm-im-augments"]


def missing_tools() -> str | None:
    """Why the pinned pyang/pyangbind cannot be used here, or None when they can."""
    for dist, want in PINNED.items():
        try:
            have = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return f"{dist}=={want} is not installed (pip install -e '.[test]')"
        if have != want:
            return f"{dist} {have} is installed, OSM pins {dist}=={want}"
    return None


def _augments_of(target_prefix: str) -> list[Path]:
    """OSM augment modules that augment the tree of the module imported as ``target_prefix``."""
    found = []
    for path in sorted((YANG_DIR / "osm-im-augments").glob("*.yang")):
        text = path.read_text()
        if re.search(rf'augment\s+"/{target_prefix}:', text):
            found.append(path)
    return found


def _module_name(path: Path) -> str:
    return re.search(r"^\s*(?:sub)?module\s+([\w-]+)", path.read_text(), re.MULTILINE).group(1)


# --------------------------------------------------------------------------------------------
# pyangbind (OSM NBI)
# --------------------------------------------------------------------------------------------


def _pyang_script() -> Path:
    """pyang 2.5.3 ships its CLI as a script beside the interpreter, not as a module."""
    beside = Path(sys.executable).parent / "pyang"
    found = beside if beside.is_file() else shutil.which("pyang")
    if not found:
        raise RuntimeError("the pyang script is not on PATH (pip install pyang==2.5.3)")
    return Path(found)


def generate_bindings(out_dir: Path) -> Path:
    """Generate ``etsi_nfv_vnfd.py`` and ``etsi_nfv_nsd.py`` into ``out_dir`` (once)."""
    import pyangbind

    out_dir.mkdir(parents=True, exist_ok=True)
    plugin_dir = Path(pyangbind.__file__).parent / "plugin"
    search_path = ":".join(str(d) for d in yang_dirs())
    sol006 = YANG_DIR / "sol006-v2.6.1-osm-patched"
    jobs = {
        "etsi_nfv_vnfd.py": [sol006 / f"{VNFD_MODULE}.yang", *_augments_of("vnfd")],
        "etsi_nfv_nsd.py": [sol006 / f"{NSD_MODULE}.yang", *_augments_of("nsd")],
    }
    for name, modules in jobs.items():
        target = out_dir / name
        if target.exists():
            continue
        tmp = target.with_suffix(".tmp")
        cmd = [
            sys.executable, str(_pyang_script()),
            "--path", search_path, "--plugindir", str(plugin_dir), "-f", "pybind",
            "-o", str(tmp), *map(str, modules),
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not tmp.exists():
            raise RuntimeError(f"pyang -f pybind failed for {name}:\n{proc.stderr}")
        tmp.rename(target)
    return out_dir


def _yang_children(node: Any) -> dict[str, Any]:
    """Map YANG child names of a pyangbind container/list entry to their binding objects."""
    children = {}
    for pyname in getattr(node, "_pyangbind_elements", {}):
        child = getattr(node, pyname)
        children[getattr(child, "_yang_name", pyname)] = child
    return children


def unknown_keys(node: Any, data: Any, path: str = "") -> Iterator[str]:
    """Yield the paths of keys in ``data`` that the binding ``node`` does not define."""
    if not isinstance(data, dict):
        return
    children = _yang_children(node)
    for raw_key, value in data.items():
        key = raw_key.split(":", 1)[-1]
        here = f"{path}/{raw_key}"
        if key not in children:
            yield here
            continue
        child = children[key]
        contained = getattr(child, "_contained_class", None)
        if contained is not None and isinstance(value, list):  # a YANG list
            for index, item in enumerate(value):
                yield from unknown_keys(contained(), item, f"{here}[{index}]")
        elif hasattr(child, "_pyangbind_elements"):  # a container
            yield from unknown_keys(child, value, here)


class NbiValidator:
    """Load descriptors through pyangbind bindings exactly as osm_nbi does."""

    def __init__(self, bindings_dir: Path):
        self.bindings_dir = generate_bindings(bindings_dir)
        if str(self.bindings_dir) not in sys.path:
            sys.path.insert(0, str(self.bindings_dir))
        self.vnfd_mod = importlib.import_module("etsi_nfv_vnfd")
        self.nsd_mod = importlib.import_module("etsi_nfv_nsd")

    def _load(self, root: Any, payload: dict, top: Any, data: Any) -> Any:
        from pyangbind.lib.serialise import pybindJSONDecoder

        unknown = list(unknown_keys(top, data))
        if unknown:
            raise DescriptorError(f"unknown key(s) not in the YANG model: {', '.join(unknown)}")
        try:
            pybindJSONDecoder.load_ietf_json(
                payload, None, None, obj=root, path_helper=True, skip_unknown=False
            )
        except Exception as exc:  # pyangbind raises ValueError/KeyError/AttributeError
            raise DescriptorError(_pyangbind_message(exc)) from exc
        return root

    def load_vnfd(self, vnfd: dict) -> Any:
        """``vnfd`` is the content under the file's top-level ``vnfd:`` key."""
        root = self.vnfd_mod.etsi_nfv_vnfd()
        return self._load(root, {"etsi-nfv-vnfd:vnfd": vnfd}, root.vnfd, vnfd)

    def load_nsd(self, nsd: dict) -> Any:
        """``nsd`` is one entry of the file's ``nsd: {nsd: [...]}`` list."""
        root = self.nsd_mod.etsi_nfv_nsd()
        entry = root.nsd.nsd._contained_class()
        self._load(root, {"nsd": {"nsd": [nsd]}}, entry, nsd)
        return root


def _pyangbind_message(exc: Exception) -> str:
    """Turn pyangbind's error (often a dict with the generated type) into one line."""
    arg = exc.args[0] if exc.args else exc
    if isinstance(arg, dict) and "error-string" in arg:
        text = arg["error-string"]
        allowed = re.findall(r"'([\w.-]+)': \{", arg.get("generated-type", ""))
        if allowed:
            text += f" (allowed: {', '.join(dict.fromkeys(allowed))})"
        return f"{type(exc).__name__}: {text}"
    return f"{type(exc).__name__}: {arg}"


# --------------------------------------------------------------------------------------------
# NBI cross-checks (osm_nbi descriptor_topics: VnfdTopic/NsdTopic._validate_input_new)
# --------------------------------------------------------------------------------------------


def _ids(items: Any, key: str = "id") -> list:
    return [item.get(key) for item in items or []]


def _dupes(values: list) -> list:
    return sorted({v for v in values if values.count(v) > 1}, key=str)


def _day12(vnfd: dict) -> list[dict]:
    out = []
    for df in vnfd.get("df", []):
        ops = df.get("lcm-operations-configuration", {}).get("operate-vnf-op-config", {})
        out.extend(ops.get("day1-2", []))
    return out


def vnfd_cross_check(vnfd: dict, package_dir: Path, charm_dirs: list[Path] | None = None) -> list[str]:
    """Return the problems osm_nbi would report (and a few it should), as ``path: message``.

    ``package_dir`` holds ``cloud_init/``; ``charm_dirs`` are the folders a charm named in an
    execution environment may live in (``<dir>/<charm>``), by default ``package_dir/charms``.
    """
    errors: list[str] = []
    charm_dirs = charm_dirs if charm_dirs is not None else [package_dir / "charms"]
    vdus = vnfd.get("vdu", [])
    vdu_ids = _ids(vdus)
    for name, items in [
        ("vdu", vdus),
        ("ext-cpd", vnfd.get("ext-cpd")),
        ("virtual-compute-desc", vnfd.get("virtual-compute-desc")),
        ("virtual-storage-desc", vnfd.get("virtual-storage-desc")),
        ("sw-image-desc", vnfd.get("sw-image-desc")),
        ("int-virtual-link-desc", vnfd.get("int-virtual-link-desc")),
        ("df", vnfd.get("df")),
    ]:
        for dup in _dupes(_ids(items)):
            errors.append(f"vnfd/{name}[id={dup}]: duplicated id")

    compute_ids = set(_ids(vnfd.get("virtual-compute-desc")))
    storage_ids = set(_ids(vnfd.get("virtual-storage-desc")))
    image_ids = set(_ids(vnfd.get("sw-image-desc")))
    ivld_ids = set(_ids(vnfd.get("int-virtual-link-desc")))
    ext_ids = set(_ids(vnfd.get("ext-cpd")))
    monitoring: list[str] = []

    for sto in vnfd.get("virtual-storage-desc", []):
        if sto.get("sw-image-desc") and sto["sw-image-desc"] not in image_ids:
            errors.append(
                f"vnfd/virtual-storage-desc[id={sto['id']}]/sw-image-desc: "
                f"'{sto['sw-image-desc']}' is not a sw-image-desc id"
            )
    for vdu in vdus:
        where = f"vnfd/vdu[id={vdu['id']}]"
        cpd_ids = _ids(vdu.get("int-cpd"))
        for dup in _dupes(cpd_ids):
            errors.append(f"{where}/int-cpd[id={dup}]: duplicated id")
        for cpd in vdu.get("int-cpd", []):
            ivl = cpd.get("int-virtual-link-desc")
            if ivl and ivl not in ivld_ids:
                errors.append(
                    f"{where}/int-cpd[id={cpd['id']}]/int-virtual-link-desc: "
                    f"'{ivl}' is not an int-virtual-link-desc id"
                )
            if not cpd.get("virtual-network-interface-requirement"):
                errors.append(f"{where}/int-cpd[id={cpd['id']}]: no virtual-network-interface-requirement")
        if vdu.get("virtual-compute-desc") not in compute_ids:
            errors.append(
                f"{where}/virtual-compute-desc: '{vdu.get('virtual-compute-desc')}' "
                "is not a virtual-compute-desc id"
            )
        for sto in vdu.get("virtual-storage-desc", []):
            if sto not in storage_ids:
                errors.append(f"{where}/virtual-storage-desc: '{sto}' is not a virtual-storage-desc id")
        if vdu.get("sw-image-desc") and vdu["sw-image-desc"] not in image_ids:
            errors.append(f"{where}/sw-image-desc: '{vdu['sw-image-desc']}' is not a sw-image-desc id")
        init_file = vdu.get("cloud-init-file")
        if init_file and not (package_dir / "cloud_init" / init_file).is_file():
            errors.append(f"{where}/cloud-init-file: cloud_init/{init_file} is not in the package")
        monitoring += _ids(vdu.get("monitoring-parameter"))

    by_vdu = {vdu["id"]: set(_ids(vdu.get("int-cpd"))) for vdu in vdus}
    for ext in vnfd.get("ext-cpd", []):
        where = f"vnfd/ext-cpd[id={ext['id']}]"
        ref = ext.get("int-cpd")
        if ref:
            if ref.get("vdu-id") not in by_vdu:
                errors.append(f"{where}/int-cpd/vdu-id: '{ref.get('vdu-id')}' is not a vdu id")
            elif ref.get("cpd") not in by_vdu[ref["vdu-id"]]:
                errors.append(
                    f"{where}/int-cpd/cpd: '{ref.get('cpd')}' is not an int-cpd of vdu '{ref['vdu-id']}'"
                )
        elif ext.get("int-virtual-link-desc") not in ivld_ids:
            errors.append(f"{where}: refers to neither an int-cpd nor an int-virtual-link-desc")
    if vnfd.get("mgmt-cp") not in ext_ids:
        errors.append(f"vnfd/mgmt-cp: '{vnfd.get('mgmt-cp')}' is not an ext-cpd id")

    for df in vnfd.get("df", []):
        where = f"vnfd/df[id={df['id']}]"
        monitoring_df = monitoring + _ids(df.get("monitoring-parameter"))
        for dup in _dupes(monitoring_df):
            errors.append(f"{where}: monitoring-parameter id '{dup}' is duplicated")
        profiles = _ids(df.get("vdu-profile"))
        for dup in _dupes(profiles):
            errors.append(f"{where}/vdu-profile[id={dup}]: duplicated id")
        for prof in profiles:
            if prof not in vdu_ids:
                errors.append(f"{where}/vdu-profile[id={prof}]: '{prof}' is not a vdu id")
        aspects = {a["id"]: a for a in df.get("scaling-aspect", [])}
        levels = _ids(df.get("instantiation-level"))
        for dup in _dupes(levels):
            errors.append(f"{where}/instantiation-level[id={dup}]: duplicated id")
        if df.get("default-instantiation-level", levels[0] if len(levels) == 1 else None) not in levels:
            errors.append(
                f"{where}/default-instantiation-level: "
                f"'{df.get('default-instantiation-level')}' is not an instantiation-level id"
            )
        for level in df.get("instantiation-level", []):
            for vl in level.get("vdu-level", []):
                if vl.get("vdu-id") not in profiles:
                    errors.append(
                        f"{where}/instantiation-level[id={level['id']}]/vdu-level: "
                        f"'{vl.get('vdu-id')}' has no vdu-profile"
                    )
            for si in level.get("scaling-info", []):
                if si.get("scaling-aspect-id") not in aspects:
                    errors.append(
                        f"{where}/instantiation-level[id={level['id']}]/scaling-info: "
                        f"'{si.get('scaling-aspect-id')}' is not a scaling-aspect id"
                    )
        ecp = df.get("exporters-endpoints", {}).get("external-connection-point-ref")
        if ecp is not None and ecp not in ext_ids:
            errors.append(
                f"{where}/exporters-endpoints/external-connection-point-ref: '{ecp}' is not an ext-cpd id"
            )

        day12 = df.get("lcm-operations-configuration", {}).get("operate-vnf-op-config", {})
        day12 = day12.get("day1-2", [])
        primitive_names = set()
        for conf in day12:
            cwhere = f"{where}/lcm-operations-configuration/operate-vnf-op-config/day1-2[id={conf['id']}]"
            if conf["id"] not in vdu_ids + [vnfd.get("id")]:
                errors.append(f"{cwhere}: '{conf['id']}' is neither the vnfd id nor a vdu id")
            ees = {ee["id"]: ee for ee in conf.get("execution-environment-list", [])}
            for ee in ees.values():
                charm = ee.get("juju", {}).get("charm")
                if charm and not any((d / charm).is_dir() for d in charm_dirs):
                    errors.append(
                        f"{cwhere}/execution-environment-list[id={ee['id']}]/juju/charm: "
                        f"charm '{charm}' not found in {', '.join(map(str, charm_dirs))}"
                    )
                ecp = ee.get("external-connection-point-ref")
                if ecp and ecp not in ext_ids:
                    errors.append(
                        f"{cwhere}/execution-environment-list[id={ee['id']}]/"
                        f"external-connection-point-ref: '{ecp}' is not an ext-cpd id"
                    )
            for kind, key in [
                ("config-primitive", "name"),
                ("initial-config-primitive", "seq"),
                ("terminate-config-primitive", "seq"),
            ]:
                prims = conf.get(kind, [])
                for dup in _dupes(_ids(prims, key)):
                    errors.append(f"{cwhere}/{kind}[{key}={dup}]: duplicated {key}")
                for prim in prims:
                    ref = prim.get("execution-environment-ref")
                    if ref is not None and ref not in ees:
                        errors.append(
                            f"{cwhere}/{kind}[{key}={prim.get(key)}]/execution-environment-ref: "
                            f"'{ref}' is not an execution-environment-list id"
                        )
                    params = _ids(prim.get("parameter"), "name")
                    for dup in _dupes(params):
                        errors.append(
                            f"{cwhere}/{kind}[{key}={prim.get(key)}]/parameter[name={dup}]: duplicated name"
                        )
            primitive_names |= set(_ids(conf.get("config-primitive"), "name"))
            for rel in conf.get("relation", []):
                for side in ("provider", "requirer"):
                    ref = rel.get(side, {}).get("vdu-profile-id")
                    if ref is not None and ref not in profiles:
                        errors.append(
                            f"{cwhere}/relation[name={rel['name']}]/{side}/vdu-profile-id: "
                            f"'{ref}' is not a vdu-profile id"
                        )
        for aspect in aspects.values():
            awhere = f"{where}/scaling-aspect[id={aspect['id']}]"
            for delta in aspect.get("aspect-delta-details", {}).get("deltas", []):
                for vd in delta.get("vdu-delta", []):
                    if vd.get("id") not in vdu_ids:
                        errors.append(
                            f"{awhere}/aspect-delta-details/deltas[id={delta['id']}]/"
                            f"vdu-delta: '{vd.get('id')}' is not a vdu id"
                        )
            for policy in aspect.get("scaling-policy", []):
                for crit in policy.get("scaling-criteria", []):
                    ref = crit.get("vnf-monitoring-param-ref")
                    if ref not in monitoring_df:
                        errors.append(
                            f"{awhere}/scaling-policy[name={policy['name']}]/scaling-criteria"
                            f"[name={crit['name']}]/vnf-monitoring-param-ref: "
                            f"'{ref}' is not a monitoring-parameter id"
                        )
            for action in aspect.get("scaling-config-action", []):
                ref = action.get("vnf-config-primitive-name-ref")
                if ref not in primitive_names:
                    errors.append(
                        f"{awhere}/scaling-config-action[trigger={action.get('trigger')}]: "
                        f"'{ref}' is not a config-primitive"
                    )
    return errors


def nsd_cross_check(nsd: dict, vnfds: dict[str, dict]) -> list[str]:
    """Problems in one NSD entry; ``vnfds`` maps vnfd id to VNFD content."""
    errors: list[str] = []
    where = f"nsd[id={nsd.get('id')}]"
    vld_ids = _ids(nsd.get("virtual-link-desc"))
    for dup in _dupes(vld_ids):
        errors.append(f"{where}/virtual-link-desc[id={dup}]: duplicated id")
    for ref in nsd.get("vnfd-id", []):
        if ref not in vnfds:
            errors.append(f"{where}/vnfd-id: '{ref}' is not an onboarded vnfd")
    vld_dfs = {v["id"]: set(_ids(v.get("df"))) for v in nsd.get("virtual-link-desc", [])}
    for df in nsd.get("df", []):
        dwhere = f"{where}/df[id={df['id']}]"
        vlps = {p["id"]: p for p in df.get("virtual-link-profile", [])}
        for prof in vlps.values():
            if prof.get("virtual-link-desc-id") not in vld_dfs:
                errors.append(
                    f"{dwhere}/virtual-link-profile[id={prof['id']}]/virtual-link-desc-id: "
                    f"'{prof.get('virtual-link-desc-id')}' is not a virtual-link-desc id"
                )
            elif prof.get("flavour-id") not in vld_dfs[prof["virtual-link-desc-id"]]:
                errors.append(
                    f"{dwhere}/virtual-link-profile[id={prof['id']}]/flavour-id: "
                    f"'{prof.get('flavour-id')}' is not a df of that virtual-link-desc"
                )
        vnf_profiles = _ids(df.get("vnf-profile"))
        for dup in _dupes(vnf_profiles):
            errors.append(f"{dwhere}/vnf-profile[id={dup}]: duplicated id")
        for prof in df.get("vnf-profile", []):
            pwhere = f"{dwhere}/vnf-profile[id={prof['id']}]"
            vnfd = vnfds.get(prof.get("vnfd-id"))
            if prof.get("vnfd-id") not in nsd.get("vnfd-id", []) or vnfd is None:
                errors.append(f"{pwhere}/vnfd-id: '{prof.get('vnfd-id')}' is not in the nsd's vnfd-id")
                continue
            vdf = {d["id"]: d for d in vnfd.get("df", [])}
            if prof.get("flavour-id") not in vdf:
                errors.append(f"{pwhere}/flavour-id: '{prof.get('flavour-id')}' is not a df of the vnfd")
            elif prof.get("instantiation-level") not in _ids(
                vdf[prof["flavour-id"]].get("instantiation-level")
            ):
                errors.append(
                    f"{pwhere}/instantiation-level: '{prof.get('instantiation-level')}' is "
                    "not an instantiation-level of that df"
                )
            ext_ids = set(_ids(vnfd.get("ext-cpd")))
            connected = []
            for conn in prof.get("virtual-link-connectivity", []):
                vlp = conn.get("virtual-link-profile-id")
                if vlp not in vld_ids or (vlps and vlp not in vlps):
                    errors.append(f"{pwhere}/virtual-link-connectivity: '{vlp}' is not a virtual link")
                for cc in conn.get("constituent-cpd-id", []):
                    if cc.get("constituent-base-element-id") != prof["id"]:
                        errors.append(
                            f"{pwhere}/virtual-link-connectivity[{vlp}]: constituent-base-"
                            f"element-id '{cc.get('constituent-base-element-id')}' is not "
                            f"'{prof['id']}'"
                        )
                    if cc.get("constituent-cpd-id") not in ext_ids:
                        errors.append(
                            f"{pwhere}/virtual-link-connectivity[{vlp}]: constituent-cpd-id "
                            f"'{cc.get('constituent-cpd-id')}' is not an ext-cpd of "
                            f"'{vnfd['id']}'"
                        )
                    connected.append(cc.get("constituent-cpd-id"))
            for dup in _dupes(connected):
                errors.append(f"{pwhere}: ext-cpd '{dup}' is connected to more than one virtual link")
        levels = _ids(df.get("ns-instantiation-level"))
        for level in df.get("ns-instantiation-level", []):
            for m in level.get("vnf-to-level-mapping", []):
                if m.get("vnf-profile-id") not in vnf_profiles:
                    errors.append(
                        f"{dwhere}/ns-instantiation-level[id={level['id']}]: "
                        f"'{m.get('vnf-profile-id')}' is not a vnf-profile id"
                    )
        if levels and df.get("default-instantiation-level") not in levels:
            errors.append(
                f"{dwhere}/default-instantiation-level: "
                f"'{df.get('default-instantiation-level')}' is not an ns-instantiation-level"
            )
    return errors


# --------------------------------------------------------------------------------------------
# yangson (strict SOL006)
# --------------------------------------------------------------------------------------------

_DEREF_LEAFREF = re.compile(
    r'type\s+leafref\s*\{\s*path\s+"deref\([^"]*"(?:\s*\+\s*"[^"]*")*\s*;\s*\}', re.DOTALL
)


def _revision(text: str) -> str | None:
    match = re.search(r"^\s*revision\s+\"?([\d-]+)\"?", text, re.MULTILINE)
    return match.group(1) if match else None


def prepare_strict_modules(out_dir: Path) -> tuple[Path, dict]:
    """Copy the modules to ``out_dir`` as ``name@revision.yang``, with ``deref()`` leafrefs
    relaxed to strings; return the folder and an RFC 7895 YANG library for yangson."""
    out_dir.mkdir(parents=True, exist_ok=True)
    modules: dict[str, dict] = {}
    submodules: dict[str, list] = {}
    for folder in yang_dirs():
        for path in sorted(folder.glob("*.yang")):
            text = path.read_text()
            relaxed = _DEREF_LEAFREF.sub("type string;", text)
            name, rev = _module_name(path), _revision(text)
            (out_dir / (f"{name}@{rev}.yang" if rev else f"{name}.yang")).write_text(relaxed)
            rev = rev or ""
            belongs = re.search(r"^\s*belongs-to\s+([\w-]+)", text, re.MULTILINE)
            if belongs:
                submodules.setdefault(belongs.group(1), []).append({"name": name, "revision": rev})
                continue
            ns = re.search(r'^\s*namespace\s+"([^"]+)"', text, re.MULTILINE).group(1)
            modules[name] = {"name": name, "revision": rev, "namespace": ns, "conformance-type": "implement"}
    for parent, subs in submodules.items():
        modules[parent]["submodule"] = subs
    # ietf types are imported only: yangson wants them as "import" conformance.
    for name in ("ietf-inet-types", "ietf-yang-types"):
        modules[name]["conformance-type"] = "import"
    library = {
        "ietf-yang-library:modules-state": {
            "module-set-id": "dpp-netapp-descriptors",
            "module": list(modules.values()),
        }
    }
    return out_dir, library


class StrictValidator:
    """yangson DataModel over SOL006 + OSM augments (deref() leafrefs relaxed)."""

    def __init__(self, work_dir: Path):
        from yangson import DataModel

        mod_dir, library = prepare_strict_modules(work_dir)
        self.dm = DataModel(json.dumps(library), [str(mod_dir)])
        self._identity_modules = self._identities(mod_dir)

    @staticmethod
    def _identities(mod_dir: Path) -> dict[str, str]:
        found: dict[str, str] = {}
        for path in mod_dir.glob("*.yang"):
            text = path.read_text()
            module = re.search(r"^\s*(?:module|submodule)\s+([\w-]+)", text, re.MULTILINE).group(1)
            belongs = re.search(r"^\s*belongs-to\s+([\w-]+)", text, re.MULTILINE)
            owner = belongs.group(1) if belongs else module
            for ident in re.findall(r"^\s*identity\s+([\w-]+)", text, re.MULTILINE):
                found[ident] = owner
        return found

    def _qualify(self, raw: dict) -> dict:
        """Write OSM's JSON the RFC 7951 way: members from augment modules get their module
        prefix (``cloud-init-file`` -> ``cloud-init:cloud-init-file``), bare identityref
        values get the identity's module (``ipv4`` -> ``etsi-nfv-descriptors:ipv4``) and
        64-bit numbers become strings.
        Unknown members are kept as they are, so yangson reports them."""
        from yangson.datatype import Decimal64Type, IdentityrefType, Int64Type, Uint64Type
        from yangson.schemanode import CaseNode, ChoiceNode, InternalNode, ListNode, TerminalNode

        idents = self._identity_modules

        def data_children(node: Any) -> Iterator[Any]:
            for child in node.children:
                if isinstance(child, (ChoiceNode, CaseNode)):
                    yield from data_children(child)
                else:
                    yield child

        def value(leaf: Any, val: Any) -> Any:
            if isinstance(val, list):
                return [value(leaf, v) for v in val]
            if isinstance(leaf.type, IdentityrefType) and isinstance(val, str) and ":" not in val:
                return f"{idents[val]}:{val}" if val in idents else val
            if isinstance(leaf.type, (Decimal64Type, Int64Type, Uint64Type)) and (
                isinstance(val, (int, float)) and not isinstance(val, bool)
            ):
                return str(val)  # RFC 7951 section 6.1: 64-bit numbers are JSON strings
            return val

        def walk(node: Any, obj: Any, drop: bool = False) -> Any:
            if not isinstance(obj, dict):
                return obj
            children = {}
            for child in data_children(node):
                children.setdefault(child.name, child)
            out = {}
            for key, val in obj.items():
                name = key.split(":", 1)[-1]
                child = children.get(name)
                if child is None:
                    if not drop:
                        out[key] = val
                    continue
                qualified = name if child.ns == node.ns else f"{child.ns}:{name}"
                # The NSD's copy of a VNFD (SOL006 nsd/vnfd, there for leafrefs) has none of
                # OSM's VNFD augments: keep only what SOL006 defines there.
                inner = drop or (node.ns == "etsi-nfv-nsd" and child.name == "vnfd")
                if isinstance(child, ListNode) and isinstance(val, list):
                    out[qualified] = [walk(child, item, inner) for item in val]
                elif isinstance(child, InternalNode):
                    out[qualified] = walk(child, val, inner)
                elif isinstance(child, TerminalNode):
                    out[qualified] = value(child, val)
                else:
                    out[qualified] = val
            return out

        return walk(self.dm.schema, copy.deepcopy(raw))

    def validate(self, raw: dict) -> None:
        """``raw`` is RFC 7951 JSON: ``{"etsi-nfv-vnfd:vnfd": ...}`` or ``{"etsi-nfv-nsd:nsd": ...}``."""
        from yangson.enumerations import ContentType, ValidationScope
        from yangson.exceptions import YangsonException

        try:
            inst = self.dm.from_raw(self._qualify(raw))
            inst.validate(ValidationScope.all, ContentType.config)
        except YangsonException as exc:
            raise DescriptorError(f"{type(exc).__name__}: {exc}") from exc


@dataclass
class Descriptors:
    """The repository's descriptors, as OSM stores them (envelope removed)."""

    vnfd: dict
    nsd: dict

    @classmethod
    def load(cls) -> Descriptors:
        import yaml

        vnfd = yaml.safe_load((REPO_ROOT / "vnfd" / "dpp-netapp_vnfd.yaml").read_text())["vnfd"]
        nsd = yaml.safe_load((REPO_ROOT / "nsd" / "dpp-netapp_nsd.yaml").read_text())["nsd"]["nsd"][0]
        return cls(vnfd=vnfd, nsd=nsd)
