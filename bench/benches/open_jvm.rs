//! What opening a JVM costs: `HotSpot::open` (its maps, libjvm's symbols, the VMStructs tables,
//! version, code cache and flags), and of it the VMStructs tables alone (`VmStructs::read`), on
//! live JVMs of Java 17, 21 and 25, idle
//! (`testkit/java/RecordBusy.java` with no busy thread). Each JVM of the host is opened once when
//! the profiler finds it, so this is the start-up cost per JVM, with libjvm's file already read
//! for an earlier JVM of the same JDK. Needs root and the JDKs of scripts/test-setup.sh:
//!
//! ```sh
//! sudo -E bash -c '. scripts/test-setup.sh && cargo bench -p joularcode-bench --bench open_jvm'
//! ```

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use joularcode_bpf::hotspot::libjvm::Libjvm;
use joularcode_bpf::hotspot::maps::parse_maps;
use joularcode_bpf::hotspot::memory::ProcessMemory;
use joularcode_bpf::hotspot::vmstructs::VmStructs;
use joularcode_bpf::hotspot::{libjvm_symbols, HotSpot};
use joularcode_testkit::{jdk, Jvm};

fn open_jvm(c: &mut Criterion) {
    let mut group = c.benchmark_group("open_jvm");
    group.measurement_time(Duration::from_secs(5));
    for version in [17, 21, 25] {
        let jvm = Jvm::start(&jdk(version), &[], "RecordBusy", &["0"]);
        let pid = jvm.pid();
        HotSpot::open(pid).expect("read the JVM");
        group.bench_function(format!("java {version}"), |b| {
            b.iter(|| black_box(HotSpot::open(pid).expect("read the JVM")))
        });
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("its maps");
        let libjvm = Libjvm::find(pid, &parse_maps(&maps), &libjvm_symbols()).expect("libjvm");
        let memory = ProcessMemory::new(pid);
        group.bench_function(format!("java {version} vmstructs"), |b| {
            b.iter(|| black_box(VmStructs::read(&memory, &libjvm).expect("its tables")))
        });
    }
    group.finish();
}

criterion_group!(benches, open_jvm);
criterion_main!(benches);
