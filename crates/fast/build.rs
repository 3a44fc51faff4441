//! Compiles the fast path's XDP program `ebpf/xdp_router.c` (at the
//! workspace root) into `OUT_DIR/xdp_router.o`; `src/lib.rs` embeds it.

include!("../../ebpf/compile.rs");

fn main() {
    compile_bpf("xdp_router", "the fast path's XDP program");
}
