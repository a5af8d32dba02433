"""Generic tables (netapp.dataplane.tables over libdpp's dpp_table_*), each test run twice: against
an anonymous kernel instance (root) and against FakeDpp, so that the fake keeps libdpp's semantics.

dpp_alt_groups is an array (the kernel's batch operations), dpp_ports a DEVMAP_HASH (no batch
operations: libdpp's per-element fallback)."""

from __future__ import annotations

import ctypes
import errno
from ctypes import c_uint32

import pytest

from netapp.dataplane.binding import (
    MAPS,
    MAX_ALT_GROUPS,
    AltGroup,
    Counter,
    DataplaneError,
    DevmapVal,
    DppHandle,
    MapSpec,
    MapType,
    load_libdpp,
)
from netapp.dataplane.fake import FakeDpp
from netapp.dataplane.tables import MapOfMaps, PerCpuTable, RowsTable, Table, UpdateFlag, held_at, open_table
from netapp.qos.abi import PolicerStats
from tests.utils.kernel import require_kernel

LOOPBACK = 1  # a DEVMAP_HASH value must name an existing interface


# the maps these tests write: each test starts with them as a new instance has them
TOUCHED = ("dpp_alt_groups", "dpp_ports", "dpp_upf_routes")


@pytest.fixture(scope="module")
def kernel_handle():
    """One anonymous instance for the module's kernel tests: loading verifies the programs, seconds
    on a loaded machine."""
    require_kernel()
    handle = DppHandle.open(load_libdpp())
    try:
        yield handle
    finally:
        handle.close()


def table_of(handle: DppHandle, name: str) -> Table:
    return PerCpuTable(handle, name) if MAPS[name].per_cpu else Table(handle, name)


def written_keys(handle: DppHandle) -> dict[str, list]:
    """Per touched map, the keys a new instance would not have: a hash's every key, an array's
    non-zero entries (on any CPU for a per-CPU array)."""
    written = {}
    for name in TOUCHED:
        spec, zero = MAPS[name], bytes(MAPS[name].value())
        if spec.type not in (MapType.ARRAY, MapType.PERCPU_ARRAY):
            written[name] = [key for key, _ in table_of(handle, name).items()]
            continue
        per_cpu = (lambda values: values) if spec.per_cpu else (lambda value: [value])
        written[name] = [key for key, value in table_of(handle, name).items()
                         if any(bytes(item) != zero for item in per_cpu(value))]
    return written


def forget_writes(handle: DppHandle) -> None:
    """The touched maps back as a new instance has them: arrays zeroed, hash entries deleted."""
    for name, keys in written_keys(handle).items():
        if not keys:
            continue
        if MAPS[name].per_cpu:
            PerCpuTable(handle, name).fill(keys)
        elif MAPS[name].type == MapType.ARRAY:
            Table(handle, name).update({key: MAPS[name].value() for key in keys})
        else:
            Table(handle, name).delete(keys)


@pytest.fixture(params=["kernel", "fake"])
def adapter(request):
    if request.param == "fake":
        yield FakeDpp()
        return
    handle = request.getfixturevalue("kernel_handle")
    assert written_keys(handle) == {name: [] for name in TOUCHED}, "an earlier test's writes were left"
    try:
        yield handle
    finally:
        forget_writes(handle)


def group(count: int, ifindex: int = 0) -> AltGroup:
    value = AltGroup(count=count)
    value.members[0].ifindex = ifindex
    return value


def same(a, b) -> bool:
    return bytes(a) == bytes(b)


def errno_of(call) -> DataplaneError:
    with pytest.raises(DataplaneError) as raised:
        call()
    return raised.value


# --- a plain array with a row per CPU (dpp_policer_stats) ----------------------------------------


def test_a_rows_table_keeps_each_cpus_value_in_its_row_and_refuses_a_key_past_a_row(adapter):
    """CPU c's value of key k is the array's slot c x row + k (the program's index, bpf/nf/qos/police.h),
    a row being the map's size over the CPUs; a key past the row would be the next CPU's."""
    rows, raw = RowsTable(adapter, "dpp_policer_stats"), Table(adapter, "dpp_policer_stats")
    assert rows.row * rows.cpus == raw.max_entries
    key, cpus = rows.row - 1, range(rows.cpus)
    try:
        rows.update({key: [PolicerStats(passed_packets=cpu + 1) for cpu in cpus]})
        assert [raw.get(cpu * rows.row + key).passed_packets for cpu in cpus] == [cpu + 1 for cpu in cpus]
        assert [value.passed_packets for value in rows.get(key)] == [cpu + 1 for cpu in cpus]
        rows.fill([key], PolicerStats(chunk=5))
        assert [raw.get(cpu * rows.row + key).chunk for cpu in cpus] == [5] * rows.cpus
        with pytest.raises(ValueError, match="past a CPU's row"):
            rows.get(rows.row)
    finally:
        rows.fill([key])


def test_a_rows_tables_fill_writes_every_cpus_slot_of_each_key_and_no_other(adapter):
    """libdpp's dpp_table_fill makes the slots itself (row c's slot of key k: c x row + k): it must
    write what a table_update of every CPU's slot writes, over values there before, and touch no
    neighbour; an index past a row is refused before anything is written."""
    rows, raw = RowsTable(adapter, "dpp_policer_stats"), Table(adapter, "dpp_policer_stats")
    keys, neighbours, cpus = [rows.row - 1, 3, 7], [2, 4, 6, 8], range(rows.cpus)
    every = sorted({*keys, *neighbours})
    try:
        rows.update({key: [PolicerStats(passed_packets=100 * key + cpu) for cpu in cpus] for key in every})
        rows.fill(keys, PolicerStats(chunk=9, credit=3))
        for key in every:
            want = [(9, 3, 0) if key in keys else (0, 0, 100 * key + cpu) for cpu in cpus]
            slots = [raw.get(cpu * rows.row + key) for cpu in cpus]
            assert [(slot.chunk, slot.credit, slot.passed_packets) for slot in slots] == want, key
        refused = errno_of(lambda: adapter.table_fill("dpp_policer_stats", (c_uint32 * 2)(1, rows.row), rows.row,
                                                      rows.cpus, bytes(PolicerStats(chunk=1))))
        assert refused.errno == errno.ERANGE
        assert raw.get(1).chunk == 0, "a refused fill wrote its first index"
    finally:
        rows.fill(every)


def test_open_table_opens_each_map_as_its_spec_says(adapter):
    """The one choice of a table's kind, by its spec, that the facade and the tests' own views make:
    a map of a row per CPU opened as a plain array would read one CPU's slot as the policer's."""
    kinds = {"dpp_policer_stats": RowsTable, "dpp_verdicts": PerCpuTable, "dpp_atsss_tx": MapOfMaps,
             "dpp_alt_groups": Table}
    assert {name: type(open_table(adapter, name)) for name in kinds} == kinds


# --- an array: batched --------------------------------------------------------------------------


def test_given_groups_written_in_one_batch_then_each_reads_back(adapter):
    table = Table(adapter, "dpp_alt_groups")
    table.update({3: group(1, 7), 5: group(2, 9)})

    three, four, five = table.lookup([3, 4, 5])

    assert same(three, group(1, 7)) and same(five, group(2, 9))
    assert same(four, AltGroup())  # an array has every index, zeroed until written
    assert same(table.get(5), group(2, 9))


def test_given_keys_and_values_as_c_arrays_then_each_pair_is_written_and_unequal_lengths_refused(adapter):
    table = Table(adapter, "dpp_alt_groups")
    values = (AltGroup * 3)(group(1, 7), group(2, 9), group(3, 11))
    table.update_arrays((c_uint32 * 3)(6, 2, 4), values)

    assert [bytes(value) for value in table.lookup([2, 4, 6])] == [bytes(group(2, 9)), bytes(group(3, 11)),
                                                                    bytes(group(1, 7))]
    with pytest.raises(ValueError, match="2 keys and 3 values"):
        table.update_arrays([1, 5], values)
    assert [bytes(value) for value in table.lookup([1, 5])] == [bytes(AltGroup())] * 2, "nothing written"


def test_an_arrays_items_are_every_index_in_order_across_dump_calls(adapter):
    table = Table(adapter, "dpp_alt_groups")
    table.DUMP_CHUNK = 5  # 64 entries in 13 calls
    table.update([(63, group(1, 4))])

    items = list(table.items())

    assert [key for key, _ in items] == list(range(MAX_ALT_GROUPS))
    assert same(items[63][1], group(1, 4)) and same(items[0][1], AltGroup())


@pytest.mark.parametrize("keys", [
    [60, 58, 61, 59, 58, 63],  # close: one batch of their span, a key twice, out of order
    [61, 62, 63, MAX_ALT_GROUPS, 62],  # close, one past the end: the kernel walks on from index 0
    [MAX_ALT_GROUPS + 1, MAX_ALT_GROUPS + 2, MAX_ALT_GROUPS + 3, MAX_ALT_GROUPS + 4],  # all past the end
    [0, 1, 2, 3, 0],  # from index 0
    [1, 40, 63, 20, 5],  # spread out: key by key
], ids=["close", "one-past-the-end", "all-past-the-end", "from-zero", "spread"])
def test_an_arrays_keys_read_together_give_what_each_read_alone_gives(adapter, keys):
    """libdpp reads an array's close keys with one batch of their span (dpp_table_lookup): each key's
    value and whether it is found must be what a lookup of that key alone gives."""
    table = Table(adapter, "dpp_alt_groups")
    table.update([(index, group(index % 7 + 1, index)) for index in range(56, MAX_ALT_GROUPS)] +
                 [(index, group(index + 1, index)) for index in range(0, 4)])
    together = table.lookup(keys)
    alone = [table.lookup([key])[0] for key in keys]
    assert [None if value is None else bytes(value) for value in together] == \
        [None if value is None else bytes(value) for value in alone]
    assert all((value is None) == (key >= MAX_ALT_GROUPS) for key, value in zip(keys, together))


@pytest.mark.parametrize("keys", [
    [60, 58, 61, 59, 58, 63], [61, 62, 63, MAX_ALT_GROUPS, 62], [MAX_ALT_GROUPS + 1, MAX_ALT_GROUPS + 2],
    [MAX_ALT_GROUPS, 0, 1, 2, 3, 0], [1, 40, 63, 20, 5], [4, 5, 6],
], ids=["close", "one-past-the-end", "all-past-the-end", "past-then-zero", "spread", "zeroed"])
def test_the_first_key_held_is_the_one_the_lookups_say(adapter, keys):
    """dpp_table_held (a guard's question: the first key held, with a flag set in its value) gives
    what the lookups and `held_at` over them give: for every flag (0: held at all), in an array (every
    key in range held, zeroed or not) and in a hash map without batches (only the keys there)."""
    table = Table(adapter, "dpp_alt_groups")
    table.update([(index, group(index % 7 + 1, index)) for index in range(56, MAX_ALT_GROUPS)] +
                 [(index, group(index + 1, index)) for index in range(0, 4)])
    for flag in (0, 1, 2, 4):
        assert table.first_held(keys, AltGroup.count.offset, flag) == \
            held_at(table.lookup(keys), AltGroup.count.offset, flag), f"flag {flag}"
    ports = Table(adapter, "dpp_ports")
    ports.update({3: DevmapVal(ifindex=LOOPBACK)})
    for asked in ([1, 2], [1, 3, 2], [3], []):
        assert ports.first_held(asked) == held_at(ports.lookup(asked)) == (asked.index(3) if 3 in asked else len(asked))


def test_a_held_question_whose_buffer_would_wrap_is_refused(kernel_handle):
    """dpp_table_held makes one buffer of n values and n found bytes: a value size that would wrap
    size_t is refused with EOVERFLOW, not allocated short (2 x 2**63 + 2 wraps to 2 bytes)."""
    keys = (c_uint32 * 2)(1, 2)
    for value_size in (1 << 63, (1 << 64) - 1):
        with pytest.raises(DataplaneError) as refused:
            kernel_handle.table_held("dpp_alt_groups", keys, value_size, 0, 0)
        assert refused.value.errno == errno.EOVERFLOW, value_size
    assert kernel_handle.table_held("dpp_alt_groups", keys, ctypes.sizeof(AltGroup), 0, 0) == 0


def test_no_keys_may_be_no_pointer(kernel_handle):
    """libdpp's C calls take NULL keys with n 0 (the header says so): an array's lookup must not read
    a first key before it knows there are any."""
    lib = kernel_handle.lib
    value = AltGroup()
    assert lib.dpp_table_lookup(kernel_handle._handle, b"dpp_alt_groups", None, 4, ctypes.byref(value),
                                ctypes.sizeof(value), 0, None) == 0


def test_given_a_key_past_the_array_then_the_batch_stops_there_and_says_how_far_it_got(adapter):
    table = Table(adapter, "dpp_alt_groups")

    error = errno_of(lambda: table.update([(1, group(1)), (2, group(2)), (MAX_ALT_GROUPS, group(3))]))

    assert error.errno == errno.E2BIG and error.done == 2
    assert same(table.get(2), group(2))


def test_an_arrays_entries_cannot_be_deleted_only_zeroed(adapter):
    table = Table(adapter, "dpp_alt_groups")
    table.update({1: group(1)})

    assert errno_of(lambda: table.delete([1])).errno == errno.EINVAL
    table.update({1: AltGroup()})
    assert same(table.get(1), AltGroup())


def test_an_array_takes_no_new_key(adapter):
    table = Table(adapter, "dpp_alt_groups")
    error = errno_of(lambda: table.update({1: group(1)}, UpdateFlag.NOEXIST))
    assert error.errno == errno.EEXIST and error.done == 0


# --- a hash without batch operations: one element at a time ------------------------------------


def test_given_a_port_added_then_it_reads_back_dumps_and_deletes(adapter):
    table = Table(adapter, "dpp_ports")
    assert table.get(LOOPBACK) is None

    table.update({LOOPBACK: DevmapVal(ifindex=LOOPBACK)})

    assert table.get(LOOPBACK).ifindex == LOOPBACK
    assert [(key, value.ifindex) for key, value in table.items()] == [(LOOPBACK, LOOPBACK)]
    table.delete([LOOPBACK])
    assert table.get(LOOPBACK) is None and list(table.items()) == []


def test_given_a_missing_key_then_delete_stops_there_and_says_how_far_it_got(adapter):
    table = Table(adapter, "dpp_ports")
    table.update({LOOPBACK: DevmapVal(ifindex=LOOPBACK)})

    error = errno_of(lambda: table.delete([LOOPBACK, 4000]))

    assert error.errno == errno.ENOENT and error.done == 1
    assert table.get(LOOPBACK) is None


def test_given_a_port_there_then_noexist_refuses_it(adapter):
    table = Table(adapter, "dpp_ports")
    table.update({LOOPBACK: DevmapVal(ifindex=LOOPBACK)}, UpdateFlag.EXIST)  # a DEVMAP_HASH ignores EXIST
    error = errno_of(lambda: table.update({LOOPBACK: DevmapVal(ifindex=LOOPBACK)}, UpdateFlag.NOEXIST))
    assert error.errno == errno.EEXIST and error.done == 0


# --- refusals -----------------------------------------------------------------------------------


def test_given_sizes_other_than_the_maps_then_nothing_is_written(adapter):
    spec = MapSpec(MapType.ARRAY, c_uint32, Counter, "DPP_MAX_ALT_GROUPS", table=True)
    wrong = Table(adapter, "dpp_alt_groups", spec)

    error = errno_of(lambda: wrong.update({1: Counter(1, 1)}))

    assert error.errno == errno.EINVAL
    assert same(Table(adapter, "dpp_alt_groups").get(1), AltGroup())


def test_given_sizes_other_than_the_maps_after_a_write_then_they_are_still_refused(adapter):
    """libdpp asks the kernel for a map's type and sizes once and keeps them: what it kept still
    refuses a caller's wrong sizes, for every operation, and takes the right ones again."""
    right = Table(adapter, "dpp_alt_groups")
    right.update({1: group(1)})
    wrong = Table(adapter, "dpp_alt_groups", MapSpec(MapType.ARRAY, c_uint32, Counter, "DPP_MAX_ALT_GROUPS", table=True))

    assert errno_of(lambda: wrong.update({1: Counter(1, 1)})).errno == errno.EINVAL
    assert errno_of(lambda: wrong.lookup([1])).errno == errno.EINVAL
    right.update({2: group(2)})
    assert [value.count for value in right.lookup([1, 2])] == [1, 2]


def test_given_a_name_no_map_has_then_every_operation_says_so(adapter):
    table = Table(adapter, "dpp_nothing", MapSpec(MapType.HASH, c_uint32, c_uint32, 1, table=True))
    assert errno_of(lambda: table.update({1: 1})).errno == errno.ENOENT
    assert errno_of(lambda: table.lookup([1])).errno == errno.ENOENT
    assert errno_of(lambda: table.delete([1])).errno == errno.ENOENT
    assert errno_of(lambda: list(table.items())).errno == errno.ENOENT


@pytest.mark.parametrize("name", sorted(MAPS))
def test_only_plain_maps_are_written_as_tables_and_every_map_reads(adapter, name):
    """libdpp refuses the maps its modules declare (their writes have a protocol); MapSpec.table
    says which, so the fake refuses the same."""
    spec = MAPS[name]
    no_keys = (spec.key * 0)() if spec.key is not None else (ctypes.c_uint8 * 0)()  # a ring has no keys
    if spec.table:
        adapter.table_delete(name, no_keys)
    else:
        assert errno_of(lambda: adapter.table_delete(name, no_keys)).errno == errno.EPERM


def test_a_map_with_a_protocol_is_refused_and_left_as_it_was(adapter):
    rules = Table(adapter, "dpp_rules")
    key, rule = MAPS["dpp_rules"].key(ifindex=9), MAPS["dpp_rules"].value(slot=1)

    assert errno_of(lambda: rules.update([(key, rule)])).errno == errno.EPERM
    assert errno_of(lambda: rules.delete([key])).errno == errno.EPERM
    assert rules.get(key) is None and list(rules.items()) == []


def test_a_per_cpu_map_or_a_map_without_mirrors_is_no_table():
    fake = FakeDpp()
    with pytest.raises(ValueError, match="per-CPU"):
        Table(fake, "dpp_flow_use")
    with pytest.raises(ValueError, match="not per-CPU"):
        PerCpuTable(fake, "dpp_alt_groups")
    with pytest.raises(ValueError, match="mirrors"):
        Table(fake, "dpp_cpu_map")
    with pytest.raises(ValueError, match="no map named"):
        Table(fake, "dpp_nothing")


def test_a_per_cpu_table_reads_and_writes_every_cpus_value(adapter):
    routes = PerCpuTable(adapter, "dpp_upf_routes")
    value = MAPS["dpp_upf_routes"].value
    per_cpu = [value(gen=cpu + 1, max_len=100 * cpu) for cpu in range(routes.cpus)]
    routes.update({7: per_cpu})
    assert [(item.gen, item.max_len) for item in routes.get(7)] == [(c + 1, 100 * c) for c in range(routes.cpus)]
    assert not any(bytes(item) != bytes(value()) for item in routes.get(8))  # other slots as they were

    routes.fill([7])
    assert all(bytes(item) == bytes(value()) for item in routes.get(7))
    routes.fill([9], value(max_len=5))
    assert [item.max_len for item in routes.get(9)] == [5] * routes.cpus
    assert [key for key, values in routes.items() if any(item.max_len for item in values)] == [9]
    routes.fill([10, 11, 12], value(gen=3, max_len=6))  # one value, every key and CPU
    assert all((item.gen, item.max_len) == (3, 6) for key in (10, 11, 12) for item in routes.get(key))
    with pytest.raises(TypeError, match="dpp_upf_routes"):
        routes.fill([13], MAPS["dpp_rules"].value(slot=1))


def test_wait_readers_returns_once_the_programs_runs_are_over(adapter):
    """In the kernel an RCU grace period (some milliseconds: the update of a map of maps waits for
    the running BPF programs); the fake counts the waits."""
    table = Table(adapter, "dpp_upf_dl4")
    table.wait_readers()
    table.wait_readers()
    if isinstance(adapter, FakeDpp):
        assert adapter.reader_waits == 2
