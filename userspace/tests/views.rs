//! End-to-end tests of what people look at: the energy flame graph opened in Debian's chromium
//! (driven by playwright-core), the pprof files decoded against pprof's published
//! `profile.proto`, the comparison of two recordings of a method made twice as cheap, and `top`
//! under tmux with two JVMs. They run the binary as a user would, as root (the BPF sampler),
//! with the tools scripts/setup.sh installs, and fail loudly without them.
//!
//! The screenshots they take are kept in `target/test-artifacts/`.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use joularcode_testkit::{agent_library, jdk, repo_root, target_dir, workload_classes, Jvm};
use protobuf::reflect::{FileDescriptor, ReflectValueRef};
use protobuf::Message as _;

/// The tests measure energy shares: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    assert!(
        // SAFETY: geteuid only reads this process's user id.
        unsafe { libc::geteuid() } == 0,
        "the views tests load the BPF sampler: run them as root"
    );
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The folder of this file's test outputs, emptied once per test process and kept afterwards.
fn work_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = target_dir().join("views-tests");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the tests' folder");
        std::fs::write(dir.join("watts"), "100\n").expect("the watts file");
        dir
    })
}

/// Where the screenshots are kept.
fn artifacts() -> PathBuf {
    let dir = target_dir().join("test-artifacts");
    std::fs::create_dir_all(&dir).expect("the artifacts folder");
    dir
}

/// `joularcode-bpf ARGS`.
fn profiler(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_joularcode-bpf"));
    command.args(args).stdin(Stdio::null());
    command
}

/// The `vm` power source reading a constant 100 W, and the symbolizer agent.
fn vm_source() -> Vec<String> {
    let watts = work_dir().join("watts");
    vec![
        "--power-source-type".into(),
        "vm".into(),
        "--vm-power-format".into(),
        "watts".into(),
        "--vm-power-file".into(),
        watts.display().to_string(),
        "--agent-path".into(),
        agent_library().display().to_string(),
    ]
}

fn run(command: &mut Command) -> Output {
    let output = command.output().expect("run joularcode-bpf");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    output
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Energy per branch of a Joular CSV file, read with the csv crate.
fn csv_energy(file: &Path) -> HashMap<String, f64> {
    let mut reader = csv::Reader::from_path(file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    let mut energy = HashMap::new();
    for record in reader.records() {
        let record = record.expect("a CSV record");
        *energy.entry(record[1].to_string()).or_insert(0.0) +=
            record[3].parse::<f64>().expect("joules");
    }
    energy
}

/// The joules of the branches whose name contains `part`.
fn joules_of(energy: &HashMap<String, f64>, part: &str) -> f64 {
    energy
        .iter()
        .filter(|(branch, _)| branch.contains(part))
        .map(|(_, joules)| joules)
        .sum()
}

/// One recording of the demo shop, with its flame graph and pprof file written by `record`.
struct Recording {
    results: PathBuf,
    svg: PathBuf,
    pprof: PathBuf,
    pid: u32,
}

/// The demo shop recorded once for the tests that look at its outputs: 6 s, from its first
/// instant, its own frames as the application's.
fn demo_recording() -> &'static Recording {
    static RECORDING: OnceLock<Recording> = OnceLock::new();
    RECORDING.get_or_init(|| {
        let dir = work_dir().join("demo");
        std::fs::create_dir_all(&dir).expect("the demo's folder");
        let recording = Recording {
            results: dir.join("results"),
            svg: dir.join("record.svg"),
            pprof: dir.join("record.pb.gz"),
            pid: 0,
        };
        let java = jdk(17).java();
        let classes = workload_classes();
        let mut args: Vec<String> = vec!["record".into()];
        args.extend(vm_source());
        for (option, value) in [
            ("--results-path", &recording.results),
            ("--flamegraph", &recording.svg),
            ("--pprof", &recording.pprof),
        ] {
            args.push(option.into());
            args.push(value.display().to_string());
        }
        args.extend(
            [
                "--methods-filtering-prefix",
                "DemoShop",
                "--",
                &java.display().to_string(),
                "-cp",
                &classes.display().to_string(),
                "DemoShop",
                "6",
            ]
            .map(String::from),
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = run(&mut profiler(&args));
        assert!(output.status.success(), "record failed");
        let pid = stdout(&output)
            .lines()
            .find_map(|line| line.strip_prefix("READY "))
            .and_then(|pid| pid.trim().parse().ok())
            .expect("DemoShop printed its pid");
        Recording { pid, ..recording }
    })
}

/// Runs `node testkit/browser/SCRIPT ARGS` (playwright-core driving Debian's chromium) and returns
/// what it printed.
fn browser(script: &str, args: &[&std::ffi::OsStr]) -> Vec<u8> {
    assert!(
        repo_root()
            .join("testkit/browser/node_modules/playwright-core")
            .is_dir(),
        "playwright-core is missing: run scripts/setup.sh"
    );
    assert!(
        Path::new("/usr/bin/chromium").is_file(),
        "chromium is missing: run scripts/setup.sh"
    );
    let output = Command::new("node")
        .arg(repo_root().join("testkit/browser").join(script))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("node runs (scripts/setup.sh installs it)");
    assert!(
        output.status.success(),
        "{script} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// What the browser saw of a flame graph (testkit/browser/flamegraph.mjs), its screenshots in
/// the artifacts' folder.
fn open_in_browser(svg: &Path, click: &str, search: &str) -> serde_json::Value {
    let artifacts = artifacts();
    let args = [
        svg.as_os_str(),
        artifacts.as_os_str(),
        click.as_ref(),
        search.as_ref(),
    ];
    serde_json::from_slice(&browser("flamegraph.mjs", &args)).expect("the browser's JSON")
}

/// The joules a frame's tooltip gives: `DemoShop.sign (12.345 J, 67.89%)`.
fn tooltip_joules(title: &str) -> f64 {
    let (_, numbers) = title.rsplit_once(" (").expect("a tooltip with numbers");
    numbers
        .split_once(" J,")
        .expect("joules in the tooltip")
        .0
        .parse()
        .expect("a number of joules")
}

#[test]
fn the_energy_flame_graph_in_a_browser() {
    let _serial = serial();
    let recording = demo_recording();
    let all = csv_energy(&recording.results.join("methods-power-all.csv"));
    let total: f64 = all.values().sum();
    let serve = joules_of(&all, "DemoShop.serve");
    let sign = joules_of(&all, "DemoShop.serve;DemoShop.sign");
    let sort = joules_of(&all, "sortTotals");
    eprintln!("CSV: {total:.3} J, serve {serve:.3} J, sign {sign:.3} J, sortTotals {sort:.3} J");

    let seen = open_in_browser(&recording.svg, "DemoShop.sign", "sortTotals");
    assert_eq!(seen["errors"].as_array().map(Vec::len), Some(0), "{seen}");
    let title = seen["title"].as_str().expect("a title");
    let titled = title
        .strip_prefix(&format!("Energy of JVM {} (DemoShop): ", recording.pid))
        .and_then(|rest| rest.split_once(" J in "))
        .and_then(|(joules, _)| joules.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("{title}"));
    assert!(
        (titled - total).abs() < 0.002,
        "{title}: the CSV files say {total} J"
    );
    let graph_width = seen["graphWidth"].as_f64().expect("the graph's width");
    let frames = seen["frames"].as_array().expect("frames");
    assert!(frames.len() > 20 && graph_width > 1000.0, "{seen}");
    let frame = |name: &str| {
        frames
            .iter()
            .filter(|f| {
                f["title"]
                    .as_str()
                    .is_some_and(|t| t.starts_with(&format!("{name} (")))
            })
            .max_by(|a, b| {
                a["width"]
                    .as_f64()
                    .unwrap()
                    .total_cmp(&b["width"].as_f64().unwrap())
            })
            .unwrap_or_else(|| panic!("no frame {name}"))
    };
    let widest = frames
        .iter()
        .max_by(|a, b| {
            a["width"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["width"].as_f64().unwrap())
        })
        .unwrap();
    assert!(widest["title"].as_str().unwrap().starts_with("all ("));
    // The demo's heaviest step is signing: the widest of the four steps.
    let steps = [
        "DemoShop.sign",
        "DemoShop.sortTotals",
        "DemoShop.price",
        "DemoShop.receiveOrders",
    ];
    let heaviest = steps
        .iter()
        .max_by(|a, b| {
            frame(a)["width"]
                .as_f64()
                .unwrap()
                .total_cmp(&frame(b)["width"].as_f64().unwrap())
        })
        .unwrap();
    assert_eq!(*heaviest, "DemoShop.sign");
    for (name, joules) in [("DemoShop.serve", serve), ("DemoShop.sign", sign)] {
        let frame = frame(name);
        let shown = tooltip_joules(frame["title"].as_str().unwrap());
        assert!(
            (shown - joules).abs() < 0.002,
            "{name}: {shown} J shown, {joules} J in the CSV"
        );
        let width = frame["width"].as_f64().unwrap() / graph_width;
        assert!(
            (width - joules / total).abs() < 0.003,
            "{name}: {width} of the width"
        );
    }
    // A click zooms into the frame: it spans the graph, its neighbours hide.
    let zoom = &seen["zoom"];
    assert!(
        zoom["before"].as_f64().unwrap() < graph_width * 0.95,
        "{zoom}"
    );
    assert!(
        (zoom["after"].as_f64().unwrap() - graph_width).abs() < 1.0,
        "{zoom}"
    );
    assert_eq!(zoom["resetShown"], true);
    assert!(zoom["hidden"].as_u64().unwrap() > 0, "{zoom}");
    // A search highlights the frames of the method, and says their share.
    let search = &seen["search"];
    let highlighted = search["highlighted"].as_array().unwrap();
    assert!(!highlighted.is_empty(), "{search}");
    assert!(
        highlighted
            .iter()
            .all(|t| t.as_str().unwrap().contains("sortTotals")),
        "{search}"
    );
    assert_eq!(search["searchColor"], "rgb(230,0,230)");
    let matched: f64 = search["matched"]
        .as_str()
        .and_then(|m| m.strip_prefix("Matched: "))
        .and_then(|m| m.strip_suffix('%'))
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("{search}"));
    assert!(
        (matched - 100.0 * sort / total).abs() < 0.15,
        "{matched}% matched"
    );
    for shot in [
        "flamegraph.png",
        "flamegraph-zoom.png",
        "flamegraph-search.png",
    ] {
        assert!(
            std::fs::metadata(artifacts().join(shot)).unwrap().len() > 10_000,
            "{shot}"
        );
    }

    // report draws the same graph from the CSV files, ours or Joular Code for Java's.
    let svg = work_dir().join("demo/report.svg");
    let output = run(&mut profiler(&[
        "report",
        &recording.results.display().to_string(),
        "--flamegraph",
        &svg.display().to_string(),
    ]));
    assert!(output.status.success());
    let text = std::fs::read_to_string(&svg).expect("report's flame graph");
    assert!(text.contains(&format!("Energy of {}: ", recording.results.display())));
    let serve_title = text
        .split("<title>")
        .find(|t| t.starts_with("DemoShop.serve ("))
        .and_then(|t| t.split_once("</title>"))
        .expect("a frame for serve")
        .0;
    assert!(
        (tooltip_joules(serve_title) - serve).abs() < 0.002,
        "{serve_title}: {serve} J"
    );
}

/// A pprof profile as pprof's published `profile.proto` reads it.
struct Decoded {
    sample_types: Vec<(String, String)>,
    default_type: String,
    /// Each sample's stack, oldest frame first, and its values.
    samples: Vec<(String, Vec<i64>)>,
}

/// Decodes the gzipped pprof file at `path` with protoc (which must accept it) and with the
/// protobuf crate's reflection over the descriptors protoc compiled from `profile.proto`.
fn decode(path: &Path) -> Decoded {
    let proto = std::env::var_os("JOULAR_PROFILE_PROTO")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from("/usr/share/gocode/src/github.com/google/pprof/proto/profile.proto")
        });
    assert!(
        proto.is_file(),
        "no profile.proto at {}: run scripts/setup.sh (golang-github-google-pprof-dev)",
        proto.display()
    );
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).expect("the pprof file"))
        .read_to_end(&mut bytes)
        .expect("a gzip file");
    let raw = path.with_extension("raw");
    std::fs::write(&raw, &bytes).expect("the raw profile");
    let (include, name) = (proto.parent().unwrap(), proto.file_name().unwrap());
    let decoded = Command::new("protoc")
        .arg("-I")
        .arg(include)
        .arg("--decode=perftools.profiles.Profile")
        .arg(name)
        .stdin(std::fs::File::open(&raw).unwrap())
        .output()
        .expect("protoc runs (scripts/setup.sh installs protobuf-compiler)");
    assert!(
        decoded.status.success(),
        "protoc cannot decode {}: {}",
        path.display(),
        String::from_utf8_lossy(&decoded.stderr)
    );
    let descriptors = path.with_extension("desc");
    let status = Command::new("protoc")
        .arg("-I")
        .arg(include)
        .arg("-o")
        .arg(&descriptors)
        .arg(name)
        .status()
        .expect("protoc runs");
    assert!(
        status.success(),
        "protoc cannot compile {}",
        proto.display()
    );
    let set = protobuf::descriptor::FileDescriptorSet::parse_from_bytes(
        &std::fs::read(&descriptors).unwrap(),
    )
    .expect("a descriptor set");
    let file = FileDescriptor::new_dynamic(set.file[0].clone(), &[]).expect("profile.proto");
    let profile = file
        .message_by_package_relative_name("Profile")
        .expect("the Profile message");
    let message = profile.parse_from_bytes(&bytes).expect("a Profile");
    let field = |descriptor: &protobuf::reflect::MessageDescriptor, name: &str| {
        descriptor
            .field_by_name(name)
            .unwrap_or_else(|| panic!("no field {name}"))
    };
    let int = |value: ReflectValueRef| value.to_i64().or(value.to_u64().map(|v| v as i64)).unwrap();
    let strings: Vec<String> = field(&profile, "string_table")
        .get_repeated(&*message)
        .into_iter()
        .map(|s| s.to_str().unwrap().to_string())
        .collect();
    let string = |index: i64| strings[usize::try_from(index).unwrap()].clone();
    let sub = |name: &str| file.message_by_package_relative_name(name).unwrap();
    let (value_type, sample, location, line, function) = (
        sub("ValueType"),
        sub("Sample"),
        sub("Location"),
        sub("Line"),
        sub("Function"),
    );
    let sample_types = field(&profile, "sample_type")
        .get_repeated(&*message)
        .into_iter()
        .map(|t| {
            let t = t.to_message().unwrap();
            (
                string(int(
                    field(&value_type, "type").get_singular_field_or_default(&*t)
                )),
                string(int(
                    field(&value_type, "unit").get_singular_field_or_default(&*t)
                )),
            )
        })
        .collect();
    let functions: HashMap<i64, String> = field(&profile, "function")
        .get_repeated(&*message)
        .into_iter()
        .map(|f| {
            let f = f.to_message().unwrap();
            (
                int(field(&function, "id").get_singular_field_or_default(&*f)),
                string(int(
                    field(&function, "name").get_singular_field_or_default(&*f)
                )),
            )
        })
        .collect();
    let locations: HashMap<i64, String> = field(&profile, "location")
        .get_repeated(&*message)
        .into_iter()
        .map(|l| {
            let l = l.to_message().unwrap();
            let lines = field(&location, "line").get_repeated(&*l);
            assert_eq!(lines.len(), 1, "one function per location");
            let first = lines.get(0).to_message().unwrap();
            let id = int(field(&line, "function_id").get_singular_field_or_default(&*first));
            (
                int(field(&location, "id").get_singular_field_or_default(&*l)),
                functions[&id].clone(),
            )
        })
        .collect();
    let samples = field(&profile, "sample")
        .get_repeated(&*message)
        .into_iter()
        .map(|s| {
            let s = s.to_message().unwrap();
            let mut frames: Vec<String> = field(&sample, "location_id")
                .get_repeated(&*s)
                .into_iter()
                .map(|id| locations[&int(id)].clone())
                .collect();
            frames.reverse();
            let values = field(&sample, "value")
                .get_repeated(&*s)
                .into_iter()
                .map(int)
                .collect();
            (frames.join(";"), values)
        })
        .collect();
    Decoded {
        sample_types,
        default_type: string(int(
            field(&profile, "default_sample_type").get_singular_field_or_default(&*message)
        )),
        samples,
    }
}

/// The energy of each branch of a decoded profile, in joules, and its samples.
fn decoded_energy(decoded: &Decoded) -> HashMap<String, (f64, i64)> {
    let mut energy = HashMap::new();
    for (branch, values) in &decoded.samples {
        let entry = energy.entry(branch.clone()).or_insert((0.0, 0));
        entry.0 += values[0] as f64 / 1e9;
        entry.1 += values.get(1).copied().unwrap_or(0);
    }
    energy
}

/// Every branch of `csv` has the same energy in `pprof`, and the totals match, within the
/// rounding of the CSV rows (9 decimals) and of the nanojoules.
fn assert_same_energy(csv: &HashMap<String, f64>, pprof: &HashMap<String, (f64, i64)>) {
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
    let energy = decoded_energy(&decoded);
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
        assert_same_energy(csv, &decoded_energy(&decoded));
    }
}

/// `record` of the EnergyHalved JVM `pid` for `seconds` into `results`, with an estimate of the
/// power that grows with the CPU time and nothing else (no idle power), so that a method's energy
/// follows its CPU time whatever else the machine runs.
fn record_halved(pid: u32, seconds: &str, results: &Path) -> Command {
    profiler(&[
        "record",
        "--pid",
        &pid.to_string(),
        "--duration",
        seconds,
        "--power-source-type",
        "estimate",
        "--estimate-idle-watts-per-cpu",
        "0",
        "--estimate-max-watts-per-cpu",
        "10",
        // 1000 Hz: enough samples of the light workload that a method's share varies by a few
        // percent only
        "--stack-monitoring-sample-rate",
        "1",
        "--methods-filtering-prefix",
        "EnergyHalved",
        "--results-path",
        &results.display().to_string(),
        "--agent-path",
        &agent_library().display().to_string(),
    ])
}

/// Records the EnergyHalved workload with hot at twice cold's cost for 16 s into `before`, and at
/// cold's cost for 12 s into `after`, both JVMs running at once: on a shared machine the CPU time
/// of the same work drifts by a quarter between runs a minute apart, and both runs see the same
/// drift this way. The workload needs a tenth of a CPU, so that it keeps its pace on a machine
/// loaded by others.
fn record_before_and_after(before: &Path, after: &Path) {
    let start = |hot_cost| Jvm::start(&jdk(17), &[], "EnergyHalved", &[hot_cost]);
    let (jvm_before, jvm_after) = (start("2"), start("1"));
    let spawn = |mut command: Command| {
        command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run joularcode-bpf")
    };
    let recording_before = spawn(record_halved(jvm_before.pid(), "16", before));
    std::thread::sleep(Duration::from_secs(2));
    let recording_after = spawn(record_halved(jvm_after.pid(), "12", after));
    for recording in [recording_before, recording_after] {
        let output = recording.wait_with_output().expect("wait for record");
        eprintln!("{}", String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "record failed");
    }
}

/// The change in percent of a method in the comparison's table.
fn change_of(table: &str, method: &str) -> f64 {
    let line = table
        .lines()
        .find(|line| line.ends_with(&format!("  {method}")))
        .unwrap_or_else(|| panic!("no line for {method} in\n{table}"));
    let fields: Vec<&str> = line.split_whitespace().collect();
    fields[5]
        .strip_suffix('%')
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no change in {line}"))
}

#[test]
fn the_comparison_sees_a_method_made_twice_as_cheap() {
    let _serial = serial();
    let dir = work_dir().join("halved");
    let (before, after) = (dir.join("before"), dir.join("after"));
    // Runs of different lengths: the comparison is per second of run.
    record_before_and_after(&before, &after);
    let (before, after) = (before.display().to_string(), after.display().to_string());
    let diff = dir.join("diff.svg").display().to_string();
    let output = run(&mut profiler(&[
        "report",
        &before,
        "--baseline",
        &after,
        "--fail-above",
        "25",
        "--flamegraph",
        &diff,
        "--app",
    ]));
    let table = stdout(&output);
    eprintln!("{table}");
    assert_eq!(output.status.code(), Some(0), "no regression: {table}");
    let hot = change_of(&table, "EnergyHalved.hot");
    let cold = change_of(&table, "EnergyHalved.cold");
    eprintln!("hot {hot:+.1}%, cold {cold:+.1}% per second of run");
    assert!((-65.0..=-35.0).contains(&hot), "hot changed by {hot}%");
    assert!(cold.abs() <= 20.0, "cold changed by {cold}%");
    // The worker's lambda class has another address in each JVM, and its branches match all
    // the same.
    let lambda_names = |results: &str| -> Vec<String> {
        csv_energy(&Path::new(results).join("methods-power-app.csv"))
            .into_keys()
            .filter(|branch| branch.contains("$$Lambda"))
            .collect()
    };
    let (names_before, names_after) = (lambda_names(&before), lambda_names(&after));
    assert!(!names_before.is_empty(), "no lambda branch");
    assert!(
        names_before.iter().all(|name| !names_after.contains(name)),
        "the lambda's address was the same in both runs: {names_before:?}"
    );
    let lambda_branch = table
        .lines()
        .find(|line| line.contains("$$Lambda.run;") && line.ends_with("EnergyHalved.hot"))
        .unwrap_or_else(|| panic!("no masked lambda branch in\n{table}"));
    assert!(lambda_branch.contains('%'), "{lambda_branch}");
    // The differential flame graph shows hot in blue (shrank), with its drop in J/s.
    let svg = std::fs::read_to_string(&diff).expect("the differential flame graph");
    let hot_frame = svg
        .split("<g>")
        .find(|g| g.contains("<title>EnergyHalved.hot ("))
        .expect("a frame for hot");
    assert!(hot_frame.contains("own change -"), "{hot_frame}");
    let fill = hot_frame
        .split("fill=\"rgb(")
        .nth(1)
        .expect("a fill")
        .split(')')
        .next()
        .unwrap();
    let rgb: Vec<u32> = fill.split(',').map(|c| c.parse().unwrap()).collect();
    assert!(rgb[2] > rgb[0], "hot is blue: rgb({fill})");

    // Swapped, the same runs are a regression of hot: the gate fails with status 3.
    let output = run(&mut profiler(&[
        "report",
        &after,
        "--baseline",
        &before,
        "--fail-above",
        "25",
    ]));
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(3), "{text}");
    assert!(
        text.contains("energy regression: method EnergyHalved.hot grew"),
        "{text}"
    );
    assert!(!text.contains("method EnergyHalved.cold grew"), "{text}");
}

/// A tmux session of its own, running bash, killed when dropped.
struct Tmux {
    name: String,
}

impl Tmux {
    fn new(name: &str) -> Tmux {
        let tmux = Tmux {
            name: format!("{name}-{}", std::process::id()),
        };
        let status = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                &tmux.name,
                "-x",
                "132",
                "-y",
                "34",
            ])
            .args(["bash", "--norc", "--noprofile"])
            .status()
            .expect("tmux runs (scripts/setup.sh installs it)");
        assert!(status.success(), "tmux new-session failed");
        tmux
    }

    fn tmux(&self, args: &[&str]) -> String {
        let output = Command::new("tmux").args(args).output().expect("tmux runs");
        assert!(output.status.success(), "tmux {args:?}");
        stdout(&output)
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", &self.name];
        args.extend(keys);
        self.tmux(&args);
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", &self.name])
    }

    fn display(&self, format: &str) -> String {
        self.tmux(&["display", "-p", "-t", &self.name, format])
            .trim()
            .to_string()
    }

    /// Waits until the screen satisfies `ready`, and returns it.
    fn wait_for(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if ready(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no {what} in 60 s:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The pid of the program the shell runs in the foreground.
    fn foreground_child(&self) -> u32 {
        let shell = self.display("#{pane_pid}");
        let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
            .expect("the shell's children");
        children
            .split_whitespace()
            .next()
            .expect("a child")
            .parse()
            .expect("a pid")
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.name])
            .status();
    }
}

/// The JVM rows of `top`'s screen: pid and watts.
fn top_rows(screen: &str) -> HashMap<u32, f64> {
    screen
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line
                .trim_matches(|c| c == '│' || c == ' ')
                .split_whitespace()
                .collect();
            match fields[..] {
                [pid, watts, share, _, _, ..] if share.ends_with('%') => {
                    Some((pid.parse().ok()?, watts.parse().ok()?))
                }
                _ => None,
            }
        })
        .collect()
}

/// The cycle `top`'s header says.
fn top_cycle(screen: &str) -> Option<u64> {
    let after = screen.split_once("| cycle ")?.1;
    after.split(':').next()?.parse().ok()
}

/// The exit status the shell printed after `top`: `TOP-EXIT=0` (the typed command line holds
/// `TOP-EXIT=$status`).
/// The exit status the shell printed after the run named `stop` (see `run_line`). The typed line
/// holds the marker too, followed by `$status`, which is no number: a screen still showing an
/// earlier run, or the line typed but not yet run, gives `None`.
fn exit_status(screen: &str, stop: &str) -> Option<i32> {
    screen
        .split(&exit_marker(stop))
        .skip(1)
        .find_map(|rest| rest.split_whitespace().next()?.parse().ok())
}

/// What the shell prints before the exit status of the run named `stop`.
fn exit_marker(stop: &str) -> String {
    format!("TOP-EXIT[{}]=", stop.replace(' ', "-"))
}

/// The terminal is as before `top` ran: the main screen, the cursor shown, the same stty modes.
fn assert_restored(tmux: &Tmux, stop: &str, before: &Path, after: &Path) {
    tmux.wait_for("the shell back", |screen| {
        exit_status(screen, stop).is_some()
    });
    assert_eq!(
        tmux.display("#{alternate_on}"),
        "0",
        "left the alternate screen"
    );
    assert_eq!(tmux.display("#{cursor_flag}"), "1", "the cursor shows");
    assert_eq!(
        std::fs::read_to_string(before).unwrap(),
        std::fs::read_to_string(after).unwrap(),
        "the terminal's modes are back"
    );
}

/// The screen with its colors, as an HTML page (aha) and a PNG (chromium).
fn save_screen(tmux: &Tmux, name: &str) {
    let ansi = tmux.tmux(&["capture-pane", "-e", "-p", "-t", &tmux.name]);
    let html_path = artifacts().join(format!("{name}.html"));
    let mut aha = Command::new("aha")
        .args(["--black", "--title", "joularcode-bpf top"])
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&html_path).unwrap())
        .spawn()
        .expect("aha runs (scripts/setup.sh installs it)");
    std::io::Write::write_all(&mut aha.stdin.take().unwrap(), ansi.as_bytes()).unwrap();
    assert!(aha.wait().unwrap().success());
    let png = artifacts().join(format!("{name}.png"));
    let args = [
        html_path.as_os_str(),
        png.as_os_str(),
        "980".as_ref(),
        "370".as_ref(),
    ];
    browser("screenshot.mjs", &args);
}

#[test]
fn top_under_tmux_shows_two_jvms_and_gives_the_terminal_back() {
    let _serial = serial();
    let busy = Jvm::start(&jdk(17), &[], "RecordBusy", &["1", "1000000", "60"]);
    let demo = Jvm::start(&jdk(21), &[], "DemoShop", &["600"]);
    let dir = work_dir().join("top");
    std::fs::create_dir_all(&dir).unwrap();
    let mut command = vec![
        env!("CARGO_BIN_EXE_joularcode-bpf").to_string(),
        "top".into(),
    ];
    for pid in [busy.pid(), demo.pid()] {
        command.extend(["--pid".to_string(), pid.to_string()]);
    }
    command.extend(vm_source());
    command.extend([
        "--methods-filtering-prefix".into(),
        "DemoShop,Record".into(),
    ]);
    let command = command.join(" ");
    let tmux = Tmux::new("views-top");
    let (before, after) = (dir.join("stty.before"), dir.join("stty.after"));
    let run_line = |stop: &str, command: &str| {
        format!(
            "clear; echo '# {stop}'; stty -g > {}; {command}; status=$?; stty -g > {}; \
             echo '{}'$status",
            before.display(),
            after.display(),
            exit_marker(stop)
        )
    };
    let line = |stop: &str| run_line(stop, &command);

    // q: both JVMs are there with their power within three cycles; the keys move the view.
    tmux.keys(&[&line("quit with q"), "Enter"]);
    let screen = tmux.wait_for("both JVMs with power", |screen| {
        let rows = top_rows(screen);
        [busy.pid(), demo.pid()]
            .iter()
            .all(|pid| rows.get(pid).is_some_and(|&w| w > 0.0))
    });
    let cycle = top_cycle(&screen).expect("a cycle in the header");
    eprintln!("{screen}");
    assert!(cycle <= 3, "both JVMs had power only at cycle {cycle}");
    let selected = |screen: &str| -> u32 {
        let title = screen
            .lines()
            .find(|l| l.contains(" of JVM "))
            .expect("the list's title");
        title
            .split(" of JVM ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let first = selected(&screen);
    tmux.keys(&["Down"]);
    let screen = tmux.wait_for("the other JVM selected", |s| selected(s) != first);
    let second = selected(&screen);
    assert!([busy.pid(), demo.pid()].contains(&second) && second != first);
    tmux.keys(&["Up"]);
    tmux.wait_for("the first JVM again", |s| selected(s) == first);
    tmux.keys(&["b"]);
    tmux.wait_for("branches", |s| s.contains("Branches of JVM"));
    tmux.keys(&["s"]);
    tmux.wait_for("the order by energy", |s| s.contains("by J since start"));
    tmux.keys(&["a"]);
    tmux.wait_for("the application's branches", |s| {
        s.contains("application branches")
    });
    tmux.keys(&["m", "s", "s"]);
    for key in ["Down", "Up"] {
        let screen = tmux.wait_for("the application's methods by W", |s| {
            s.contains("application branches, by W now")
        });
        if selected(&screen) == demo.pid() {
            break;
        }
        tmux.keys(&[key]);
        std::thread::sleep(Duration::from_millis(300));
    }
    let screen = tmux.wait_for("the demo's methods", |s| {
        s.contains(&format!(
            "Methods of JVM {} (DemoShop), application branches, by W now",
            demo.pid()
        )) && s.contains("DemoShop.sign")
            && top_cycle(s).is_some_and(|c| c >= cycle + 3)
    });
    eprintln!("{screen}");
    save_screen(&tmux, "top");
    tmux.keys(&["q"]);
    assert_restored(&tmux, "quit with q", &before, &after);
    assert_eq!(
        exit_status(&tmux.screen(), "quit with q"),
        Some(0),
        "{}",
        tmux.screen()
    );
    assert!(
        tmux.screen().contains("# quit with q"),
        "the main screen is back as it was"
    );

    // Ctrl-C, a key in raw mode, ends it as q does.
    tmux.keys(&[&line("quit with Ctrl-C"), "Enter"]);
    tmux.wait_for("a cycle", |s| top_cycle(s).is_some());
    tmux.keys(&["C-c"]);
    assert_restored(&tmux, "quit with Ctrl-C", &before, &after);
    assert_eq!(
        exit_status(&tmux.screen(), "quit with Ctrl-C"),
        Some(0),
        "{}",
        tmux.screen()
    );

    // SIGTERM ends the recording, which ends the view.
    tmux.keys(&[&line("quit with SIGTERM"), "Enter"]);
    tmux.wait_for("a cycle", |s| top_cycle(s).is_some());
    let top = tmux.foreground_child();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(top).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM to top");
    assert_restored(&tmux, "quit with SIGTERM", &before, &after);
    assert_eq!(
        exit_status(&tmux.screen(), "quit with SIGTERM"),
        Some(0),
        "{}",
        tmux.screen()
    );

    // An error once the view has taken the terminal over: the terminal is given back before the
    // error's line is printed.
    let missing = dir.join("no-such-watts-file");
    let failing = format!(
        "{} top --power-source-type vm --vm-power-file {}",
        env!("CARGO_BIN_EXE_joularcode-bpf"),
        missing.display()
    );
    tmux.keys(&[&run_line("an error", &failing), "Enter"]);
    assert_restored(&tmux, "an error", &before, &after);
    let screen = tmux.screen();
    assert_eq!(exit_status(&screen, "an error"), Some(1), "{screen}");
    assert!(
        screen.contains("joularcode-bpf: Cannot measure the CPU power"),
        "{screen}"
    );
}

#[test]
fn top_prints_plain_text_when_not_on_a_terminal() {
    let _serial = serial();
    let jvm = Jvm::start(&jdk(17), &[], "RecordBusy", &["1"]);
    let mut args = vec!["top".to_string(), "--pid".into(), jvm.pid().to_string()];
    args.extend(vm_source());
    args.extend([
        "--duration".into(),
        "3.5".into(),
        "--top".into(),
        "3".into(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = run(&mut profiler(&args));
    assert!(output.status.success());
    let text = stdout(&output);
    eprintln!("{text}");
    assert!(
        !text.contains('\u{1b}'),
        "no terminal escapes in plain text"
    );
    let cycles = text
        .lines()
        .filter(|line| line.starts_with("cycle "))
        .count();
    assert!(cycles >= 3, "one block per cycle: {cycles}");
    assert!(
        text.contains(&format!("Methods of JVM {} (RecordBusy)", jvm.pid())),
        "{text}"
    );
    let last = text.rsplit("cycle ").next().unwrap();
    assert!(last.contains("RecordBusy.burn"), "{last}");
    let rows = top_rows(last);
    assert!(rows.get(&jvm.pid()).is_some_and(|&w| w > 0.0), "{last}");

    // Its reader gone (`top | head -1`), it ends by itself.
    let mut args = vec!["top".to_string(), "--pid".into(), jvm.pid().to_string()];
    args.extend(vm_source());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut top = profiler(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start top");
    let mut first = [0u8; 6];
    top.stdout
        .take()
        .expect("piped")
        .read_exact(&mut first)
        .expect("a first cycle");
    assert_eq!(&first, b"cycle ");
    let start = Instant::now();
    while top.try_wait().expect("top's status").is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "top runs on with nobody reading"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn an_output_path_that_is_a_link_is_refused_before_recording() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("precious");
    std::fs::write(&target, "keep").unwrap();
    let link = dir.path().join("flame.svg");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let output = run(&mut profiler(&[
        "record",
        "--all",
        "--flamegraph",
        &link.display().to_string(),
        "--results-path",
        &dir.path().join("results").display().to_string(),
    ]));
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--flamegraph") && stderr.contains("is a symbolic link"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    assert!(!dir.path().join("results").exists(), "nothing was recorded");
}
