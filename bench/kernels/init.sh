#!/bin/busybox sh
# The virtual machine's /init (bench/kernels): loads the data path the way the service does
# (dppctl attach on a veth, which loads and pins the instance, then dppctl upgrade of it; where the
# kernel refuses the data path, the upgrade of an instance pinned by hand) and every BPF object of the build the way the tests do (load, every knob setting),
# then powers off. Each line meant for the host starts with "@dpp " on the console, among the
# kernel's own messages.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t bpf bpf /sys/fs/bpf
export PATH=/bin:/dpp

say() { echo "@dpp $*"; }

# A kernel too old for the data path must refuse its upgrade too (libdpp checks the kernel before
# it loads the new programs). No instance can be loaded here, so one is pinned by hand where libdpp
# keeps the default one (stand-in: the pipeline's maps, a small entry program), and `dppctl upgrade`
# opens it as it opens a running instance.
upgrade_refused() {
	mkdir -p /sys/fs/bpf/dpp
	if ! stand-in /sys/fs/bpf/dpp/default /objects/dpp.bpf.o /objects/xdp_pass.bpf.o >/tmp/stand-in.log 2>&1; then
		say "upgrade not tried"
		sed 's/^/@dpp log upgrade stand-in: /' /tmp/stand-in.log
	elif dppctl -v upgrade >/tmp/upgrade.log 2>&1; then
		say "upgrade done"
	else
		say "upgrade refused"
		grep -v 'dppctl: libbpf: ' /tmp/upgrade.log | tail -n 40 | sed 's/^/@dpp log upgrade dppctl: /'
	fi
}

# Where the kernel takes the data path, the attached instance is upgraded under its link as an
# operator upgrades it (dppctl upgrade): the frames counted before stay counted, and the new program
# counts the next ones.
upgrade_in_place() {
	not_ip_count before
	if dppctl -v upgrade >/tmp/upgrade.log 2>&1; then
		say "upgrade done"
		grep 'upgraded: program id' /tmp/upgrade.log | sed 's/^/@dpp log upgrade dppctl: /'
	else
		say "upgrade refused"
		grep -v 'dppctl: libbpf: ' /tmp/upgrade.log | tail -n 40 | sed 's/^/@dpp log upgrade dppctl: /'
	fi
	not_ip_count after
}

# not_ip_count WHEN: two ARP probes sent from dpp1 into the attached dpp0, then the pipeline's count
# of frames that are not IP (its not_ip reason), which only ARP makes here.
not_ip_count() {
	arping -U -c 2 -I dpp1 10.0.0.1 >/dev/null 2>&1
	say "not-ip $1 $(dppctl stats | sed -n 's/^  not_ip  *\([0-9]*\) .*/\1/p')"
}

say "kernel $(uname -r)"
if [ -e /sys/kernel/btf/vmlinux ]; then say "btf yes"; else say "btf no"; fi

settings= # the loader's: every setting of every object

# The service's way: dppctl loads, pins and attaches the instance (libdpp's kernel check, map sizes,
# the policers' clock started).
insmod /lib/modules/veth.ko
# busybox's ip takes no peer name: the kernel names the peer veth0, renamed here
ip link add dpp0 type veth && ip link set veth0 name dpp1 && ip link set dpp0 up && ip link set dpp1 up
if dppctl -v attach -i dpp0 >/tmp/attach.log 2>&1; then
	say "service attached"
	dppctl status 2>&1 | sed 's/^/@dpp status /'
	upgrade_in_place
else
	say "service refused"
	grep -v 'relocated, imm\|insns from sub-prog' /tmp/attach.log | tail -n 40 | sed 's/^/@dpp log service dppctl: /'
	# refused by libdpp's kernel check, not by a verifier (the stand-in's maps suit only the former)
	if grep -q 'is older than' /tmp/attach.log; then
		upgrade_refused
		settings=-1 # the verifier's reason is wanted, once an object (load.c says why)
	fi
fi

# The tests' way: every object, every knob setting (the first only on a kernel libdpp refuses). Its
# exit status (the loads it refused) told too: a loader that dies part way (killed, a crash) leaves
# a status its lines do not account for.
load $settings /objects/*.bpf.o >/tmp/load.out 2>/dev/null
loaded=$?
sed 's/^/@dpp /' /tmp/load.out
say "loader exit $loaded"
say "done"
poweroff -f
