//! The views `record` writes at the end of a recording: with `--app` its flame graph and pprof
//! file hold the application's branches only (the frames of `--methods-filtering-prefix`), the
//! energy of `methods-power-app.csv`; without it, every frame of `methods-power-all.csv`.

use joularcode_testkit::pprof::decode;

use super::flamegraph::{read_svg, titled_joules, SvgText};
use super::pprof::assert_same_energy;
use super::*;

/// The prefix the demo is recorded with.
const PREFIX: &str = "DemoShop";

/// Each frame of `csv`'s branches and the energy of the branches it is part of.
fn frame_energy(csv: &HashMap<String, f64>) -> HashMap<&str, f64> {
    let mut energy: HashMap<&str, f64> = HashMap::new();
    for (branch, joules) in csv {
        let mut frames: Vec<&str> = branch.split(';').collect();
        frames.sort_unstable();
        frames.dedup();
        for frame in frames {
            *energy.entry(frame).or_default() += joules;
        }
    }
    energy
}

/// The frames drawn in a flame graph, but the root `all`.
fn drawn(svg: &SvgText) -> Vec<&str> {
    svg.frames
        .iter()
        .map(|(name, _)| name.as_str())
        .filter(|&name| name != "all")
        .collect()
}

#[test]
fn record_app_views_hold_the_application_branches_only() {
    let _serial = serial();

    // --app: the application's branches, and nothing else
    let recording = demo_app_recording();
    let app = csv_energy(&recording.results.join("methods-power-app.csv"));
    let app_total: f64 = app.values().sum();
    let pprof = decode(&recording.pprof).branches();
    assert_same_energy(&app, &pprof);
    for branch in pprof.keys() {
        assert!(
            branch.split(';').all(|frame| frame.starts_with(PREFIX)),
            "a frame outside {PREFIX} in the app's pprof: {branch}"
        );
    }
    let svg = read_svg(&recording.svg);
    eprintln!("{}\n{}", svg.title, svg.subtitle);
    assert!(
        (titled_joules(&svg.title) - app_total).abs() < 0.002,
        "{}: the app file says {app_total} J",
        svg.title
    );
    assert!(
        svg.subtitle.ends_with("; application branches"),
        "{}",
        svg.subtitle
    );
    let frames = drawn(&svg);
    assert!(frames.contains(&"DemoShop.sign"), "{frames:?}");
    for frame in &frames {
        assert!(
            frame.starts_with(PREFIX),
            "a frame outside {PREFIX} in the app's flame graph: {frame}"
        );
    }

    // Without --app: every frame, the JDK's and the JVM's own too
    let recording = demo_recording();
    let all = csv_energy(&recording.results.join("methods-power-all.csv"));
    let all_total: f64 = all.values().sum();
    assert_same_energy(&all, &decode(&recording.pprof).branches());
    let svg = read_svg(&recording.svg);
    assert!(
        (titled_joules(&svg.title) - all_total).abs() < 0.002,
        "{}: the all file says {all_total} J",
        svg.title
    );
    assert!(svg.subtitle.ends_with("; all branches"), "{}", svg.subtitle);
    let frames = drawn(&svg);
    // A frame of 0.1% of the energy is 1 pixel wide: inferno draws it.
    let wide: Vec<(&str, f64)> = frame_energy(&all)
        .into_iter()
        .filter(|&(_, joules)| joules >= all_total / 1000.0)
        .collect();
    for (frame, joules) in &wide {
        assert!(
            frames.contains(frame),
            "{frame} ({joules} J of {all_total} J) is not drawn"
        );
    }
    let outside: f64 = all
        .iter()
        .filter(|(branch, _)| !branch.split(';').any(|f| f.starts_with(PREFIX)))
        .map(|(_, joules)| joules)
        .sum();
    let outside_frames = wide.iter().filter(|(f, _)| !f.starts_with(PREFIX)).count();
    eprintln!(
        "all: {all_total:.3} J, {outside:.3} J in branches without a {PREFIX} frame; \
         {} frames drawn, {outside_frames} of the {} frames of 0.1% or more outside {PREFIX}",
        frames.len(),
        wide.len()
    );
    assert!(outside > 0.0 && outside_frames > 0);
}
