//! Compiles the fast path's XDP program `ebpf/xdp_router.c` (at the
//! workspace root) into `OUT_DIR/xdp_router.o`, which `src/lib.rs` embeds,
//! and the benchmarks' live-frames generator and counting sink
//! (`ebpf/xdp_livegen.c`, `ebpf/xdp_seqsink.c`), which `src/livegen.rs`
//! embeds, and the minimal router `ebpf/xdp_minrouter.c` (`src/cost.rs`).

include!("../../ebpf/compile.rs");

fn main() {
    // Included by xdp_router.c.
    println!("cargo::rerun-if-changed=../../ebpf/xdp_tunnel.h");
    println!("cargo::rerun-if-changed=../../ebpf/xdp_cache.h");
    println!("cargo::rerun-if-changed=../../ebpf/xdp_fib.h");
    println!("cargo::rerun-if-changed=../../ebpf/xdp_ttl.h");
    compile_bpf("xdp_router", "the fast path's XDP program");
    compile_bpf("xdp_livegen", "the live-frames generator's XDP program");
    compile_bpf("xdp_seqsink", "the counting sink's XDP program");
    compile_bpf("xdp_minrouter", "the minimal XDP router (cost reference)");
}
