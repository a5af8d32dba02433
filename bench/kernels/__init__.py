"""Whether other kernels' verifiers take the data path: a kernel booted under qemu (TCG, no KVM
needed) from an initramfs holding busybox, this build's dppctl and BPF objects and a small loader,
which loads the pipeline as the service does and every object as the tests do, and reports each
load on the serial console. `python -m bench.kernels` (bench/README.md, "Kernels")."""
