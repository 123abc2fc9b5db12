//! End-to-end tests of `lifeline certs`, running the built binary.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use lifeline_core::tree::Rank;
use lifeline_transport_quic::{CertDir, ClusterId, IdentityError, RankIdentity};

fn lifeline(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lifeline"))
        .args(args)
        .output()
        .expect("run lifeline")
}

/// A path under the system temp dir unique to this process and `name`, absent at the start and
/// removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let p =
            std::env::temp_dir().join(format!("lifeline-cli-certs-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        let _ = fs::remove_file(&p);
        Self(p)
    }

    fn arg(&self) -> &str {
        self.0.to_str().expect("utf-8 temp dir")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
        let _ = fs::remove_file(&self.0);
    }
}

fn certs(dir: &Scratch, extra: &[&str]) -> Output {
    let base = [
        "certs",
        "--nodes",
        "3",
        "--cluster",
        "job-7",
        "--out",
        dir.arg(),
    ];
    lifeline(&[&base[..], extra].concat())
}

#[cfg(unix)]
fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn writes_the_layout_with_private_keys_0600() {
    let dir = Scratch::new("layout");
    let out = certs(&dir, &["--days", "2"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    assert!(stdout.contains("cluster job-7: 3 ranks"), "{stdout}");
    assert!(
        stdout.contains("ca.key must stay with the launcher"),
        "{stdout}"
    );

    let d = CertDir::new(&dir.0);
    let ca_pem = fs::read_to_string(d.ca_cert()).unwrap();
    assert!(
        ca_pem.starts_with("-----BEGIN CERTIFICATE-----"),
        "{ca_pem}"
    );
    assert!(
        !ca_pem.contains("PRIVATE KEY"),
        "ca.pem holds the certificate only"
    );
    assert!(fs::read_to_string(d.ca_key())
        .unwrap()
        .contains("PRIVATE KEY"));
    let mut top: Vec<String> = fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    top.sort();
    assert_eq!(top, ["ca.key", "ca.pem", "rank-0", "rank-1", "rank-2"]);
    #[cfg(unix)]
    {
        assert_eq!(mode(&d.ca_key()), 0o600);
        for r in 0..3 {
            assert_eq!(mode(&d.rank_key(Rank(r))), 0o600, "rank {r}");
        }
    }

    // A node's view: ca.pem and its own rank-R/ only, no CA key; it loads as rank 2 only.
    let node = Scratch::new("node");
    fs::create_dir_all(node.0.join("rank-2")).unwrap();
    fs::copy(d.ca_cert(), node.0.join("ca.pem")).unwrap();
    for f in ["cert.pem", "key.pem"] {
        fs::copy(d.rank_dir(Rank(2)).join(f), node.0.join("rank-2").join(f)).unwrap();
    }
    let cluster = ClusterId::new("job-7").unwrap();
    let id = RankIdentity::load(&node.0, Rank(2), &cluster).unwrap();
    assert_eq!(id.name(), "r2.job-7.lifeline");
    assert!(matches!(
        RankIdentity::load(&node.0, Rank(1), &cluster),
        Err(IdentityError::Missing { .. })
    ));
}

#[test]
fn a_second_run_refuses_without_force() {
    let dir = Scratch::new("again");
    assert!(certs(&dir, &[]).status.success());
    let ca_before = fs::read(CertDir::new(&dir.0).ca_cert()).unwrap();

    let again = certs(&dir, &[]);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("is not empty; refusing to overwrite"),
        "{stderr}"
    );
    assert!(again.stdout.is_empty());
    assert_eq!(fs::read(CertDir::new(&dir.0).ca_cert()).unwrap(), ca_before);

    // With --force, a new CA replaces the old one; fewer ranks leave the old ones behind,
    // named in a note.
    let forced = lifeline(&[
        "certs",
        "--nodes",
        "2",
        "--cluster",
        "job-7",
        "--out",
        dir.arg(),
        "--force",
    ]);
    let stdout = String::from_utf8_lossy(&forced.stdout);
    assert!(
        forced.status.success(),
        "{}",
        String::from_utf8_lossy(&forced.stderr)
    );
    assert_ne!(fs::read(CertDir::new(&dir.0).ca_cert()).unwrap(), ca_before);
    assert!(
        stdout.contains("did not write") && stdout.contains("rank-2"),
        "{stdout}"
    );
    let cluster = ClusterId::new("job-7").unwrap();
    assert!(RankIdentity::load(&dir.0, Rank(1), &cluster).is_ok());
    assert!(matches!(
        RankIdentity::load(&dir.0, Rank(2), &cluster),
        Err(IdentityError::Untrusted { .. })
    ));
}

#[test]
fn bad_arguments_are_usage_errors() {
    let dir = Scratch::new("bad");
    for (args, want) in [
        (vec!["--nodes", "0", "--cluster", "c"], "--nodes 0"),
        (vec!["--nodes", "2", "--cluster", "Job_7"], "--cluster"),
        (
            vec!["--nodes", "2", "--cluster", "c", "--days", "0"],
            "--days 0",
        ),
    ] {
        let out = lifeline(&[&["certs", "--out", dir.arg()], &args[..]].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(!dir.0.exists(), "{args:?} wrote something");
    }
    // A file where the directory should be.
    let file = Scratch::new("file");
    fs::write(&file.0, "x").unwrap();
    let out = lifeline(&[
        "certs",
        "--nodes",
        "1",
        "--cluster",
        "c",
        "--out",
        file.arg(),
    ]);
    assert_eq!(out.status.code(), Some(2));
}
