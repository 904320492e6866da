//! Energy flame graphs, drawn by inferno: each branch is a stack, its joules its width. The
//! SVG is interactive in a browser (click a frame to zoom, Ctrl-F or "Search" to highlight a
//! method), and each frame's tooltip gives its joules and its share of the total.
//!
//! inferno counts whole numbers, so energy is handed over in microjoules and the tooltips are
//! rewritten in joules afterwards. A differential flame graph ([`write_diff`]) compares two
//! recordings per second of run (J/s, so runs of different length compare), per run or per unit
//! of work ([`Per`]): widths are the second recording's, red frames grew and blue ones shrank.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::{self, Write};

use inferno::flamegraph::{self, color::MultiPalette, Options, Palette};

use joularcode_core::log::printable;

use crate::output::folded::stack_line;
use crate::profile::{divided, figure, format_grams, format_joules, signed, EnergyProfile, Per};

/// The unit inferno is given and writes in the tooltips, rewritten afterwards.
const COUNT_NAME: &str = "uJ";
/// Microjoules per joule.
const MICRO: f64 = 1e6;

/// Writes the flame graph of `profile` to `out`; when it counts grams of CO2e, each tooltip
/// gives the frame's grams after its joules.
pub fn write(profile: &EnergyProfile, out: &mut dyn Write) -> io::Result<()> {
    let mut folded: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    for (frames, weight) in profile.stacks() {
        let line = folded.entry(stack_line(frames)).or_default();
        line.0 += micro(weight.joules);
        line.1 += weight.grams;
    }
    let mut lines: Vec<(String, f64)> = folded
        .into_iter()
        .filter(|&(_, (count, _))| count > 0)
        .map(|(stack, (count, grams))| (format!("{stack} {count}"), grams))
        .collect();
    // In the order inferno sorts them, so that a frame's span is that of the lines it holds.
    lines.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let grams = profile.carbon.is_some().then(|| SpanGrams::new(&lines));
    let lines: Vec<String> = lines.into_iter().map(|(line, _)| line).collect();
    let mut options = options(profile.title(), profile.subtitle());
    let svg = render(&mut options, &lines)?;
    let joules = |frame: &Tooltip| {
        let mut text = format_joules(frame.count / MICRO);
        if let Some(grams) = grams.as_ref().and_then(|grams| grams.of(frame.span?)) {
            let _ = write!(text, ", {} CO2e", format_grams(grams));
        }
        (text, String::new())
    };
    out.write_all(rewrite_titles(&svg, &joules).as_bytes())
}

/// The grams of CO2e of the frames of a flame graph. inferno lays the sorted lines side by
/// side, each as wide as its count, and a frame spans the lines whose stacks pass through it:
/// its grams are those of the lines in its span (`fg:x`, `fg:w`, in counts), whatever the
/// carbon intensity of the cycles each line's energy came from.
struct SpanGrams {
    /// The grams of the lines before each line boundary, by the count there.
    before: HashMap<u64, f64>,
}

impl SpanGrams {
    /// The boundaries of `lines` (`stack count`, with their grams), in inferno's order.
    fn new(lines: &[(String, f64)]) -> SpanGrams {
        let mut before = HashMap::from([(0, 0.0)]);
        let (mut count, mut grams) = (0u64, 0.0);
        for (line, line_grams) in lines {
            let line_count = line
                .rsplit_once(' ')
                .and_then(|(_, count)| count.parse::<u64>().ok())
                .unwrap_or(0);
            count = count.saturating_add(line_count);
            grams += line_grams;
            before.insert(count, grams);
        }
        SpanGrams { before }
    }

    /// The grams of the frame that starts at count `start` and is `width` wide.
    fn of(&self, (start, width): (u64, u64)) -> Option<f64> {
        let end = self.before.get(&start.checked_add(width)?)?;
        Some(end - self.before.get(&start)?)
    }
}

/// Writes the differential flame graph of `before` and `after`, their energy divided as `per`
/// says (per second of each run, per run, per unit of work). Frames match by name: give
/// profiles whose hidden-class names are masked ([`EnergyProfile::masked`]) so that lambdas
/// match across runs.
pub fn write_diff(
    before: &EnergyProfile,
    after: &EnergyProfile,
    per: Per,
    out: &mut dyn Write,
) -> io::Result<()> {
    let divisors = per.divisors(before, after);
    let was = divided(before.joules(), divisors.0);
    let now = divided(after.joules(), divisors.1);
    // inferno counts whole numbers: at least a million for the larger run, however small its
    // energy per unit of work.
    let largest = was.max(now);
    let digits = if largest > 0.0 {
        (6.0 - largest.log10().floor()).clamp(6.0, 15.0)
    } else {
        6.0
    };
    let scale = 10f64.powf(digits);
    let mut folded: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (profile, divisor, after_side) in [(before, divisors.0, false), (after, divisors.1, true)] {
        for (frames, weight) in profile.stacks() {
            let entry = folded.entry(stack_line(frames)).or_default();
            let rate = counted(divided(weight.joules, divisor) * scale);
            if after_side {
                entry.1 += rate;
            } else {
                entry.0 += rate;
            }
        }
    }
    let lines: Vec<String> = folded
        .into_iter()
        .filter(|&(_, (b, a))| b > 0 || a > 0)
        .map(|(stack, (b, a))| format!("{stack} {b} {a}"))
        .collect();
    let change = if was > 0.0 {
        format!(" ({:+.1}%)", 100.0 * (now - was) / was)
    } else {
        String::new()
    };
    let (unit, what) = (per.unit(), per.describe());
    let title = format!(
        "Energy {what}: {} {unit} before, {} {unit} after{change}",
        figure(was, 3),
        figure(now, 3)
    );
    // One line of 1200 pixels holds about 160 characters: the runs' names (results paths,
    // often) are cut to fit.
    let subtitle = format!(
        "{} ({:.1} s) against {} ({:.1} s); widths: {unit} after, colors: own {unit}, red grew, \
         blue shrank; {}",
        shortened(&after.subject(), NAME_CHARS),
        after.seconds,
        shortened(&before.subject(), NAME_CHARS),
        before.seconds,
        after.set.describe()
    );
    let mut options = options(title, subtitle);
    let svg = render(&mut options, &lines)?;
    let divided = |frame: &Tooltip| {
        let change = frame.delta.map_or(String::new(), |delta| {
            format!("; own change {} {unit}", signed(delta / scale, 3))
        });
        (format!("{} {unit}", figure(frame.count / scale, 3)), change)
    };
    out.write_all(rewrite_titles(&svg, &divided).as_bytes())
}

/// How many characters of a run's name the subtitle of a differential graph shows.
const NAME_CHARS: usize = 28;

/// `name` if it has at most `max` characters; otherwise "…" and the end of it, from a `/` when
/// there is one (`…/halved/after`).
fn shortened(name: &str, max: usize) -> String {
    let count = name.chars().count();
    if count <= max {
        return name.to_string();
    }
    let tail: String = name.chars().skip(count + 1 - max).collect();
    let from = tail.find('/').unwrap_or(0);
    format!("…{}", &tail[from..])
}

/// Joules as whole microjoules, inferno's counts.
fn micro(joules: f64) -> u64 {
    counted(joules * MICRO)
}

/// `value` rounded to a whole count (0 for what is not a positive number).
fn counted(value: f64) -> u64 {
    let count = value.round();
    if count.is_finite() && count > 0.0 {
        count as u64
    } else {
        0
    }
}

/// inferno's options for an energy flame graph. The titles name JVMs and folders: written as
/// [`printable`] gives them, as the frames are ([`stack_line`]), so that the file is XML.
fn options(title: String, subtitle: String) -> Options<'static> {
    let mut options = Options::default();
    options.title = printable(&title).into_owned();
    options.subtitle = Some(printable(&subtitle).into_owned());
    options.count_name = COUNT_NAME.to_string();
    options.name_type = "Method:".to_string();
    options.colors = Palette::Multi(MultiPalette::Java);
    options.hash = true;
    options
}

/// Draws the folded `lines` into an SVG document.
fn render(options: &mut Options, lines: &[String]) -> io::Result<String> {
    if lines.is_empty() {
        // inferno refuses an empty graph; a user gets a picture that says why there is none.
        return Ok(format!(
            "<?xml version=\"1.0\" standalone=\"no\"?>\n\
             <svg version=\"1.1\" width=\"1200\" height=\"80\" \
             xmlns=\"http://www.w3.org/2000/svg\">\
             <text x=\"600\" y=\"30\" text-anchor=\"middle\" font-size=\"17\">{}</text>\
             <text x=\"600\" y=\"60\" text-anchor=\"middle\" font-size=\"14\">\
             No energy was recorded: there is nothing to draw.</text></svg>\n",
            escape_xml(&options.title)
        ));
    }
    let mut svg = Vec::new();
    flamegraph::from_lines(options, lines.iter().map(String::as_str), &mut svg)?;
    String::from_utf8(svg).map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))
}

/// `text` fit for an XML text node.
fn escape_xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// What inferno says of a frame, for its tooltip.
struct Tooltip {
    /// Its count.
    count: f64,
    /// In a differential graph, its own change, turned back from a percentage of the total
    /// into a count.
    delta: Option<f64>,
    /// Where it starts and how wide it is, in counts (`fg:x`, `fg:w`), when inferno says it.
    span: Option<(u64, u64)>,
}

/// How a tooltip's count is written: `unit(frame)` gives the text in place of the count and
/// what follows the share.
type Unit<'a> = &'a dyn Fn(&Tooltip) -> (String, String);

/// Rewrites the count of each frame's tooltip, `name (1,234 uJ, 12.34%)` or, in a differential
/// graph, `name (1,234 uJ, 12.34%; +5.67%)`, with `unit`.
fn rewrite_titles(svg: &str, unit: Unit) -> String {
    let total = total_count(svg);
    let mut out = String::with_capacity(svg.len());
    let mut rest = svg;
    while let Some(open) = rest.find("<title>") {
        let body_start = open + "<title>".len();
        let Some(close) = rest[body_start..].find("</title>") else {
            break;
        };
        out.push_str(&rest[..body_start]);
        let body = &rest[body_start..body_start + close];
        rest = &rest[body_start + close..];
        // The frame's rectangle follows its title, before the next frame's title.
        let group = rest.find("<title>").map_or(rest, |next| &rest[..next]);
        let span = attribute(group, "fg:x").zip(attribute(group, "fg:w"));
        out.push_str(&rewrite_title(body, total, span, unit).unwrap_or_else(|| body.to_string()));
    }
    out.push_str(rest);
    out
}

/// The `total_samples` inferno writes on the frames' container: the count of the whole graph.
fn total_count(svg: &str) -> f64 {
    svg.split_once("total_samples=\"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .and_then(|(total, _)| total.parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// The number in the first attribute `name="..."` of `text`.
fn attribute(text: &str, name: &str) -> Option<u64> {
    let (_, value) = text.split_once(&format!(" {name}=\""))?;
    value.split_once('"')?.0.parse().ok()
}

fn rewrite_title(title: &str, total: f64, span: Option<(u64, u64)>, unit: Unit) -> Option<String> {
    let open = title.rfind(" (")?;
    let inner = title[open + 2..].strip_suffix(')')?;
    let (count, rest) = inner.split_once(&format!(" {COUNT_NAME}, "))?;
    let count: f64 = count.replace(',', "").parse().ok()?;
    let (share, delta) = match rest.split_once("; ") {
        Some((share, delta)) => {
            let pct: f64 = delta.strip_suffix('%')?.parse().ok()?;
            (share, Some(pct / 100.0 * total))
        }
        None => (rest, None),
    };
    let (count, after_share) = unit(&Tooltip { count, delta, span });
    Some(format!(
        "{} ({count}, {share}{after_share})",
        &title[..open]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{BranchSet, JvmEnergy, Weight};

    fn profile(branches: &[(&str, f64)], seconds: f64) -> EnergyProfile {
        EnergyProfile {
            jvms: vec![JvmEnergy {
                name: "JVM 7 (a.Main)".into(),
                branches: branches
                    .iter()
                    .map(|&(b, joules)| {
                        (
                            b.to_string(),
                            Weight {
                                joules,
                                ..Weight::default()
                            },
                        )
                    })
                    .collect(),
            }],
            set: BranchSet::All,
            seconds,
            start_ms: None,
            power_source: Some("vm (file /w)".into()),
            sampled: false,
            carbon: None,
            from_entries: false,
        }
    }

    fn svg(profile: &EnergyProfile) -> String {
        let mut out = Vec::new();
        write(profile, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn frames_are_as_wide_as_their_joules_and_say_them() {
        let svg = svg(&profile(
            &[("a.A.run;a.A.hot", 3.0), ("a.A.run;a.A.cold", 1.0)],
            2.0,
        ));
        assert!(svg.contains("Energy of JVM 7 (a.Main): 4.000 J in 2.0 s"));
        assert!(svg.contains("power from vm (file /w); all branches"));
        assert!(
            svg.contains("<title>a.A.hot (3.000 J, 75.00%)</title>"),
            "{svg}"
        );
        assert!(svg.contains("<title>a.A.run (4.000 J, 100.00%)</title>"));
        assert!(svg.contains("<title>all (4.000 J, 100%)</title>"));
        assert!(svg.contains("total_samples=\"4000000\""));
        assert!(!svg.contains(COUNT_NAME), "every count is rewritten");
    }

    #[test]
    fn tooltips_give_the_grams_of_the_branches_below_each_frame() {
        // cold ran while the intensity was high: its grams are not its joules' share.
        let mut carbon = profile(
            &[
                ("a.A.run;a.A.hot", 3.0),
                ("a.A.run;a.A.cold", 1.0),
                ("b.B.run", 2.0),
            ],
            2.0,
        );
        for (branch, grams) in [
            ("a.A.run;a.A.hot", 0.001),
            ("a.A.run;a.A.cold", 0.003),
            ("b.B.run", 2.5),
        ] {
            carbon.jvms[0].branches.get_mut(branch).unwrap().grams = grams;
        }
        carbon.carbon = Some("file".into());
        let drawn = svg(&carbon);
        for title in [
            "a.A.hot (3.000 J, 1.000 mg CO2e, 50.00%)",
            "a.A.cold (1.000 J, 3.000 mg CO2e, 16.67%)",
            "a.A.run (4.000 J, 4.000 mg CO2e, 66.67%)",
            "b.B.run (2.000 J, 2.500 g CO2e, 33.33%)",
            "all (6.000 J, 2.504 g CO2e, 100%)",
        ] {
            assert!(
                drawn.contains(&format!("<title>{title}</title>")),
                "{title}: {drawn}"
            );
        }
        carbon.carbon = None;
        assert!(!svg(&carbon).contains("CO2e"), "no grams unless counted");
    }

    #[test]
    fn the_differential_graph_is_per_second_of_run() {
        // Before: hot 4 J and cold 2 J in 2 s; after: hot 2 J and cold 2 J in 2 s... of 2 s and 1 s.
        let before = profile(&[("a.A.hot", 4.0), ("a.A.cold", 2.0)], 2.0);
        let after = profile(&[("a.A.hot", 0.5), ("a.A.cold", 1.0)], 1.0);
        let mut out = Vec::new();
        write_diff(&before, &after, Per::Second, &mut out).unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(
            svg.contains("3.000 J/s before, 1.500 J/s after (-50.0%)"),
            "{svg}"
        );
        assert!(
            svg.contains("<title>a.A.hot (0.500 J/s, 33.33%; own change -1.500 J/s)</title>"),
            "{svg}"
        );
        assert!(svg.contains("<title>a.A.cold (1.000 J/s, 66.67%; own change +0.000 J/s)</title>"));
        assert!(
            svg.contains(">JVM 7 (a.Main) (1.0 s) against JVM 7 (a.Main) (2.0 s); widths: J/s"),
            "{svg}"
        );
    }

    #[test]
    fn the_differential_graph_per_unit_of_work_keeps_small_figures() {
        // 1000 units before, 2000 after: 3 mJ and 1.5 mJ per unit.
        let before = profile(&[("a.A.hot", 2.0), ("a.A.cold", 1.0)], 2.0);
        let after = profile(&[("a.A.hot", 2.0), ("a.A.cold", 1.0)], 1.0);
        let per = Per::Unit {
            before: 1000.0,
            after: 2000.0,
        };
        let mut out = Vec::new();
        write_diff(&before, &after, per, &mut out).unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(
            svg.contains(
                "Energy per unit of work: 0.00300 J/unit before, 0.00150 J/unit after (-50.0%)"
            ),
            "{svg}"
        );
        assert!(
            svg.contains(
                "<title>a.A.hot (0.00100 J/unit, 66.67%; own change -0.00100 J/unit)</title>"
            ),
            "{svg}"
        );
        assert!(svg.contains("widths: J/unit after, colors: own J/unit"));
    }

    /// Names no Java source holds but a class file or a results file may: each one would make
    /// the SVG invalid XML (a browser then draws nothing), write markup, or reorder the text.
    const HOSTILE: [&str; 4] = [
        "a.A.run;a.A.wipe\x1b[2J\x07",
        "a.A.run;a.A.\u{202e}txt.exe",
        "a.A.run;a.A.forged\nline\u{ffff}",
        "a.A.run;a.A.<b>&x\"'",
    ];

    /// The text of every `<title>` of `svg`, read by a real XML parser.
    fn parsed_titles(svg: &str) -> Vec<String> {
        let options = roxmltree::ParsingOptions {
            allow_dtd: true,
            ..roxmltree::ParsingOptions::default()
        };
        let document = roxmltree::Document::parse_with_options(svg, options)
            .unwrap_or_else(|e| panic!("{e}: {svg}"));
        document
            .descendants()
            .filter(|node| node.has_tag_name("title"))
            .filter_map(|node| node.text().map(str::to_string))
            .collect()
    }

    #[test]
    fn hostile_names_are_shown_escaped_in_a_file_that_parses() {
        let branches: Vec<(&str, f64)> = HOSTILE.iter().map(|&name| (name, 1.0)).collect();
        let mut hostile = profile(&branches, 1.0);
        hostile.jvms[0].name = "JVM 7 (\x1b]0;title\x07)".into();
        let titles = parsed_titles(&svg(&hostile));
        for expected in [
            "a.A.wipe\\u{1b}[2J\\u{7} (1.000 J, 25.00%)",
            "a.A.\\u{202e}txt.exe (1.000 J, 25.00%)",
            "a.A.forged\\u{a}line\\u{ffff} (1.000 J, 25.00%)",
            "a.A.<b>&x\"' (1.000 J, 25.00%)",
        ] {
            assert!(
                titles.iter().any(|t| t == expected),
                "{expected}: {titles:?}"
            );
        }
        let mut out = Vec::new();
        write_diff(&hostile, &hostile, Per::Second, &mut out).unwrap();
        let titles = parsed_titles(&String::from_utf8(out).unwrap());
        assert!(
            titles
                .iter()
                .any(|t| t.starts_with("a.A.wipe\\u{1b}[2J\\u{7} (")),
            "{titles:?}"
        );
        let empty = profile(&[], 0.0);
        let mut hostile_empty = empty.clone();
        hostile_empty.jvms[0].name = "JVM 7 (\x1b)".into();
        assert!(parsed_titles(&svg(&hostile_empty)).is_empty());
    }

    #[test]
    fn long_names_are_cut_at_a_folder() {
        assert_eq!(shortened("halved/after", 28), "halved/after");
        assert_eq!(
            shortened("/work/wt-views14/target/views-tests/grown/after", 28),
            "…/views-tests/grown/after"
        );
        assert_eq!(
            shortened("JVM 1234567 (com.example.Main)", 12),
            "…ample.Main)"
        );
        assert_eq!(shortened("éééé", 3), "…éé");
    }

    #[test]
    fn nothing_to_show_still_gives_a_graph() {
        let svg = svg(&profile(&[], 0.0));
        assert!(svg.contains("No energy was recorded"), "{svg}");
        assert!(
            svg.contains("Energy of JVM 7 (a.Main): 0.000 J in 0.0 s"),
            "{svg}"
        );
    }

    #[test]
    fn only_tooltips_with_counts_are_touched() {
        let unit = |frame: &Tooltip| (format!("{} J", frame.count), String::new());
        assert_eq!(
            rewrite_titles(
                "<title>JVM 1 (x) (1,000 uJ, 50.00%)</title><title>x</title>",
                &unit
            ),
            "<title>JVM 1 (x) (1000 J, 50.00%)</title><title>x</title>"
        );
    }
}
