//! Names as long and as unusual as the JVM allows (issue 19, cases 5 and 11): `record`'s files
//! and memory stay bounded, and names are shown as Java spells them, never merged.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use joularcode_core::branch::MAX_BRANCH_BYTES;
use joularcode_core::names::{method_name, MAX_FRAME_NAME_BYTES};
use joularcode_testkit::odd_names::{
    long_name, odd_names_class_path, LONG_NAME_DEPTH, LONG_NAME_METHODS, NUL_METHODS,
    SUPPLEMENTARY_CLASS, SUPPLEMENTARY_METHODS,
};
use joularcode_testkit::record_run::record_until;
use joularcode_testkit::results::rows;

use super::*;

/// `main_class` of the generated odd names run for `seconds` by JDK 17, with `jvm_args`.
fn odd_names_jvm(jvm_args: &[&str], main_class: &str, seconds: &str) -> Command {
    let mut command = Command::new(jdk(17).java());
    command
        .args(jvm_args)
        .arg("-cp")
        .arg(odd_names_class_path())
        .args([main_class, seconds]);
    command
}

/// The CSV files under `dir`, at any depth.
fn csv_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(csv_files(&path));
        } else if path.extension().is_some_and(|ext| ext == "csv") {
            files.push(path);
        }
    }
    files
}

/// Issue 19, case 5: methods named with 65 000 bytes, recursing 20 deep, once made `record` write
/// 507 MB of CSV in 3 s (rows of 1.36 MB) and hold 960 MB. Each frame name is now at most
/// `MAX_FRAME_NAME_BYTES` and each row at most `MAX_BRANCH_BYTES` and its numbers: the files of
/// an 8-second run stay under 8 MiB, record under 200 MiB, and the four methods, whose names
/// differ only in their last byte, stay four frames.
#[test]
fn methods_named_with_65_000_bytes_keep_records_files_and_memory_small() {
    let _serial = serial();
    let user = User::create("longname");
    // Interpreted, as the issue saw it: every frame is named from the JVM's Symbols (compiled,
    // from the agent's code map, whose names the agent cuts as the readers do).
    let mut command = odd_names_jvm(&["-Xint"], "LongNames", "60");
    user.run_as(&mut command);
    let jvm = Jvm::spawn(command);
    let pid = jvm.pid().to_string();
    let run = new_run();
    let finished = watch(
        run.command(&["--pid", &pid, "--duration", "8"]),
        Duration::from_secs(8),
        |_, _| {},
    );
    assert!(finished.status.success(), "{}", finished.stderr);

    let files = csv_files(&run.results());
    let bytes: u64 = files
        .iter()
        .map(|file| std::fs::metadata(file).expect("a CSV file").len())
        .sum();
    let longest_line = files
        .iter()
        .flat_map(|file| {
            std::fs::read_to_string(file)
                .expect("a CSV file")
                .lines()
                .map(str::len)
                .collect::<Vec<_>>()
        })
        .max()
        .unwrap_or(0);
    eprintln!(
        "{} CSV files, {bytes} bytes, longest line {longest_line} bytes; record: peak RSS {} MiB",
        files.len(),
        finished.peak_rss_kib >> 10
    );
    assert!(bytes < 8 << 20, "{bytes} bytes of CSV");
    assert!(longest_line <= MAX_BRANCH_BYTES + 100, "{longest_line}");
    assert!(
        finished.peak_rss_kib < 200 << 10,
        "{} KiB",
        finished.peak_rss_kib
    );

    let all = files
        .iter()
        .find(|file| file.ends_with("methods-power-all.csv"))
        .expect("methods-power-all.csv");
    let frames: BTreeSet<String> = rows(all)
        .iter()
        .flat_map(|row| row.branch.split(';').map(str::to_owned).collect::<Vec<_>>())
        .filter(|frame| frame.starts_with("LongNames.LLLL"))
        .collect();
    let expected: BTreeSet<String> = (0..LONG_NAME_METHODS)
        .map(|k| format!("LongNames.{}", method_name(&long_name(k))))
        .collect();
    assert_eq!(frames, expected, "one frame per method, cut, none merged");
    assert!(frames
        .iter()
        .all(|frame| frame.len() <= MAX_FRAME_NAME_BYTES));
    let deepest = rows(all)
        .iter()
        .map(|row| row.branch.matches("LongNames.LLLL").count())
        .max()
        .unwrap_or(0);
    assert!(
        deepest > LONG_NAME_DEPTH,
        "a branch of {deepest} long frames"
    );
}

/// Issue 19, case 11: names were decoded as UTF-8, where the JVM writes modified UTF-8: a
/// character beyond the BMP became six U+FFFD (and two methods that differ only there one
/// frame), a NUL two. Interpreted (names from the JVM's Symbols), compiled (names from the
/// agent's code map, through JVMTI) and sampled by the agent (JVMTI's names in the JVM), the
/// branches show the very characters, and the methods stay apart. The NUL methods are judged
/// where they are frames of their own: interpreted (compiled, reflection's accessor inlines
/// them and the BPF sampler names the loop after the next call it makes).
#[test]
fn names_beyond_the_bmp_or_holding_a_nul_are_shown_as_java_spells_them() {
    let _serial = serial();
    for (jvm_args, mode) in [(&["-Xint"][..], "bpf"), (&[], "bpf"), (&["-Xint"], "agent")] {
        let jvm = Jvm::spawn(odd_names_jvm(jvm_args, "UnusualNames", "60"));
        let pid = jvm.pid().to_string();
        let run = new_run();
        record_until(
            run.command(&["--mode", mode, "--pid", &pid, "--duration", "60"]),
            &run.cycle_log(),
            400,
            Duration::from_secs(60),
        );
        let all = csv_files(&run.results())
            .into_iter()
            .find(|file| file.ends_with("methods-power-all.csv"))
            .expect("methods-power-all.csv");
        let frames: BTreeSet<String> = rows(&all)
            .iter()
            .flat_map(|row| row.branch.split(';').map(str::to_owned).collect::<Vec<_>>())
            .collect();
        let run_of = format!("{mode} {jvm_args:?}");
        eprintln!("{run_of}: {frames:?}");
        assert!(
            !frames.iter().any(|frame| frame.contains('\u{fffd}')),
            "{run_of}: {frames:?}"
        );
        for method in SUPPLEMENTARY_METHODS {
            let frame = format!("{SUPPLEMENTARY_CLASS}.{method}");
            assert!(
                frames.contains(&frame),
                "{run_of}: no {frame} in {frames:?}"
            );
        }
        if jvm_args.is_empty() {
            continue;
        }
        for method in NUL_METHODS {
            let frame = format!("Nul.{method}");
            assert!(
                frames.contains(&frame),
                "{run_of}: no {frame:?} in {frames:?}"
            );
        }
    }
}
