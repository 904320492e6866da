//! The pprof files of `record` and `report`, decoded against pprof's published `profile.proto`:
//! the same energy as the CSV files.

use super::*;

/// A pprof profile as pprof's published `profile.proto` reads it.
pub(super) struct Decoded {
    sample_types: Vec<(String, String)>,
    default_type: String,
    /// Each sample's stack, oldest frame first, and its values.
    samples: Vec<(String, Vec<i64>)>,
}

/// Decodes the gzipped pprof file at `path` with protoc (which must accept it) and with the
/// protobuf crate's reflection over the descriptors protoc compiled from `profile.proto`.
pub(super) fn decode(path: &Path) -> Decoded {
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
pub(super) fn decoded_energy(decoded: &Decoded) -> HashMap<String, (f64, i64)> {
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
