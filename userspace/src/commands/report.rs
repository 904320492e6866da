//! `joularcode-bpf report`: the table of a recording's branches that used the most energy, its
//! energy flame graph and pprof profile, or its comparison with a baseline recording
//! ([`crate::report`] reads and ranks the CSV files).

use std::fmt::Write as _;
use std::path::Path;

use joularcode_core::entry::EntryRule;
use joularcode_core::log::{printable, Level, Log, Recorded, Stderr};

use crate::cli::ReportArgs;
use crate::output::{flamegraph, pprof, stdout, OutputFile};
use crate::profile::{BranchSet, EnergyProfile};
use crate::record::options::{self, ConfigOptions};
use crate::report::compare::Comparison;
use crate::report::{read, table, By, REGRESSION_EXIT};

/// Runs `report`: prints the table (and says where the files asked for went); returns the exit
/// status (0, or [`REGRESSION_EXIT`]), or the error to print.
pub fn run(args: &ReportArgs) -> Result<i32, String> {
    let (text, code) = report(args)?;
    stdout::print(text).map_err(|e| e.to_string())?;
    Ok(code)
}

/// What `report` prints, and its exit status (0, or [`REGRESSION_EXIT`]).
fn report(args: &ReportArgs) -> Result<(String, i32), String> {
    let set = BranchSet::from_app_flag(args.app);
    match &args.baseline {
        Some(after) => compare_runs(args, after, set),
        None => {
            let rule = (args.by == By::Entry || args.root.at_entries())
                .then(|| entry_rule(args))
                .transpose()?;
            let (table_set, entries) = match args.by {
                By::Entry => (BranchSet::All, rule.as_ref()),
                By::Branch if args.all_branches => (BranchSet::All, None),
                By::Branch => (BranchSet::App, None),
            };
            let mut out =
                table(&args.results, table_set, entries, args.top).map_err(|e| e.to_string())?;
            if args.flamegraph.is_some() || args.pprof.is_some() {
                let profile = read::profile(&args.results, set).map_err(|e| e.to_string())?;
                let profile = match &rule {
                    Some(rule) if args.root.at_entries() => profile.from_entries(rule),
                    _ => profile,
                };
                if let Some(path) = &args.flamegraph {
                    write(path, "--flamegraph", |out| flamegraph::write(&profile, out))?;
                    let _ = writeln!(out, "flame graph of {}: {}", what(&profile), path.display());
                }
                if let Some(path) = &args.pprof {
                    write(path, "--pprof", |out| pprof::write(&profile, out))?;
                    let _ = writeln!(
                        out,
                        "pprof profile of {}: {}",
                        what(&profile),
                        path.display()
                    );
                }
            }
            Ok((out, 0))
        }
    }
}

/// The rule that finds the entry points: `methods-filtering-prefix` and `entry-points` of the
/// `--config` file (or ./joularcodejava.properties), overridden by the options of the same name.
/// What reading the file says is printed when it is a warning or worse.
fn entry_rule(args: &ReportArgs) -> Result<EntryRule, String> {
    let values = [
        ("methods-filtering-prefix", &args.methods_filtering_prefix),
        ("entry-points", &args.entry_points),
    ]
    .into_iter()
    .filter_map(|(key, value)| value.clone().map(|value| (key, value)))
    .collect();
    let working_dir =
        std::env::current_dir().map_err(|e| format!("cannot read the working folder: {e}"))?;
    let said = Recorded::default();
    let config = options::load(
        args.config.as_deref(),
        &ConfigOptions { values },
        &working_dir,
        &said,
    )
    .map_err(|e| e.to_string())?;
    for (level, message) in said.messages() {
        if level >= Level::Warning {
            Stderr::default().log(level, &message);
        }
    }
    Ok(EntryRule::of(&config))
}

/// Writes the file of `option` at `path` with `write`.
fn write(
    path: &Path,
    option: &'static str,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<(), String> {
    OutputFile::create(option, path)
        .and_then(|file| file.write(write))
        .map_err(|e| e.to_string())
}

/// What a profile written holds, for the line that says where it went.
fn what(profile: &EnergyProfile) -> String {
    format!(
        "{} ({}, {})",
        printable(&profile.subject()),
        crate::profile::format_joules(profile.joules()),
        profile.set.describe()
    )
}

/// `report BEFORE --baseline AFTER`: the comparison's table (of the app file, or the all file
/// with `--all-branches`), the differential flame graph of `set`, and the gate.
fn compare_runs(
    args: &ReportArgs,
    after_path: &Path,
    set: BranchSet,
) -> Result<(String, i32), String> {
    let table_set = if args.all_branches {
        BranchSet::All
    } else {
        BranchSet::App
    };
    let read = |set| -> Result<(EnergyProfile, EnergyProfile), String> {
        let read = |path| read::profile(path, set).map_err(|e| e.to_string());
        Ok((read(&args.results)?.masked(), read(after_path)?.masked()))
    };
    let (before, after) = read(table_set)?;
    let comparison = Comparison::new(&before, &after);
    let mut out = format!(
        "== {}: {} (after) compared with {} (before), per second of run\n",
        table_set.describe(),
        printable(&after_path.display().to_string()),
        printable(&args.results.display().to_string())
    );
    out.push_str(&comparison.render(args.top));
    if let Some(path) = &args.flamegraph {
        let (before, after) = if set == table_set {
            (before, after)
        } else {
            read(set)?
        };
        write(path, "--flamegraph", |out| {
            flamegraph::write_diff(&before, &after, out)
        })?;
        let _ = writeln!(
            out,
            "\ndifferential flame graph of {}: {}",
            set.describe(),
            path.display()
        );
    }
    let regressions = args
        .fail_above
        .map(|percent| comparison.regressions(percent, args.top))
        .unwrap_or_default();
    for line in &regressions {
        let _ = writeln!(out, "energy regression: {line}");
    }
    Ok((
        out,
        if regressions.is_empty() {
            0
        } else {
            REGRESSION_EXIT
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::RootArgs;
    use crate::report::read::tests::FILE;
    use crate::report::render;
    use crate::report::Root;
    use joularcode_core::output::csv::{ALL_FILE, APP_FILE};
    use std::path::PathBuf;

    fn args(results: &Path) -> ReportArgs {
        ReportArgs {
            results: results.to_path_buf(),
            all_branches: false,
            top: 10,
            flamegraph: None,
            pprof: None,
            app: false,
            baseline: None,
            fail_above: None,
            by: By::Branch,
            root: RootArgs { root: Root::Thread },
            config: None,
            methods_filtering_prefix: None,
            entry_points: None,
        }
    }

    #[test]
    fn the_table_ranks_the_branches_of_each_file() {
        let file = read::file_energy(FILE).unwrap();
        let text = render(Path::new("r.csv"), &file, "branch", 1);
        assert!(text.starts_with("r.csv: 5.000 J in 3 rows (1 unreadable rows left out)\n"));
        assert!(text.contains("4.000   80.0%  a.A.run;a.A.x\n"), "{text}");
        assert!(!text.contains("a.A.y"), "top 1 only: {text}");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(APP_FILE), FILE).unwrap();
        assert!(table(dir.path(), BranchSet::App, None, 10)
            .unwrap()
            .contains("80.0%"));
        assert!(
            table(dir.path(), BranchSet::All, None, 10).is_err(),
            "no all file"
        );
    }

    /// As Joular Code for Java writes its files: both in results-path, the rows of a window in
    /// no particular order, a branch name quoted for its comma, two runs appended.
    const JOULAR: &str = "timestamp,branch,power_watts,energy_joules,interval_seconds,coverage\n\
        1746000001000,java.lang.Thread.run;com.app.Main.run;com.app.Main.sort,3.000000000,3.000000000,1.000000000,0.7500\n\
        1746000001000,java.lang.Thread.run;com.app.Main.run,1.000000000,1.000000000,1.000000000,0.7500\n\
        1746000002000,\"java.lang.Thread.run;com.app.Main$$Lambda/0x00000008000c5898.run;com.app.Main.f,g\",2.000000000,2.000000000,1.000000000,0.9000\n\
        1746000010000,java.lang.Thread.run;com.app.Main.run;com.app.Main.sort,4.000000000,4.000000000,1.000000000,1.0000\n";

    #[test]
    fn joular_code_for_javas_files_are_drawn_too() {
        let dir = tempfile::tempdir().unwrap();
        for file in [ALL_FILE, APP_FILE] {
            std::fs::write(dir.path().join(file), JOULAR).unwrap();
        }
        let mut args = args(dir.path());
        args.flamegraph = Some(dir.path().join("fg.svg"));
        let (text, _) = report(&args).unwrap();
        assert!(text.contains("10.000 J in 4 rows"), "{text}");
        let svg = std::fs::read_to_string(dir.path().join("fg.svg")).unwrap();
        // From the start of the first window to the end of the last: the time between runs too.
        assert!(svg.contains(&format!(
            "Energy of {}: 10.000 J in 10.0 s",
            dir.path().display()
        )));
        assert!(svg.contains("power source not recorded in the CSV files"));
        assert!(
            svg.contains("<title>com.app.Main.sort (7.000 J, 70.00%)</title>"),
            "{svg}"
        );
        assert!(
            svg.contains("<title>com.app.Main.f,g (2.000 J, 20.00%)</title>"),
            "{svg}"
        );
        assert!(svg.contains("com.app.Main$$Lambda/0x00000008000c5898.run (2.000 J"));
    }

    #[test]
    fn names_and_folders_are_printed_escaped_one_line_each() {
        let dir = tempfile::tempdir().unwrap();
        let jvm = dir.path().join("JVM 1 (\x1b[2J)");
        std::fs::create_dir(&jvm).unwrap();
        let hostile = format!(
            "{}\n1000,\"a.A.run;a.A.wipe\x1b[2J\x07\n    99.000  99.0%  a.Forged\",\
             1.000000000,1.000000000,1.000000000,1.0000\n\
             1000,a.A.run;a.A.\u{202e}exe,1.000000000,2.000000000,1.000000000,1.0000\n",
            joularcode_core::output::csv::HEADER
        );
        std::fs::write(jvm.join(APP_FILE), &hostile).unwrap();
        std::fs::write(jvm.join(ALL_FILE), &hostile).unwrap();
        let other = dir.path().join("other");
        std::fs::create_dir(&other).unwrap();
        // After the change, the method with the bidi override uses more.
        let grown = hostile.replace("1.000000000,2.000000000", "1.000000000,9.000000000");
        std::fs::write(other.join(APP_FILE), &grown).unwrap();
        std::fs::write(other.join(ALL_FILE), &grown).unwrap();
        let mut args = args(dir.path());
        args.flamegraph = Some(dir.path().join("fg.svg"));
        let (table, _) = report(&args).unwrap();
        args.results = jvm.clone();
        args.baseline = Some(other);
        args.fail_above = Some(20.0);
        let (comparison, _) = report(&args).unwrap();
        for text in [&table, &comparison] {
            assert!(
                !text.contains(|c: char| (c.is_control() && c != '\n') || c == '\u{202e}'),
                "{text}"
            );
            assert!(
                text.contains("a.A.wipe\\u{1b}[2J\\u{7}\\u{a}    99.000  99.0%  a.Forged"),
                "{text}"
            );
            assert!(text.contains("a.A.\\u{202e}exe"), "{text}");
            assert!(
                !text
                    .lines()
                    .any(|line| line.trim_start().starts_with("99.000")),
                "a forged line: {text}"
            );
        }
        assert!(table.contains("JVM 1 (\\u{1b}[2J)"), "{table}");
        assert!(
            comparison.contains("energy regression: method a.A.\\u{202e}exe"),
            "{comparison}"
        );
    }

    #[test]
    fn outputs_are_written_after_the_table() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(APP_FILE), FILE).unwrap();
        std::fs::write(
            dir.path().join(ALL_FILE),
            FILE.replace("3.000000000,1", "9.000000000,1"),
        )
        .unwrap();
        let mut args = args(dir.path());
        args.flamegraph = Some(dir.path().join("fg.svg"));
        args.pprof = Some(dir.path().join("p.pb.gz"));
        let (text, code) = report(&args).unwrap();
        assert_eq!(code, 0);
        assert!(
            text.contains(&format!(
                "flame graph of {} (11.000 J, all branches)",
                dir.path().display()
            )),
            "{text}"
        );
        let svg = std::fs::read_to_string(dir.path().join("fg.svg")).unwrap();
        assert!(
            svg.contains("a.A.x (10.000 J, 90.91%)"),
            "the all file by default"
        );
        args.app = true;
        report(&args).unwrap();
        let svg = std::fs::read_to_string(dir.path().join("fg.svg")).unwrap();
        assert!(svg.contains("a.A.x (4.000 J, 80.00%)"), "--app");
        assert!(std::fs::metadata(dir.path().join("p.pb.gz")).unwrap().len() > 0);
    }

    #[test]
    fn a_comparison_exits_with_its_own_status_on_a_regression() {
        let dir = tempfile::tempdir().unwrap();
        let (before, after) = (dir.path().join("before"), dir.path().join("after"));
        for (path, hot) in [(&before, "1.000000000"), (&after, "2.000000000")] {
            std::fs::create_dir(path).unwrap();
            let text = format!(
                "{}\n1000,m.M.run;m.M.hot,{hot},{hot},1.000000000,1.0000\n\
                 1000,m.M.run;m.M.cold,1.000000000,1.000000000,1.000000000,1.0000\n",
                joularcode_core::output::csv::HEADER
            );
            for file in [APP_FILE, ALL_FILE] {
                std::fs::write(path.join(file), &text).unwrap();
            }
        }
        let mut args = args(&before);
        args.baseline = Some(after.clone());
        args.flamegraph = Some(dir.path().join("diff.svg"));
        let (text, code) = report(&args).unwrap();
        assert_eq!(code, 0, "no gate without --fail-above");
        assert!(text.contains("+100.0%  m.M.hot"), "{text}");
        assert!(std::fs::read_to_string(dir.path().join("diff.svg"))
            .unwrap()
            .contains("J/s"));
        args.fail_above = Some(20.0);
        let (text, code) = report(&args).unwrap();
        assert_eq!(code, REGRESSION_EXIT);
        assert!(text.contains("energy regression: the total energy per second grew from 2.0000 to 3.0000 J/s (+50.0%)"), "{text}");
        assert!(
            text.contains("energy regression: method m.M.hot grew"),
            "{text}"
        );
        args.results = PathBuf::from(&after);
        args.baseline = Some(before);
        assert_eq!(report(&args).unwrap().1, 0, "a drop passes");
    }

    /// A router of the application calling two handlers by reflection and a lambda, a stream
    /// in a handler, and a thread of the JVM's own.
    const ROUTED: &str = "timestamp,branch,power_watts,energy_joules,interval_seconds,coverage\n\
        1000,java.lang.Thread.run;a.Main.run;a.Router.route;java.lang.reflect.Method.invoke;a.Orders.handle;a.Orders.price,3.0,3.000000000,1.0,1.0\n\
        1000,java.lang.Thread.run;a.Main.run;a.Router.route;a.Main$$Lambda/0x0000000801001a00.handle;a.Users.handle,1.0,1.000000000,1.0,1.0\n\
        2000,java.lang.Thread.run;a.Main.run;a.Router.route;java.lang.reflect.Method.invoke;a.Orders.handle;java.util.stream.ReferencePipeline.collect;a.Orders$$Lambda/0x0000000801001b00.apply;a.Orders.lambda$handle$0,1.0,1.000000000,1.0,1.0\n\
        2000,java.lang.Thread.run;a.Main.run;a.Main.idle,0.5,0.500000000,1.0,1.0\n\
        2000,[GC],0.5,0.500000000,1.0,1.0\n";

    #[test]
    fn energy_is_added_up_per_entry_point_and_the_flame_graph_starts_there() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(ALL_FILE), ROUTED).unwrap();
        std::fs::write(dir.path().join(APP_FILE), "not read").unwrap();
        let mut args = args(dir.path());
        args.by = By::Entry;
        args.config = Some(dir.path().join("none.properties"));
        assert!(
            report(&args).unwrap_err().contains("--config"),
            "a missing --config is refused"
        );
        std::fs::write(
            dir.path().join("j.properties"),
            "methods-filtering-prefix=b.\n",
        )
        .unwrap();
        args.config = Some(dir.path().join("j.properties"));
        args.methods_filtering_prefix = Some("a.".into());
        args.root.root = Root::Entry;
        args.flamegraph = Some(dir.path().join("fg.svg"));
        let (text, code) = report(&args).unwrap();
        assert_eq!(code, 0);
        assert!(text.contains("    energy (J)   share  entry\n"), "{text}");
        for line in [
            "4.000   66.7%  a.Orders.handle\n",
            "1.000   16.7%  a.Users.handle\n",
            "0.500    8.3%  a.Main.run\n",
            "0.500    8.3%  [no entry]\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        let svg = std::fs::read_to_string(dir.path().join("fg.svg")).unwrap();
        assert!(
            svg.contains("all branches, from their entry points"),
            "{svg}"
        );
        assert!(
            svg.contains("<title>a.Orders.handle (4.000 J, 66.67%)</title>"),
            "{svg}"
        );
        assert!(
            svg.contains("<title>a.Orders.price (3.000 J, 50.00%)</title>"),
            "{svg}"
        );
        assert!(
            !svg.contains("a.Router.route"),
            "the router is above the entries"
        );
        assert!(
            svg.contains("<title>[GC] (0.500 J, 8.33%)</title>"),
            "{svg}"
        );
        args.entry_points = Some("a.Router.route".into());
        let (text, _) = report(&args).unwrap();
        assert!(text.contains("5.000   83.3%  a.Router.route\n"), "{text}");
    }

    #[test]
    fn entry_points_are_printed_escaped() {
        let dir = tempfile::tempdir().unwrap();
        let hostile = format!(
            "{}\n1000,\"java.lang.Thread.run;a.Evil\x1b[2J\u{202e}.run\n    9.000  99.0%  a.Forged;a.B.c\",\
             1.0,1.000000000,1.0,1.0\n",
            joularcode_core::output::csv::HEADER
        );
        std::fs::write(dir.path().join(ALL_FILE), hostile).unwrap();
        let mut args = args(dir.path());
        args.by = By::Entry;
        let (text, _) = report(&args).unwrap();
        assert!(
            text.contains("a.Evil\\u{1b}[2J\\u{202e}.run\\u{a}    9.000  99.0%  a.Forged"),
            "{text}"
        );
        assert!(
            !text.contains(|c: char| (c.is_control() && c != '\n') || c == '\u{202e}'),
            "{text}"
        );
    }
}
