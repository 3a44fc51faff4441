//! Compiles the fast path's XDP program `ebpf/xdp_router.c` (at the
//! workspace root) into `OUT_DIR/xdp_router.o` with clang, as
//! crates/io/build.rs does for the AF_XDP port's; `src/lib.rs` embeds it.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    compile("xdp_router");
}

fn compile(prog: &str) {
    let manifest =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let src = manifest.join(format!("../../ebpf/{prog}.c"));
    let out =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join(format!("{prog}.o"));
    println!("cargo::rerun-if-changed={}", src.display());
    println!("cargo::rerun-if-env-changed=CLANG");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".to_string());
    // Debian keeps <asm/types.h> under the host triplet's include directory.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let status = Command::new(&clang)
        .args(["-O2", "-g", "-target", "bpf", "-Wall", "-c"])
        .arg(format!("-I/usr/include/{arch}-linux-gnu"))
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!(
            "{clang} failed ({s}) compiling {}: the fast path's XDP program does not build \
             (needs the Debian packages clang, llvm and libbpf-dev: run scripts/install)",
            src.display()
        ),
        Err(e) => panic!(
            "cannot run {clang} ({e}): the fast path's XDP program is compiled with clang; \
             install clang, llvm and libbpf-dev with scripts/install"
        ),
    }
}
