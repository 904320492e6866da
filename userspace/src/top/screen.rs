//! `top` on a terminal: a thread draws [`Top`] with ratatui and reads the keys with crossterm
//! while the recording runs; cycles and messages reach it through a channel.
//!
//! The terminal is left as it was found (raw mode off, the main screen back, the cursor shown)
//! when the view ends, on `q` or Ctrl-C (which in raw mode is a key, not a signal), on SIGTERM
//! (the recording stops and ends the view), on an error (the [`Screen`] is dropped), and on a
//! panic in any thread (a panic hook restores it before the message is printed).

use std::io::{self, Stdout, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex, Once};
use std::thread::JoinHandle;
use std::time::Duration;

use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use crossterm::{cursor, execute, terminal};
use joularcode_core::log::{printable, Level, Log};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line as TextLine;
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table, TableState};
use ratatui::{Frame, Terminal};

use super::state::{Key, List, Snapshot, Top};
use crate::signals;

/// How long the view waits for a key before it looks for new cycles.
const KEY_POLL: Duration = Duration::from_millis(100);

/// What reaches the view's thread.
enum Message {
    /// A cycle's results.
    Cycle(Box<Snapshot>),
    /// A message of the recording, shown at the bottom.
    Log(String),
    /// The recording is over.
    End,
}

/// Whether the terminal is in the view's state (raw mode, alternate screen, hidden cursor).
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Puts the terminal back as it was, if the view had changed it.
fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let mut stdout = io::stdout();
        // Nothing can be done about a terminal that cannot be written to any more
        let _ = execute!(stdout, cursor::Show, terminal::LeaveAlternateScreen);
        let _ = terminal::disable_raw_mode();
        let _ = stdout.flush();
    }
}

/// Why the terminal cannot show the live view.
#[derive(Debug, thiserror::Error)]
#[error("cannot use the terminal for the live view: {0}")]
pub struct ScreenError(#[source] io::Error);

/// The live view on the terminal, until [`Screen::end`] or drop.
pub struct Screen {
    sender: Sender<Message>,
    thread: Option<JoinHandle<()>>,
}

impl Screen {
    /// Takes the terminal over (raw mode, alternate screen) and starts drawing, with `list`
    /// shown for the selected JVM.
    pub fn start(list: List) -> Result<Screen, ScreenError> {
        static HOOK: Once = Once::new();
        HOOK.call_once(|| {
            let hook = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                hook(info);
            }));
        });
        let fail = |error: io::Error| {
            restore();
            ScreenError(error)
        };
        terminal::enable_raw_mode().map_err(fail)?;
        ACTIVE.store(true, Ordering::SeqCst);
        execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide).map_err(fail)?;
        let terminal = Terminal::new(CrosstermBackend::new(io::stdout())).map_err(fail)?;
        let (sender, receiver) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("top-view".into())
            .spawn(move || {
                view(terminal, &receiver, list);
                restore();
            })
            .map_err(fail)?;
        Ok(Screen {
            sender,
            thread: Some(thread),
        })
    }

    /// Where the recording's messages go: the bottom line of the view.
    pub fn log(&self) -> Arc<dyn Log> {
        Arc::new(ScreenLog {
            sender: Mutex::new(self.sender.clone()),
        })
    }

    /// Shows a cycle's results.
    pub fn show(&self, snapshot: Snapshot) {
        // A view that has ended takes nothing more
        let _ = self.sender.send(Message::Cycle(Box::new(snapshot)));
    }

    /// Ends the view and gives the terminal back.
    pub fn end(&mut self) {
        let _ = self.sender.send(Message::End);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        restore();
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        self.end();
    }
}

/// The recording's messages, sent to the view.
struct ScreenLog {
    sender: Mutex<Sender<Message>>,
}

impl Log for ScreenLog {
    fn log(&self, level: Level, message: &str) {
        let sender = self
            .sender
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let _ = sender.send(Message::Log(format!("{level}: {}", printable(message))));
    }
}

/// The view's loop: draws, takes in the cycles and the keys, until the recording is over or the
/// terminal fails.
fn view(
    mut terminal: Terminal<CrosstermBackend<Stdout>>,
    receiver: &Receiver<Message>,
    list: List,
) {
    let mut top = Top::new(list);
    let mut message = String::from("waiting for the first cycle...");
    loop {
        loop {
            match receiver.try_recv() {
                Ok(Message::Cycle(snapshot)) => top.apply(&snapshot),
                Ok(Message::Log(text)) => message = text,
                Ok(Message::End) | Err(TryRecvError::Disconnected) => return,
                Err(TryRecvError::Empty) => break,
            }
        }
        if terminal.draw(|frame| draw(frame, &top, &message)).is_err() {
            return;
        }
        match event::poll(KEY_POLL) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(_) => return,
        }
        let Ok(Event::Key(key)) = event::read() else {
            continue;
        };
        if key.kind != KeyEventKind::Press {
            continue;
        }
        let action = match key.code {
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => None,
            KeyCode::Char('q') | KeyCode::Esc => None,
            KeyCode::Up | KeyCode::Char('k') => Some(Key::Up),
            KeyCode::Down | KeyCode::Char('j') => Some(Key::Down),
            KeyCode::Char('m') => Some(Key::Methods),
            KeyCode::Char('b') => Some(Key::Branches),
            KeyCode::Char('e') => Some(Key::Entries),
            KeyCode::Char('s') => Some(Key::Order),
            KeyCode::Char('a') => Some(Key::Set),
            _ => continue,
        };
        match action {
            Some(action) => top.key(action),
            None => {
                // The recording ends its cycle and then the view.
                signals::stop();
                message = "stopping...".to_string();
            }
        }
    }
}

/// Draws the header, the JVMs, the selected JVM's list and the keys.
fn draw(frame: &mut Frame, top: &Top, message: &str) {
    let jvm_rows = u16::try_from(top.jvms.len())
        .unwrap_or(u16::MAX)
        .clamp(1, 8);
    let [header, jvms, list, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(jvm_rows + 3),
        Constraint::Min(4),
        Constraint::Length(2),
    ])
    .areas(frame.area());
    frame.render_widget(
        Paragraph::new(format!("joularcode-bpf top | {}", top.header()))
            .style(Style::new().add_modifier(Modifier::BOLD)),
        header,
    );
    draw_jvms(frame, top, jvms);
    draw_list(frame, top, list);
    frame.render_widget(
        Paragraph::new(vec![
            TextLine::from(
                "q quit | up/down select a JVM | m methods | b branches | e entries | s sort | a all/app",
            ),
            TextLine::from(message.to_string()),
        ])
        .style(Style::new().add_modifier(Modifier::DIM)),
        footer,
    );
}

/// Right-aligned numbers of a table.
fn number(text: String) -> Cell<'static> {
    Cell::from(TextLine::from(text).right_aligned())
}

/// `name` cut to `width` characters from its start, where a branch's oldest frames are: its
/// newest frames are what tells branches apart.
fn keep_end(name: &str, width: usize) -> String {
    let length = name.chars().count();
    if length <= width || width == 0 {
        return name.to_string();
    }
    let skip = length - width + 1;
    format!("…{}", name.chars().skip(skip).collect::<String>())
}

/// A table's header: the numbers' columns right-aligned, the name's left.
fn header_row(numbers: &[&str], name: &'static str) -> Row<'static> {
    let mut cells: Vec<Cell> = numbers.iter().map(|h| number(h.to_string())).collect();
    cells.push(Cell::from(name));
    Row::new(cells).style(Style::new().add_modifier(Modifier::BOLD))
}

/// The width of the grams' column, when grams of CO2e are counted.
const GRAMS_WIDTH: u16 = 12;

/// A table of `rows` whose numbers' columns are as wide as `numbers` says, with the grams'
/// column after them when grams of CO2e are counted, and the name's last.
fn table<'a>(
    rows: impl IntoIterator<Item = Row<'a>>,
    top: &Top,
    numbers: &[(&'static str, u16)],
    name: &'static str,
) -> Table<'a> {
    let mut columns = numbers.to_vec();
    if top.carbon {
        columns.push(("CO2e", GRAMS_WIDTH));
    }
    let headers: Vec<&str> = columns.iter().map(|&(header, _)| header).collect();
    let mut widths: Vec<Constraint> = columns
        .iter()
        .map(|&(_, width)| Constraint::Length(width))
        .collect();
    widths.push(Constraint::Fill(1));
    Table::new(rows, widths).header(header_row(&headers, name))
}

/// A table's row: its numbers, its grams when they are counted, its name.
fn row<'a>(mut numbers: Vec<Cell<'a>>, grams: Option<String>, name: String) -> Row<'a> {
    numbers.extend(grams.map(number));
    numbers.push(Cell::from(name));
    Row::new(numbers)
}

fn draw_jvms(frame: &mut Frame, top: &Top, area: Rect) {
    let rows = top.jvms.iter().map(|jvm| {
        row(
            vec![
                number(jvm.pid.to_string()),
                number(format!("{:.2}", jvm.usage.watts)),
                number(format!("{:.1}%", 100.0 * jvm.share)),
                number(format!("{:.1}", jvm.usage.joules)),
            ],
            top.grams(&jvm.usage),
            format!(
                "{}{}",
                jvm.main_class,
                if jvm.ended { " (ended)" } else { "" }
            ),
        )
    });
    let table = table(
        rows,
        top,
        &[("PID", 8), ("W", 9), ("share", 7), ("J", 10)],
        "JVM",
    )
    .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
    .block(Block::bordered().title("JVMs: power now, share of the CPU power, energy since start"));
    let mut state = TableState::default().with_selected(
        top.jvms
            .iter()
            .position(|row| Some(row.pid) == top.selected),
    );
    frame.render_stateful_widget(table, area, &mut state);
}

fn draw_list(frame: &mut Frame, top: &Top, area: Rect) {
    let Some(selected) = top.selected() else {
        frame.render_widget(Paragraph::new("No JVM yet.").block(Block::bordered()), area);
        return;
    };
    // The borders, the numbers' columns and the spaces between the columns
    let grams = if top.carbon { GRAMS_WIDTH + 1 } else { 0 };
    let name_width = usize::from(area.width.saturating_sub(2 + 9 + 7 + 10 + 3 + grams));
    let rows = top.lines(selected).into_iter().map(|line| {
        row(
            vec![
                number(format!("{:.3}", line.usage.watts)),
                number(format!("{:.1}%", 100.0 * line.share)),
                number(format!("{:.2}", line.usage.joules)),
            ],
            top.grams(&line.usage),
            keep_end(&line.name, name_width),
        )
    });
    let table = table(rows, top, &[("W", 9), ("share", 7), ("J", 10)], "name")
        .block(Block::bordered().title(top.list_title(selected)));
    frame.render_widget(table, area);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_screen_shows_grams_when_they_are_counted() {
        use super::super::state::{JvmSnapshot, Snapshot};
        use joularcode_core::carbon::{Intensity, IntensitySource};
        use joularcode_core::energy::Interval;
        use ratatui::backend::TestBackend;
        let screen_text = |carbon: Option<Intensity>| {
            let mut top = Top::default();
            // 40 J in the cycle at 450 g/kWh: 5 mg of CO2e.
            top.apply(&Snapshot {
                source: "vm".into(),
                power_w: 40.0,
                interval: Interval::from_ns(2_000_000_000),
                carbon,
                jvms: vec![JvmSnapshot {
                    pid: 7,
                    main_class: "a.Main".into(),
                    watts: 20.0,
                    share: 0.5,
                    ended: false,
                    all: vec![("t.run;a.A.hot".into(), 20.0)],
                    app: Vec::new(),
                    entries: Vec::new(),
                }],
            });
            let mut terminal = ratatui::Terminal::new(TestBackend::new(100, 16)).unwrap();
            terminal.draw(|frame| draw(frame, &top, "")).unwrap();
            let buffer = terminal.backend().buffer().clone();
            let mut text = String::new();
            for y in 0..buffer.area.height {
                for x in 0..buffer.area.width {
                    text.push_str(buffer[(x, y)].symbol());
                }
                text.push('\n');
            }
            text
        };
        let text = screen_text(Some(Intensity {
            grams_per_kwh: 450.0,
            source: IntensitySource::Constant,
        }));
        assert!(text.contains("450 g CO2e/kWh (constant)"), "{text}");
        assert!(text.contains("CO2e JVM"), "{text}");
        assert!(
            text.contains("       7     20.00   50.0%       40.0     5.000 mg a.Main"),
            "{text}"
        );
        assert!(
            text.contains("   20.000  100.0%      40.00     5.000 mg a.A.hot"),
            "{text}"
        );
        assert!(!screen_text(None).contains("CO2e"));
    }

    #[test]
    fn long_branches_keep_their_newest_frames() {
        assert_eq!(keep_end("a.B.run;a.B.work", 40), "a.B.run;a.B.work");
        assert_eq!(keep_end("a.B.run;a.B.work", 10), "…;a.B.work");
        assert_eq!(keep_end("a.B.run;a.B.work", 10).chars().count(), 10);
    }
}
