//! Data flows one way between the userspace's modules: no top-level module of userspace/src uses,
//! through a chain of others, a module that uses it. A module's dependencies are the `crate::x`
//! paths of its files' code (comments left out). Needs no root.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module name -> the other top-level modules its code names.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The top-level module a file under `src` belongs to: `session` for src/session.rs and for
/// src/session/jvm.rs; `None` for the crate roots.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?;
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main").then(|| name.to_string())
}

/// The modules named by `crate::x` paths in the code of `text` (not its comments).
fn named_modules(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
    {
        for (at, _) in line.match_indices("crate::") {
            if line[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let rest = &line[at + "crate::".len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            if end > 0 {
                names.insert(rest[..end].to_string());
            }
        }
    }
    names
}

fn add_files(src: &Path, dir: &Path, graph: &mut Graph) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            add_files(src, &path, graph);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let Some(module) = module_of(src, &path) else {
                continue;
            };
            let text = std::fs::read_to_string(&path).expect("read source");
            let uses = graph.entry(module.clone()).or_default();
            uses.extend(named_modules(&text).into_iter().filter(|m| *m != module));
        }
    }
}

/// A cycle of `graph`, as the modules along it (the first repeated at the end), if there is one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        module: &str,
        graph: &Graph,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|m| m == module) {
            let mut cycle = path[at..].to_vec();
            cycle.push(module.to_string());
            return Some(cycle);
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.to_string());
        for next in graph.get(module).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(module.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|module| visit(module, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_module_uses_itself_through_others() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = Graph::new();
    add_files(&src, &src, &mut graph);
    for module in [
        "session",
        "sampler",
        "discovery",
        "commands",
        "cli",
        "record",
    ] {
        assert!(graph.contains_key(module), "{module} not found: {graph:?}");
    }
    assert!(
        graph["commands"].contains("session"),
        "the paths are read: {graph:?}"
    );
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "import cycle: {}; data flows one way: the later module must not use the earlier \
             (see docs/architecture.md, layout)",
            cycle.join(" -> ")
        );
    }
}

/// The modules of docs/architecture.md's table of `userspace/src`, in its order (the cells of a
/// row such as `` `top/`, `daemon/` `` name several modules of one rank).
fn documented_order() -> BTreeMap<String, usize> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/architecture.md");
    let text = std::fs::read_to_string(path).expect("read docs/architecture.md");
    let table = text
        .split("Inside `userspace/src`")
        .nth(1)
        .expect("the table of userspace/src");
    let mut order = BTreeMap::new();
    let rows = table
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .skip(2);
    for (rank, row) in rows.enumerate() {
        let cell = row.split('|').nth(1).unwrap_or_default();
        for name in cell.split('`').skip(1).step_by(2) {
            order.insert(name.trim_end_matches('/').to_string(), rank);
        }
    }
    order
}

#[test]
fn each_module_uses_only_those_below_it_in_the_architecture_table() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = Graph::new();
    add_files(&src, &src, &mut graph);
    let order = documented_order();
    for (module, uses) in &graph {
        let rank = order.get(module).unwrap_or_else(|| {
            panic!("userspace/src/{module} is missing from docs/architecture.md's table")
        });
        for used in uses {
            assert!(
                order.get(used).is_some_and(|below| below > rank),
                "{module} uses {used}, which docs/architecture.md's table does not list below it"
            );
        }
    }
    for module in order.keys() {
        assert!(
            graph.contains_key(module),
            "docs/architecture.md lists {module}, which userspace/src does not hold"
        );
    }
}

#[test]
fn the_check_finds_a_cycle_and_reads_only_code() {
    let graph: Graph = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")]
        .into_iter()
        .map(|(from, to)| (from.to_string(), BTreeSet::from([to.to_string()])))
        .collect();
    let cycle = find_cycle(&graph).expect("a cycle");
    assert_eq!(cycle, ["a", "b", "c", "a"]);
    let acyclic: Graph = graph.into_iter().filter(|(from, _)| from != "c").collect();
    assert_eq!(find_cycle(&acyclic), None);
    let text = "use crate::session::Session;\n// [`crate::launch::end`]\n\
        let x = crate::sampler::StackFrame {};\nuse joularcode_crate::other;";
    assert_eq!(
        named_modules(text),
        BTreeSet::from(["session".to_string(), "sampler".to_string()])
    );
}
