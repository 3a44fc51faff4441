//! Compiles the XDP programs in `ebpf/` at the workspace root into
//! `OUT_DIR/NAME.o`: the AF_XDP port's `xdp_redirect` (embedded by
//! `src/af_xdp.rs`, with its transmit without skbs `xdp_txlive.h`) and the benchmark sink's `xdp_sink` (embedded as
//! `XDP_SINK_OBJ` in `src/lib.rs`).

include!("../../ebpf/compile.rs");

fn main() {
    compile_bpf("xdp_redirect", "the AF_XDP port's XDP program");
    println!("cargo::rerun-if-changed=../../ebpf/xdp_txlive.h");
    compile_bpf("xdp_sink", "the benchmark sink's XDP program");
}
