//! Folded stacks, the input of flame graph tools (`flamegraph.pl`, inferno): one line per
//! distinct stack, its frames oldest first joined by `;`, a space, and its count:
//!
//! ```text
//! java.lang.Thread.run;com.example.Worker.run;com.example.Worker.compute 42
//! ```
//!
//! Lines are sorted by stack, so that two runs compare line by line.
//!
//! The format is read by tools and by people alike (`stacks` prints it on the terminal, a
//! flame graph tool copies its names into an SVG file): each frame's name is written as
//! [`frame`] gives it, so that no name, whatever its class file or its JVM holds, forges a line
//! or a frame, sends escape sequences to a terminal, or puts in an SVG file a character XML
//! forbids. A folded line has no escape of its own that tools would decode, so the same
//! `\u{..}` as the profiler's messages is shown to the reader as it is.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{self, Write};

use joularcode_core::log::printable;

/// A frame's name as a folded stack holds it: control characters (a line end too), bidi
/// overrides and what XML forbids written as `\u{..}` ([`printable`]), and `;`, which would
/// split the frame in two, as `_`.
pub fn frame(name: &str) -> Cow<'_, str> {
    match printable(name) {
        Cow::Borrowed(name) if !name.contains(';') => Cow::Borrowed(name),
        shown => Cow::Owned(shown.replace(';', "_")),
    }
}

/// Stacks and their counts.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Folded {
    stacks: BTreeMap<String, u64>,
}

impl Folded {
    /// No stacks yet.
    pub fn new() -> Folded {
        Folded::default()
    }

    /// Adds `count` to the stack made of `frames`, oldest first, each named as [`frame`] gives
    /// it.
    pub fn add<'a>(&mut self, frames: impl IntoIterator<Item = &'a str>, count: u64) {
        let total = self.stacks.entry(stack_line(frames)).or_insert(0);
        *total = total.saturating_add(count);
    }

    /// The stacks and their counts, sorted by stack.
    pub fn stacks(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        self.stacks
            .iter()
            .map(|(stack, &count)| (stack.as_str(), count))
    }

    /// Writes one `stack count` line per stack.
    pub fn write(&self, out: &mut impl Write) -> io::Result<()> {
        for (stack, count) in self.stacks() {
            writeln!(out, "{stack} {count}")?;
        }
        Ok(())
    }
}

/// `frames` as one folded stack, oldest first: each named as [`frame`] gives it, joined by `;`.
pub fn stack_line<'a>(frames: impl IntoIterator<Item = &'a str>) -> String {
    let mut stack = String::new();
    for (i, name) in frames.into_iter().enumerate() {
        if i > 0 {
            stack.push(';');
        }
        stack.push_str(&frame(name));
    }
    stack
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sorted_line_per_stack_with_counts_added() {
        let mut folded = Folded::new();
        folded.add(["a.B.main", "a.B.run"], 2);
        folded.add(["[GC]"], 5);
        folded.add(["a.B.main", "a.B.run"], 3);
        folded.add(["a.B.main", "odd;name\nhere"], 1);
        let mut out = Vec::new();
        folded.write(&mut out).expect("written");
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            "[GC] 5\na.B.main;a.B.run 5\na.B.main;odd_name\\u{a}here 1\n"
        );
    }
}
