//! What the C tests share: where `cargo test` put the static library, and the C compiler.

#![allow(dead_code)] // each test binary uses its own subset

use std::path::PathBuf;
use std::process::Command;

/// The target triple (from `build.rs`: cargo sets `TARGET` only for build scripts).
pub(crate) const TARGET: &str = env!("LIFELINE_TARGET");

/// The directory this test binary's profile builds into (`target/<profile>`).
pub(crate) fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/c_api-<hash>
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// The static library: `cargo test` builds it into `deps/` (a `cargo build` copies it up). The
/// newest of the candidates wins.
pub(crate) fn static_lib() -> PathBuf {
    let dir = profile_dir();
    let mut found: Vec<PathBuf> = [dir.join("liblifeline.a")]
        .into_iter()
        .chain(
            std::fs::read_dir(dir.join("deps"))
                .unwrap()
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                        n.starts_with("liblifeline") && n.ends_with(".a") && !n.contains("core")
                    })
                }),
        )
        .filter(|p| p.is_file())
        .collect();
    found.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    found
        .pop()
        .expect("liblifeline.a in target/<profile>/deps (cargo test builds the staticlib)")
}

/// The C (or, with `cpp`, C++) compiler the cc crate picks for this target, at `-O<opt>`.
pub(crate) fn compiler(cpp: bool, opt: u32) -> Command {
    cc::Build::new()
        .target(TARGET)
        .host(TARGET)
        .opt_level(opt)
        .cargo_metadata(false)
        .cpp(cpp)
        .get_compiler()
        .to_command()
}
