//! `lifeline certs`: make a cluster CA and one certificate per rank for the QUIC transport, in
//! the layout `lifeline_transport_quic::CertDir` describes.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use clap::Args;
use lifeline_core::tree::Rank;
use lifeline_transport_quic::{CertDir, ClusterCa, ClusterId, IdentityError};

use crate::{write_stdout, CliError};

/// The most ranks one run issues certificates for.
const MAX_NODES: u64 = 1 << 20;
/// The longest validity, in days.
const MAX_DAYS: u64 = 3650;

/// Arguments of `lifeline certs`.
#[derive(Debug, Args)]
pub(crate) struct CertsArgs {
    /// Number of ranks: one certificate each, for ranks 0..N-1 (1..=1048576).
    #[arg(long, value_name = "N")]
    nodes: u64,
    /// The cluster (job) id: 1 to 63 lowercase letters, digits or '-'. Rank R's certificate
    /// is for the name rR.ID.lifeline.
    #[arg(long, value_name = "ID")]
    cluster: String,
    /// Output directory (created if missing; must be empty unless --force).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Days until the CA and every certificate expire (1..=3650).
    #[arg(long, value_name = "D", default_value_t = 30)]
    days: u64,
    /// Write into a non-empty DIR, replacing the layout's files there.
    #[arg(long)]
    force: bool,
}

/// Runs `lifeline certs`.
pub(crate) fn run(args: &CertsArgs) -> Result<(), CliError> {
    if args.nodes == 0 || args.nodes > MAX_NODES {
        return Err(CliError::Usage(format!(
            "--nodes {} is outside 1..={MAX_NODES}",
            args.nodes
        )));
    }
    if args.days == 0 || args.days > MAX_DAYS {
        return Err(CliError::Usage(format!(
            "--days {} is outside 1..={MAX_DAYS}",
            args.days
        )));
    }
    let cluster =
        ClusterId::new(&args.cluster).map_err(|e| CliError::Usage(format!("--cluster: {e}")))?;
    let others = check_out_dir(&args.out, args.force)?;
    let nodes = args.nodes as u32; // at most MAX_NODES
    let not_after = SystemTime::now() + Duration::from_secs(args.days * 86_400);
    let failed = |e: IdentityError| CliError::Failed(e.to_string());
    let ca = ClusterCa::generate(cluster.clone(), not_after).map_err(failed)?;
    ca.write(&args.out).map_err(failed)?;
    for r in 0..nodes {
        ca.issue(Rank(r))
            .and_then(|leaf| leaf.write(&args.out))
            .map_err(failed)?;
    }
    let stale = others
        .into_iter()
        .filter(|name| !written(name, nodes))
        .collect::<Vec<_>>();
    write_stdout(|out| report(out, args, &cluster, &ca, &stale))
}

/// Refuses an existing non-empty `out` without `force`; returns the names already in it.
fn check_out_dir(out: &Path, force: bool) -> Result<Vec<String>, CliError> {
    let entries = match fs::read_dir(out) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(CliError::Usage(format!(
                "--out {}: not a readable directory: {e}",
                out.display()
            )))
        }
    };
    let mut names = entries
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CliError::Failed(format!("reading {}: {e}", out.display())))?;
    names.sort();
    if !names.is_empty() && !force {
        return Err(CliError::Usage(format!(
            "--out {} is not empty; refusing to overwrite (pass --force to replace its \
             certificates)",
            out.display()
        )));
    }
    Ok(names)
}

/// Whether this run wrote `name` (a top-level entry of the output directory).
fn written(name: &str, nodes: u32) -> bool {
    if name == lifeline_transport_quic::CA_CERT_FILE || name == lifeline_transport_quic::CA_KEY_FILE
    {
        return true;
    }
    name.strip_prefix("rank-")
        .and_then(|r| r.parse::<u32>().ok())
        .is_some_and(|r| r < nodes && name == format!("rank-{r}"))
}

/// What was written, and how to hand it out.
fn report(
    out: &mut dyn Write,
    args: &CertsArgs,
    cluster: &ClusterId,
    ca: &ClusterCa,
    stale: &[String],
) -> io::Result<()> {
    let d = CertDir::new(&args.out);
    let last = args.nodes - 1;
    writeln!(
        out,
        "cluster {cluster}: {} ranks, certificates valid until {} ({} days)",
        args.nodes,
        ca.not_after_utc(),
        args.days
    )?;
    writeln!(
        out,
        "wrote {}  the cluster CA certificate",
        d.ca_cert().display()
    )?;
    writeln!(
        out,
        "wrote {}  the cluster CA key (0600)",
        d.ca_key().display()
    )?;
    writeln!(
        out,
        "wrote {}/rank-R/cert.pem and key.pem (0600) for R = 0..={last}: rank R's certificate \
         for rR.{cluster}.lifeline and its key",
        d.root().display()
    )?;
    writeln!(
        out,
        "give node R only ca.pem and rank-R/. ca.key must stay with the launcher: never copy it \
         to a node (whoever holds it can pose as any rank)."
    )?;
    if !stale.is_empty() {
        writeln!(
            out,
            "note: {} also holds entries this run did not write (older certificates will not \
             load under the new ca.pem): {}",
            d.root().display(),
            stale.join(" ")
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_names() {
        assert!(written("ca.pem", 1));
        assert!(written("ca.key", 1));
        assert!(written("rank-0", 2));
        assert!(written("rank-1", 2));
        assert!(!written("rank-2", 2));
        assert!(!written("rank-01", 2));
        assert!(!written("rank-+1", 2));
        assert!(!written("notes.txt", 2));
    }
}
