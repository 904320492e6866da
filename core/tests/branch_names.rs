//! Branch identity and names, one test per case of Joular Code for Java's BranchTest.

use joularcode_core::branch::{BranchId, Branches, Frame, GC, UNKNOWN};

/// The branch of `methods` (`package.Class.method`, oldest first) in `branches`.
fn branch(branches: &mut Branches, methods: &[&str]) -> BranchId {
    let frames: Vec<_> = methods
        .iter()
        .map(|qualified| {
            let (class, method) = qualified.rsplit_once('.').expect("class.method");
            branches.frame(class, method)
        })
        .collect();
    branches.branch(&frames)
}

fn app_name(prefixes: &[&str], methods: &[&str]) -> String {
    let mut branches = Branches::new(prefixes);
    let id = branch(&mut branches, methods);
    branches
        .app(id)
        .map(|app| branches.app_name(app).to_string())
        .unwrap_or_default()
}

#[test]
fn name_walks_the_stack_oldest_frame_first() {
    let mut branches = Branches::default();
    let id = branch(
        &mut branches,
        &["com.example.Main.main", "com.example.Worker.compute"],
    );
    assert_eq!(
        branches.name(id),
        "com.example.Main.main;com.example.Worker.compute"
    );
}

#[test]
fn name_single_frame_has_no_separator() {
    let mut branches = Branches::default();
    let id = branch(&mut branches, &["com.example.Main.main"]);
    assert_eq!(branches.name(id), "com.example.Main.main");
}

/// Frames carry no line number: two samples on different lines of the same methods are one branch.
#[test]
fn equals_ignores_line_numbers() {
    let mut branches = Branches::default();
    let on_line_10 = branches.frame("a.Worker", "compute");
    let on_line_20 = branches.frame("a.Worker", "compute");
    assert_eq!(on_line_10, on_line_20);
    assert_eq!(
        branches.branch(&[on_line_10]),
        branches.branch(&[on_line_20])
    );
    assert_eq!(branches.len(), 1);
}

#[test]
fn equals_different_methods_or_depth_are_different_branches() {
    let mut branches = Branches::default();
    let compute = branch(&mut branches, &["a.Main.main", "a.Worker.compute"]);
    assert_ne!(
        compute,
        branch(&mut branches, &["a.Main.main", "a.Worker.save"])
    );
    assert_ne!(compute, branch(&mut branches, &["a.Main.main"]));
    assert_ne!(
        compute,
        branch(&mut branches, &["a.Worker.compute", "a.Main.main"])
    );
    assert_eq!(
        compute,
        branch(&mut branches, &["a.Main.main", "a.Worker.compute"])
    );
}

#[test]
fn app_name_keeps_only_matching_frames() {
    let methods = [
        "java.lang.Thread.run",
        "com.example.Worker.compute",
        "java.util.HashMap.put",
    ];
    let mut branches = Branches::new(&["com.example"]);
    let id = branch(&mut branches, &methods);
    assert_eq!(
        branches.name(id),
        "java.lang.Thread.run;com.example.Worker.compute;java.util.HashMap.put"
    );
    assert_eq!(
        app_name(&["com.example"], &methods),
        "com.example.Worker.compute"
    );
}

#[test]
fn app_name_nothing_matches_is_empty() {
    assert_eq!(
        app_name(
            &["com.example"],
            &["java.lang.Thread.run", "java.util.HashMap.put"]
        ),
        ""
    );
}

#[test]
fn app_name_unmatched_frames_below_a_match_collapse_onto_the_matched_method() {
    let mut branches = Branches::new(&["com.example"]);
    let put = branch(
        &mut branches,
        &["com.example.Service.save", "java.util.HashMap.put"],
    );
    let write = branch(
        &mut branches,
        &["com.example.Service.save", "java.io.FileOutputStream.write"],
    );
    assert_ne!(put, write);
    assert_eq!(branches.app(put), branches.app(write));
    assert_eq!(
        branches.app_name(branches.app(put).unwrap()),
        "com.example.Service.save"
    );
}

#[test]
fn app_name_multiple_prefixes_each_one_matches() {
    assert_eq!(
        app_name(
            &["com.example", "org.myapp"],
            &[
                "org.myapp.Boot.start",
                "java.util.HashMap.put",
                "com.example.Worker.compute"
            ]
        ),
        "org.myapp.Boot.start;com.example.Worker.compute"
    );
}

#[test]
fn app_name_prefix_matches_text_not_package_boundaries() {
    assert_eq!(
        app_name(
            &["com.example"],
            &["com.examples.Other.run", "com.example.Worker.compute"]
        ),
        "com.examples.Other.run;com.example.Worker.compute"
    );
}

#[test]
fn starts_with_prefix_reaching_into_the_method_name() {
    let frame = Frame::java("com.example.Worker", "compute");
    assert!(frame.matches("com.example.Worker.com"));
    assert!(frame.matches("com.example.Worker.compute"));
    assert!(frame.matches("com.example.Worker."));
    assert!(!frame.matches("com.example.Worker.x"));
    assert!(
        !frame.matches("com.example.Worker.computed"),
        "a prefix longer than the whole name cannot match"
    );
    assert!(!frame.matches("com.example.Workers"));
}

#[test]
fn starts_with_prefix_inside_the_class_name() {
    let frame = Frame::java("com.example.Worker", "compute");
    assert!(frame.matches("com.example"));
    assert!(frame.matches("com.example.Worker"));
    assert!(!frame.matches("org.other"));
}

/// With no prefixes, the app name is the whole name (Joular: the app map is the all map).
#[test]
fn app_name_without_prefixes_is_the_name() {
    let methods = ["java.lang.Thread.run", "com.app.Main.run"];
    assert_eq!(
        app_name(&[], &methods),
        "java.lang.Thread.run;com.app.Main.run"
    );
}

/// docs/architecture.md, "Decisions, and why", 7: pseudo-frames have a name of their own and
/// never belong to the application.
#[test]
fn jvm_pseudo_frames_are_named_alone_and_never_in_the_app_name() {
    let mut branches = Branches::default();
    let gc = branches.jvm_frame(GC);
    let gc_branch = branches.branch(&[gc]);
    assert_eq!(branches.name(gc_branch), "[GC]");
    assert_eq!(branches.app(gc_branch), None);
    assert!(branches.frames(gc_branch).all(Frame::is_jvm));

    let run = branches.frame("com.app.Main", "run");
    let unknown = branches.jvm_frame(UNKNOWN);
    let mixed = branches.branch(&[run, unknown]);
    assert_eq!(branches.name(mixed), "com.app.Main.run;[unknown]");
    assert_eq!(
        branches.app_name(branches.app(mixed).unwrap()),
        "com.app.Main.run"
    );
    // A prefix cannot reach a pseudo-frame either
    assert!(!Frame::jvm(GC).matches(""));
    assert!(!Frame::jvm(GC).matches("."));
}

#[test]
fn frames_come_back_oldest_first() {
    let mut branches = Branches::default();
    let id = branch(&mut branches, &["a.Main.main", "a.Worker.compute"]);
    let frames: Vec<_> = branches
        .frames(id)
        .map(|f| format!("{}#{}", f.class(), f.method()))
        .collect();
    assert_eq!(frames, ["a.Main#main", "a.Worker#compute"]);
}
