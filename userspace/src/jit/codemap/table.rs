//! The code of one JVM as its code map describes it: every piece of code with the interval in
//! which it was valid, `[load, unload)`, its inline ranges and names, searchable by pc and time.
//!
//! A long-lived JVM that keeps loading and unloading classes reports code without end, so the
//! table is compacted ([`CodeTable::compact`]): code unloaded (or overwritten by a later load at
//! the same address) before a horizon, and names that no code and no method number refers to any
//! more, are dropped. With the agent's `F` records, which retire method numbers, what the table
//! holds stays proportional to the code alive in the JVM, however long it runs.

use std::collections::HashMap;

use joularcode_core::code_map::Record;

/// What a piece of code is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeKind {
    /// A JIT-compiled Java method.
    Compiled,
    /// Code the JVM generated: interpreter, stubs, adapters.
    Stub,
}

/// The Java frames at one pc, found by [`CodeTable::lookup`].
#[derive(Debug, Clone, Copy)]
pub struct JitFrames<'a> {
    /// Compiled method or stub.
    pub kind: CodeKind,
    /// Start address of the code.
    pub start: u64,
    /// Address after its end.
    pub end: u64,
    /// When the code was loaded (0 when it existed before the agent started reporting).
    pub load_ns: u64,
    /// When it was unloaded, if it was.
    pub unload_ns: Option<u64>,
    chain: &'a [u32],
    strings: &'a [Box<str>],
}

impl<'a> JitFrames<'a> {
    /// The frames, outermost first: the compiled method, then each inlined method. For a stub,
    /// its one name.
    pub fn frames(&self) -> impl DoubleEndedIterator<Item = &'a str> + ExactSizeIterator + 'a {
        let strings = self.strings;
        self.chain.iter().map(move |&s| &*strings[s as usize])
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    start: u64,
    end: u64,
    load: u64,
    unload: u64,
    code: u32,
}

#[derive(Debug, Clone, Copy)]
struct Span {
    offset: u32,
    len: u32,
}

#[derive(Debug, Clone)]
struct InlineRange {
    from: u32,
    to: u32,
    chain: Span,
}

#[derive(Debug, Clone)]
struct Code {
    kind: CodeKind,
    root: Span,
    inline: Vec<InlineRange>,
}

/// The code of one JVM, fed record by record.
#[derive(Debug, Default)]
pub struct CodeTable {
    strings: Vec<Box<str>>,
    methods: HashMap<u32, u32>,
    chains: Vec<u32>,
    codes: Vec<Code>,
    entries: Vec<Entry>,
    max_end: Vec<u64>,
    fresh: usize,
    unloads: Vec<(u64, u64)>,
    unmatched_unloads: u64,
    /// Entries and method numbers kept after the last compaction.
    kept: usize,
}

/// Entries and method numbers held before a compaction is worth it.
const FIRST_COMPACTION: usize = 4096;

/// How late a load may be reported after the code ran: HotSpot posts the event from its service
/// thread, and the agent writes its buffer every 20 ms.
const LOAD_LAG_NS: u64 = 250_000_000;

impl CodeTable {
    /// Unload records that named no loaded code.
    pub fn unmatched_unloads(&self) -> u64 {
        self.unmatched_unloads
    }

    /// Pieces of code held (loaded, unloaded and stubs).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no code is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries, method numbers and names held: what the table's memory grows with.
    pub fn size(&self) -> usize {
        self.entries.len() + self.methods.len() + self.strings.len()
    }

    /// Applies one record; `false` when it names a method number not given (the line is bad).
    /// Code takes effect at the next [`CodeTable::publish`].
    pub fn apply(&mut self, record: Record) -> bool {
        match record {
            Record::Method { id, name } => {
                let string = self.intern(name);
                self.methods.insert(id, string);
            }
            Record::Compiled {
                replayed,
                time_ns,
                start,
                size,
                root,
                ranges,
            } => {
                let chains_before = self.chains.len();
                let mut inline = Vec::with_capacity(ranges.len());
                for range in ranges {
                    let names: Option<Vec<u32>> =
                        range.chain.iter().map(|id| self.method(*id)).collect();
                    let Some(names) = names else {
                        self.chains.truncate(chains_before);
                        return false;
                    };
                    let chain = self.chain(&names);
                    inline.push(InlineRange {
                        from: range.from,
                        to: range.to,
                        chain,
                    });
                }
                let Some(root) = self.method(root) else {
                    self.chains.truncate(chains_before);
                    return false;
                };
                let root = self.chain(&[root]);
                let load = if replayed { 0 } else { time_ns };
                let end = start + u64::from(size);
                self.push(start, end, load, CodeKind::Compiled, root, inline);
            }
            Record::Unload { time_ns, start } => self.unloads.push((start, time_ns)),
            Record::Stub {
                start, size, name, ..
            } => {
                let name = self.intern(name);
                let root = self.chain(&[name]);
                let end = start + u64::from(size);
                self.push(start, end, 0, CodeKind::Stub, root, Vec::new());
            }
            Record::Forget { .. } => self.methods.clear(),
        }
        true
    }

    fn method(&self, id: u32) -> Option<u32> {
        self.methods.get(&id).copied()
    }

    fn intern(&mut self, name: String) -> u32 {
        self.strings.push(name.into_boxed_str());
        (self.strings.len() - 1) as u32
    }

    fn chain(&mut self, ids: &[u32]) -> Span {
        let offset = self.chains.len() as u32;
        self.chains.extend_from_slice(ids);
        Span {
            offset,
            len: ids.len() as u32,
        }
    }

    fn push(
        &mut self,
        start: u64,
        end: u64,
        load: u64,
        kind: CodeKind,
        root: Span,
        inline: Vec<InlineRange>,
    ) {
        self.entries.push(Entry {
            start,
            end,
            load,
            unload: u64::MAX,
            code: self.codes.len() as u32,
        });
        self.codes.push(Code { kind, root, inline });
        self.fresh += 1;
    }

    /// Sorts the new code in, applies the unloads read, and rebuilds the search helper.
    pub fn publish(&mut self) {
        if self.fresh == 0 && self.unloads.is_empty() {
            return;
        }
        if self.fresh > 0 {
            self.entries.sort_by_key(|e| (e.start, e.load));
            self.fresh = 0;
            self.index();
        }
        for (start, time) in std::mem::take(&mut self.unloads) {
            let first = self.entries.partition_point(|e| e.start < start);
            let open = self.entries[first..]
                .iter_mut()
                .take_while(|e| e.start == start)
                .filter(|e| e.unload == u64::MAX && e.load <= time)
                .max_by_key(|e| e.load);
            match open {
                Some(entry) => entry.unload = time,
                None => self.unmatched_unloads += 1,
            }
        }
    }

    fn index(&mut self) {
        let mut max = 0;
        self.max_end = self
            .entries
            .iter()
            .map(|e| {
                max = max.max(e.end);
                max
            })
            .collect();
    }

    /// Whether enough was added since the last compaction for another to be worth it (the table
    /// grew by a quarter): what it holds stays within 1.25 times what is alive, and a pass over
    /// the table is paid once per quarter of it added, a constant cost per record.
    pub fn wants_compaction(&self) -> bool {
        self.entries.len() + self.methods.len() >= (self.kept + self.kept / 4).max(FIRST_COMPACTION)
    }

    /// Drops the code that was no longer valid at `horizon_ns` (unloaded, or overwritten by a
    /// later load of code at the same address that covers it), then the names that neither the
    /// code kept nor a method number refers to. Lookups of samples taken before `horizon_ns` may
    /// then find nothing. Call it after [`CodeTable::publish`].
    pub fn compact(&mut self, horizon_ns: u64) {
        let covered: Vec<bool> = (0..self.entries.len())
            .map(|i| {
                let old = &self.entries[i];
                self.entries.get(i + 1).is_some_and(|new| {
                    new.start == old.start
                        && old.end <= new.end
                        && old.load < new.load
                        && new.load <= horizon_ns
                })
            })
            .collect();
        let mut covered = covered.into_iter();
        self.entries
            .retain(|e| !covered.next().unwrap_or(false) && e.unload > horizon_ns);
        let mut strings = Vec::new();
        let mut renamed: HashMap<u32, u32> = HashMap::new();
        // Each name kept moves, once, from the old list to the new one.
        let mut old = std::mem::take(&mut self.strings);
        let mut keep = |s: u32, old: &mut [Box<str>]| {
            *renamed.entry(s).or_insert_with(|| {
                strings.push(std::mem::take(&mut old[s as usize]));
                (strings.len() - 1) as u32
            })
        };
        for string in self.methods.values_mut() {
            *string = keep(*string, &mut old);
        }
        let mut chains = Vec::new();
        let mut copy = |span: Span, old: &mut [Box<str>]| {
            let offset = chains.len() as u32;
            let names = &self.chains[span.offset as usize..(span.offset + span.len) as usize];
            chains.extend(names.iter().map(|&s| keep(s, old)));
            Span {
                offset,
                len: span.len,
            }
        };
        let mut codes = Vec::with_capacity(self.entries.len());
        for entry in &mut self.entries {
            let code = &self.codes[entry.code as usize];
            let root = copy(code.root, &mut old);
            let inline = code
                .inline
                .iter()
                .map(|r| InlineRange {
                    from: r.from,
                    to: r.to,
                    chain: copy(r.chain, &mut old),
                })
                .collect();
            entry.code = codes.len() as u32;
            codes.push(Code {
                kind: code.kind,
                root,
                inline,
            });
        }
        self.strings = strings;
        self.chains = chains;
        self.codes = codes;
        self.strings.shrink_to_fit();
        self.chains.shrink_to_fit();
        self.entries.shrink_to_fit();
        self.methods.shrink_to_fit();
        self.index();
        self.kept = self.entries.len() + self.methods.len();
    }

    /// The Java frames at `pc` at time `time_ns` (CLOCK_MONOTONIC), outermost first, from the
    /// code that was valid then: loaded at or before `time_ns` and not yet unloaded. Within a
    /// compiled method, the inline range covering `pc` gives the inlined methods.
    ///
    /// HotSpot reports code after it installs it, so code can run before its load time here.
    /// When no code was valid at `time_ns`, the code at `pc` then was code whose load came
    /// later: the first one to load there after `time_ns` (HotSpot reports loads in the order it
    /// installs the code), if it loaded within [`LOAD_LAG_NS`].
    pub fn lookup(&self, pc: u64, time_ns: u64) -> Option<JitFrames<'_>> {
        let mut i = self.entries.partition_point(|e| e.start <= pc);
        let mut best: Option<&Entry> = None;
        let mut reported_late: Option<&Entry> = None;
        let latest_load = time_ns.saturating_add(LOAD_LAG_NS);
        while i > 0 {
            i -= 1;
            if self.max_end[i] <= pc {
                break;
            }
            let e = &self.entries[i];
            if pc >= e.end {
                continue;
            }
            if e.load <= time_ns && time_ns < e.unload && best.is_none_or(|b| e.load >= b.load) {
                best = Some(e);
            }
            if e.load > time_ns
                && e.load <= latest_load
                && reported_late.is_none_or(|b| e.load < b.load)
            {
                reported_late = Some(e);
            }
        }
        let entry = best.or(reported_late)?;
        let code = &self.codes[entry.code as usize];
        let offset = (pc - entry.start) as u32;
        let span = code
            .inline
            .get(code.inline.partition_point(|r| r.to <= offset))
            .filter(|r| r.from <= offset)
            .map_or(code.root, |r| r.chain);
        Some(self.frames(entry, span))
    }

    /// Every piece of code held, by start address, each with its own name (the compiled method
    /// alone, without inlined methods).
    pub fn iter(&self) -> impl Iterator<Item = JitFrames<'_>> {
        self.entries
            .iter()
            .map(|e| self.frames(e, self.codes[e.code as usize].root))
    }

    fn frames(&self, entry: &Entry, span: Span) -> JitFrames<'_> {
        JitFrames {
            kind: self.codes[entry.code as usize].kind,
            start: entry.start,
            end: entry.end,
            load_ns: entry.load,
            unload_ns: (entry.unload != u64::MAX).then_some(entry.unload),
            chain: &self.chains[span.offset as usize..(span.offset + span.len) as usize],
            strings: &self.strings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of the records in `text`, each line valid.
    fn table(text: &str) -> CodeTable {
        let mut table = CodeTable::default();
        for line in text.lines() {
            let record = joularcode_core::code_map::parse(line).expect(line);
            assert!(table.apply(record), "{line}");
        }
        table.publish();
        table
    }

    fn names(map: &CodeTable, pc: u64, time: u64) -> Option<Vec<&str>> {
        map.lookup(pc, time).map(|f| f.frames().collect())
    }

    #[test]
    fn inline_ranges_give_the_chain_outermost_first() {
        let map = table(
            "M 0 a.B.work\nM 1 a.B.outer\nM 2 a.B.inner%20x\n\
             L 100 1000 100 0 10-20:0,1 20-30:0,1,2\n",
        );
        assert_eq!(names(&map, 0x1005, 200), Some(vec!["a.B.work"]));
        assert_eq!(
            names(&map, 0x1010, 200),
            Some(vec!["a.B.work", "a.B.outer"])
        );
        assert_eq!(
            names(&map, 0x102f, 200),
            Some(vec!["a.B.work", "a.B.outer", "a.B.inner x"])
        );
        assert_eq!(names(&map, 0x1030, 200), Some(vec!["a.B.work"]));
        assert_eq!(names(&map, 0x1100, 200), None);
        // A return address right after a call at the end of an inline range.
        let frames = map.lookup(0x1030 - 1, 200).unwrap();
        assert_eq!(frames.frames().count(), 3);
        assert_eq!(frames.kind, CodeKind::Compiled);
    }

    #[test]
    fn reused_addresses_name_the_code_valid_at_the_sample_time() {
        let map = table(
            "M 0 a.Old.m\nM 1 a.New.m\n\
             L 100 1000 80 0\nU 500 1000\nL 600 1000 40 1\n",
        );
        // Code runs before HotSpot reports it: a sample before a load, and between an unload
        // and the next load, was in the code reported next.
        assert_eq!(names(&map, 0x1010, 99), Some(vec!["a.Old.m"]));
        assert_eq!(names(&map, 0x1010, 100), Some(vec!["a.Old.m"]));
        assert_eq!(names(&map, 0x1010, 499), Some(vec!["a.Old.m"]));
        assert_eq!(names(&map, 0x1010, 550), Some(vec!["a.New.m"]));
        assert_eq!(names(&map, 0x1010, 600), Some(vec!["a.New.m"]));
        assert_eq!(names(&map, 0x1060, 700), None, "the new code is shorter");
        assert_eq!(names(&map, 0x1060, 300), Some(vec!["a.Old.m"]));
        let old = map.lookup(0x1010, 300).unwrap();
        assert_eq!((old.load_ns, old.unload_ns), (100, Some(500)));
    }

    #[test]
    fn code_reported_late_names_only_samples_within_the_lag() {
        let map = table(&format!(
            "M 0 a.A.m\nM 1 a.B.m\nL {} 1000 80 0\nU {} 1000\nL {} 1000 80 1\n",
            LOAD_LAG_NS * 4,
            LOAD_LAG_NS * 6,
            LOAD_LAG_NS * 8
        ));
        let at = |time: u64| names(&map, 0x1010, time);
        assert_eq!(
            at(LOAD_LAG_NS * 4 - LOAD_LAG_NS - 1),
            None,
            "long before its load"
        );
        assert_eq!(at(LOAD_LAG_NS * 4 - LOAD_LAG_NS), Some(vec!["a.A.m"]));
        // After A's unload: B, if B's load comes within the lag; else nothing.
        assert_eq!(at(LOAD_LAG_NS * 7 - 1), None);
        assert_eq!(at(LOAD_LAG_NS * 8 - 1), Some(vec!["a.B.m"]));
    }

    #[test]
    fn overlapping_code_prefers_the_latest_load_and_replays_count_from_the_start() {
        let map = table(
            "M 0 a.A.big\nM 1 a.B.small\n\
             R 900 1000 1000 0\nL 1000 1400 20 1\nS 5 3000 100 Interpreter\n",
        );
        assert_eq!(names(&map, 0x1410, 10), Some(vec!["a.A.big"]));
        assert_eq!(names(&map, 0x1410, 2000), Some(vec!["a.B.small"]));
        assert_eq!(names(&map, 0x1800, 2000), Some(vec!["a.A.big"]));
        let stub = map.lookup(0x3000, 1).unwrap();
        assert_eq!(stub.kind, CodeKind::Stub);
        assert_eq!(stub.frames().next(), Some("Interpreter"));
    }

    #[test]
    fn compaction_drops_old_code_and_names_and_keeps_what_is_valid() {
        let mut map = table(
            "M 0 a.Old.m\nM 1 a.New.m\nM 2 a.Gone.m\nM 3 a.Over.m\n\
             L 100 1000 80 0 10-20:0,1\nU 500 1000\nL 600 1000 40 1\n\
             L 100 5000 40 2\nU 200 5000\n\
             L 100 7000 40 3\nL 300 7000 40 1\n\
             S 1 3000 10 Interpreter\nF 700\nM 0 b.Fresh.m\nL 800 9000 10 0\n",
        );
        assert_eq!(map.len(), 7);
        map.compact(450);
        // Unloaded at 200 and overwritten at 300 (before the horizon): dropped. Unloaded at 500,
        // after the horizon: kept, to name samples taken before it.
        assert_eq!(map.len(), 5);
        assert_eq!(names(&map, 0x1010, 400), Some(vec!["a.Old.m", "a.New.m"]));
        assert_eq!(names(&map, 0x1010, 650), Some(vec!["a.New.m"]));
        assert_eq!(names(&map, 0x5010, 150), None);
        // Over, overwritten before the horizon, is gone: New, reported at 300, is taken for the
        // code that ran there at 250 (no sample that old is asked of a map compacted at 450).
        assert_eq!(names(&map, 0x7010, 250), Some(vec!["a.New.m"]));
        assert_eq!(names(&map, 0x7010, 350), Some(vec!["a.New.m"]));
        assert_eq!(names(&map, 0x3000, 1), Some(vec!["Interpreter"]));
        assert_eq!(names(&map, 0x9000, 900), Some(vec!["b.Fresh.m"]));
        map.compact(10_000);
        assert_eq!(map.len(), 4);
        // Names left: a.New.m (twice: the M line forgotten, a chain), b.Fresh.m, Interpreter.
        let kept: Vec<&str> = map.strings.iter().map(|s| &**s).collect();
        assert!(
            !kept.contains(&"a.Old.m") && !kept.contains(&"a.Gone.m"),
            "{kept:?}"
        );
        assert!(!kept.contains(&"a.Over.m"), "{kept:?}");
        assert_eq!(map.size(), 4 + 1 + kept.len());
        // Method numbers given after the compaction still apply.
        assert!(map.apply(joularcode_core::code_map::parse("L 900 a000 10 0").unwrap()));
        map.publish();
        assert_eq!(names(&map, 0xa000, 950), Some(vec!["b.Fresh.m"]));
    }

    #[test]
    fn a_jvm_that_loads_and_unloads_forever_holds_bounded_memory() {
        let mut map = CodeTable::default();
        let mut largest = 0;
        for i in 0..200_000u64 {
            let time = i * 1000;
            let id = (i % 60_000) as u32;
            if id == 0 {
                map.apply(Record::Forget { time_ns: time });
            }
            map.apply(Record::Method {
                id,
                name: format!("Gen{i}.work"),
            });
            let start = 0x10_0000 + (i % 500) * 0x100;
            map.apply(Record::Unload {
                time_ns: time,
                start,
            });
            let load = format!("L {} {start:x} 80 {id}", time + 1);
            assert!(map.apply(joularcode_core::code_map::parse(&load).unwrap()));
            if map.wants_compaction() {
                map.publish();
                map.compact(time.saturating_sub(50_000));
            }
            largest = largest.max(map.size());
        }
        assert!(largest < 250_000, "{largest}");
        map.publish();
        let last = 199_999u64;
        let start = 0x10_0000 + (last % 500) * 0x100;
        assert_eq!(
            names(&map, start + 8, last * 1000 + 2),
            Some(vec![format!("Gen{last}.work").as_str()])
        );
    }
}
