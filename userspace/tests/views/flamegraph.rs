//! The energy flame graph `record` wrote, opened in Debian's chromium: it renders, its widest
//! frames carry the demo's methods and joules, a click zooms, a search highlights.

use super::*;

/// What the browser saw of a flame graph (testkit/browser/flamegraph.mjs), its screenshots in
/// the artifacts' folder.
fn open_in_browser(svg: &Path, click: &str, search: &str) -> serde_json::Value {
    let artifacts = artifacts();
    let args = [
        svg.as_os_str(),
        artifacts.as_os_str(),
        click.as_ref(),
        search.as_ref(),
    ];
    serde_json::from_slice(&browser("flamegraph.mjs", &args)).expect("the browser's JSON")
}

/// The joules a frame's tooltip gives: `DemoShop.sign (12.345 J, 67.89%)`.
fn tooltip_joules(title: &str) -> f64 {
    let (_, numbers) = title.rsplit_once(" (").expect("a tooltip with numbers");
    numbers
        .split_once(" J,")
        .expect("joules in the tooltip")
        .0
        .parse()
        .expect("a number of joules")
}

#[test]
fn the_energy_flame_graph_in_a_browser() {
    let _serial = serial();
    let recording = demo_recording();
    let all = csv_energy(&recording.results.join("methods-power-all.csv"));
    let total: f64 = all.values().sum();
    let serve = joules_of(&all, "DemoShop.serve");
    let sign = joules_of(&all, "DemoShop.serve;DemoShop.sign");
    let sort = joules_of(&all, "sortTotals");
    eprintln!("CSV: {total:.3} J, serve {serve:.3} J, sign {sign:.3} J, sortTotals {sort:.3} J");

    let seen = open_in_browser(&recording.svg, "DemoShop.sign", "sortTotals");
    assert_eq!(seen["errors"].as_array().map(Vec::len), Some(0), "{seen}");
    let title = seen["title"].as_str().expect("a title");
    let titled = title
        .strip_prefix(&format!("Energy of JVM {} (DemoShop): ", recording.pid))
        .and_then(|rest| rest.split_once(" J in "))
        .and_then(|(joules, _)| joules.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("{title}"));
    assert!(
        (titled - total).abs() < 0.002,
        "{title}: the CSV files say {total} J"
    );
    let graph_width = seen["graphWidth"].as_f64().expect("the graph's width");
    let frames = seen["frames"].as_array().expect("frames");
    assert!(frames.len() > 20 && graph_width > 1000.0, "{seen}");
    let frame = |name: &str| {
        frames
            .iter()
            .filter(|f| {
                f["title"]
                    .as_str()
                    .is_some_and(|t| t.starts_with(&format!("{name} (")))
            })
            .max_by(|a, b| {
                a["width"]
                    .as_f64()
                    .unwrap()
                    .total_cmp(&b["width"].as_f64().unwrap())
            })
            .unwrap_or_else(|| panic!("no frame {name}"))
    };
    let widest = frames
        .iter()
        .max_by(|a, b| {
            a["width"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["width"].as_f64().unwrap())
        })
        .unwrap();
    assert!(widest["title"].as_str().unwrap().starts_with("all ("));
    // The demo's heaviest step is signing: the widest of the four steps.
    let steps = [
        "DemoShop.sign",
        "DemoShop.sortTotals",
        "DemoShop.price",
        "DemoShop.receiveOrders",
    ];
    let heaviest = steps
        .iter()
        .max_by(|a, b| {
            frame(a)["width"]
                .as_f64()
                .unwrap()
                .total_cmp(&frame(b)["width"].as_f64().unwrap())
        })
        .unwrap();
    assert_eq!(*heaviest, "DemoShop.sign");
    for (name, joules) in [("DemoShop.serve", serve), ("DemoShop.sign", sign)] {
        let frame = frame(name);
        let shown = tooltip_joules(frame["title"].as_str().unwrap());
        assert!(
            (shown - joules).abs() < 0.002,
            "{name}: {shown} J shown, {joules} J in the CSV"
        );
        let width = frame["width"].as_f64().unwrap() / graph_width;
        assert!(
            (width - joules / total).abs() < 0.003,
            "{name}: {width} of the width"
        );
    }
    // A click zooms into the frame: it spans the graph, its neighbours hide.
    let zoom = &seen["zoom"];
    assert!(
        zoom["before"].as_f64().unwrap() < graph_width * 0.95,
        "{zoom}"
    );
    assert!(
        (zoom["after"].as_f64().unwrap() - graph_width).abs() < 1.0,
        "{zoom}"
    );
    assert_eq!(zoom["resetShown"], true);
    assert!(zoom["hidden"].as_u64().unwrap() > 0, "{zoom}");
    // A search highlights the frames of the method, and says their share.
    let search = &seen["search"];
    let highlighted = search["highlighted"].as_array().unwrap();
    assert!(!highlighted.is_empty(), "{search}");
    assert!(
        highlighted
            .iter()
            .all(|t| t.as_str().unwrap().contains("sortTotals")),
        "{search}"
    );
    assert_eq!(search["searchColor"], "rgb(230,0,230)");
    let matched: f64 = search["matched"]
        .as_str()
        .and_then(|m| m.strip_prefix("Matched: "))
        .and_then(|m| m.strip_suffix('%'))
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("{search}"));
    assert!(
        (matched - 100.0 * sort / total).abs() < 0.15,
        "{matched}% matched"
    );
    for shot in [
        "flamegraph.png",
        "flamegraph-zoom.png",
        "flamegraph-search.png",
    ] {
        assert!(
            std::fs::metadata(artifacts().join(shot)).unwrap().len() > 10_000,
            "{shot}"
        );
    }

    // report draws the same graph from the CSV files, ours or Joular Code for Java's.
    let svg = work_dir().join("demo/report.svg");
    let output = run(&mut profiler(&[
        "report",
        &recording.results.display().to_string(),
        "--flamegraph",
        &svg.display().to_string(),
    ]));
    assert!(output.status.success());
    let text = std::fs::read_to_string(&svg).expect("report's flame graph");
    assert!(text.contains(&format!("Energy of {}: ", recording.results.display())));
    let serve_title = text
        .split("<title>")
        .find(|t| t.starts_with("DemoShop.serve ("))
        .and_then(|t| t.split_once("</title>"))
        .expect("a frame for serve")
        .0;
    assert!(
        (tooltip_joules(serve_title) - serve).abs() < 0.002,
        "{serve_title}: {serve} J"
    );
}
