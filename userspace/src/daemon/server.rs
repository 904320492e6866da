//! The HTTP endpoint (docs/daemon.md): `GET /metrics` answers the registry in OpenMetrics text to
//! a client that accepts it (Prometheus does), else in Prometheus' classic text format (version
//! 0.0.4, which `promtool check metrics` and older scrapers read); `GET /healthz` answers `ok`
//! (the probes of a DaemonSet); anything else a 404 that says where the metrics are. With a web
//! configuration file ([`super::web_config`]) it speaks TLS and asks for a password
//! ([`super::basic_auth`]), but not on `/healthz`.
//!
//! hyper serves it on a tokio runtime of one thread, beside the recording loop; each connection
//! is a task of its own, so that no client delays another's scrape. What a client can make it
//! hold is bounded: a request head of [`MAX_HEAD`] bytes (hyper answers 431 beyond it and closes),
//! no request body ever read, [`HEAD_TIMEOUT`] to send a head from the connection's start or the
//! previous answer's end (so a kept-alive connection waits that long for its next request; a TLS
//! handshake has as long), [`IDLE_TIMEOUT`] without a byte either way on a connection (a client
//! that never reads its answers), and [`MAX_CONNECTIONS`] open at
//! once: a new one beyond it closes the one that has been quiet the longest, so that a crowd of
//! idle connections never keeps a scraper out. The encoding of the metrics is reused for
//! [`ENCODING_REUSE`], so that a flood of scrapes neither holds the lock the cycles need nor
//! makes a copy per connection. An accept that fails for want of a file descriptor or memory is
//! retried after [`ACCEPT_BACKOFF`]; if the listener fails for good, the daemon says so in one
//! SEVERE line and exits 1, so that systemd or Kubernetes starts it again.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use joularcode_core::log::{Level, Log};
use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::registry::Registry;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio_rustls::TlsAcceptor;

use super::basic_auth::BasicAuth;

/// The largest request head read (request line and headers): hyper answers 431 beyond it.
pub const MAX_HEAD: usize = 16 * 1024;
/// How long a client has to send a whole request head, from the connection's start or the end of
/// the previous answer, and to finish a TLS handshake.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a connection may stay without a byte read or written before it is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// The most connections open at once (one file descriptor each).
pub const MAX_CONNECTIONS: usize = 256;
/// The connections the kernel queues before they are accepted (capped by
/// `net.core.somaxconn`): beyond it a new connection's SYN is dropped and retried a second later,
/// so it holds a burst of connections, such as a crowd of idle ones, without delaying a scrape.
pub const BACKLOG: i32 = 1024;
/// How long an encoding of the metrics is served again before the registry is encoded anew.
pub const ENCODING_REUSE: Duration = Duration::from_secs(1);
/// How long the listener waits after an accept failed for want of a resource.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The content type of OpenMetrics text.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of the other answers.
const TEXT: &str = "text/plain; charset=utf-8";

/// Why the endpoint cannot serve: one line that says what failed and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// `--listen` cannot be listened on (the port is taken, the address is not this machine's).
    #[error(
        "--listen {address}: cannot listen there ({source}). Give a free port of an address of \
         this machine, such as 127.0.0.1:29100."
    )]
    Listen {
        /// The address given.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The thread that serves, or its runtime, cannot be started.
    #[error("cannot start the metrics endpoint's thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// Listens on `address`, with a queue of [`BACKLOG`] connections not yet accepted.
pub fn bind(address: SocketAddr) -> Result<std::net::TcpListener, ServerError> {
    let listener = std::net::TcpListener::bind(address)
        .and_then(|listener| {
            // Linux takes a second listen() as a new length of the queue.
            rustix::net::listen(&listener, BACKLOG)?;
            listener.set_nonblocking(true)?;
            Ok(listener)
        })
        .map_err(|source| ServerError::Listen { address, source })?;
    Ok(listener)
}

/// What the endpoint serves: the metrics, and who may read them.
#[derive(Debug)]
pub struct Endpoint {
    registry: Registry,
    auth: Option<BasicAuth>,
    /// The latest encoding of each format (classic text, OpenMetrics), with when it was made.
    encodings: Mutex<[Option<(Instant, Bytes)>; 2]>,
}

impl Endpoint {
    /// Serves `registry`, to anyone or, with `auth`, to its users only.
    pub fn new(registry: Registry, auth: Option<BasicAuth>) -> Endpoint {
        Endpoint {
            registry,
            auth,
            encodings: Mutex::new([None, None]),
        }
    }

    /// The answer to `request`.
    async fn respond(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let path = request.uri().path();
        let get = request.method() == Method::GET;
        if get && path == "/healthz" {
            return answer(StatusCode::OK, TEXT, "ok\n");
        }
        if let Some(auth) = &self.auth {
            if !auth.allows(request.headers().get(AUTHORIZATION)).await {
                let mut response = answer(
                    StatusCode::UNAUTHORIZED,
                    TEXT,
                    "joularcode-bpf daemon: a user and password of the web configuration file \
                     are needed\n",
                );
                response.headers_mut().insert(
                    WWW_AUTHENTICATE,
                    HeaderValue::from_static("Basic realm=\"joularcode-bpf\""),
                );
                return response;
            }
        }
        if !(get && path == "/metrics") {
            return answer(
                StatusCode::NOT_FOUND,
                TEXT,
                "joularcode-bpf daemon: the metrics are at /metrics\n",
            );
        }
        let openmetrics = request.headers().get_all(ACCEPT).iter().any(|value| {
            value
                .to_str()
                .is_ok_and(|value| value.contains("application/openmetrics-text"))
        });
        match self.encoding(openmetrics) {
            Some(body) => answer(
                StatusCode::OK,
                if openmetrics {
                    OPENMETRICS
                } else {
                    prometheus_text::CONTENT_TYPE
                },
                body,
            ),
            None => answer(
                StatusCode::INTERNAL_SERVER_ERROR,
                TEXT,
                "could not encode the metrics\n",
            ),
        }
    }

    /// The metrics in OpenMetrics text or in the classic format: the last encoding if it is less
    /// than [`ENCODING_REUSE`] old, else a new one.
    fn encoding(&self, openmetrics: bool) -> Option<Bytes> {
        let mut encodings = self
            .encodings
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let slot = &mut encodings[usize::from(openmetrics)];
        if let Some((at, body)) = slot {
            if at.elapsed() < ENCODING_REUSE {
                return Some(body.clone());
            }
        }
        let mut body = String::new();
        let encoded = if openmetrics {
            text::encode(&mut body, &self.registry)
        } else {
            prometheus_text::encode(&mut body, &self.registry)
        };
        encoded.ok()?;
        let body = Bytes::from(body);
        *slot = Some((Instant::now(), body.clone()));
        Some(body)
    }
}

/// A response of `status` with `body` of `content_type`.
fn answer(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// Serves the requests of one connection, `io`, to its end: HTTP/1.1 with a head of
/// [`MAX_HEAD`] bytes at most, sent within [`HEAD_TIMEOUT`]. The body of a request is never
/// read. Must run in a tokio runtime with its timer.
pub async fn serve_connection<IO>(io: IO, endpoint: Arc<Endpoint>)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request| {
        let endpoint = endpoint.clone();
        async move { Ok::<_, Infallible>(endpoint.respond(request).await) }
    });
    // A client that went away, or sent what is not HTTP, is no concern of the daemon's.
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD)
        .serve_connection(TokioIo::new(io), service)
        .await;
}

/// Serves `endpoint` on `listener` (from [`bind`]), with TLS if `tls` is given, from a thread of
/// its own until the process ends. If the listener fails for good, says so through `log` and
/// ends the process with status 1.
pub fn serve(
    listener: std::net::TcpListener,
    endpoint: Endpoint,
    tls: Option<TlsAcceptor>,
    log: Arc<dyn Log>,
) -> Result<JoinHandle<()>, ServerError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        // The password checks (bcrypt) run there, one at a time.
        .max_blocking_threads(1)
        .thread_name("jp-metrics-auth")
        .build()
        .map_err(ServerError::Thread)?;
    let endpoint = Arc::new(endpoint);
    std::thread::Builder::new()
        .name("jp-metrics".into())
        .spawn(move || {
            let error = runtime.block_on(async {
                match TcpListener::from_std(listener) {
                    Ok(listener) => accept(listener, endpoint, tls, &*log).await,
                    Err(error) => error,
                }
            });
            log.log(
                Level::Severe,
                &format!(
                    "The metrics endpoint can no longer accept connections ({error}): the \
                     daemon exits so that its service manager starts it again."
                ),
            );
            std::process::exit(1);
        })
        .map_err(ServerError::Thread)
}

/// Accepts the connections of `listener` and serves each in a task of its own, until accepting
/// fails for good: that error.
async fn accept(
    listener: TcpListener,
    endpoint: Arc<Endpoint>,
    tls: Option<TlsAcceptor>,
    log: &dyn Log,
) -> std::io::Error {
    let open = Arc::new(Mutex::new(Open::default()));
    let mut said_scarce = false;
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) if is_per_connection(&error) => continue,
            Err(error) if is_scarcity(&error) => {
                if !said_scarce {
                    said_scarce = true;
                    log.log(
                        Level::Warning,
                        &format!(
                            "The metrics endpoint cannot accept a connection ({error}); it \
                             retries every {} ms. Raise the daemon's limit of open files \
                             (LimitNOFILE) if this lasts.",
                            ACCEPT_BACKOFF.as_millis()
                        ),
                    );
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
            Err(error) => return error,
        };
        let slot = Slot::take(&open);
        tokio::spawn(connection(stream, endpoint.clone(), tls.clone(), slot));
        // Lets the connection closed for this one end before the next accept, so that the
        // connections open never exceed the cap, however many wait in the queue.
        tokio::task::yield_now().await;
    }
}

/// An accept error that concerns the connection being accepted only.
fn is_per_connection(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        error.kind(),
        ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset | ErrorKind::Interrupted
    ) || matches!(
        error.raw_os_error(),
        Some(libc::EPROTO | libc::EPERM | libc::ENETDOWN | libc::EHOSTUNREACH | libc::ENONET)
    )
}

/// An accept error for want of a file descriptor or memory, which goes when some are freed.
fn is_scarcity(error: &std::io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// Serves one accepted connection until it ends, is idle for [`IDLE_TIMEOUT`], or a newer one
/// takes its slot.
async fn connection(
    stream: TcpStream,
    endpoint: Arc<Endpoint>,
    tls: Option<TlsAcceptor>,
    slot: Slot,
) {
    let stream = Watched {
        inner: stream,
        activity: slot.activity.clone(),
    };
    let served = async {
        match tls {
            None => serve_connection(stream, endpoint).await,
            Some(acceptor) => {
                if let Ok(Ok(stream)) =
                    tokio::time::timeout(HEAD_TIMEOUT, acceptor.accept(stream)).await
                {
                    serve_connection(stream, endpoint).await;
                }
            }
        }
    };
    tokio::select! {
        () = served => {}
        () = slot.close.notified() => {}
        () = slot.activity.idle_for(IDLE_TIMEOUT) => {}
    }
}

/// When a connection last read or wrote a byte, in milliseconds since [`Activity::new`]'s epoch.
#[derive(Debug, Clone)]
struct Activity {
    epoch: Instant,
    last_ms: Arc<AtomicU64>,
}

impl Activity {
    fn new(epoch: Instant) -> Activity {
        let activity = Activity {
            epoch,
            last_ms: Arc::new(AtomicU64::new(0)),
        };
        activity.touch();
        activity
    }

    /// Notes a byte read or written now.
    fn touch(&self) {
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(now, Ordering::Relaxed);
    }

    /// When it last read or wrote.
    fn last(&self) -> Instant {
        self.epoch + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }

    /// Returns once no byte has moved for `limit`.
    async fn idle_for(&self, limit: Duration) {
        loop {
            let deadline = self.last() + limit;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline.into()).await;
        }
    }
}

/// The connections open, each with its activity and the signal that closes it.
#[derive(Debug)]
struct Open {
    epoch: Instant,
    next: u64,
    connections: HashMap<u64, (Activity, Arc<Notify>)>,
}

impl Default for Open {
    fn default() -> Open {
        Open {
            epoch: Instant::now(),
            next: 0,
            connections: HashMap::new(),
        }
    }
}

/// One connection's place among the [`MAX_CONNECTIONS`], given back when dropped.
struct Slot {
    id: u64,
    open: Arc<Mutex<Open>>,
    activity: Activity,
    close: Arc<Notify>,
}

impl Slot {
    /// A place for a new connection; when all are taken, that of the connection quiet the
    /// longest, which is told to close.
    fn take(open: &Arc<Mutex<Open>>) -> Slot {
        let mut guard = open.lock().unwrap_or_else(PoisonError::into_inner);
        if guard.connections.len() >= MAX_CONNECTIONS {
            let quietest = guard
                .connections
                .iter()
                .min_by_key(|(_, (activity, _))| activity.last())
                .map(|(&id, _)| id);
            if let Some((_, close)) = quietest.and_then(|id| guard.connections.remove(&id)) {
                close.notify_one();
            }
        }
        let id = guard.next;
        guard.next += 1;
        let activity = Activity::new(guard.epoch);
        let close = Arc::new(Notify::new());
        guard
            .connections
            .insert(id, (activity.clone(), close.clone()));
        Slot {
            id,
            open: open.clone(),
            activity,
            close,
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .connections
            .remove(&self.id);
    }
}

/// A connection's stream that notes each byte read or written in its [`Activity`].
struct Watched<S> {
    inner: S,
    activity: Activity,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
