//! `agentgate sim`: the command-line arguments of the emulators and the function that
//! starts them, prints how to reach them, and serves until shutdown.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::qbusiness::{
    self, DEFAULT_ACCESS_KEY_ID, DEFAULT_APPLICATION_ID, DEFAULT_REGION, DEFAULT_SECRET_ACCESS_KEY,
    QBusinessConfig, QBusinessSim, SIGNIN_PLUGIN_ID, TICKET_PLUGIN_ID,
};

/// Arguments of `agentgate sim`. `#[non_exhaustive]`: build it with
/// `SimArgs::default()` and set fields, more emulators add more flags. `Debug` redacts
/// the secret.
#[derive(Clone, clap::Args)]
#[non_exhaustive]
pub struct SimArgs {
    /// Address of the Amazon Q Business emulator.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8731")]
    pub qbusiness_listen: SocketAddr,
    /// The Q Business application id served.
    #[arg(long, value_name = "ID", default_value = DEFAULT_APPLICATION_ID)]
    pub application_id: String,
    /// The access key id requests must be signed with.
    #[arg(long, value_name = "KEY", default_value = DEFAULT_ACCESS_KEY_ID)]
    pub aws_access_key_id: String,
    /// The secret access key requests must be signed with.
    #[arg(long, value_name = "SECRET", default_value = DEFAULT_SECRET_ACCESS_KEY)]
    pub aws_secret_access_key: String,
    /// The region of the SigV4 credential scope.
    #[arg(long, value_name = "REGION", default_value = DEFAULT_REGION)]
    pub region: String,
    /// Latency added to every request, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub latency_ms: u64,
    /// Random extra latency, up to this many milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub latency_jitter_ms: u64,
    /// Fraction of requests that fail with InternalServerException (500).
    #[arg(long = "fail-rate-500", value_name = "0..1", default_value_t = 0.0, value_parser = parse_rate)]
    pub fail_rate_500: f64,
    /// Fraction of requests that fail with ThrottlingException (429).
    #[arg(long = "fail-rate-429", value_name = "0..1", default_value_t = 0.0, value_parser = parse_rate)]
    pub fail_rate_429: f64,
}

impl std::fmt::Debug for SimArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimArgs")
            .field("qbusiness_listen", &self.qbusiness_listen)
            .field("application_id", &self.application_id)
            .field("aws_access_key_id", &self.aws_access_key_id)
            .field("aws_secret_access_key", &"<redacted>")
            .field("region", &self.region)
            .field("latency_ms", &self.latency_ms)
            .field("latency_jitter_ms", &self.latency_jitter_ms)
            .field("fail_rate_500", &self.fail_rate_500)
            .field("fail_rate_429", &self.fail_rate_429)
            .finish()
    }
}

impl Default for SimArgs {
    fn default() -> Self {
        Self {
            qbusiness_listen: SocketAddr::from(([127, 0, 0, 1], 8731)),
            application_id: DEFAULT_APPLICATION_ID.into(),
            aws_access_key_id: DEFAULT_ACCESS_KEY_ID.into(),
            aws_secret_access_key: DEFAULT_SECRET_ACCESS_KEY.into(),
            region: DEFAULT_REGION.into(),
            latency_ms: 0,
            latency_jitter_ms: 0,
            fail_rate_500: 0.0,
            fail_rate_429: 0.0,
        }
    }
}

fn parse_rate(s: &str) -> Result<f64, String> {
    let rate: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if (0.0..=1.0).contains(&rate) {
        Ok(rate)
    } else {
        Err(format!("`{s}` is not between 0 and 1"))
    }
}

/// Starts the emulators, prints their addresses and the settings clients need to stdout
/// (ready-to-paste `KEY=value` lines), and serves until `shutdown` is cancelled.
pub async fn run(args: SimArgs, shutdown: CancellationToken) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(args.qbusiness_listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.qbusiness_listen))?;
    let address = listener.local_addr().context("listener address")?;
    let config = QBusinessConfig {
        application_id: args.application_id.clone(),
        access_key_id: args.aws_access_key_id.clone(),
        secret_access_key: args.aws_secret_access_key.clone(),
        region: args.region.clone(),
        latency: Duration::from_millis(args.latency_ms),
        latency_jitter: Duration::from_millis(args.latency_jitter_ms),
        public_base_url: None,
    };
    let sim = QBusinessSim::new(config);
    sim.faults()
        .set_rates(args.fail_rate_500, args.fail_rate_429);

    let endpoint = format!("http://{address}");
    let banner = format!(
        "Amazon Q Business emulator listening on {endpoint}\n\
         \x20 application id:   {app}\n\
         \x20 ticket plugin:    {TICKET_PLUGIN_ID} (IT help desk: open a ticket)\n\
         \x20 sign-in plugin:   {SIGNIN_PLUGIN_ID} (Calendar, needs sign-in)\n\
         \x20 latency: {lat} ms (+ up to {jit} ms), fail rates: 500 {p500}, 429 {p429}\n\
         Environment for clients:\n\
         AWS_ENDPOINT_URL_QBUSINESS={endpoint}\n\
         AWS_REGION={region}\n\
         AWS_ACCESS_KEY_ID={key}\n\
         AWS_SECRET_ACCESS_KEY={secret}\n\
         QBUSINESS_APPLICATION_ID={app}\n",
        app = args.application_id,
        lat = args.latency_ms,
        jit = args.latency_jitter_ms,
        p500 = args.fail_rate_500,
        p429 = args.fail_rate_429,
        region = args.region,
        key = args.aws_access_key_id,
        secret = args.aws_secret_access_key,
    );
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(banner.as_bytes()).context("stdout")?;
    stdout.flush().context("stdout")?;
    drop(stdout);
    tracing::info!(%endpoint, "Q Business emulator started");

    qbusiness::serve(listener, sim.router(), shutdown)
        .await
        .context("Q Business emulator")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sim: SimArgs,
    }

    #[test]
    fn defaults_match_the_constants() {
        let cli = Cli::parse_from(["sim"]);
        let d = SimArgs::default();
        assert_eq!(cli.sim.qbusiness_listen, d.qbusiness_listen);
        assert_eq!(cli.sim.application_id, d.application_id);
        assert_eq!(cli.sim.aws_secret_access_key, d.aws_secret_access_key);
    }

    #[tokio::test]
    async fn run_reports_a_busy_address() {
        let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let args = SimArgs {
            qbusiness_listen: busy.local_addr().expect("addr"),
            ..SimArgs::default()
        };
        let err = run(args, CancellationToken::new())
            .await
            .expect_err("address in use");
        assert!(
            err.to_string().starts_with("cannot listen on 127.0.0.1:"),
            "{err}"
        );
    }

    #[test]
    fn debug_output_redacts_the_secret() {
        let shown = format!("{:?}", SimArgs::default());
        assert!(!shown.contains(DEFAULT_SECRET_ACCESS_KEY));
        let shown = format!("{:?}", QBusinessSim::new(QBusinessConfig::default()));
        assert!(!shown.contains(DEFAULT_SECRET_ACCESS_KEY), "{shown}");
    }

    #[test]
    fn rates_must_be_fractions() {
        assert!(Cli::try_parse_from(["sim", "--fail-rate-500", "1.5"]).is_err());
        let cli = Cli::try_parse_from(["sim", "--fail-rate-429", "0.25", "--latency-ms", "20"])
            .expect("parses");
        assert_eq!(cli.sim.fail_rate_429, 0.25);
        assert_eq!(cli.sim.latency_ms, 20);
    }
}
