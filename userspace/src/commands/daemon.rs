//! `joularcode-bpf daemon`: profiles every JVM of the host, always, and exports their energy on a
//! Prometheus endpoint (see docs/daemon.md). It is `record --all` ([`record::run_with`]) with no
//! end but a signal, whose cycles go to the metrics ([`crate::daemon`]) the endpoint serves.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use joularcode_core::entry::EntryRule;
use joularcode_core::log::{Log, Stderr};
use prometheus_client::registry::Registry;

use crate::cli::DaemonArgs;
use crate::daemon::metrics::{ExportOptions, Metrics};
use crate::daemon::{server, web_config, Shared};
use crate::record::{self, Outputs};

/// Runs the daemon until SIGTERM or Ctrl-C (the cycle in progress is written first). Errors are
/// one line each: the options, the web configuration file or the configuration file are wrong
/// (said before anything listens), the address cannot be listened on, the power source is
/// wrong, BPF cannot be loaded.
pub fn run(args: &DaemonArgs) -> Result<i32, String> {
    crate::daemon::bound_the_heap();
    let recording = args.recording();
    let log: Arc<dyn Log> = Arc::new(Stderr::default());
    // Read before anything listens, so that a wrong file or option is the only line
    let web = args
        .web_config_file
        .as_deref()
        .map(web_config::read)
        .transpose()
        .map_err(|e| e.to_string())?;
    let config = record::configure(&recording, &*log).map_err(|e| e.to_string())?;
    let listener = server::bind(args.listen).map_err(|e| e.to_string())?;
    // The port the system chose for port 0, else the one asked for.
    let listening = listener
        .local_addr()
        .map_or_else(|_| args.listen.to_string(), |address| address.to_string());
    let metrics = Shared(Arc::new(Mutex::new(Metrics::new(
        ExportOptions {
            top: usize::from(args.top),
            idle: Duration::from_secs_f64(args.branch_idle),
            keep_ended: Duration::from_secs_f64(args.keep_ended),
            entries: EntryRule::of(&config),
        },
        Path::new("/proc"),
    ))));
    let mut registry = Registry::default();
    registry.register_collector(Box::new(metrics.clone()));
    let (tls, auth) = web.map_or((None, None), |web| (web.tls, web.auth));
    let scheme = if tls.is_some() { "https" } else { "http" };
    server::serve(
        listener,
        server::Endpoint::new(registry, auth),
        tls,
        log.clone(),
    )
    .map_err(|e| e.to_string())?;
    log.log(
        joularcode_core::log::Level::Info,
        &format!("Metrics at {scheme}://{listening}/metrics"),
    );
    record::run_configured(
        recording,
        config,
        Outputs {
            log,
            csv: args.writes_csv(),
            sinks: vec![Box::new(metrics)],
        },
    )
    .map_err(|e| e.to_string())
}
