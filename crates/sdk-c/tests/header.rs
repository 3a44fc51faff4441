//! The committed header, `include/vrhost_sdk.h`, is what cbindgen makes of
//! the crate now. `VRHOST_BLESS=1 cargo test -p vrhost-sdk-c --test header`
//! rewrites it after a change of the ABI.

use std::path::Path;

#[test]
fn the_header_is_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut made = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen reads the crate")
        .write(&mut made);
    let made = String::from_utf8(made).expect("UTF-8 header");
    let path = dir.join("include/vrhost_sdk.h");
    if std::env::var_os("VRHOST_BLESS").is_some() {
        std::fs::write(&path, &made).expect("write the header");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == made,
        "include/vrhost_sdk.h is out of date: run VRHOST_BLESS=1 cargo test -p vrhost-sdk-c --test header"
    );
}
