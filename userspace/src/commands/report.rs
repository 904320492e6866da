//! `joularcode-bpf report`: the table of a recording's branches that used the most energy, its
//! energy flame graph and pprof profile, or its comparison with a baseline recording
//! ([`crate::report`] reads and ranks the CSV files).

use std::fmt::Write as _;
use std::path::Path;

use joularcode_core::entry::EntryRule;
use joularcode_core::log::{printable, Level, Log, Recorded, Stderr};

use crate::cli::ReportArgs;
use crate::output::{flamegraph, pprof, stdout, OutputFile};
use crate::profile::{BranchSet, EnergyProfile, Per};
use crate::record::options::{self, ConfigOptions};
use crate::report::compare::Comparison;
use crate::report::{per, read, table, By, REGRESSION_EXIT};

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
    let per = match &args.per {
        Some(units) => per::per_unit(units, &args.results, after_path)?,
        None if args.per_run => Per::Run,
        None => Per::Second,
    };
    let (before, after) = read(table_set)?;
    let comparison = Comparison::new(&before, &after, per);
    let mut out = format!(
        "== {}: {} (after) compared with {} (before), {}\n",
        table_set.describe(),
        printable(&after_path.display().to_string()),
        printable(&args.results.display().to_string()),
        match per {
            Per::Second => "per second of run",
            Per::Run | Per::Unit { .. } => per.describe(),
        }
    );
    out.push_str(&comparison.render(args.top));
    if let Some(path) = &args.flamegraph {
        let (before, after) = if set == table_set {
            (before, after)
        } else {
            read(set)?
        };
        write(path, "--flamegraph", |out| {
            flamegraph::write_diff(&before, &after, per, out)
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
            per_run: false,
            per: None,
            by: By::Branch,
            root: RootArgs { root: Root::Thread },
            config: None,
            methods_filtering_prefix: None,
            entry_points: None,
        }
    }

    #[test]
    fn the_table_ranks_the_branches_of_each_file() {
        let file = read::file_energy(FILE, None).unwrap();
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

    /// A benchmark of a fixed amount of work (1000 units: a hot and a cold method, 9 to 1),
    /// recorded as `record` writes it: `seconds` cycles of 1 s at `watts`, the JVM the
    /// machine's only load.
    fn benchmark(dir: &Path, seconds: i64, watts: f64) -> PathBuf {
        use crate::record::results::written::{write_run, RunCycle};
        let samples = [
            ("work.Bench.run;work.Bench.hot", 90),
            ("work.Bench.run;work.Bench.cold", 10),
        ];
        let cycles: Vec<RunCycle> = (1..=seconds)
            .map(|second| RunCycle {
                end_ms: 1_700_000_000_000 + 1000 * second,
                seconds: 1.0,
                watts,
                samples: &samples,
                carbon: None,
            })
            .collect();
        write_run(dir, &cycles);
        std::fs::write(dir.join("units.txt"), "1000\n").unwrap();
        dir.to_path_buf()
    }

    #[test]
    fn a_fixed_work_run_twice_as_fast_at_the_same_power_halves_the_energy_per_run() {
        let dir = tempfile::tempdir().unwrap();
        let slow = benchmark(&dir.path().join("slow"), 10, 20.0);
        let fast = benchmark(&dir.path().join("fast"), 5, 20.0);
        let mut args = args(&slow);
        args.baseline = Some(fast.clone());
        args.fail_above = Some(5.0);
        // Per second, the same power is the same energy: no saving shown, the gate passes.
        let (text, code) = report(&args).unwrap();
        assert!(
            text.contains("before:   200.000 J in 10.0 s = 20.000 J/s"),
            "{text}"
        );
        assert!(
            text.contains("after:    100.000 J in 5.0 s = 20.000 J/s"),
            "{text}"
        );
        assert!(text.contains("change:   +0.000 J/s (+0.0%)"), "{text}");
        assert_eq!(code, 0);
        // Per run, and per unit of work (1000 units each), half the energy.
        args.per_run = true;
        let (text, code) = report(&args).unwrap();
        assert!(text.contains("), per run\n"), "{text}");
        assert!(text.contains("change:   -100.000 J/run (-50.0%)"), "{text}");
        assert!(text.contains("-50.0%  work.Bench.hot"), "{text}");
        assert_eq!(code, 0);
        args.per_run = false;
        for units in ["1000", "1000,1000", "@units.txt", "@units.txt,1000"] {
            args.per = Some(per::parse(units).unwrap());
            let (text, code) = report(&args).unwrap();
            assert!(
                text.contains("after:    100.000 J in 5.0 s, 1000 units = 0.100 J/unit"),
                "{units}: {text}"
            );
            assert!(text.contains("(-50.0%)"), "{units}: {text}");
            assert_eq!(code, 0);
        }
        // The other way round, the slow run costs twice as much: the gate fails per run and per
        // unit, not per second.
        args.results = fast.clone();
        args.baseline = Some(slow.clone());
        args.per = None;
        assert_eq!(report(&args).unwrap().1, 0, "per second");
        args.per_run = true;
        let (text, code) = report(&args).unwrap();
        assert_eq!(code, REGRESSION_EXIT, "{text}");
        assert!(text.contains("energy regression: the total energy per run grew from 100.0000 to 200.0000 J/run (+100.0%), more than --fail-above 5%"), "{text}");
        args.per_run = false;
        args.per = Some(per::parse("@units.txt").unwrap());
        let (text, code) = report(&args).unwrap();
        assert_eq!(code, REGRESSION_EXIT, "{text}");
        assert!(text.contains("energy regression: method work.Bench.hot grew from 0.0900 to 0.1800 J/unit (+100.0%)"), "{text}");
        // The slow run did twice the work: the same energy per unit, the gate passes.
        args.per = Some(per::parse("1000,2000").unwrap());
        assert_eq!(report(&args).unwrap().1, 0);
    }

    #[test]
    fn a_faster_run_at_a_higher_power_is_worse_per_second_and_better_per_run() {
        let dir = tempfile::tempdir().unwrap();
        let slow = benchmark(&dir.path().join("slow"), 10, 20.0);
        let fast = benchmark(&dir.path().join("fast"), 5, 22.0);
        let mut args = args(&slow);
        args.baseline = Some(fast);
        args.fail_above = Some(5.0);
        let (text, code) = report(&args).unwrap();
        assert_eq!(code, REGRESSION_EXIT, "{text}");
        assert!(
            text.contains("the total energy per second grew from 20.0000 to 22.0000 J/s (+10.0%)"),
            "{text}"
        );
        args.per_run = true;
        let (text, code) = report(&args).unwrap();
        assert_eq!(code, 0, "{text}");
        assert!(text.contains("change:   -90.000 J/run (-45.0%)"), "{text}");
    }

    #[test]
    fn units_that_cannot_be_read_are_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let slow = benchmark(&dir.path().join("slow"), 2, 20.0);
        let mut args = args(&slow);
        args.baseline = Some(dir.path().join("slow"));
        args.per = Some(per::parse("@missing.txt").unwrap());
        let error = report(&args).unwrap_err();
        assert!(error.starts_with("--per: cannot read "), "{error}");
        assert!(
            error.contains("missing.txt: there is no such file"),
            "{error}"
        );
        assert!(!error.contains('\n'));
    }

    #[test]
    fn grams_are_the_kilowatt_hours_of_each_cycle_times_its_intensity() {
        use crate::record::results::written::{write_run, RunCycle};
        use joularcode_core::carbon::{Intensity, IntensitySource};
        let dir = tempfile::tempdir().unwrap();
        let samples = [
            ("work.Bench.run;work.Bench.hot", 90),
            ("work.Bench.run;work.Bench.cold", 10),
        ];
        // 36 J a cycle (36 W, the JVM the only load); the file said 100, 100 and 400 g/kWh,
        // then could not be read.
        let intensities = [
            Some((100.0, IntensitySource::Constant)),
            Some((100.0, IntensitySource::File)),
            Some((400.0, IntensitySource::File)),
            None,
        ];
        let cycles: Vec<RunCycle> = intensities
            .iter()
            .zip(1..)
            .map(|(carbon, second)| RunCycle {
                end_ms: 1_700_000_000_000 + 1000 * second,
                seconds: 1.0,
                watts: 36.0,
                samples: &samples,
                carbon: carbon.map(|(grams_per_kwh, source)| Intensity {
                    grams_per_kwh,
                    source,
                }),
            })
            .collect();
        write_run(dir.path(), &cycles);
        let mut args = args(dir.path());
        args.flamegraph = Some(dir.path().join("fg.svg"));
        args.app = true;
        let (text, _) = report(&args).unwrap();
        // hot: 32.4 J a cycle, 97.2 J at 600 g/kWh-cycles: 32.4 × 600 / 3.6e6 g.
        assert!(
            text.contains(
                "methods-power-app.csv: 144.000 J, 6.000 mg CO2e (carbon intensity: constant \
                 and file) (2 rows without a carbon intensity have no grams) in 8 rows\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("    energy (J)   share          CO2e  branch\n"),
            "{text}"
        );
        assert!(
            text.contains("       129.600   90.0%      5.400 mg  work.Bench.run;work.Bench.hot\n"),
            "{text}"
        );
        assert!(
            text.contains("    600.000 µg  work.Bench.run;work.Bench.cold\n"),
            "{text}"
        );
        let svg = std::fs::read_to_string(dir.path().join("fg.svg")).unwrap();
        assert!(
            svg.contains("<title>work.Bench.hot (129.600 J, 5.400 mg CO2e, 90.00%)</title>"),
            "{svg}"
        );
        assert!(svg.contains("CO2e at the carbon intensity of the constant and file"));
        // Without an intensity file, no grams.
        std::fs::remove_file(dir.path().join("carbon-intensity.csv")).unwrap();
        let (text, _) = report(&args).unwrap();
        assert!(!text.contains("CO2e"), "{text}");
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
    fn grams_are_added_up_per_entry_point_and_shown_in_the_flame_graph_rooted_there() {
        use crate::record::results::written::{write_run, RunCycle};
        use joularcode_core::carbon::{Intensity, IntensitySource};
        let dir = tempfile::tempdir().unwrap();
        let samples = [
            ("java.lang.Thread.run;work.Router.route;java.lang.reflect.Method.invoke;work.Orders.handle", 75),
            ("java.lang.Thread.run;work.Router.route;java.lang.reflect.Method.invoke;work.Users.handle", 25),
        ];
        // 36 J a cycle (36 W, the JVM the only load) at 100 then 400 g/kWh: Orders.handle has
        // 27 J of each, 27 × 500 / 3.6e6 g; Users.handle 9 J of each.
        let cycles: Vec<RunCycle> = [100.0, 400.0]
            .into_iter()
            .zip(1..)
            .map(|(grams_per_kwh, second)| RunCycle {
                end_ms: 1_700_000_000_000 + 1000 * second,
                seconds: 1.0,
                watts: 36.0,
                samples: &samples,
                carbon: Some(Intensity {
                    grams_per_kwh,
                    source: IntensitySource::File,
                }),
            })
            .collect();
        write_run(dir.path(), &cycles);
        let mut args = args(dir.path());
        args.by = By::Entry;
        args.methods_filtering_prefix = Some("work.".into());
        args.root.root = Root::Entry;
        args.flamegraph = Some(dir.path().join("fg.svg"));
        let (text, _) = report(&args).unwrap();
        assert!(
            text.contains(
                "methods-power-all.csv: 72.000 J, 5.000 mg CO2e (carbon intensity: file)"
            ),
            "{text}"
        );
        assert!(
            text.contains("    energy (J)   share          CO2e  entry\n"),
            "{text}"
        );
        for line in [
            "54.000   75.0%      3.750 mg  work.Orders.handle\n",
            "18.000   25.0%      1.250 mg  work.Users.handle\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        let svg = std::fs::read_to_string(dir.path().join("fg.svg")).unwrap();
        assert!(
            svg.contains("<title>work.Orders.handle (54.000 J, 3.750 mg CO2e, 75.00%)</title>"),
            "{svg}"
        );
        assert!(
            svg.contains("<title>work.Users.handle (18.000 J, 1.250 mg CO2e, 25.00%)</title>"),
            "{svg}"
        );
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
