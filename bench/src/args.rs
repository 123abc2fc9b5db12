//! Hand-rolled `--flag value` parsing shared by the `scale` subcommands (a handful of numeric
//! flags does not justify a derive macro in a benchmark crate).

use std::fmt;
use std::str::FromStr;

/// Why a subcommand did not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CliError {
    /// `--help` was asked for: print the usage and exit 0.
    Help,
    /// Bad arguments or an impossible configuration: print this and the usage, exit 2.
    Usage(String),
    /// The experiment ran and failed its own checks: print this, exit 1.
    Failed(String),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Help => f.write_str("help requested"),
            Self::Usage(m) | Self::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for CliError {}

/// Parsed `--name value` / `--name=value` pairs, each name at most once.
#[derive(Debug, Default)]
pub struct Flags {
    pairs: Vec<(String, String)>,
}

impl Flags {
    /// Parses `args`, accepting only the flag names in `known` (without the leading `--`).
    pub fn parse(args: &[String], known: &[&str]) -> Result<Self, CliError> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            if arg == "-h" || arg == "--help" {
                return Err(CliError::Help);
            }
            let Some(body) = arg.strip_prefix("--") else {
                return Err(CliError::Usage(format!("unexpected argument {arg:?}")));
            };
            let (name, value) = match body.split_once('=') {
                Some((n, v)) => (n, v.to_owned()),
                None => {
                    let v = it
                        .next()
                        .ok_or_else(|| CliError::Usage(format!("--{body} needs a value")))?;
                    (body, v.clone())
                }
            };
            if !known.contains(&name) {
                return Err(CliError::Usage(format!("unknown flag --{name}")));
            }
            if pairs.iter().any(|(n, _)| n == name) {
                return Err(CliError::Usage(format!("--{name} given twice")));
            }
            pairs.push((name.to_owned(), value));
        }
        Ok(Self { pairs })
    }

    /// The value of `--name` parsed as `T`, `default` when absent (`None`: the flag is required).
    pub fn get<T: FromStr>(&self, name: &str, default: Option<T>) -> Result<T, CliError> {
        match self.pairs.iter().find(|(n, _)| n == name) {
            Some((_, v)) => v.trim().parse().map_err(|_| {
                CliError::Usage(format!(
                    "--{name}: {v:?} is not a valid value (a non-negative integer in range)"
                ))
            }),
            None => default.ok_or_else(|| CliError::Usage(format!("--{name} is required"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn parses_both_forms_and_defaults() {
        let f = Flags::parse(&argv("--ranks 100 --radix=4"), &["ranks", "radix", "seed"]).unwrap();
        assert_eq!(f.get::<u32>("ranks", None), Ok(100));
        assert_eq!(f.get::<u32>("radix", None), Ok(4));
        assert_eq!(f.get::<u64>("seed", Some(1)), Ok(1));
        assert!(f.get::<u32>("seed", None).is_err());
    }

    #[test]
    fn refuses_bad_input() {
        let known = &["ranks"];
        for bad in ["--ranks", "--bogus 1", "ranks 1", "--ranks 1 --ranks 2"] {
            assert!(
                matches!(Flags::parse(&argv(bad), known), Err(CliError::Usage(_))),
                "{bad}"
            );
        }
        let f = Flags::parse(&argv("--ranks -3"), known).unwrap();
        assert!(f.get::<u32>("ranks", None).is_err());
        assert_eq!(
            Flags::parse(&argv("--help"), known).unwrap_err(),
            CliError::Help
        );
    }
}
