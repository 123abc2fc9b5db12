//! Passes the target triple to the tests (the `cc` crate needs it; Cargo sets `TARGET` only for
//! build scripts) and gives the shared library its soname.

fn main() {
    let target = std::env::var("TARGET").expect("cargo sets TARGET for build scripts");
    println!("cargo:rustc-env=LIFELINE_TARGET={target}");
    // Keep in step with `LIFELINE_ABI_VERSION` in src/lib.rs.
    let abi = 2;
    println!("cargo:rustc-env=LIFELINE_SONAME_ABI={abi}");
    if target.contains("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,liblifeline.so.{abi}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
