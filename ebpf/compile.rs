// The one way the workspace compiles an XDP program of `ebpf/`: included
// by the build scripts of `crates/io` and `crates/fast` with
// `include!("../../ebpf/compile.rs")`, so the clang command line and its
// errors are written once.

/// Compile `ebpf/PROG.c` (at the workspace root) into `OUT_DIR/PROG.o`
/// with clang (`$CLANG`, default `clang`). `what` names the program in
/// the error ("the AF_XDP port's XDP program").
fn compile_bpf(prog: &str, what: &str) {
    let manifest = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"),
    );
    let src = manifest.join(format!("../../ebpf/{prog}.c"));
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"))
        .join(format!("{prog}.o"));
    println!("cargo::rerun-if-changed={}", src.display());
    println!("cargo::rerun-if-env-changed=CLANG");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".to_string());
    // Debian keeps <asm/types.h> under the host triplet's include directory.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let status = std::process::Command::new(&clang)
        .args(["-O2", "-g", "-target", "bpf", "-Wall", "-c"])
        .arg(format!("-I/usr/include/{arch}-linux-gnu"))
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!(
            "{clang} failed ({s}) compiling {}: {what} does not build \
             (needs the Debian packages clang, llvm and libbpf-dev: run scripts/install)",
            src.display()
        ),
        Err(e) => panic!(
            "cannot run {clang} ({e}): {what} is compiled with clang; \
             install clang, llvm and libbpf-dev with scripts/install"
        ),
    }
}
