//! The HotSpot reader against real JVMs on JDK 17, 21 and 25. Needs root (or CAP_SYS_PTRACE) to
//! read the JVMs' memory. The tests run JVMs, so they are serialised.

use std::process::Command;
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use joularcode_bpf::hotspot::{HotSpot, HotSpotError, JavaMethod};
use joularcode_testkit::{all_jdks, one_at_a_time, Jvm};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

mod scopes;

/// The tests run JVMs: one at a time.
fn serial() -> MutexGuard<'static, ()> {
    one_at_a_time("the HotSpot reader reads other processes' memory")
}

fn open(jvm: &Jvm) -> HotSpot {
    HotSpot::open(jvm.pid()).unwrap_or_else(|e| panic!("open JVM {}: {e}", jvm.pid()))
}

/// Calls `f` until it gives a value; fails after a minute (the JIT works in the background).
fn poll<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = f() {
            return value;
        }
        assert!(Instant::now() < deadline, "never true: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn java(class: &str, name: &str) -> JavaMethod {
    JavaMethod {
        class: class.into(),
        name: name.into(),
    }
}

#[test]
fn version_and_flags_on_every_jdk() {
    let _serial = serial();
    for jdk in all_jdks() {
        let with = Jvm::start(
            &jdk,
            &["-XX:+PreserveFramePointer", "-XX:+DisableAttachMechanism"],
            "HotSpotChain",
            &[],
        );
        let without = Jvm::start(&jdk, &[], "HotSpotChain", &[]);
        let (hs_with, hs_without) = (open(&with), open(&without));
        for hs in [&hs_with, &hs_without] {
            let version = hs.version();
            assert_eq!(version.major, jdk.major, "{version:?}");
            assert!(
                version.release.starts_with(&jdk.major.to_string()),
                "{version:?}"
            );
            assert_eq!(hs.flag_bool("DebugNonSafepoints"), Some(false));
            assert_eq!(hs.flag_bool("UseCompressedOops"), Some(true));
            assert_eq!(hs.flag_bool("MaxHeapSize"), None, "not a boolean");
            assert!(hs.has_flag("MaxHeapSize"));
            assert_eq!(hs.flag_bool("NoSuchFlagAtAll"), None);
            let dynamic_agents = hs.flag_bool("EnableDynamicAgentLoading");
            // JDK 21 added the flag (default true); some 17 updates have it backported.
            if jdk.major >= 21 {
                assert_eq!(dynamic_agents, Some(true), "JDK {}", jdk.major);
            } else {
                assert_ne!(dynamic_agents, Some(false), "JDK {}", jdk.major);
            }
        }
        assert_eq!(hs_with.flag_bool("PreserveFramePointer"), Some(true));
        assert_eq!(hs_with.flag_bool("DisableAttachMechanism"), Some(true));
        assert_eq!(hs_without.flag_bool("PreserveFramePointer"), Some(false));
        assert_eq!(hs_without.flag_bool("DisableAttachMechanism"), Some(false));
    }
}

#[test]
fn the_walker_gets_the_code_cache_the_field_layouts_and_the_java_threads() {
    let _serial = serial();
    for jdk in all_jdks() {
        let jvm = Jvm::start(&jdk, &[], "HotSpotChain", &[]);
        let hs = open(&jvm);
        let info = hs.unwind_info().expect("what the walker needs");
        // One to three heaps, side by side, holding the interpreter and the call stub.
        assert!((1..=3).contains(&info.heaps.len()), "{info:?}");
        let mut heaps = info.heaps.clone();
        heaps.sort_by_key(|heap| heap.low);
        assert!(heaps.windows(2).all(|w| w[0].high == w[1].low), "{heaps:?}");
        assert!(heaps
            .iter()
            .all(|h| h.low < h.high && (4..=16).contains(&h.log2_segment)));
        assert_eq!(info.interpreter, hs.code_cache().interpreter());
        assert!(hs.in_code_cache(info.call_stub_return));
        let stub = hs
            .blob_name(info.call_stub_return)
            .expect("the call stub's blob");
        assert!(
            stub.starts_with("StubRoutines"),
            "JDK {}: {stub}",
            jdk.major
        );
        assert_eq!(
            info.call_wrapper, -48,
            "frame::entry_frame_call_wrapper_offset"
        );
        // Layouts by JDK: 16-bit frame-complete offsets and offsets instead of pointers in 25.
        let jdk25 = jdk.major >= 25;
        assert_eq!(info.frame_complete.size, if jdk25 { 2 } else { 4 });
        assert_eq!(info.code_begin.relative, jdk25);
        assert_eq!(info.deopt_handler.relative, jdk25);
        assert_eq!((info.frame_size.size, info.compile_id.size), (4, 4));
        assert!(info
            .fields()
            .iter()
            .all(|f| u64::from(f.offset) + u64::from(f.size) <= u64::from(info.blob_read)));
        // Every Java thread with its tid and stack; the JVM's own threads are not listed.
        let threads = hs.java_threads();
        let tids: Vec<u32> = threads.iter().filter_map(|t| t.tid).collect();
        assert!(tids.len() >= 3, "JDK {}: {threads:?}", jdk.major);
        assert_eq!(tids.len(), threads.len());
        for thread in &threads {
            let (low, high) = thread.stack.expect("a stack");
            assert!(high - low >= 64 * 1024, "JDK {}: {thread:?}", jdk.major);
        }
        // Every thread Java code started is a plain JavaThread, with the vtable the walker
        // checks r15 against, and the stack and OS thread id where the layout says.
        let layout = info.thread.expect("the JavaThread layout");
        let mem = hs.memory();
        let plain = threads
            .iter()
            .filter(|t| mem.read_u64(t.address) == Some(layout.vtable))
            .count();
        assert!(plain >= 2, "JDK {}: {plain} plain JavaThreads", jdk.major);
        for thread in &threads {
            let base = mem.read_u64(thread.address + u64::from(layout.stack_base));
            assert_eq!(base, thread.stack.map(|s| s.1), "JDK {}", jdk.major);
            let os = mem
                .read_u64(thread.address + u64::from(layout.osthread))
                .expect("an OSThread");
            let tid = mem.read_u32(os + u64::from(layout.osthread_tid));
            assert_eq!(tid, thread.tid, "JDK {}", jdk.major);
        }
        let names: Vec<String> = tids
            .iter()
            .map(|tid| {
                std::fs::read_to_string(format!("/proc/{}/task/{tid}/comm", jvm.pid()))
                    .expect("the thread's name")
                    .trim_end()
                    .to_string()
            })
            .collect();
        assert!(names.iter().any(|n| n == "lambda"), "{names:?}");
        assert!(
            !names.iter().any(|n| n.starts_with("GC Thread")),
            "{names:?}"
        );
    }
}

#[test]
fn compiled_methods_are_named_by_their_nmethods() {
    let _serial = serial();
    for jdk in all_jdks() {
        let jvm = Jvm::start(&jdk, &["-XX:-TieredCompilation"], "HotSpotHot", &[]);
        let hs = open(&jvm);
        let wanted = [java("HotSpotHot", "compute"), java("HotSpotHot", "mix")];
        let compiled = poll(
            &format!("JDK {}: compute and mix compiled", jdk.major),
            || {
                let all = hs.compiled_methods();
                wanted
                    .iter()
                    .all(|w| all.iter().any(|c| c.method == *w))
                    .then_some(all)
            },
        );
        let mut ids: Vec<u32> = compiled.iter().map(|c| c.compile_id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), compiled.len(), "compile ids are unique");
        assert!(ids.iter().all(|&id| id > 0));
        for w in &wanted {
            let frame = compiled.iter().find(|c| c.method == *w).expect("compiled");
            assert_eq!(frame.comp_level, 4, "C2 only: {frame:?}");
            assert!(frame.code_begin < frame.code_end);
            assert!(hs.in_code_cache(frame.code_begin));
            assert!(!hs.is_interpreter(frame.code_begin));
            for pc in [
                frame.code_begin,
                frame.code_begin + (frame.code_end - frame.code_begin) / 2,
                frame.code_end - 1,
            ] {
                assert_eq!(
                    hs.compiled_method_at(pc).as_ref(),
                    Some(frame),
                    "pc {pc:#x}"
                );
                assert_eq!(hs.blob_name(pc).as_deref(), Some("nmethod"));
            }
        }
        let (begin, end) = hs.code_cache().interpreter();
        assert!(hs.is_interpreter(begin) && hs.is_interpreter(end - 1) && !hs.is_interpreter(end));
        assert_eq!(hs.blob_name(begin + 16).as_deref(), Some("Interpreter"));
        assert_eq!(hs.compiled_method_at(begin + 16), None);
    }
}

#[test]
fn garbage_gives_none_or_errors_never_a_panic() {
    let _serial = serial();
    let jdk = joularcode_testkit::jdk(25);
    let jvm = Jvm::start(&jdk, &["-XX:-TieredCompilation"], "HotSpotHot", &[]);
    let hs = open(&jvm);
    let (interp_begin, _) = hs.code_cache().interpreter();
    let method = poll("a compiled method", || {
        hs.compiled_methods()
            .into_iter()
            .map(|compiled| compiled.method_ptr)
            .next()
    });
    assert!(hs.method(method).is_some());
    // Inside a Method, but not at its start: never a Method.
    for delta in 1..80 {
        assert_eq!(hs.method(method + delta), None, "Method* + {delta}");
    }
    for bad in [0, 1, 8, u64::MAX, u64::MAX - 7, interp_begin, method - 8] {
        assert_eq!(hs.method(bad), None, "{bad:#x}");
        assert_eq!(hs.compiled_method_at(bad), None, "{bad:#x}");
    }
    let (low, high) = hs.code_cache().heap_ranges()[0];
    let mut runner = TestRunner::new(Config::with_cases(2000));
    runner
        .run(&(any::<u64>(), low..high), |(pointer, pc)| {
            let _ = hs.method(pointer);
            prop_assert!(hs.blob_at(pointer).is_none() || hs.in_code_cache(pointer));
            if let Some(blob) = hs.blob_at(pc) {
                prop_assert!(blob.address <= pc && pc < blob.end, "{blob:?} {pc:#x}");
            }
            let _ = hs.compiled_method_at(pc);
            Ok(())
        })
        .expect("random pointers");

    let own = HotSpot::open(std::process::id()).expect_err("the test is not a JVM");
    assert!(matches!(own, HotSpotError::NotAJvm { .. }), "{own}");
    let mut child = Command::new("true").spawn().expect("run true");
    let pid = child.id();
    child.wait().expect("true ends");
    let gone = HotSpot::open(pid).expect_err("an exited process");
    assert!(matches!(gone, HotSpotError::Process { .. }), "{gone}");
}

/// A JVM opened as soon as it can be (as a launched one is) is read as it is once running: the
/// walker gets the same code heaps, interpreter and layouts (the interpreter's queue is read
/// only once its unused tail went back to the code heap, where stubs go later).
#[test]
fn a_starting_jvm_says_try_again_until_it_is_ready() {
    let _serial = serial();
    for jdk in all_jdks() {
        for _ in 0..3 {
            let mut jvm = Jvm::launch(Jvm::command(&jdk, &[], "HotSpotChain", &[]));
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut errors = Vec::new();
            let opened = loop {
                match HotSpot::open(jvm.pid()) {
                    Ok(hs) => break hs,
                    Err(e) => {
                        assert!(
                            matches!(e, HotSpotError::NotReady(_) | HotSpotError::NotAJvm { .. }),
                            "unexpected while starting: {e}"
                        );
                        errors.push(e.to_string());
                    }
                }
                assert!(Instant::now() < deadline, "never ready: {errors:?}");
            };
            assert_eq!(opened.version().major, jdk.major);
            assert!(opened.in_code_cache(opened.code_cache().interpreter().0));
            jvm.wait_for_line("READY", Duration::from_secs(60));
            let running = open(&jvm);
            assert_eq!(
                opened.unwind_info().expect("unwind info at the start"),
                running.unwind_info().expect("unwind info once running"),
                "Java {}: read at the start, after {} tries: {:?}",
                jdk.major,
                errors.len(),
                errors.last()
            );
        }
    }
}
