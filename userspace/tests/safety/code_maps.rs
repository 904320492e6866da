//! The code map a JVM's owner controls: a FIFO in its place hangs nothing, garbage or millions
//! of records cost bounded memory.

use super::*;

#[test]
fn a_fifo_for_a_code_map_hangs_nothing() {
    let _serial = serial();
    let user = User::create("fifo");
    let jvm = user_jvm(&user, "RecordBusy", &["1"]);
    let pid = jvm.pid().to_string();
    let map = code_map(jvm.pid());

    // Planted before the attach: the agent is not loaded into a JVM that would block on it, and
    // that is said.
    user.mkfifo(&map);
    let run = new_run();
    let before = watch(
        run.command(&["--pid", &pid, "--duration", "60"]),
        Duration::from_secs(60),
        |_, record| {
            if run.cycles_so_far().len() >= 3 {
                interrupt(record);
            }
        },
    );
    assert!(before.status.success(), "{}", before.stderr);
    assert!(
        before.stderr.contains("is a FIFO, not a regular file")
            && before.stderr.contains("the symbolizer agent is not loaded"),
        "{}",
        before.stderr
    );
    assert!(run.cycles().len() >= 3, "{} cycles", run.cycles().len());
    assert!(!maps_agent(jvm.pid()));
    clear(&map);

    // Swapped for a FIFO while record reads it: record goes on with the code cache, 4 cycles
    // at least.
    let run = new_run();
    let mut swapped = None;
    let during = watch(
        run.command(&["--pid", &pid, "--duration", "60"]),
        Duration::from_secs(60),
        |elapsed, record| {
            if swapped.is_none() && is_regular(&map) && elapsed > Duration::from_secs(2) {
                clear(&map);
                user.mkfifo(&map);
                swapped = Some((elapsed, run.cycles_so_far().len()));
            }
            if swapped.is_some_and(|(_, then)| run.cycles_so_far().len() >= (then + 4).max(6)) {
                interrupt(record);
            }
        },
    );
    clear(&map);
    let (swapped, _) = swapped.expect("the agent wrote its map");
    assert!(during.status.success(), "{}", during.stderr);
    assert!(
        during.stderr.contains("is a FIFO, not a regular file")
            && during.stderr.contains("named from its code cache"),
        "{}",
        during.stderr
    );
    let cycles = run.cycles().len();
    eprintln!(
        "swapped at {swapped:?}; {cycles} cycles in {:?}",
        during.wall
    );
    assert!(
        cycles >= 6,
        "{cycles} cycles: cycles stopped after the swap"
    );
}

/// The lines of a code map of `methods` methods and as many pieces of code (about 70 bytes each).
fn huge_code_map(path: &Path, pid: u32, methods: u64) {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("the huge map"));
    writeln!(out, "joularcode-code-map 2 monotonic {pid}").expect("written");
    for i in 0..methods {
        writeln!(
            out,
            "M {} com.example.generated.Service{}.method{i}",
            i % 0xff_ffff,
            i % 97
        )
        .expect("written");
        writeln!(
            out,
            "L {i} {:x} 40 {}",
            0x7f00_0000_0000 + i * 0x40,
            i % 0xff_ffff
        )
        .expect("written");
    }
    out.flush().expect("written");
}

#[test]
fn a_code_map_of_garbage_or_millions_of_records_costs_bounded_memory() {
    let _serial = serial();
    let user = User::create("huge");
    let jvm = user_jvm(&user, "RecordBusy", &["1"]);
    let pid = jvm.pid().to_string();
    let map = code_map(jvm.pid());

    // The map swapped for a link to /dev/zero once the agent writes it: refused, not read, for
    // 3 cycles at least.
    let run = new_run();
    let mut swapped = None;
    let zero = watch(
        run.command(&["--pid", &pid, "--duration", "60"]),
        Duration::from_secs(60),
        |elapsed, record| {
            if swapped.is_none() && is_regular(&map) && elapsed > Duration::from_secs(2) {
                clear(&map);
                user.symlink(Path::new("/dev/zero"), &map);
                swapped = Some(run.cycles_so_far().len());
            }
            if swapped.is_some_and(|then| run.cycles_so_far().len() >= (then + 3).max(4)) {
                interrupt(record);
            }
        },
    );
    clear(&map);
    assert!(swapped.is_some(), "the agent wrote its map");
    eprintln!(
        "/dev/zero: peak RSS {} MiB, {:.2} s of CPU in {:?}, {} cycles",
        zero.peak_rss_kib >> 10,
        zero.cpu_s,
        zero.wall,
        run.cycles().len()
    );
    assert!(zero.peak_rss_kib < 200 << 10, "{} KiB", zero.peak_rss_kib);
    assert!(run.cycles().len() >= 4);
    assert!(zero.status.success(), "{}", zero.stderr);
    assert!(
        zero.stderr.contains("is a symbolic link"),
        "{}",
        zero.stderr
    );

    // The map of another JVM replaced by 4.5 million records of the user's: read at a bounded
    // rate and time per refresh, and only its first 2^20 lines kept (the cap itself is checked by
    // codemap's unit tests: how far a run gets depends on the machine's load).
    let jvm = user_jvm(&user, "RecordBusy", &["1"]);
    let pid = jvm.pid().to_string();
    let map = code_map(jvm.pid());
    let huge = PathBuf::from(format!("/tmp/jcsafe-huge-{}.map", std::process::id()));
    huge_code_map(&huge, jvm.pid(), 2_250_000);
    user.own(&huge);
    let run = new_run();
    let mut swapped = false;
    let big = watch(
        run.command(&["--pid", &pid, "--duration", "14"]),
        Duration::from_secs(14),
        |elapsed, _| {
            if !swapped && is_regular(&map) && elapsed > Duration::from_secs(2) {
                std::fs::rename(&huge, &map).expect("the huge map in place");
                swapped = true;
            }
        },
    );
    clear(&map);
    clear(&huge);
    assert!(swapped, "the agent wrote its map");
    let cycles = run.cycles().len();
    eprintln!(
        "4.5 M records: peak RSS {} MiB, {:.2} s of CPU in {:?}, {cycles} cycles",
        big.peak_rss_kib >> 10,
        big.cpu_s,
        big.wall
    );
    assert!(big.peak_rss_kib < 400 << 10, "{} KiB", big.peak_rss_kib);
    assert!(cycles >= 10, "{cycles} cycles");
    assert!(big.status.success(), "{}", big.stderr);
}
