//! Method-handle code (HotSpot's intrinsics `invokeBasic`, `linkTo*`, the lambda forms) and
//! lambdas made by invokedynamic are named, and their stacks are whole.

use super::*;

/// Most samples with an `[unknown]` frame, as a share of all.
const MOST_UNKNOWN: f64 = 0.005;

/// Least share of the worker's samples whose branch is whole, from `java.lang.Thread.run` on.
const LEAST_WHOLE: f64 = 0.995;

#[test]
fn method_handle_intrinsics_are_named_and_their_stacks_whole() {
    let _serial = serial();
    for jdk in all_jdks() {
        // Until its worker has run 3 s of CPU time while sampled: 1,500 samples, of which the
        // start of the JVM (its first classes, the lambda's bootstrap) is a small part.
        let command = java(&jdk, &[], "StacksHandles", &["60", "stdin"]);
        let run = stacks_launched(&[], &command, 3.0);
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        let total = run.total();
        let unknown = run.samples_where(|stack| stack.contains("[unknown]"));
        let worker = run.samples_where(|stack| stack.contains(";StacksHandles.work"));
        let whole = run.samples_where(|stack| {
            stack.starts_with("java.lang.Thread.run;")
                && stack.contains("StacksHandles.lambda$main$1;StacksHandles.work")
                && !stack.contains("[unknown]")
        });
        let intrinsic =
            run.samples_where(|stack| stack.ends_with("java.lang.invoke.MethodHandle.invokeBasic"));
        eprintln!(
            "Java {}: {total} samples, {unknown} with [unknown]; the worker's {worker}, {whole} \
             whole; {intrinsic} in invokeBasic",
            jdk.major
        );
        let listing = || {
            let mut stacks = run.folded.clone();
            stacks.sort_by_key(|(_, count)| std::cmp::Reverse(*count));
            stacks.truncate(30);
            stacks
        };
        assert!(
            (unknown as f64) < MOST_UNKNOWN * total as f64,
            "Java {}: {unknown} of {total} samples hold [unknown]: {:?}",
            jdk.major,
            listing()
        );
        assert!(
            worker > 0 && whole as f64 >= LEAST_WHOLE * worker as f64,
            "Java {}: {whole} of the worker's {worker} samples are whole: {:?}",
            jdk.major,
            listing()
        );
        assert!(
            intrinsic > 0,
            "Java {}: no sample names invokeBasic: {:?}",
            jdk.major,
            listing()
        );
    }
}
