//! Folded stacks, the input of flame graph tools (`flamegraph.pl`, inferno): one line per
//! distinct stack, its frames oldest first joined by `;`, a space, and its count:
//!
//! ```text
//! java.lang.Thread.run;com.example.Worker.run;com.example.Worker.compute 42
//! ```
//!
//! Lines are sorted by stack, so that two runs compare line by line.

use std::collections::BTreeMap;
use std::io::{self, Write};

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

    /// Adds `count` to the stack made of `frames`, oldest first. A `;` or a line end inside a
    /// frame's name would break the format: it becomes `_`.
    pub fn add<'a>(&mut self, frames: impl IntoIterator<Item = &'a str>, count: u64) {
        let mut stack = String::new();
        for (i, frame) in frames.into_iter().enumerate() {
            if i > 0 {
                stack.push(';');
            }
            stack.extend(frame.chars().map(|c| match c {
                ';' | '\n' | '\r' => '_',
                c => c,
            }));
        }
        let total = self.stacks.entry(stack).or_insert(0);
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
            "[GC] 5\na.B.main;a.B.run 5\na.B.main;odd_name_here 1\n"
        );
    }
}
