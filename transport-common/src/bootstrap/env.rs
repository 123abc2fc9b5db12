//! [`LauncherEnv`]: this process's rank and the job size, read from the launcher's environment.

use std::collections::HashMap;
use std::fmt;

use super::error::EnvError;

/// A launcher whose environment variables [`LauncherEnv`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Launcher {
    /// Slurm `srun`: `SLURM_PROCID`, `SLURM_NTASKS`.
    Slurm,
    /// Open MPI / PRRTE `mpirun`, `prterun`: `OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`.
    OpenMpi,
    /// A PMIx server: `PMIX_RANK`, the size from `PMIX_SIZE` or `PMIX_UNIV_SIZE` (not every
    /// PMIx server exports one; without it the environment is refused).
    Pmix,
    /// MPICH / Hydra `mpiexec`: `PMI_RANK`, `PMI_SIZE`.
    Mpich,
    /// PyTorch `torchrun`: `RANK`, `WORLD_SIZE`.
    Torchrun,
}

impl Launcher {
    /// Every launcher, in the order they are tried.
    pub const ORDER: [Self; 5] = [
        Self::Slurm,
        Self::OpenMpi,
        Self::Pmix,
        Self::Mpich,
        Self::Torchrun,
    ];

    /// The short name (`slurm`, `ompi`, `pmix`, `mpich`, `torchrun`), as `LIFELINE_LAUNCHER`
    /// takes it and the CLI prints it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Slurm => "slurm",
            Self::OpenMpi => "ompi",
            Self::Pmix => "pmix",
            Self::Mpich => "mpich",
            Self::Torchrun => "torchrun",
        }
    }

    fn rank_var(self) -> &'static str {
        match self {
            Self::Slurm => "SLURM_PROCID",
            Self::OpenMpi => "OMPI_COMM_WORLD_RANK",
            Self::Pmix => "PMIX_RANK",
            Self::Mpich => "PMI_RANK",
            Self::Torchrun => "RANK",
        }
    }

    fn size_vars(self) -> &'static [&'static str] {
        match self {
            Self::Slurm => &["SLURM_NTASKS"],
            Self::OpenMpi => &["OMPI_COMM_WORLD_SIZE"],
            Self::Pmix => &["PMIX_SIZE", "PMIX_UNIV_SIZE"],
            Self::Mpich => &["PMI_SIZE"],
            Self::Torchrun => &["WORLD_SIZE"],
        }
    }
}

impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// This process's place in the job, as its launcher told it.
///
/// Guarantees: `rank < size`, `size >= 1`, and `launcher` is the launcher whose variables gave
/// them. `rendezvous` is `MASTER_ADDR:MASTER_PORT` when both are set (torchrun style), checked
/// to be a non-empty host and a port number (the host is not resolved here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LauncherEnv {
    /// The launcher recognised.
    pub launcher: Launcher,
    /// This process's rank, `0..size`.
    pub rank: u32,
    /// The number of processes in the job.
    pub size: u32,
    /// `MASTER_ADDR:MASTER_PORT`, when both are set.
    pub rendezvous: Option<String>,
}

impl LauncherEnv {
    /// Reads the process environment; see [`LauncherEnv::from_map`].
    pub fn from_env() -> Result<Self, EnvError> {
        let vars: HashMap<String, String> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        Self::from_map(&vars)
    }

    /// Reads rank and size from `vars` (an environment, for tests or embedders that carry one).
    ///
    /// Launchers are tried in [`Launcher::ORDER`]: Slurm (`SLURM_PROCID`, `SLURM_NTASKS`), Open
    /// MPI / PRRTE (`OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`), PMIx (`PMIX_RANK`,
    /// `PMIX_SIZE` or `PMIX_UNIV_SIZE`), MPICH / Hydra (`PMI_RANK`, `PMI_SIZE`), torchrun
    /// (`RANK`, `WORLD_SIZE`). A launcher counts as present when its rank variable is set; a
    /// present launcher's values must be well formed (decimal, size ≥ 1, rank < size, a size
    /// variable set) or the call fails naming the variable. When several are present and
    /// disagree on (rank, size), the call fails ([`EnvError::Conflict`]) rather than guess,
    /// unless `LIFELINE_LAUNCHER` (`slurm`, `ompi`, `pmix`, `mpich`, `torchrun`) names the one to
    /// use; when they agree, the first in the order is reported.
    pub fn from_map(vars: &HashMap<String, String>) -> Result<Self, EnvError> {
        let rendezvous = rendezvous(vars)?;
        let mut found = Vec::new();
        for l in Launcher::ORDER {
            if let Some(rs) = read(l, vars)? {
                found.push((l, rs));
            }
        }
        let pick = match vars.get("LIFELINE_LAUNCHER") {
            Some(name) => *found
                .iter()
                .find(|(l, _)| l.name() == name.trim())
                .ok_or_else(|| EnvError::BadOverride(name.clone()))?,
            None => {
                let Some(&first) = found.first() else {
                    return Err(EnvError::NoLauncher);
                };
                if let Some(&(b, (rb, sb))) = found.iter().find(|(_, rs)| *rs != first.1) {
                    let (a, (ra, sa)) = first;
                    return Err(EnvError::Conflict {
                        a,
                        ra,
                        sa,
                        b,
                        rb,
                        sb,
                    });
                }
                first
            }
        };
        let (launcher, (rank, size)) = pick;
        Ok(Self {
            launcher,
            rank,
            size,
            rendezvous,
        })
    }
}

fn number(vars: &HashMap<String, String>, var: &'static str) -> Result<Option<u32>, EnvError> {
    match vars.get(var) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse::<u32>()
            .map(Some)
            .map_err(|_| EnvError::NotANumber {
                var,
                value: v.clone(),
            }),
    }
}

/// `launcher`'s (rank, size), `None` when its rank variable is unset.
fn read(
    launcher: Launcher,
    vars: &HashMap<String, String>,
) -> Result<Option<(u32, u32)>, EnvError> {
    let Some(rank) = number(vars, launcher.rank_var())? else {
        return Ok(None);
    };
    let mut size = None;
    for &var in launcher.size_vars() {
        if let Some(s) = number(vars, var)? {
            size = Some((var, s));
            break;
        }
    }
    let Some((var, size)) = size else {
        return Err(EnvError::MissingSize {
            launcher,
            rank_var: launcher.rank_var(),
            size_vars: launcher.size_vars().join(" or "),
        });
    };
    if size == 0 {
        return Err(EnvError::ZeroSize { launcher, var });
    }
    if rank >= size {
        return Err(EnvError::RankOutOfRange {
            launcher,
            rank,
            size,
        });
    }
    Ok(Some((rank, size)))
}

fn rendezvous(vars: &HashMap<String, String>) -> Result<Option<String>, EnvError> {
    let (Some(addr), Some(port)) = (vars.get("MASTER_ADDR"), vars.get("MASTER_PORT")) else {
        return Ok(None);
    };
    let addr = addr.trim();
    if addr.is_empty() {
        return Err(EnvError::BadRendezvous("MASTER_ADDR is empty".into()));
    }
    let port: u16 = port
        .trim()
        .parse()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| EnvError::BadRendezvous(format!("MASTER_PORT={port:?} is not a port")))?;
    // A bare IPv6 address needs brackets to be joined with a port.
    if addr.contains(':') && !addr.starts_with('[') {
        Ok(Some(format!("[{addr}]:{port}")))
    } else {
        Ok(Some(format!("{addr}:{port}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Result<LauncherEnv, EnvError> {
        let m = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        LauncherEnv::from_map(&m)
    }

    type Vars = &'static [(&'static str, &'static str)];

    #[test]
    fn table() {
        use Launcher::*;
        let ok: &[(Vars, Launcher, u32, u32)] = &[
            (&[("SLURM_PROCID", "3"), ("SLURM_NTASKS", "8")], Slurm, 3, 8),
            (
                &[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "2")],
                OpenMpi,
                0,
                2,
            ),
            (&[("PMIX_RANK", "1"), ("PMIX_SIZE", "4")], Pmix, 1, 4),
            (&[("PMIX_RANK", "1"), ("PMIX_UNIV_SIZE", "4")], Pmix, 1, 4),
            (&[("PMI_RANK", "5"), ("PMI_SIZE", "6")], Mpich, 5, 6),
            (&[("RANK", "7"), ("WORLD_SIZE", "8")], Torchrun, 7, 8),
            // Agreeing launchers: the first in the order is reported.
            (
                &[
                    ("PMIX_RANK", "2"),
                    ("PMIX_SIZE", "4"),
                    ("OMPI_COMM_WORLD_RANK", "2"),
                    ("OMPI_COMM_WORLD_SIZE", "4"),
                ],
                OpenMpi,
                2,
                4,
            ),
            // Disagreeing, with an override.
            (
                &[
                    ("SLURM_PROCID", "0"),
                    ("SLURM_NTASKS", "1"),
                    ("RANK", "3"),
                    ("WORLD_SIZE", "4"),
                    ("LIFELINE_LAUNCHER", "torchrun"),
                ],
                Torchrun,
                3,
                4,
            ),
            (
                &[("SLURM_PROCID", " 1 "), ("SLURM_NTASKS", "2")],
                Slurm,
                1,
                2,
            ),
        ];
        for (vars, l, r, s) in ok {
            let e = env(vars).unwrap_or_else(|e| panic!("{vars:?}: {e}"));
            assert_eq!((e.launcher, e.rank, e.size), (*l, *r, *s), "{vars:?}");
            assert_eq!(e.rendezvous, None);
        }
        let bad: &[(Vars, &str)] = &[
            (&[], "no launcher"),
            (&[("WORLD_SIZE", "4")], "no launcher"),
            (
                &[("SLURM_PROCID", "x"), ("SLURM_NTASKS", "8")],
                "SLURM_PROCID=\"x\"",
            ),
            (
                &[("SLURM_PROCID", "-1"), ("SLURM_NTASKS", "8")],
                "not a non-negative",
            ),
            (
                &[("SLURM_PROCID", "1"), ("SLURM_NTASKS", "")],
                "SLURM_NTASKS",
            ),
            (
                &[("SLURM_PROCID", "8"), ("SLURM_NTASKS", "8")],
                "rank 8 is not below size 8",
            ),
            (&[("RANK", "0"), ("WORLD_SIZE", "0")], "WORLD_SIZE=0"),
            (&[("PMIX_RANK", "0")], "PMIX_SIZE or PMIX_UNIV_SIZE"),
            (
                &[("PMI_RANK", "99999999999"), ("PMI_SIZE", "2")],
                "PMI_RANK",
            ),
            (
                &[
                    ("SLURM_PROCID", "0"),
                    ("SLURM_NTASKS", "4"),
                    ("RANK", "2"),
                    ("WORLD_SIZE", "4"),
                ],
                "slurm says rank 0 of 4, torchrun says rank 2 of 4",
            ),
            (
                &[
                    ("RANK", "2"),
                    ("WORLD_SIZE", "4"),
                    ("LIFELINE_LAUNCHER", "slurm"),
                ],
                "LIFELINE_LAUNCHER=\"slurm\"",
            ),
            (
                &[
                    ("RANK", "2"),
                    ("WORLD_SIZE", "4"),
                    ("MASTER_ADDR", "h"),
                    ("MASTER_PORT", "p"),
                ],
                "MASTER_PORT=\"p\"",
            ),
            (
                &[
                    ("RANK", "2"),
                    ("WORLD_SIZE", "4"),
                    ("MASTER_ADDR", ""),
                    ("MASTER_PORT", "1"),
                ],
                "MASTER_ADDR is empty",
            ),
        ];
        for (vars, needle) in bad {
            let e = env(vars).expect_err(needle).to_string();
            assert!(e.contains(needle), "{vars:?}: {e:?} lacks {needle:?}");
        }
    }

    #[test]
    fn rendezvous_address() {
        let e = env(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "node17"),
            ("MASTER_PORT", "29500"),
        ])
        .unwrap();
        assert_eq!(e.rendezvous.as_deref(), Some("node17:29500"));
        let e = env(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "fd00::1"),
            ("MASTER_PORT", "29500"),
        ])
        .unwrap();
        assert_eq!(e.rendezvous.as_deref(), Some("[fd00::1]:29500"));
    }
}
