//! The HTTP endpoint: `GET /metrics` answers the registry in OpenMetrics text to a client that
//! accepts it (Prometheus does), else in Prometheus' classic text format (version 0.0.4, which
//! `promtool check metrics` and older scrapers read); anything else a 404 that says where the
//! metrics are. One thread serves the scrapes one after the other (a
//! scrape takes a lock on the metrics for as long as it encodes them, well under a millisecond).

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::registry::Registry;
use tiny_http::{Header, Method, Response, Server};

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
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The thread that serves cannot be started.
    #[error("cannot start the metrics endpoint's thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// Listens on `address`.
pub fn bind(address: SocketAddr) -> Result<Server, ServerError> {
    Server::http(address).map_err(|source| ServerError::Listen { address, source })
}

/// Serves `registry` on `server` from a thread of its own, until the process ends.
pub fn serve(server: Server, registry: Arc<Registry>) -> Result<JoinHandle<()>, ServerError> {
    std::thread::Builder::new()
        .name("jp-metrics".into())
        .spawn(move || {
            for request in server.incoming_requests() {
                let response = if *request.method() == Method::Get
                    && request.url().split('?').next() == Some("/metrics")
                {
                    let openmetrics = request.headers().iter().any(|header| {
                        header.field.equiv("Accept")
                            && header
                                .value
                                .as_str()
                                .contains("application/openmetrics-text")
                    });
                    let mut body = String::new();
                    let (encoded, content_type) = if openmetrics {
                        (text::encode(&mut body, &registry), OPENMETRICS)
                    } else {
                        (
                            prometheus_text::encode(&mut body, &registry),
                            prometheus_text::CONTENT_TYPE,
                        )
                    };
                    match encoded {
                        Ok(()) => Response::from_string(body).with_header(header(content_type)),
                        Err(_) => Response::from_string("could not encode the metrics\n")
                            .with_status_code(500)
                            .with_header(header(TEXT)),
                    }
                } else {
                    Response::from_string("joularcode-bpf daemon: the metrics are at /metrics\n")
                        .with_status_code(404)
                        .with_header(header(TEXT))
                };
                // A scraper that went away is no concern of the daemon's.
                let _ = request.respond(response);
            }
        })
        .map_err(ServerError::Thread)
}

fn header(content_type: &str) -> Header {
    Header::from_bytes(&b"Content-Type"[..], content_type.as_bytes())
        .expect("the content types above are valid header values")
}
