//! The pprof files of `record` and `report`, decoded against pprof's published `profile.proto`:
//! the same energy as the CSV files.

use joularcode_testkit::pprof::decode;

use super::*;

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
