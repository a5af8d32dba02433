#!/bin/busybox sh
# The virtual machine's /init (bench/kernels): loads the data path the way the service does
# (dppctl attach on a veth, which loads and pins the instance) and every BPF object of the build the
# way the tests do (load, every knob setting), then powers off. Each line meant for the host starts
# with "@dpp " on the console, among the kernel's own messages.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t bpf bpf /sys/fs/bpf
export PATH=/bin:/dpp

say() { echo "@dpp $*"; }

say "kernel $(uname -r)"
if [ -e /sys/kernel/btf/vmlinux ]; then say "btf yes"; else say "btf no"; fi

# The service's way: dppctl loads, pins and attaches the instance (libdpp's kernel check, map sizes,
# the policers' clock started).
insmod /lib/modules/veth.ko
ip link add dpp0 type veth peer name dpp1 && ip link set dpp0 up && ip link set dpp1 up
if dppctl -v attach -i dpp0 >/tmp/attach.log 2>&1; then
	say "service attached"
	dppctl status 2>&1 | sed 's/^/@dpp status /'
else
	say "service refused"
	grep -v 'relocated, imm\|insns from sub-prog' /tmp/attach.log | tail -n 40 | sed 's/^/@dpp log service dppctl: /'
fi

# The tests' way: every object, every knob setting. Its exit status (the loads it refused) told too:
# a loader that dies part way (killed, a crash) leaves a status its lines do not account for.
load /objects/*.bpf.o >/tmp/load.out 2>/dev/null
loaded=$?
sed 's/^/@dpp /' /tmp/load.out
say "loader exit $loaded"
say "done"
poweroff -f
