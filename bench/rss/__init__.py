"""The GTP-U dispatcher's benchmark ("XDP RSS", netapp.qos.dispatch): its per-packet cost above the
empty program's floor (BPF_PROG_TEST_RUN, the redirect decided; live frames, the redirect into
CPUMAP carried out), and the spread of 10,000 tunnels over the workers (max/min load), through the
program for this machine's workers and through the hash's model for more. See bench/README.md."""
