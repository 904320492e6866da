//! The pprof files of `record` and `report`, decoded against pprof's published `profile.proto`:
//! the same energy as the CSV files.

use joularcode_testkit::pprof::decode;

use super::*;

/// Every branch of `csv` has the same energy in `pprof`, and the totals match, within the
/// rounding of the CSV rows (9 decimals) and of the nanojoules.
pub(super) fn assert_same_energy(csv: &HashMap<String, f64>, pprof: &HashMap<String, (f64, i64)>) {
    let (csv_total, pprof_total): (f64, f64) =
        (csv.values().sum(), pprof.values().map(|(j, _)| j).sum());
    eprintln!(
        "CSV {csv_total:.9} J, pprof {pprof_total:.9} J, {} branches",
        csv.len()
    );
    assert!(
        (csv_total - pprof_total).abs() < 1e-6,
        "{csv_total} vs {pprof_total}"
    );
    assert_eq!(csv.len(), pprof.len());
    for (branch, joules) in csv {
        let (decoded, _) = pprof
            .get(branch)
            .unwrap_or_else(|| panic!("no {branch} in pprof"));
        assert!(
            (joules - decoded).abs() < 1e-7,
            "{branch}: {joules} vs {decoded}"
        );
    }
}

#[test]
fn pprof_files_decode_against_the_published_profile_proto() {
    let _serial = serial();
    let recording = demo_recording();
    let results = recording.results.display().to_string();
    let all = csv_energy(&recording.results.join("methods-power-all.csv"));
    let app = csv_energy(&recording.results.join("methods-power-app.csv"));

    // record's: energy and samples, per branch of the all file
    let decoded = decode(&recording.pprof);
    assert_eq!(
        decoded.sample_types,
        [
            ("energy".into(), "nanojoules".into()),
            ("samples".into(), "count".into())
        ]
    );
    assert_eq!(decoded.default_type, "energy");
    let energy = decoded.branches();
    assert_same_energy(&all, &energy);
    let samples: i64 = energy.values().map(|(_, n)| n).sum();
    let sign_samples: i64 = energy
        .iter()
        .filter(|(branch, _)| branch.contains("DemoShop.sign"))
        .map(|(_, (_, n))| n)
        .sum();
    eprintln!("{samples} samples, {sign_samples} in DemoShop.sign");
    assert!(
        sign_samples > 0 && samples > sign_samples,
        "{samples} {sign_samples}"
    );
    for (branch, (joules, samples)) in &energy {
        assert!(
            *joules <= 0.0 || *samples > 0,
            "{branch}: {joules} J without samples"
        );
    }

    // speedscope reads it: its table gives the methods' total energy of the CSV files.
    let artifacts = artifacts();
    let args = [recording.pprof.as_os_str(), artifacts.as_os_str()];
    let seen: serde_json::Value =
        serde_json::from_slice(&browser("speedscope.mjs", &args)).expect("speedscope's JSON");
    assert_eq!(seen["errors"].as_array().map(Vec::len), Some(0), "{seen}");
    for (method, part) in [
        ("DemoShop.serve", "DemoShop.serve"),
        ("DemoShop.sign", "DemoShop.sign"),
    ] {
        let shown = seen["functions"]
            .as_array()
            .expect("speedscope's functions")
            .iter()
            .find(|f| f["name"] == method)
            .and_then(|f| f["total"].as_f64())
            .unwrap_or_else(|| panic!("speedscope lists no {method}: {seen}"));
        let joules = joules_of(&all, part);
        eprintln!("speedscope: {method} {shown} nJ, CSV {joules:.9} J");
        assert!(
            (shown / 1e9 - joules).abs() < 1e-6,
            "{method}: {shown} nJ vs {joules} J"
        );
    }

    // report's, from the CSV files: energy only, the all file or the app file
    for (file, csv, app_flag) in [
        ("report.pb.gz", &all, false),
        ("report-app.pb.gz", &app, true),
    ] {
        let path = work_dir().join("demo").join(file);
        let mut args = vec!["report", &results, "--pprof"];
        let path_text = path.display().to_string();
        args.push(&path_text);
        if app_flag {
            args.push("--app");
        }
        assert!(run(&mut profiler(&args)).status.success());
        let decoded = decode(&path);
        assert_eq!(
            decoded.sample_types,
            [("energy".into(), "nanojoules".into())]
        );
        assert_same_energy(csv, &decoded.branches());
    }
}

/// `go tool pprof -symbolize=none ARGS FILE` (Debian's golang-go), offline: its home, caches
/// and saved profiles in a folder of their own, no module proxy. What it printed.
fn go_pprof(args: &[&str], file: &Path) -> String {
    assert!(
        Path::new("/usr/bin/go").is_file(),
        "go is missing: run scripts/setup.sh (golang-go)"
    );
    let home = tempfile::tempdir().expect("a home for go");
    let output = Command::new("/usr/bin/go")
        .args(["tool", "pprof", "-symbolize=none"])
        .args(args)
        .arg(file)
        .env("HOME", home.path())
        .env("GOCACHE", home.path().join("cache"))
        .env("GOPATH", home.path().join("go"))
        .env("PPROF_TMPDIR", home.path().join("pprof"))
        .env("GOPROXY", "off")
        .stdin(Stdio::null())
        .output()
        .expect("go runs");
    assert!(
        output.status.success(),
        "go tool pprof {args:?} {} failed: {}",
        file.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    stdout(&output)
}

/// The energy of the samples `go tool pprof -raw` printed, in joules.
fn raw_samples_joules(raw: &str) -> f64 {
    let samples = raw
        .split_once("Samples:\n")
        .and_then(|(_, rest)| rest.split_once("Locations"))
        .unwrap_or_else(|| panic!("no samples in\n{raw}"))
        .0;
    let nanojoules: i64 = samples
        .lines()
        .filter_map(|line| line.trim().split_once(": "))
        .map(|(value, _)| value.parse::<i64>().expect("a sample's nanojoules"))
        .sum();
    nanojoules as f64 / 1e9
}

/// The total `go tool pprof -top` printed (`Total samples = 123nanojoules`), in joules, and
/// the function of its first row, the most energy of its own.
fn top_total_and_first(top: &str) -> (f64, String) {
    let total = top
        .split_once("Total samples = ")
        .and_then(|(_, rest)| rest.split_once("nanojoules"))
        .and_then(|(total, _)| total.parse::<i64>().ok())
        .unwrap_or_else(|| panic!("no total in\n{top}"));
    let first = top
        .lines()
        .skip_while(|line| !line.trim_start().starts_with("flat  flat%"))
        .nth(1)
        .unwrap_or_else(|| panic!("no rows in\n{top}"));
    let function = first
        .split_whitespace()
        .skip(5)
        .collect::<Vec<_>>()
        .join(" ");
    (total as f64 / 1e9, function)
}

/// The method with the most energy of its own (the newest frame of its branches) in `csv`.
fn hottest_method(csv: &HashMap<String, f64>) -> (String, f64) {
    let mut own: HashMap<&str, f64> = HashMap::new();
    for (branch, joules) in csv {
        *own.entry(branch.rsplit(';').next().unwrap()).or_default() += joules;
    }
    own.into_iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(method, joules)| (method.to_string(), joules))
        .expect("branches")
}

#[test]
fn go_tool_pprof_reads_the_pprof_files() {
    let _serial = serial();
    let recording = demo_recording();
    let results = recording.results.display().to_string();
    for (file, csv, app) in [
        ("go-all.pb.gz", "methods-power-all.csv", false),
        ("go-app.pb.gz", "methods-power-app.csv", true),
    ] {
        let csv = csv_energy(&recording.results.join(csv));
        let csv_total: f64 = csv.values().sum();
        let (hottest, hottest_joules) = hottest_method(&csv);
        let path = work_dir().join("demo").join(file);
        let path_text = path.display().to_string();
        let mut args = vec!["report", &results, "--pprof", &path_text];
        if app {
            args.push("--app");
        }
        assert!(run(&mut profiler(&args)).status.success());
        let raw = raw_samples_joules(&go_pprof(&["-raw"], &path));
        let top = go_pprof(&["-top", "-sample_index=energy"], &path);
        eprintln!("{top}");
        let (total, first) = top_total_and_first(&top);
        eprintln!(
            "{file}: CSV {csv_total:.9} J, go tool pprof -raw {raw:.9} J, -top {total:.9} J; \
             hottest {hottest} ({hottest_joules:.3} J), pprof's first {first}"
        );
        // Each branch is rounded to the nanojoule once: the rows' 9 decimals.
        let rounding = 1e-9 * csv.len() as f64;
        assert!((raw - csv_total).abs() <= rounding, "{raw} vs {csv_total}");
        assert!(
            (total - csv_total).abs() <= rounding,
            "{total} vs {csv_total}"
        );
        assert_eq!(first, hottest, "{top}");
        if app {
            // The app file gives each application method the JDK code it calls: signing is
            // the demo's heaviest step.
            assert_eq!(first, "DemoShop.sign", "{top}");
        }
    }
}
