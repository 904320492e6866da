//! The energy flame graph `record` wrote, opened in Debian's chromium: it renders, its widest
//! frames carry the demo's methods and joules, a click zooms, a search highlights.

use super::*;

/// What the browser saw of a flame graph (testkit/browser/flamegraph.mjs) after a click on the
/// frame `click` and a search for `search`, its screenshots in the folder `shots`.
pub(super) fn open_in_browser(
    svg: &Path,
    shots: &Path,
    click: &str,
    search: &str,
) -> serde_json::Value {
    std::fs::create_dir_all(shots).expect("the screenshots' folder");
    let args = [
        svg.as_os_str(),
        shots.as_os_str(),
        click.as_ref(),
        search.as_ref(),
    ];
    serde_json::from_slice(&browser("flamegraph.mjs", &args)).expect("the browser's JSON")
}

/// The title and the subtitle the browser drew fit in the picture: a longer line is cut off at
/// both ends.
pub(super) fn assert_lines_fit(seen: &serde_json::Value) {
    let width = seen["width"].as_f64().expect("the picture's width");
    for line in ["title", "subtitle"] {
        let drawn = seen[format!("{line}Width")]
            .as_f64()
            .expect("a line's width");
        assert!(
            drawn <= width - 20.0,
            "the {line} is {drawn} pixels wide in a picture of {width}: {}",
            seen[line]
        );
    }
}

/// The widest of the frames named `name` the browser saw.
pub(super) fn widest_frame<'a>(seen: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    seen["frames"]
        .as_array()
        .expect("frames")
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
}

/// The joules a flame graph's title gives: `Energy of JVM 12 (DemoShop): 1.234 J in 6.0 s`.
pub(super) fn titled_joules(title: &str) -> f64 {
    title
        .rsplit_once(": ")
        .and_then(|(_, rest)| rest.split_once(" J in "))
        .and_then(|(joules, _)| joules.parse().ok())
        .unwrap_or_else(|| panic!("no joules in the title {title}"))
}

/// The joules a frame's tooltip gives: `DemoShop.sign (12.345 J, 67.89%)`.
pub(super) fn tooltip_joules(title: &str) -> f64 {
    let (_, numbers) = title.rsplit_once(" (").expect("a tooltip with numbers");
    numbers
        .split_once(" J,")
        .expect("joules in the tooltip")
        .0
        .parse()
        .expect("a number of joules")
}

/// The frames of a flame graph's SVG text: each frame's name (its XML escapes undone) and the
/// joules its tooltip gives, and the text of the graph's title and subtitle.
pub(super) struct SvgText {
    pub(super) frames: Vec<(String, f64)>,
    pub(super) title: String,
    pub(super) subtitle: String,
}

/// Reads the SVG file `path` that `record` or `report` wrote.
pub(super) fn read_svg(path: &Path) -> SvgText {
    let svg = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let unescape = |text: &str| {
        text.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&amp;", "&")
    };
    let text_of = |id: &str| {
        svg.split_once(&format!("id=\"{id}\""))
            .and_then(|(_, rest)| rest.split_once('>'))
            .and_then(|(_, rest)| rest.split_once('<'))
            .map(|(text, _)| unescape(text))
            .unwrap_or_else(|| panic!("no {id} in {}", path.display()))
    };
    let frames = svg
        .split("<title>")
        .skip(1)
        .filter_map(|rest| rest.split_once("</title>"))
        .map(|(title, _)| {
            let title = unescape(title);
            let name = title.rsplit_once(" (").expect("a tooltip").0.to_string();
            (name, tooltip_joules(&title))
        })
        .collect();
    SvgText {
        frames,
        title: text_of("title"),
        subtitle: text_of("subtitle"),
    }
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

    let seen = open_in_browser(&recording.svg, &artifacts(), "DemoShop.sign", "sortTotals");
    assert_eq!(seen["errors"].as_array().map(Vec::len), Some(0), "{seen}");
    assert_lines_fit(&seen);
    let title = seen["title"].as_str().expect("a title");
    assert!(
        title.starts_with(&format!("Energy of JVM {} (DemoShop): ", recording.pid)),
        "{title}"
    );
    let titled = titled_joules(title);
    assert!(
        (titled - total).abs() < 0.002,
        "{title}: the CSV files say {total} J"
    );
    let graph_width = seen["graphWidth"].as_f64().expect("the graph's width");
    let frames = seen["frames"].as_array().expect("frames");
    assert!(frames.len() > 20 && graph_width > 1000.0, "{seen}");
    let frame = |name: &str| widest_frame(&seen, name);
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
