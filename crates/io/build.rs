//! Compiles the XDP programs in `ebpf/` at the workspace root into
//! `OUT_DIR/NAME.o`: the AF_XDP port's `xdp_redirect` (embedded by
//! `src/af_xdp.rs`), its transmit without skbs `xdp_txlive` (embedded by
//! `src/af_xdp/txlive.rs`) and the benchmark sink's `xdp_sink` (embedded as
//! `XDP_SINK_OBJ` in `src/lib.rs`).

include!("../../ebpf/compile.rs");

fn main() {
    compile_bpf("xdp_redirect", "the AF_XDP port's XDP program");
    compile_bpf("xdp_txlive", "the AF_XDP port's XDP transmit");
    compile_bpf("xdp_sink", "the benchmark sink's XDP program");
}
