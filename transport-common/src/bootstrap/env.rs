//! [`LauncherEnv`]: this process's rank and the job size, read from the launcher's environment.
//!
//! What each launcher really sets (a launcher often sets another's variables too, partially):
//!
//! | launcher | rank, size | also sets (partial entries of others) |
//! |---|---|---|
//! | Slurm `srun` | `SLURM_PROCID`, `SLURM_NTASKS` (and `SLURM_NPROCS`) | with `--mpi=pmix`: `PMIX_RANK`, `PMIX_NAMESPACE`, `PMIX_SERVER_URI*`, no PMIx size |
//! | Open MPI 4.x `mpirun` | `OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE` | `PMIX_RANK`, `PMIX_NAMESPACE`, `PMIX_SERVER_URI*`, no PMIx size |
//! | Open MPI 5 `mpirun` / PRRTE `prterun` | PRRTE: `PMIX_RANK` only; Open MPI's personality adds `OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE` | `PMIX_NAMESPACE`, `PMIX_SERVER_URI*`; the job size is PMIx job data (`PMIX_JOB_SIZE`, `PMIX_UNIV_SIZE` through `PMIx_Get`), not an environment variable |
//! | MPICH / Hydra `mpiexec` | `PMI_RANK`, `PMI_SIZE` | `PMI_FD`, `MPI_LOCALRANKID`, `MPI_LOCALNRANKS` |
//! | `torchrun` | `RANK`, `WORLD_SIZE` | `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, `GROUP_RANK`, `MASTER_ADDR`, `MASTER_PORT` |
//!
//! Sources: Open MPI's "Environment variables set for MPI applications"
//! (<https://docs.open-mpi.org/en/v5.0.x/tuning-apps/environment-var.html>); `srun --mpi=pmix
//! env` as shown in <https://github.com/open-mpi/ompi/issues/10286>; the PMIx reference
//! server's "RM-provided information" (<https://openpmix.github.io/support/faq/rm-provided-information>:
//! the sizes are job-level PMIx data); torchrun's "Environment Variables"
//! (<https://pytorch.org/docs/stable/elastic/run.html>); MPICH's Hydra `mpiexec` (`PMI_RANK`,
//! `PMI_SIZE`). Open MPI 4.1.4 (Debian 12's `openmpi-bin`) checked by hand: `mpirun -np 2 env`
//! shows `OMPI_COMM_WORLD_*`, `PMIX_RANK`, `PMIX_NAMESPACE`, `PMIX_SERVER_URI*` and no
//! `PMIX_SIZE`; `cli/tests/mpirun.rs` runs it.
//!
//! Hence the rule ([`LauncherEnv::from_map`]): `LIFELINE_LAUNCHER`, when set, decides before
//! anything else is looked at; otherwise a complete, well-formed entry wins over an incomplete
//! or malformed one (Open MPI's over the `PMIX_RANK` it also sets), and only when there is no
//! complete entry at all does the first incomplete one's error, naming its launcher and what
//! is missing, come back.

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
    /// A launcher's *entry* is its rank variable and its size variable(s): Slurm
    /// (`SLURM_PROCID`, `SLURM_NTASKS`), Open MPI / PRRTE (`OMPI_COMM_WORLD_RANK`,
    /// `OMPI_COMM_WORLD_SIZE`), PMIx (`PMIX_RANK`, `PMIX_SIZE` or `PMIX_UNIV_SIZE`), MPICH /
    /// Hydra (`PMI_RANK`, `PMI_SIZE`), torchrun (`RANK`, `WORLD_SIZE`). An entry is present when
    /// its rank variable is set, and complete when its values are well formed (decimal, a size
    /// variable set, size ≥ 1, rank < size).
    ///
    /// 1. `LIFELINE_LAUNCHER` (`slurm`, `ompi`, `pmix`, `mpich`, `torchrun`), when set, decides
    ///    before anything else is checked: that launcher's entry is used, and any other
    ///    launcher's variables are ignored; an error names that launcher and what is wrong.
    /// 2. Otherwise the complete entries count, in [`Launcher::ORDER`]; incomplete or malformed
    ///    ones are ignored when there is a complete one (Open MPI 4.x and Slurm `--mpi=pmix`
    ///    set `PMIX_RANK` without a PMIx size). Complete entries that disagree on (rank, size)
    ///    are an error ([`EnvError::Conflict`]) rather than a guess; when they agree, the first
    ///    in the order is reported.
    /// 3. With no complete entry, the first present one's error comes back, naming the
    ///    launcher it thinks it is under and what is missing; with none present,
    ///    [`EnvError::NoLauncher`].
    pub fn from_map(vars: &HashMap<String, String>) -> Result<Self, EnvError> {
        let rendezvous = rendezvous(vars)?;
        if let Some(name) = vars.get("LIFELINE_LAUNCHER") {
            let launcher = Launcher::ORDER
                .into_iter()
                .find(|l| l.name() == name.trim())
                .ok_or_else(|| EnvError::BadOverride(name.clone()))?;
            let (rank, size) = read(launcher, vars)?.ok_or(EnvError::OverrideUnset {
                launcher,
                rank_var: launcher.rank_var(),
            })?;
            return Ok(Self {
                launcher,
                rank,
                size,
                rendezvous,
            });
        }
        let mut complete = Vec::new();
        let mut first_error = None;
        for l in Launcher::ORDER {
            match read(l, vars) {
                Ok(Some(rs)) => complete.push((l, rs)),
                Ok(None) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        let Some(&(launcher, (rank, size))) = complete.first() else {
            return Err(first_error.unwrap_or(EnvError::NoLauncher));
        };
        if let Some(&(b, (rb, sb))) = complete.iter().find(|(_, rs)| *rs != (rank, size)) {
            return Err(EnvError::Conflict {
                a: launcher,
                ra: rank,
                sa: size,
                b,
                rb,
                sb,
            });
        }
        Ok(Self {
            launcher,
            rank,
            size,
            rendezvous,
        })
    }
}

fn number(
    launcher: Launcher,
    vars: &HashMap<String, String>,
    var: &'static str,
) -> Result<Option<u32>, EnvError> {
    match vars.get(var) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse::<u32>()
            .map(Some)
            .map_err(|_| EnvError::NotANumber {
                launcher,
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
    let Some(rank) = number(launcher, vars, launcher.rank_var())? else {
        return Ok(None);
    };
    let mut size = None;
    for &var in launcher.size_vars() {
        if let Some(s) = number(launcher, vars, var)? {
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
                "LIFELINE_LAUNCHER=slurm but SLURM_PROCID is not set",
            ),
            (
                &[
                    ("RANK", "2"),
                    ("WORLD_SIZE", "4"),
                    ("LIFELINE_LAUNCHER", "lsf"),
                ],
                "LIFELINE_LAUNCHER=\"lsf\": not a launcher",
            ),
            // The override decides before any check: its own entry must be complete.
            (
                &[
                    ("OMPI_COMM_WORLD_RANK", "1"),
                    ("OMPI_COMM_WORLD_SIZE", "2"),
                    ("PMIX_RANK", "1"),
                    ("LIFELINE_LAUNCHER", "pmix"),
                ],
                "under pmix (PMIX_RANK is set) but none of PMIX_SIZE or PMIX_UNIV_SIZE",
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

    /// Each launcher's real variable set (see the module docs for the sources), as a rank of
    /// an 8-process job sees it: the launcher the entry belongs to wins, whatever partial
    /// entries of other launchers come with it.
    #[test]
    fn real_launcher_environments() {
        use Launcher::*;
        let cases: &[(&str, Vars, Launcher, u32, u32)] = &[
            (
                // Debian 12's openmpi-bin 4.1.4: `mpirun -np 8 env` (no PMIx size).
                "Open MPI 4.1 mpirun",
                &[
                    ("OMPI_COMM_WORLD_RANK", "5"),
                    ("OMPI_COMM_WORLD_SIZE", "8"),
                    ("OMPI_COMM_WORLD_LOCAL_RANK", "5"),
                    ("OMPI_COMM_WORLD_LOCAL_SIZE", "8"),
                    ("OMPI_COMM_WORLD_NODE_RANK", "5"),
                    ("OMPI_UNIVERSE_SIZE", "2"),
                    ("OMPI_MCA_orte_launch", "1"),
                    ("PMIX_RANK", "5"),
                    ("PMIX_NAMESPACE", "2197487617"),
                    ("PMIX_SERVER_URI3", "2197487616.0;tcp4://127.0.0.1:44139"),
                    ("PMIX_SERVER_URI2", "2197487616.0;tcp4://127.0.0.1:44139"),
                    ("PMIX_SERVER_URI41", "2197487616.0;tcp4://127.0.0.1:44139"),
                    ("PMIX_ID", "2197487617.5"),
                    ("PMIX_VERSION", "4.2.2rc2"),
                    ("PMIX_SECURITY_MODE", "native"),
                ],
                OpenMpi,
                5,
                8,
            ),
            (
                "Slurm srun --mpi=pmix",
                &[
                    ("SLURM_PROCID", "3"),
                    ("SLURM_NTASKS", "8"),
                    ("SLURM_NPROCS", "8"),
                    ("SLURM_LOCALID", "1"),
                    ("SLURM_STEP_NUM_TASKS", "8"),
                    ("PMIX_RANK", "3"),
                    ("PMIX_NAMESPACE", "slurm.pmix.134.0"),
                    (
                        "PMIX_SERVER_URI3",
                        "pmix-server.29227;tcp4://127.0.0.1:40141",
                    ),
                    (
                        "PMIX_SERVER_URI2",
                        "pmix-server.29227;tcp4://127.0.0.1:40141",
                    ),
                ],
                Slurm,
                3,
                8,
            ),
            (
                // Open MPI 5's mpirun is PRRTE's prterun with Open MPI's personality.
                "PRRTE prterun (Open MPI 5 mpirun)",
                &[
                    ("PMIX_RANK", "6"),
                    ("PMIX_NAMESPACE", "prterun-host-1234@1"),
                    (
                        "PMIX_SERVER_URI41",
                        "prterun-host-1234@0.0;tcp4://127.0.0.1:41021",
                    ),
                    ("PRTE_MCA_prte_launch", "1"),
                    ("OMPI_COMM_WORLD_RANK", "6"),
                    ("OMPI_COMM_WORLD_SIZE", "8"),
                    ("OMPI_COMM_WORLD_LOCAL_RANK", "6"),
                ],
                OpenMpi,
                6,
                8,
            ),
            (
                "torchrun",
                &[
                    ("RANK", "7"),
                    ("WORLD_SIZE", "8"),
                    ("LOCAL_RANK", "3"),
                    ("LOCAL_WORLD_SIZE", "4"),
                    ("GROUP_RANK", "1"),
                    ("ROLE_RANK", "7"),
                    ("ROLE_WORLD_SIZE", "8"),
                    ("MASTER_ADDR", "head"),
                    ("MASTER_PORT", "29500"),
                    ("TORCHELASTIC_RESTART_COUNT", "0"),
                ],
                Torchrun,
                7,
                8,
            ),
            (
                "MPICH / Hydra mpiexec",
                &[
                    ("PMI_RANK", "2"),
                    ("PMI_SIZE", "8"),
                    ("PMI_FD", "6"),
                    ("MPI_LOCALRANKID", "2"),
                    ("MPI_LOCALNRANKS", "8"),
                ],
                Mpich,
                2,
                8,
            ),
            (
                // A complete entry also wins over a malformed one.
                "Open MPI with a garbled PMIX_RANK",
                &[
                    ("OMPI_COMM_WORLD_RANK", "1"),
                    ("OMPI_COMM_WORLD_SIZE", "8"),
                    ("PMIX_RANK", "4294967294x"),
                ],
                OpenMpi,
                1,
                8,
            ),
        ];
        for (who, vars, l, r, s) in cases {
            let e = env(vars).unwrap_or_else(|e| panic!("{who}: {e}"));
            assert_eq!((e.launcher, e.rank, e.size), (*l, *r, *s), "{who}");
            // LIFELINE_LAUNCHER naming the same launcher gives the same answer.
            let mut with = vars.to_vec();
            with.push(("LIFELINE_LAUNCHER", l.name()));
            let o = env(&with).unwrap_or_else(|e| panic!("{who} with the override: {e}"));
            assert_eq!(o, e, "{who}");
        }
        // PRRTE without Open MPI's personality sets no size variable at all: the error names
        // the launcher it thinks it is under and what is missing.
        let e = env(&[
            ("PMIX_RANK", "6"),
            ("PMIX_NAMESPACE", "prterun-host-1234@1"),
            (
                "PMIX_SERVER_URI41",
                "prterun-host-1234@0.0;tcp4://127.0.0.1:41021",
            ),
        ])
        .unwrap_err();
        assert!(
            matches!(
                e,
                EnvError::MissingSize {
                    launcher: Launcher::Pmix,
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string().contains("under pmix (PMIX_RANK is set)"),
            "{e}"
        );
        // ... and torchrun's variables next to it settle it.
        let e = env(&[("PMIX_RANK", "6"), ("RANK", "6"), ("WORLD_SIZE", "8")]).unwrap();
        assert_eq!((e.launcher, e.rank, e.size), (Launcher::Torchrun, 6, 8));
        // Open MPI inside an sbatch allocation: SLURM_PROCID is the batch step's, complete and
        // different: a conflict, settled by the override (which ignores Slurm's entry).
        let sbatch: Vars = &[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "1"),
            ("OMPI_COMM_WORLD_RANK", "4"),
            ("OMPI_COMM_WORLD_SIZE", "8"),
            ("PMIX_RANK", "4"),
        ];
        assert!(matches!(env(sbatch), Err(EnvError::Conflict { .. })));
        let mut with = sbatch.to_vec();
        with.push(("LIFELINE_LAUNCHER", "ompi"));
        let e = env(&with).unwrap();
        assert_eq!((e.launcher, e.rank, e.size), (Launcher::OpenMpi, 4, 8));
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
