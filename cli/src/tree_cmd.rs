//! `lifeline tree`: print the repaired routing tree as text, JSON lines or Graphviz DOT.

use std::fmt;
use std::io::{self, Write};

use clap::{Args, ValueEnum};
use lifeline_core::tree::{Layout, Rank, RankSet, View, MAX_RADIX, MAX_SPAN, MIN_RADIX};

use crate::{write_stdout, CliError};

/// The most ranks printed without `--rank`.
const MAX_ALL_RANKS: u32 = 100_000;

/// Arguments of `lifeline tree`.
#[derive(Debug, Args)]
pub(crate) struct TreeArgs {
    /// Number of ranks in the tree (its span), 1..=4294967292.
    #[arg(long, value_name = "N")]
    ranks: u64,
    /// Maximum children per rank, 2..=1024.
    #[arg(long, value_name = "K", default_value_t = 64)]
    radix: u64,
    /// Failed ranks as a range list, e.g. `2,7:9` (`A:B` is inclusive).
    #[arg(long, value_name = "LIST")]
    failed: Option<String>,
    /// Show only this rank's view (required above 100000 ranks).
    #[arg(long, value_name = "R")]
    rank: Option<u64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// How `lifeline tree` prints views.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    /// A header line, then `rank R: slot S depth D parent P children [..]` per rank.
    Text,
    /// One JSON object per rank and line.
    Json,
    /// A Graphviz digraph of the live tree (with `--rank`, that rank's neighbourhood).
    Dot,
}

/// Runs `lifeline tree`.
pub(crate) fn run(args: &TreeArgs) -> Result<(), CliError> {
    let layout = layout(args.ranks, args.radix)?;
    let span = layout.span();
    let dead = match &args.failed {
        Some(list) => RankSet::parse_bounded(list, span)
            .map_err(|e| CliError::Usage(format!("--failed: {e}")))?,
        None => RankSet::new(),
    };
    let target = match args.rank {
        Some(r) if r < u64::from(span) => Some(Rank(r as u32)),
        Some(r) => {
            return Err(CliError::Usage(format!(
                "--rank {r} is outside the tree (ranks are 0..{span})"
            )))
        }
        None if span > MAX_ALL_RANKS => {
            return Err(CliError::Usage(format!(
                "refusing to print all {span} ranks (at most {MAX_ALL_RANKS}); \
                 pass --rank R to show one rank"
            )))
        }
        None => None,
    };
    let tree = Shown { layout, dead };
    let ranks = target.map_or(0..span, |r| r.0..r.0 + 1);
    write_stdout(|out| match (args.format, target) {
        (Format::Text, _) => tree.text(out, ranks),
        (Format::Json, _) => ranks.map(Rank).try_for_each(|r| tree.json(out, r)),
        (Format::Dot, None) => tree.dot_all(out),
        (Format::Dot, Some(r)) => tree.dot_one(out, r),
    })
}

/// Validates the span and radix with the flags' names in the message (shared with `sim`).
pub(crate) fn layout(ranks: u64, radix: u64) -> Result<Layout, CliError> {
    if !(u64::from(MIN_RADIX)..=u64::from(MAX_RADIX)).contains(&radix) {
        return Err(CliError::Usage(format!(
            "--radix {radix} is out of range ({MIN_RADIX}..={MAX_RADIX})"
        )));
    }
    let span = u32::try_from(ranks)
        .ok()
        .filter(|&n| n != 0 && n <= MAX_SPAN)
        .ok_or_else(|| {
            CliError::Usage(format!("--ranks {ranks} is out of range (1..={MAX_SPAN})"))
        })?;
    Layout::new(span, radix as u32).map_err(|e| CliError::Usage(e.to_string()))
}

/// The tree being printed: a layout and its dead set.
struct Shown {
    layout: Layout,
    dead: RankSet,
}

impl Shown {
    /// `r`'s view, or `None` if `r` is dead.
    fn view(&self, r: Rank) -> Option<View> {
        View::compute(&self.layout, &self.dead, r).ok()
    }

    /// One line describing the whole tree, e.g. `span 9, radix 2, failed 3,7:8 (3 dead)`.
    fn summary(&self) -> String {
        let failed = match self.dead.len() {
            0 => "none".to_owned(),
            n => format!("{} ({n} dead)", self.dead),
        };
        format!(
            "span {}, radix {}, failed {failed}",
            self.layout.span(),
            self.layout.radix()
        )
    }

    /// Text: a `#` header line, then one line per rank.
    fn text(&self, out: &mut dyn Write, ranks: std::ops::Range<u32>) -> io::Result<()> {
        writeln!(out, "# {}", self.summary())?;
        for r in ranks {
            match self.view(Rank(r)) {
                None => writeln!(out, "rank {r}: dead")?,
                Some(v) => writeln!(
                    out,
                    "rank {r}: slot {} depth {} parent {} children [{}]",
                    v.slot(),
                    v.depth(),
                    Or(v.parent(), "-"),
                    List(v.children(), ", ", "-"),
                )?,
            }
        }
        Ok(())
    }

    /// JSON: one object per line, keys in a fixed order; dead ranks have null fields.
    fn json(&self, out: &mut dyn Write, r: Rank) -> io::Result<()> {
        let v = self.view(r);
        let v = v.as_ref();
        writeln!(
            out,
            r#"{{"rank":{r},"alive":{},"slot":{},"parent":{},"children":[{}],"depth":{}}}"#,
            v.is_some(),
            Or(v.map(View::slot), "null"),
            Or(v.and_then(View::parent), "null"),
            List(v.map_or(&[], View::children), ",", "null"),
            Or(v.map(View::depth), "null"),
        )
    }

    /// DOT of the whole live tree; dead ranks are grey dashed nodes without edges.
    fn dot_all(&self, out: &mut dyn Write) -> io::Result<()> {
        self.dot_open(out)?;
        for r in (0..self.layout.span()).map(Rank) {
            let v = self.view(r);
            dot_node(out, r, v.as_ref().map(View::slot), false)?;
            for c in v.iter().flat_map(View::live_children) {
                writeln!(out, "  {r} -> {c};")?;
            }
        }
        writeln!(out, "}}")
    }

    /// DOT of `me`'s neighbourhood: the chain of ancestors from the root, `me`, its children.
    fn dot_one(&self, out: &mut dyn Write, me: Rank) -> io::Result<()> {
        self.dot_open(out)?;
        let Some(v) = self.view(me) else {
            dot_node(out, me, None, true)?;
            return writeln!(out, "}}");
        };
        // Ancestor `i` occupies the depth-`i` slot on the base chain above `me`'s slot.
        let chain = v.ancestors().iter().zip(self.layout.ancestors(v.slot()));
        for (&a, slot) in chain {
            dot_node(out, a, Some(slot), false)?;
        }
        dot_node(out, me, Some(v.slot()), true)?;
        for (j, c) in v.children().iter().enumerate() {
            if let Some(c) = *c {
                dot_node(out, c, self.layout.child(v.slot(), j as u32), false)?;
            }
        }
        let path = v.ancestors().iter().copied().chain([me]);
        for (p, c) in path.clone().zip(path.skip(1)) {
            writeln!(out, "  {p} -> {c};")?;
        }
        for c in v.live_children() {
            writeln!(out, "  {me} -> {c};")?;
        }
        writeln!(out, "}}")
    }

    fn dot_open(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "digraph lifeline {{")?;
        writeln!(out, "  label=\"{}\";", self.summary())?;
        writeln!(out, "  labelloc=t;")
    }
}

/// One DOT node: `slot` is `None` for a dead rank; a promoted rank is labelled with its slot;
/// `focus` draws the node bold.
fn dot_node(out: &mut dyn Write, r: Rank, slot: Option<Rank>, focus: bool) -> io::Result<()> {
    let mut attrs = match slot {
        None => format!("label=\"{r} (dead)\", style=dashed, color=grey, fontcolor=grey"),
        Some(s) if s != r => format!("label=\"{r} (slot {s})\""),
        Some(_) => String::new(),
    };
    if focus {
        attrs += if attrs.is_empty() {
            "penwidth=2"
        } else {
            ", penwidth=2"
        };
    }
    if attrs.is_empty() {
        writeln!(out, "  {r};")
    } else {
        writeln!(out, "  {r} [{attrs}];")
    }
}

/// Displays a value, or a placeholder for `None`.
struct Or<T>(Option<T>, &'static str);

impl<T: fmt::Display> fmt::Display for Or<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(v) => v.fmt(f),
            None => f.write_str(self.1),
        }
    }
}

/// Displays child slots joined by a separator, empty slots as a placeholder.
struct List<'a>(&'a [Option<Rank>], &'static str, &'static str);

impl fmt::Display for List<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &c) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(self.1)?;
            }
            Or(c, self.2).fmt(f)?;
        }
        Ok(())
    }
}
