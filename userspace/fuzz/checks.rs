//! What each fuzz target checks, on any bytes: nothing panics, and what is read keeps its
//! promises. userspace/tests/fuzz_seeds.rs runs the same checks on the seeds of seeds/<target>
//! with `cargo test`.

use joularcode_bpf::attach::parse_reply;
use joularcode_bpf::daemon::basic_auth::BasicAuth;
use joularcode_bpf::daemon::server::{serve_connection, Endpoint};
use joularcode_bpf::discovery::parse_stat;
use joularcode_bpf::hotspot::libjvm::Libjvm;
use joularcode_bpf::hotspot::maps::parse_maps;
use joularcode_bpf::hotspot::memory::{readable_range, Memory};
use joularcode_bpf::hotspot::scopes::{Bound, Encoding, ScopeLayout, Table, MAX_DEPTH, MAX_TABLE};
use joularcode_bpf::hotspot::CodeBlob;
use joularcode_bpf::hotspot::{libjvm_symbols, HotSpot};
use joularcode_bpf::jit::codemap::CodeMap;
use joularcode_bpf::jit::perfmap::PerfMap;
use joularcode_bpf::proc_files::{self, ProcStatus};
use joularcode_core::code_map as format;
use joularcode_core::log::quote;
use joularcode_core::mutf8;
use joularcode_core::names::{self, main_class as main_class_of, MAX_FRAME_NAME_BYTES};
use jvm_symbolizer_agent::options::Options;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The agent's code map (docs/code-map.md), fed in two parts cut where the first byte says, as
/// two refreshes would read it: every piece of code found is a non-empty range with names within
/// their bound, and its start names code that holds it.
pub fn code_map(bytes: &[u8]) {
    let Some((&cut, rest)) = bytes.split_first() else {
        return;
    };
    let at = usize::from(cut) * rest.len() / 256;
    let mut map = CodeMap::new("fuzz.map");
    // A bad header is an error; what follows is still fed, as a refresh would.
    let _ = map.feed(&rest[..at]);
    let _ = map.feed(&rest[at..]);
    for code in map.iter() {
        assert!(code.start < code.end);
        assert!(code.frames().len() >= 1);
        assert!(code.frames().all(|name| name.len() <= MAX_FRAME_NAME_BYTES));
        if let Some(found) = map.lookup(code.start, code.load_ns) {
            assert!(found.start <= code.start && code.start < found.end);
            assert!(found.frames().len() >= 1);
        }
    }
}

/// What the agent writes (`format`), read back by the profiler (`CodeMap`): any method or stub
/// name, with any bytes, comes back the same (cut as [`names::qualified_name`] cuts it), and an
/// escaped name is one field of its line.
pub fn code_map_round_trip(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let (method, stub) = text.split_once('\u{0}').unwrap_or((&text, "stub"));
    if method.is_empty() || stub.is_empty() {
        return;
    }
    let mut escaped = Vec::new();
    format::escape(&mut escaped, method);
    assert!(!escaped
        .iter()
        .any(|&b| b <= b' ' || b == b',' || b == b';' || b == 0x7f));
    let mut map_text = Vec::new();
    format::header(&mut map_text, 42);
    format::method(&mut map_text, 7, method);
    let inline = format::InlineRange {
        from: 0x10,
        to: 0x20,
        chain: vec![7, 7],
    };
    format::compiled_load(&mut map_text, false, 100, 0x1000, 0x40, 7, &[inline]);
    format::stub(&mut map_text, 0, 0x9000, 0x10, stub);
    let mut map = CodeMap::new("round-trip.map");
    map.feed(&map_text).expect("the agent's header");
    let names = |pc: u64| -> Vec<String> {
        let frames = map.lookup(pc, 200).expect("the code written");
        frames.frames().map(str::to_string).collect()
    };
    let (method, stub) = (names::qualified_name(method), names::qualified_name(stub));
    assert_eq!(names(0x1000), [&*method]);
    assert_eq!(names(0x1015), [&*method, &*method]);
    assert_eq!(names(0x9000), [&*stub]);
    assert_eq!(map.bad_lines(), 0);
}

/// A perf map, in both forms, decoded as its reader does: an entry found for a pc holds it, and
/// names are within their bound.
pub fn perf_map(bytes: &[u8]) {
    let map = PerfMap::parse(&mutf8::decode(bytes));
    for entry in map.entries() {
        assert!(entry.name.len() <= MAX_FRAME_NAME_BYTES);
        let pc = entry.start.saturating_add(entry.size / 2);
        if let Some(found) = map.lookup(pc) {
            assert!(found.start <= pc && pc - found.start < found.size);
        }
    }
}

/// A reply on the attach socket: what is quoted of it in a message is one line of at most 300
/// characters (and `...`) with no control character left.
pub fn attach_reply(bytes: &[u8]) {
    if let Some((_, output)) = parse_reply(bytes) {
        let quoted = quote(&output, 300);
        assert!(!quoted.chars().any(char::is_control), "{quoted:?}");
        assert!(!quoted.contains('\u{1b}'));
    }
}

/// `/proc/PID/maps`, `/proc/PID/stat` and `/proc/PID/status` text; and a stat line whose process
/// name (which its owner chooses: up to 15 bytes, anything but NUL, `) ` included) comes from the
/// bytes reads back with the right name, state and start time.
pub fn proc_files(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    for mapping in parse_maps(&text) {
        assert!(!mapping.path.contains('\n'));
    }
    for line in bytes.split(|&b| b == b'\n') {
        let _ = proc_files::maps_libjvm(line);
    }
    let status = ProcStatus::parse(&text);
    let _ = (
        status.field("Name"),
        status.effective_uid(),
        status.ns_pid(),
    );
    let _ = (status.mask("CapEff"), status.mask("SigCgt"));
    let _ = parse_stat(&text);
    let mut name = String::new();
    for c in text.chars().filter(|&c| c != '\u{0}') {
        if name.len() + c.len_utf8() > 15 {
            break;
        }
        name.push(c);
    }
    let line = format!(
        "4242 ({name}) S 1 4242 4242 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 987654 0 0 0 0\n"
    );
    let stat = parse_stat(&line).expect("a well-formed stat line");
    assert_eq!(
        (stat.name, stat.state, stat.start_time),
        (name.as_str(), 'S', 987654)
    );
}

/// A JVM's command line (NUL-separated, as /proc/PID/cmdline): its main class is a non-empty
/// name fit for a folder (letters, digits, `.`, `_`, `-`, `$`).
pub fn main_class(bytes: &[u8]) {
    let args: Vec<String> = bytes
        .split(|&b| b == 0)
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect();
    let name = main_class_of(&args);
    assert!(!name.is_empty());
    assert!(name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._-$".contains(c)));
}

/// The agent's options (`-agentpath:...=dir=/tmp,perfmap=no`): accepted ones name an absolute
/// folder.
pub fn agent_options(bytes: &[u8]) {
    if let Ok(text) = std::str::from_utf8(bytes) {
        if let Ok(options) = Options::parse(text) {
            assert!(options.dir.is_absolute());
        }
    }
}

/// A JVM's memory for [`hotspot_open`]: every address of user space (below 2^47) reads the
/// image's bytes, from `address % length` on, so that any pointer of the image leads somewhere
/// and tables need not end; the bytes read are counted.
#[derive(Debug)]
struct Image {
    bytes: Vec<u8>,
    read: Arc<AtomicU64>,
}

impl Memory for Image {
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> bool {
        let len = self.bytes.len() as u64;
        if !readable_range(addr, buf.len()) || len == 0 || addr >= 1 << 47 {
            return false;
        }
        self.read.fetch_add(buf.len() as u64, Ordering::Relaxed);
        for (i, byte) in buf.iter_mut().enumerate() {
            *byte = self.bytes[((addr + i as u64) % len) as usize];
        }
        true
    }
}

/// The most bytes that reading a JVM's tables, version, code heaps and flags may read, whatever
/// its memory holds.
pub const MAX_OPEN_READ: u64 = 64 << 20;

/// Opening a JVM whose memory is `bytes` (an [`Image`]; libjvm's symbols at 8, 16, 24, ... in
/// the order of [`libjvm_symbols`]), as [`HotSpot::read`] does for a live one: whatever the bytes,
/// it ends without a panic, having read at most [`MAX_OPEN_READ`] bytes.
pub fn hotspot_open(bytes: &[u8]) {
    let symbols = libjvm_symbols()
        .into_iter()
        .zip(1..)
        .map(|(name, i)| (name.to_string(), 8 * i))
        .collect();
    let read = Arc::new(AtomicU64::new(0));
    let image = Image {
        bytes: bytes.to_vec(),
        read: read.clone(),
    };
    let _ = HotSpot::read(1, Box::new(image), &Libjvm::with_symbols(symbols));
    let read = read.load(Ordering::Relaxed);
    assert!(read <= MAX_OPEN_READ, "{read} bytes read");
}

/// Bytes of the nmethod header that [`nmethod_scopes`] reads.
const SCOPES_HEADER: u64 = 256;

/// An nmethod's debug information read from a memory of any bytes (an [`Image`]), through a
/// layout that the bytes choose too, as a JVM's VMStructs could: the first byte picks the
/// integer encoding, the next 22 the header fields (bases and int32 offsets of each table's
/// bounds, the compile id, the Method*, the PcDesc fields and size). The nmethod is at an address
/// that reads the image from its first byte, its code 256 bytes further. Whatever the bytes,
/// reading ends without a panic, within two headers and three tables' bytes, and every chain
/// found at a pc of the code has at most [`MAX_DEPTH`] methods.
pub fn nmethod_scopes(bytes: &[u8]) {
    let Some((choice, _)) = bytes.split_first_chunk::<23>() else {
        return;
    };
    let field = |i: usize| u64::from(choice[i]);
    let bound = |i: usize| Bound {
        base: (choice[i] & 1 == 1).then(|| field(i + 1)),
        plus: (choice[i] & 2 == 2).then(|| field(i + 2)),
    };
    let table = |i: usize| Table {
        begin: bound(i),
        end: bound(i + 3),
    };
    let layout = ScopeLayout {
        header_size: SCOPES_HEADER,
        compile_id: field(1),
        method: field(2),
        pcs: table(3),
        data: table(9),
        metadata: table(15),
        pc_desc_size: field(21) % 32,
        pc_offset: field(22) % 16,
        scope_offset: field(22) / 16,
        encoding: if choice[0] & 1 == 0 {
            Encoding::Pack200
        } else {
            Encoding::Unsigned5
        },
    };
    let read = Arc::new(AtomicU64::new(0));
    let image = Image {
        bytes: bytes.to_vec(),
        read: read.clone(),
    };
    // An address that reads the image from its first byte.
    let nmethod = bytes.len() as u64 * 4096;
    let blob = CodeBlob {
        address: nmethod,
        name: "nmethod".into(),
        code_begin: nmethod + SCOPES_HEADER,
        code_end: nmethod + SCOPES_HEADER + 1024,
        end: nmethod + SCOPES_HEADER + 1024,
        frame_size: 4,
        nmethod: None,
    };
    if let Some(scopes) = layout.scopes(&image, &blob) {
        for pc in (blob.code_begin - 1..=blob.code_end).step_by(7) {
            if let Some(chain) = scopes.at(pc) {
                assert!(!chain.is_empty() && chain.len() <= MAX_DEPTH);
            }
        }
    }
    let read = read.load(Ordering::Relaxed);
    assert!(
        read <= 2 * SCOPES_HEADER + 3 * MAX_TABLE,
        "{read} bytes read"
    );
}

/// The daemon's endpoint (`daemon::server`): any bytes as the input of one connection, the
/// first byte choosing an endpoint open to all or one that asks for a password (user `fuzz`,
/// password `fuzz`). The connection ends, nothing panics, and what it answers is HTTP responses
/// only (HTTP/1.1, or HTTP/1.0 to a request of 1.0), none larger than the metrics.
pub fn endpoint(bytes: &[u8]) {
    use std::sync::{Arc, OnceLock};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    static ENDPOINTS: OnceLock<[Arc<Endpoint>; 2]> = OnceLock::new();
    let endpoints = ENDPOINTS.get_or_init(|| {
        let endpoint = |auth| {
            let mut registry = Registry::default();
            let counter: Counter = Counter::default();
            counter.inc_by(42);
            registry.register("joularcode_fuzz", "a counter", counter);
            Arc::new(Endpoint::new(registry, auth))
        };
        let hash = bcrypt::hash("fuzz", 4).expect("a bcrypt hash");
        [
            endpoint(None),
            endpoint(Some(BasicAuth::new(
                [("fuzz".to_string(), hash)].into_iter().collect(),
            ))),
        ]
    });
    let Some((&choice, input)) = bytes.split_first() else {
        return;
    };
    let endpoint = endpoints[usize::from(choice & 1)].clone();
    // Paused time: the timeouts pass at once when nothing else is left to do.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let answer = runtime.block_on(async {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let served = tokio::spawn(serve_connection(server, endpoint));
        let (mut reader, mut writer) = tokio::io::split(client);
        let write = async {
            let _ = writer.write_all(input).await;
            let _ = writer.shutdown().await;
        };
        let read = async {
            let mut answer = Vec::new();
            let _ = reader.read_to_end(&mut answer).await;
            answer
        };
        let ((), answer) = tokio::join!(write, read);
        served.await.expect("the connection's task");
        answer
    });
    assert!(
        answer.is_empty() || answer.starts_with(b"HTTP/1.1 ") || answer.starts_with(b"HTTP/1.0 "),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
    // Each request's head has 16 bytes at least; each answer is a few hundred bytes.
    assert!(answer.len() <= (input.len() / 16 + 1) * 1024);
}
