//! Builds the extension into a Python virtual environment (`maturin develop --release`) and runs
//! the Python suite (`pytest python/tests`), so `cargo test --workspace --release` covers the
//! binding.
//!
//! The Python is `LIFELINE_PYTHON`, else `python3` on `PATH`; it must run in a virtual
//! environment with `maturin` and `pytest` installed (`.ci/run` makes one:
//! `python3 -m venv` + `pip install maturin pytest`). Where any of that is missing the test prints
//! one line, `SKIPPED python_pytest: <why> (set LIFELINE_REQUIRE_PYTHON=1 to make this a
//! failure)`, straight to the terminal, and passes; with `LIFELINE_REQUIRE_PYTHON=1` (set by
//! `.ci/run`) the same is a failure. The extension is built in its own target directory
//! (`<target>/python-ext`): the outer `cargo test` may hold the lock on the shared one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

const TEST: &str = "python_pytest";
const VAR: &str = "LIFELINE_REQUIRE_PYTHON";

/// Skips with one loud line, or fails when [`VAR`] is `1`.
fn skip(why: &str) {
    if std::env::var(VAR).is_ok_and(|v| v == "1") {
        panic!("{TEST}: {why}, and {VAR}=1 forbids skipping");
    }
    let line = format!("SKIPPED {TEST}: {why} (set {VAR}=1 to make this a failure)\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Runs `python -c code`; its trimmed stdout if it succeeded.
fn python_says(python: &Path, code: &str) -> Option<String> {
    let out = Command::new(python).args(["-c", code]).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate_dir().join("..").join("target"))
}

#[test]
fn python_pytest() {
    let python = std::env::var_os("LIFELINE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("python3"));
    let Some(prefix) = python_says(&python, "import sys; print(sys.prefix)") else {
        return skip(&format!(
            "needs Python 3.9+ ({} does not run; set LIFELINE_PYTHON or install python3)",
            python.display()
        ));
    };
    if python_says(&python, "import sys; assert sys.version_info >= (3, 9)").is_none() {
        return skip(&format!("needs Python >= 3.9 ({})", python.display()));
    }
    if python_says(&python, "import sys; assert sys.prefix != sys.base_prefix").is_none() {
        return skip(&format!(
            "needs a virtual environment with maturin and pytest ({} is not in one: \
             python3 -m venv DIR && DIR/bin/pip install maturin pytest, then LIFELINE_PYTHON=DIR/bin/python)",
            python.display()
        ));
    }
    for module in ["maturin", "pytest"] {
        if python_says(&python, &format!("import {module}")).is_none() {
            return skip(&format!(
                "needs `{module}` in the virtual environment {prefix} (pip install maturin pytest)"
            ));
        }
    }
    let build = Command::new(&python)
        .args(["-m", "maturin", "develop", "--release", "--manifest-path"])
        .arg(crate_dir().join("Cargo.toml"))
        .env("VIRTUAL_ENV", &prefix)
        .env("CARGO_TARGET_DIR", target_dir().join("python-ext"))
        .status()
        .expect("running maturin");
    assert!(build.success(), "maturin develop failed: {build}");
    let run = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
        .current_dir(crate_dir())
        .status()
        .expect("running pytest");
    // pytest's 5 (no test ran) is a failure too.
    assert!(run.success(), "pytest failed: {run}");
}
