"""What a MEC 011 traffic rule costs: a PUT through a real `netapp serve` (uvicorn, NetAppService,
SQLite store) over the real data plane, with 10,000 rules installed, and what the rule's packets
cost compared with the equivalent native intent.

    python -m bench.mec --out bench/results/mec.json

Fill: application instances of 64 rules each (the most an instance holds) declared by the admin
until `--rules` rules are installed. Timed: `--puts` PUTs of a random installed rule (seeded), each
moving its destination port to the other of two values, so that every PUT takes one entry out of
dpp_rules and writes another; every n-th PUT is checked in dpp_rules (the new entry there, the old
gone) through a second handle on the instance. Equivalence: for a sample of rules, the entry in
dpp_rules is byte for byte the entry the equivalent native intent compiles to, so a MEC rule's
packets take the native intent's path: the same lookups, the same cost per packet.

Needs root and `make -C dataplane`. Methodology and results: bench/README.md ("bench/mec/").
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any, Optional, Sequence

import httpx

from bench.api import CheckError, MapProbe, summary
from bench.apiserver import TENANT, Served, ServerError, cpu_seconds, served
from bench.dataplane import machine_info
from netapp.dataplane import binding
from netapp.dataplane.binding import rule_key, rule_value, struct_bytes
from netapp.intents.compiler import compile_intent
from netapp.intents.models import Intent
from netapp.mec.compiler import MEC_PRIORITY_BASE, MAX_MEC_PRIORITY, intent_ids, rule_intents
from netapp.mec.models import TrafficRule
from netapp.service.service import rule_id

DEFAULT_OUT = Path("bench/results/mec.json")
APPLICATIONS = "/api/v1/mec/applications"
APP_SUPPORT = "/mec_app_support/v1/applications"
RULES_PER_APPLICATION = 64  # MecApplicationSpec.trafficRules' most
GRANT = "10.0.0.0/8"  # the tenant's traffic: every rule's destination lies in it
PORTS = (5000, 5001)  # a timed PUT moves a rule from one to the other
EQUIVALENCE_SAMPLE = 100
TARGET_P99_MS = 10.0  # issue 21: PUT -> rule in the maps, at 10,000 rules


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.mec", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    parser.add_argument("--rules", type=int, default=10_000, help="traffic rules installed before timing")
    parser.add_argument("--puts", type=int, default=1000, help="timed PUTs")
    parser.add_argument("--warmup", type=int, default=50, help="untimed PUTs before")
    parser.add_argument("--sample-every", type=int, default=10, help="check every n-th PUT in dpp_rules")
    parser.add_argument("--seed", type=int, default=1, help="of the PUTs' choice of rules")
    args = parser.parse_args(argv)
    if min(args.rules, args.puts, args.sample_every) < 1 or args.warmup < 0:
        parser.error("--rules, --puts, --sample-every must be positive, --warmup not negative")
    return args


# --- the workload --------------------------------------------------------------------------------


def application_id(index: int) -> str:
    return f"bench-app-{index // RULES_PER_APPLICATION}"


def traffic_rule(index: int, port: int) -> dict[str, Any]:
    """Rule `index`: drop UDP to its own /32 in the grant, at `port`. Priorities spread over MEC's
    0..255, as many applications' rules would be."""
    address = f"10.{index >> 16 & 255}.{index >> 8 & 255}.{index & 255}"
    return {
        "trafficRuleId": f"r{index % RULES_PER_APPLICATION}",
        "filterType": "PACKET",
        "priority": index % (MAX_MEC_PRIORITY + 1),
        "trafficFilter": [{"dstAddress": [f"{address}/32"], "protocol": ["UDP"], "dstPort": [str(port)]}],
        "action": "DROP",
        "state": "ACTIVE",
    }


def rule_path(index: int) -> str:
    return f"{APP_SUPPORT}/{application_id(index)}/traffic_rules/r{index % RULES_PER_APPLICATION}"


def installed_entry(index: int, port: int) -> tuple[bytes, Intent]:
    """The dpp_rules key the service installs for rule `index` at `port`, and the rule's intent."""
    app = application_id(index)
    rule = TrafficRule.model_validate(traffic_rule(index, port))
    (intent,) = rule_intents(app, rule, {})
    return struct_bytes(rule_key(compile_intent(intent, {}, rule_id(TENANT, intent.id)))), intent


def native_equivalent(index: int, port: int) -> Intent:
    """The native intent an operator would write for rule `index`: same match, action, priority."""
    rule = traffic_rule(index, port)
    flt = rule["trafficFilter"][0]
    return Intent.model_validate({
        "id": "native",
        "priority": MEC_PRIORITY_BASE + MAX_MEC_PRIORITY - rule["priority"],
        "match": {"dst": flt["dstAddress"][0], "protocol": "udp", "dst_port": port},
        "action": {"type": "drop"},
    })


# --- phases --------------------------------------------------------------------------------------


def grant_tenant(server: Served) -> None:
    """The bench tenant owns the rules' destinations, with room for every rule's intent."""
    spec = {"traffic": [{"dst": GRANT}], "quotas": {"intents": 1 << 24}}
    with server.client(admin=True) as admin:
        response = admin.put(f"/api/v1/tenants/{TENANT}", json=spec)
    if response.status_code not in (200, 201):
        raise CheckError(f"the tenant was not granted {GRANT}: {response.status_code} {response.text[:300]}")


def fill(server: Served, rules: int) -> dict[str, Any]:
    """Declare application instances of 64 rules each until `rules` are installed."""
    started = time.perf_counter()
    per_application = []
    with server.client(admin=True) as admin:
        for first in range(0, rules, RULES_PER_APPLICATION):
            indexes = range(first, min(first + RULES_PER_APPLICATION, rules))
            body = {
                "appInstanceId": application_id(first),
                "tenant": TENANT,
                "trafficRules": [traffic_rule(i, PORTS[0]) for i in indexes],
            }
            sent = time.perf_counter()
            response = admin.post(APPLICATIONS, json=body)
            per_application.append((time.perf_counter() - sent) * 1e3)
            if response.status_code != 201:
                raise CheckError(f"{application_id(first)} was refused: {response.status_code} {response.text[:300]}")
    seconds = time.perf_counter() - started
    return {
        "rules": rules,
        "applications": len(per_application),
        "seconds": round(seconds, 2),
        "rules_per_s": round(rules / seconds, 1),
        "application_ms": summary(per_application),
    }


def check_installed(probe: MapProbe, rules: int) -> None:
    held = probe.count()
    if held != rules:
        raise CheckError(f"dpp_rules holds {held} rules, not the {rules} installed")
    sample = range(0, rules, max(1, rules // EQUIVALENCE_SAMPLE))
    missing = [i for i in sample if not probe.present(_key(installed_entry(i, PORTS[0])[0]))]
    if missing:
        raise CheckError(f"rules missing from dpp_rules: {missing[:5]}")


def _key(raw: bytes) -> binding.FlowKey:
    return binding.FlowKey.from_buffer_copy(raw)


def equivalence(probe: MapProbe, rules: int, ports: dict[int, int]) -> dict[str, Any]:
    """For a sample of rules, the installed value against the native intent's compiled value."""
    held = {struct_bytes(key): value for key, value in probe.handle.rules_dump()}
    sample = list(range(0, rules, max(1, rules // EQUIVALENCE_SAMPLE)))
    identical = 0
    for index in sample:
        port = ports.get(index, PORTS[0])
        key, _ = installed_entry(index, port)
        app_rule_id = rule_id(TENANT, intent_ids(application_id(index), f"r{index % RULES_PER_APPLICATION}")[0])
        native = compile_intent(native_equivalent(index, port), {}, app_rule_id)
        value = held.get(key)
        if value is not None and struct_bytes(rule_key(native)) == key and struct_bytes(value) == struct_bytes(
            rule_value(native, slot=value.slot)
        ):
            identical += 1
    return {"sampled": len(sample), "identical": identical}


def timed_puts(server: Served, probe: MapProbe, args: argparse.Namespace) -> tuple[dict[str, Any], dict[int, int]]:
    """PUTs of random installed rules, each moving the rule to its other port."""
    chooser = random.Random(args.seed)
    ports: dict[int, int] = {}
    times: list[float] = []
    errors: list[str] = []
    checked = 0
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.tenant_token}"},
                      timeout=30) as api:
        cpu_before = cpu_seconds(server.pid)
        for n in range(args.warmup + args.puts):
            index = chooser.randrange(args.rules)
            old = ports.get(index, PORTS[0])
            new = PORTS[1] if old == PORTS[0] else PORTS[0]
            sent = time.perf_counter()
            response = api.put(rule_path(index), json=traffic_rule(index, new))
            elapsed_ms = (time.perf_counter() - sent) * 1e3
            if response.status_code != 200:
                errors.append(f"{response.status_code} {response.text[:200]}")
                continue
            ports[index] = new
            if n < args.warmup:
                cpu_before = cpu_seconds(server.pid)
                continue
            times.append(elapsed_ms)
            if n % args.sample_every == 0:
                checked += 1
                if probe.present(_key(installed_entry(index, old)[0])) or not probe.present(
                    _key(installed_entry(index, new)[0])
                ):
                    raise CheckError(f"PUT {n} of rule {index} is not what dpp_rules holds")
        cpu_ms = 1e3 * (cpu_seconds(server.pid) - cpu_before) / max(len(times), 1)
    return {
        "latency_ms": summary(times),
        "checked_in_maps": checked,
        "errors": len(errors),
        "error_samples": errors[:5],
        "server_cpu_ms_per_put": round(cpu_ms, 3),
    }, ports


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    print("  starting netapp serve", file=sys.stderr, flush=True)
    with served([]) as server, closing(MapProbe(server.instance)) as probe:
        grant_tenant(server)
        print(f"  declaring {args.rules:,} traffic rules", file=sys.stderr, flush=True)
        filled = fill(server, args.rules)
        check_installed(probe, args.rules)
        print(f"  {args.puts:,} timed PUTs", file=sys.stderr, flush=True)
        puts, ports = timed_puts(server, probe, args)
        same = equivalence(probe, args.rules, ports)
        if probe.count() != args.rules:
            raise CheckError(f"dpp_rules holds {probe.count()} rules after the PUTs, not {args.rules}")
    p99 = puts["latency_ms"].get("p99", float("inf"))
    return {
        "fill": filled,
        "put": puts,
        "equivalence": same,
        "target": {"name": f"PUT p99 at {args.rules:,} rules", "value": p99, "limit": TARGET_P99_MS,
                   "unit": "ms", "met": p99 <= TARGET_P99_MS},
        "kernel": platform.release(),
        "machine": machine_info(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - started, 1),
    }


def format_table(result: dict[str, Any]) -> str:
    fill_, put, same, target = result["fill"], result["put"], result["equivalence"], result["target"]
    latency = put["latency_ms"]
    return "\n".join([
        f"DPP NetApp MEC 011 traffic rules: netapp serve over the real data plane, kernel {result['kernel']}, "
        f"{result['machine']['cpus']} CPUs",
        f"fill: {fill_['rules']:,} rules in {fill_['applications']} applications in {fill_['seconds']:.1f} s "
        f"({fill_['rules_per_s']:,.0f} rules/s; an application of 64: p50 {fill_['application_ms'].get('p50', 0):.1f} ms)",
        f"PUT sent -> response, {latency['n']} PUTs at {fill_['rules']:,} rules (ms): p50 {latency['p50']:.2f}  "
        f"p90 {latency['p90']:.2f}  p99 {latency['p99']:.2f}  max {latency['max']:.2f}; "
        f"{put['checked_in_maps']} checked in dpp_rules, {put['errors']} errors, "
        f"server CPU {put['server_cpu_ms_per_put']:.2f} ms per PUT",
        f"entries: {same['identical']}/{same['sampled']} sampled rules hold exactly the native intent's entry",
        f"target (reported, not asserted): {target['name']} {target['value']:.2f} ms (<= {target['limit']:.0f}) "
        f"{'met' if target['met'] else 'NOT met'}",
    ])


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0:
        print("bench.mec: the data plane (BPF maps, pinning) needs root", file=sys.stderr)
        return 2
    try:
        result = run(args)
    except CheckError as exc:
        print(f"bench.mec: check failed, no results written: {exc}", file=sys.stderr)
        return 1
    except ServerError as exc:
        print(f"bench.mec: {exc}", file=sys.stderr)
        return 3
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(format_table(result))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
