//! The C ABI from C: the committed header is current, the C programs in `tests/c/` compile with
//! warnings as errors against it and the static library and run clean (also under ASan and
//! UBSan), and the header compiles as C++17.

use std::path::{Path, PathBuf};
use std::process::Command;

const MANIFEST: &str = env!("CARGO_MANIFEST_DIR");
mod common;

use common::{profile_dir, static_lib};

/// The header cbindgen makes from the sources now.
fn generate_header() -> Vec<u8> {
    let cfg = cbindgen::Config::from_file(Path::new(MANIFEST).join("cbindgen.toml")).unwrap();
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_crate(MANIFEST)
        .with_config(cfg)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut out);
    out
}

#[test]
fn header_is_current() {
    let path = Path::new(MANIFEST).join("include/lifeline.h");
    let fresh = generate_header();
    if std::env::var_os("LIFELINE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &fresh).unwrap();
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "capi/include/lifeline.h is stale: regenerate it with \
         `LIFELINE_BLESS=1 cargo test -p lifeline-capi --test c_api header_is_current` \
         and commit it"
    );
}

/// Skips `test` for `why` with one line to the terminal (not captured by the harness), or fails
/// it when `var` is `1` (`.ci/run` sets it once it has installed the package).
fn skip(test: &str, why: &str, var: &str) {
    use std::io::Write;
    if std::env::var(var).is_ok_and(|v| v == "1") {
        panic!("{test}: {why}, and {var}=1 forbids skipping");
    }
    // In one write, straight to the terminal: the harness captures only the print macros.
    let line = format!("SKIPPED {test}: {why} (set {var}=1 to make this a failure)\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

fn compiler(cpp: bool) -> Command {
    common::compiler(cpp, 0)
}

/// Whether the C compiler can link a program with `flags` (the sanitizer runtime may be absent).
fn can_link(flags: &[&str], out_dir: &Path) -> bool {
    let src = out_dir.join("probe.c");
    std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
    compiler(false)
        .args(flags)
        .arg(&src)
        .arg("-o")
        .arg(out_dir.join("probe"))
        .status()
        .is_ok_and(|s| s.success())
}

fn out_dir(name: &str) -> PathBuf {
    let d = profile_dir().join("c_api").join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Compiles `tests/c/<name>.c` against the header and the static library, runs it, and fails
/// with its output unless it exits 0.
fn build_and_run(name: &str, extra: &[&str], dir: &Path) {
    let src = Path::new(MANIFEST)
        .join("tests/c")
        .join(format!("{name}.c"));
    let exe = dir.join(name);
    let out = compiler(false)
        .args(["-std=c11", "-Wall", "-Wextra", "-pedantic", "-Werror", "-g"])
        .args(extra)
        .arg("-I")
        .arg(Path::new(MANIFEST).join("include"))
        .arg(&src)
        .arg(static_lib())
        .args(["-lpthread", "-ldl", "-lm"])
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "compiling {name}.c failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe)
        .env("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        .env("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{name} ({extra:?}) failed with {}:\nstdout:\n{}\nstderr:\n{}",
        run.status,
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
}

const PROGRAMS: [&str; 7] = [
    "three_nodes",
    "misuse",
    "join",
    "startup",
    "shrink",
    "shrink_failed",
    "revoke",
];

#[test]
fn c_programs_run() {
    let dir = out_dir("plain");
    for p in PROGRAMS {
        build_and_run(p, &[], &dir);
    }
}

#[test]
fn c_programs_run_under_sanitizers() {
    let dir = out_dir("sanitized");
    let flags = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"];
    if !can_link(&flags, &dir) {
        skip(
            "c_programs_run_under_sanitizers",
            "the C compiler cannot link -fsanitize=address,undefined: install the Debian \
             packages libasan8 and libubsan1 (gcc's, `.ci/run` does, as root)",
            "LIFELINE_REQUIRE_SANITIZERS",
        );
        return;
    }
    for p in PROGRAMS {
        build_and_run(p, &flags, &dir);
    }
}

#[test]
fn header_compiles_as_cpp17() {
    let dir = out_dir("cpp");
    let src = dir.join("header.cpp");
    std::fs::write(
        &src,
        "#include \"lifeline.h\"\n\
         static_assert(LIFELINE_ABI_VERSION >= 1, \"abi\");\n\
         int main() { lifeline_node *n = nullptr; lifeline_node_free(n); \
         return lifeline_abi_version() == LIFELINE_ABI_VERSION ? 0 : 1; }\n",
    )
    .unwrap();
    let mut cmd = compiler(true);
    // A C++ compiler may be missing on a C-only machine.
    if Command::new(cmd.get_program())
        .arg("--version")
        .output()
        .is_err()
    {
        skip(
            "header_compiles_as_cpp17",
            "needs a C++ compiler (`c++`): install the Debian package g++ (`.ci/run` does, as root)",
            "LIFELINE_REQUIRE_CXX",
        );
        return;
    }
    let out = cmd
        .args([
            "-std=c++17",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fsyntax-only",
            "-I",
        ])
        .arg(Path::new(MANIFEST).join("include"))
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "lifeline.h does not compile as C++17:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
