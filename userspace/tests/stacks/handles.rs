//! Method-handle code (HotSpot's intrinsics `invokeBasic`, `linkTo*`, the lambda forms) and
//! lambdas made by invokedynamic are named, and their stacks are whole: on StacksHandles, and on
//! Debian's JRuby running a Ruby loop with invokedynamic.

use super::*;

/// Most samples with an `[unknown]` frame, as a share of all.
const MOST_UNKNOWN: f64 = 0.005;

/// Least share of the worker's samples whose branch is whole, from `java.lang.Thread.run` on.
const LEAST_WHOLE: f64 = 0.995;

/// Asserts that under [`MOST_UNKNOWN`] of `run`'s samples hold `[unknown]`, and that at least
/// [`LEAST_WHOLE`] of those holding `work` (the frames of the program's hot loop) start with
/// `entry`, the thread's first frame.
fn assert_named_and_whole(what: &str, run: &StacksRun, entry: &str, work: &str) {
    let total = run.total();
    let unknown = run.samples_where(|stack| stack.contains("[unknown]"));
    let worker = run.samples_where(|stack| stack.contains(work));
    let whole = run.samples_where(|stack| {
        stack.starts_with(entry) && stack.contains(work) && !stack.contains("[unknown]")
    });
    eprintln!(
        "{what}: {total} samples, {unknown} with [unknown]; {worker} in {work}, {whole} whole"
    );
    let listing = || {
        let mut stacks = run.folded.clone();
        stacks.sort_by_key(|(_, count)| std::cmp::Reverse(*count));
        stacks.truncate(30);
        stacks
    };
    assert!(
        (unknown as f64) < MOST_UNKNOWN * total as f64,
        "{what}: {unknown} of {total} samples hold [unknown]: {:?}",
        listing()
    );
    assert!(
        worker > 0 && whole as f64 >= LEAST_WHOLE * worker as f64,
        "{what}: {whole} of the {worker} samples in {work} are whole: {:?}",
        listing()
    );
}

#[test]
fn method_handle_intrinsics_are_named_and_their_stacks_whole() {
    let _serial = serial();
    for jdk in all_jdks() {
        // Until its worker has run 3 s of CPU time while sampled: 1,500 samples, of which the
        // start of the JVM (its first classes, the lambda's bootstrap) is a small part.
        let command = java(&jdk, &[], "StacksHandles", &["60", "stdin"]);
        let run = stacks_launched(&[], &command, 3.0);
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        let what = format!("Java {}", jdk.major);
        assert_named_and_whole(
            &what,
            &run,
            "java.lang.Thread.run;",
            "StacksHandles.lambda$main$1;StacksHandles.work",
        );
        let intrinsic =
            run.samples_where(|stack| stack.ends_with("java.lang.invoke.MethodHandle.invokeBasic"));
        assert!(intrinsic > 0, "{what}: no sample names invokeBasic");
    }
}

/// Debian's JRuby, a real program that dispatches through method handles: a Ruby loop compiled
/// with invokedynamic.
#[test]
fn jruby_with_invokedynamic_is_named_and_whole() {
    let _serial = serial();
    let script = joularcode_testkit::repo_root().join("testkit/ruby/handles.rb");
    let command = [
        "/usr/bin/jruby".to_owned(),
        "-Xcompile.invokedynamic=true".into(),
        script.display().to_string(),
    ];
    assert!(
        Path::new(&command[0]).is_file(),
        "no {}: install Debian's jruby (scripts/test-setup.sh does)",
        command[0]
    );
    // Until its busiest thread has run 4 s of CPU time while sampled (the JIT compilers are
    // the busiest while JRuby starts).
    let run = stacks_launched(&[], &command, 4.0);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_named_and_whole(
        "JRuby",
        &run,
        "org.jruby.Main.main;",
        "handles.RUBY$method$work$",
    );
}
