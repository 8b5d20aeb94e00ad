//! `agentgate sim`: the command-line arguments of the emulators and the function that
//! starts them, prints how to reach them, and serves until shutdown.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::a2a::{self, A2aConfig, A2aSim, Skill};
use crate::github::{
    self, DEFAULT_GITHUB_TOKEN, DEFAULT_RATE_LIMIT, GithubConfig, GithubSim, Seed,
};
use crate::mcp;
use crate::qbusiness::{
    self, DEFAULT_ACCESS_KEY_ID, DEFAULT_APPLICATION_ID, DEFAULT_REGION, DEFAULT_SECRET_ACCESS_KEY,
    IdentityCenterConfig, QBusinessConfig, QBusinessSim, SIGNIN_PLUGIN_ID, TICKET_PLUGIN_ID,
};

/// Arguments of `agentgate sim`. `#[non_exhaustive]`: build it with
/// `SimArgs::default()` and set fields, more emulators add more flags. `Debug` redacts
/// the secrets.
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
    /// Address of the GitHub emulator (GraphQL and REST).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8732")]
    pub github_listen: SocketAddr,
    /// The token GitHub requests must carry.
    #[arg(long, value_name = "TOKEN", default_value = DEFAULT_GITHUB_TOKEN)]
    pub github_token: String,
    /// The GitHub emulator's seed (TOML, or JSON if the name ends in .json); default: the
    /// built-in seed (acme/widgets, acme/crowded, acme/legacy).
    #[arg(long, value_name = "FILE")]
    pub seed: Option<PathBuf>,
    /// Multiplies the simulated Copilot agent's delays (0.1 = ten times faster).
    #[arg(long, value_name = "F", default_value_t = 1.0, value_parser = parse_scale)]
    pub time_scale: f64,
    /// The GitHub primary rate-limit budget, points per hour (GraphQL and REST each).
    #[arg(long, value_name = "POINTS", default_value_t = DEFAULT_RATE_LIMIT)]
    pub github_rate_limit: u64,
    /// Fraction of GitHub requests that fail with 502 Server Error.
    #[arg(long = "github-fail-rate-5xx", value_name = "0..1", default_value_t = 0.0, value_parser = parse_rate)]
    pub github_fail_rate_5xx: f64,
    /// Fraction of GitHub requests that hit a secondary rate limit (REST 429, GraphQL 403).
    #[arg(long = "github-fail-rate-429", value_name = "0..1", default_value_t = 0.0, value_parser = parse_rate)]
    pub github_fail_rate_429: f64,
    /// Faults for the next GitHub requests, comma-separated: ok, 502,
    /// secondary_rate_limit, rate_limited, bad_credentials.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub github_fault_script: Vec<String>,
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
    /// Address of the slow-tool MCP server (Streamable HTTP at `/mcp`).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8734")]
    pub mcp_listen: SocketAddr,
    /// Serve only the slow-tool MCP server, on stdin/stdout (what
    /// `[[mcp.servers]] command` runs); nothing is printed to stdout but MCP.
    #[arg(long)]
    pub mcp_stdio: bool,
    /// Address of the A2A v1.0 agent emulator (JSON-RPC at `/`).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8733")]
    pub a2a_listen: SocketAddr,
    /// The bearer token A2A requests must carry; none: no authentication.
    #[arg(long, value_name = "TOKEN", env = "AGENTGATE_SIM_A2A_TOKEN")]
    pub a2a_token: Option<String>,
    /// Milliseconds between the progress steps of the A2A `long-running` agents.
    #[arg(long, value_name = "MS", default_value_t = 200)]
    pub a2a_step_delay_ms: u64,
    /// An OAuth client id: the A2A card then asks for the client-credentials flow
    /// and its token endpoint (`/oauth/token`) issues access tokens to this client.
    #[arg(long, value_name = "ID", requires = "a2a_oauth_client_secret")]
    pub a2a_oauth_client_id: Option<String>,
    /// The OAuth client's secret.
    #[arg(long, value_name = "SECRET", env = "AGENTGATE_SIM_A2A_CLIENT_SECRET")]
    pub a2a_oauth_client_secret: Option<String>,
    /// Serve A2A push notifications (`capabilities.pushNotifications`).
    #[arg(long)]
    pub a2a_push: bool,
    /// Play IAM Identity Center and STS for identity-aware sessions: the
    /// trusted token issuer's `iss` (its keys from `--idc-jwks-uri`).
    #[arg(long, value_name = "URL", requires_all = ["idc_jwks_uri", "idc_audience"])]
    pub idc_issuer: Option<String>,
    /// The trusted token issuer's JWKS.
    #[arg(long, value_name = "URL", requires = "idc_issuer")]
    pub idc_jwks_uri: Option<String>,
    /// The `aud` the Identity Center application accepts (agentgate's `[auth] resource`).
    #[arg(long, value_name = "AUD", requires = "idc_issuer")]
    pub idc_audience: Option<String>,
    /// The token claim that names the Identity Center user.
    #[arg(long, value_name = "CLAIM", default_value = "email")]
    pub idc_user_claim: String,
    /// The Identity Center application's ARN (`CreateTokenWithIAM`'s `clientId`).
    #[arg(long, value_name = "ARN", default_value = DEFAULT_IDC_APPLICATION_ARN)]
    pub idc_application_arn: String,
    /// The role `AssumeRole` may assume with an identity context.
    #[arg(long, value_name = "ARN", default_value = DEFAULT_IDC_ROLE_ARN)]
    pub idc_role_arn: String,
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
            .field("github_listen", &self.github_listen)
            .field("github_token", &"<redacted>")
            .field("seed", &self.seed)
            .field("time_scale", &self.time_scale)
            .field("github_rate_limit", &self.github_rate_limit)
            .field("github_fail_rate_5xx", &self.github_fail_rate_5xx)
            .field("github_fail_rate_429", &self.github_fail_rate_429)
            .field("github_fault_script", &self.github_fault_script)
            .field("mcp_listen", &self.mcp_listen)
            .field("mcp_stdio", &self.mcp_stdio)
            .field("a2a_listen", &self.a2a_listen)
            .field("a2a_token", &self.a2a_token.as_ref().map(|_| "<redacted>"))
            .field("a2a_step_delay_ms", &self.a2a_step_delay_ms)
            .field("a2a_oauth_client_id", &self.a2a_oauth_client_id)
            .field(
                "a2a_oauth_client_secret",
                &self.a2a_oauth_client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("a2a_push", &self.a2a_push)
            .field("idc_issuer", &self.idc_issuer)
            .field("idc_jwks_uri", &self.idc_jwks_uri)
            .field("idc_audience", &self.idc_audience)
            .field("idc_user_claim", &self.idc_user_claim)
            .field("idc_application_arn", &self.idc_application_arn)
            .field("idc_role_arn", &self.idc_role_arn)
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
            github_listen: SocketAddr::from(([127, 0, 0, 1], 8732)),
            github_token: DEFAULT_GITHUB_TOKEN.into(),
            seed: None,
            time_scale: 1.0,
            github_rate_limit: DEFAULT_RATE_LIMIT,
            github_fail_rate_5xx: 0.0,
            github_fail_rate_429: 0.0,
            github_fault_script: Vec::new(),
            mcp_listen: SocketAddr::from(([127, 0, 0, 1], 8734)),
            mcp_stdio: false,
            a2a_listen: SocketAddr::from(([127, 0, 0, 1], 8733)),
            a2a_token: None,
            a2a_step_delay_ms: 200,
            a2a_oauth_client_id: None,
            a2a_oauth_client_secret: None,
            a2a_push: false,
            idc_issuer: None,
            idc_jwks_uri: None,
            idc_audience: None,
            idc_user_claim: "email".into(),
            idc_application_arn: DEFAULT_IDC_APPLICATION_ARN.into(),
            idc_role_arn: DEFAULT_IDC_ROLE_ARN.into(),
        }
    }
}

/// The Identity Center application the emulator plays by default.
const DEFAULT_IDC_APPLICATION_ARN: &str =
    "arn:aws:sso::111122223333:application/ssoins-emulated/apl-agentgate";
/// The role it lets be assumed by default.
const DEFAULT_IDC_ROLE_ARN: &str = "arn:aws:iam::111122223333:role/QBusinessIdentityAware";

fn parse_scale(s: &str) -> Result<f64, String> {
    let scale: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if scale.is_finite() && scale >= 0.0 {
        Ok(scale)
    } else {
        Err(format!("`{s}` is not a non-negative number"))
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
    if args.mcp_stdio {
        return mcp::serve_stdio(shutdown).await;
    }
    let listener = tokio::net::TcpListener::bind(args.qbusiness_listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.qbusiness_listen))?;
    let address = listener.local_addr().context("listener address")?;
    let github_listener = tokio::net::TcpListener::bind(args.github_listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.github_listen))?;
    let github_address = github_listener.local_addr().context("listener address")?;
    let a2a_listener = tokio::net::TcpListener::bind(args.a2a_listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.a2a_listen))?;
    let a2a_address = a2a_listener.local_addr().context("listener address")?;
    let mcp_listener = tokio::net::TcpListener::bind(args.mcp_listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.mcp_listen))?;
    let mcp_address = mcp_listener.local_addr().context("listener address")?;
    let oauth = match (&args.a2a_oauth_client_id, &args.a2a_oauth_client_secret) {
        (Some(id), Some(secret)) => Some(a2a::OAuthClient {
            client_id: id.clone(),
            client_secret: secret.clone(),
            token_ttl: Duration::from_secs(3600),
        }),
        (None, None) => None,
        _ => anyhow::bail!("--a2a-oauth-client-id and --a2a-oauth-client-secret go together"),
    };
    let a2a_sim = A2aSim::new(A2aConfig {
        token: args.a2a_token.clone(),
        step_delay: Duration::from_millis(args.a2a_step_delay_ms),
        oauth,
        push_notifications: args.a2a_push,
        ..A2aConfig::default()
    });
    let seed = match &args.seed {
        Some(path) => Seed::from_path(path)?,
        None => Seed::default(),
    };
    let config = QBusinessConfig {
        application_id: args.application_id.clone(),
        access_key_id: args.aws_access_key_id.clone(),
        secret_access_key: args.aws_secret_access_key.clone(),
        region: args.region.clone(),
        latency: Duration::from_millis(args.latency_ms),
        latency_jitter: Duration::from_millis(args.latency_jitter_ms),
        public_base_url: None,
        identity_center: match (&args.idc_issuer, &args.idc_jwks_uri, &args.idc_audience) {
            (Some(issuer), Some(jwks_uri), Some(audience)) => Some(IdentityCenterConfig {
                application_arn: args.idc_application_arn.clone(),
                role_arn: args.idc_role_arn.clone(),
                issuer: issuer.clone(),
                jwks_uri: jwks_uri.clone(),
                audience: audience.clone(),
                user_claim: args.idc_user_claim.clone(),
            }),
            _ => None,
        },
        ..QBusinessConfig::default()
    };
    let sim = QBusinessSim::new(config);
    sim.faults()
        .set_rates(args.fail_rate_500, args.fail_rate_429);
    let github_sim = GithubSim::new(GithubConfig {
        token: args.github_token.clone(),
        latency: Duration::from_millis(args.latency_ms),
        latency_jitter: Duration::from_millis(args.latency_jitter_ms),
        time_scale: args.time_scale,
        rate_limit: args.github_rate_limit,
        seed,
        ..GithubConfig::default()
    });
    github_sim
        .faults()
        .set_rates(args.github_fail_rate_5xx, args.github_fail_rate_429);
    github_sim
        .faults()
        .try_script(&args.github_fault_script)
        .context("--github-fault-script")?;

    let endpoint = format!("http://{address}");
    let github_endpoint = format!("http://{github_address}");
    let a2a_endpoint = format!("http://{a2a_address}");
    let repos: Vec<String> = github_sim
        .config()
        .seed
        .repositories
        .iter()
        .map(|r| {
            let copilot = if r.copilot_enabled {
                ""
            } else {
                " (no Copilot)"
            };
            format!("{}/{}{copilot}", r.owner, r.name)
        })
        .collect();
    let banner = format!(
        "Amazon Q Business emulator listening on {endpoint}\n\
         \x20 application id:   {app}\n\
         \x20 ticket plugin:    {TICKET_PLUGIN_ID} (IT help desk: open a ticket)\n\
         \x20 sign-in plugin:   {SIGNIN_PLUGIN_ID} (Calendar, needs sign-in)\n\
         \x20 latency: {lat} ms (+ up to {jit} ms), fail rates: 500 {p500}, 429 {p429}\n\
         GitHub emulator listening on {github_endpoint} (GraphQL at /graphql, REST)\n\
         \x20 repositories:     {repos}\n\
         \x20 time scale: {scale}, rate limit: {budget}/h, fail rates: 5xx {g5xx}, 429 {g429}\n\
         A2A v1.0 agent emulator listening on {a2a_endpoint}/ (JSON-RPC, send A2A-Version: 1.0)\n\
         \x20 agent card:       {a2a_endpoint}{card}\n\
         \x20 skills:           {skills} (metadata `skill` or the first word selects)\n\
         \x20 bearer token:     {a2a_auth}\n\
         \x20 OAuth client:     {a2a_oauth}\n\
         \x20 push:             {a2a_push}\n\
         Environment for clients:\n\
         AWS_ENDPOINT_URL_QBUSINESS={endpoint}\n\
         AWS_REGION={region}\n\
         AWS_ACCESS_KEY_ID={key}\n\
         AWS_SECRET_ACCESS_KEY={secret}\n\
         QBUSINESS_APPLICATION_ID={app}\n\
         GITHUB_API_URL={github_endpoint}\n\
         GITHUB_PERSONAL_ACCESS_TOKEN={token}\n\
         Slow-tool MCP server listening on http://{mcp_address}{mcp_path} (Streamable HTTP; \
         tool `{mcp_tool}`; stdio: agentgate sim --mcp-stdio)\n\
         For the A2A agent, agentgate's config file (A2A agents are configured there, not in \
         the environment):\n\
         \x20 [[a2a.agents]]\n\
         \x20 name = \"sim\"\n\
         \x20 url = \"{a2a_endpoint}\"\n\
         For the MCP server, also there:\n\
         \x20 [[mcp.servers]]\n\
         \x20 name = \"sim\"\n\
         \x20 url = \"http://{mcp_address}{mcp_path}\"\n",
        app = args.application_id,
        lat = args.latency_ms,
        jit = args.latency_jitter_ms,
        p500 = args.fail_rate_500,
        p429 = args.fail_rate_429,
        repos = repos.join(", "),
        scale = args.time_scale,
        budget = args.github_rate_limit,
        g5xx = args.github_fail_rate_5xx,
        g429 = args.github_fail_rate_429,
        region = args.region,
        key = args.aws_access_key_id,
        secret = args.aws_secret_access_key,
        token = args.github_token,
        card = a2a::AGENT_CARD_PATH,
        skills = Skill::ALL.map(Skill::id).join(", "),
        a2a_auth = if args.a2a_token.is_some() {
            "required (--a2a-token)"
        } else {
            "none"
        },
        a2a_oauth = match &args.a2a_oauth_client_id {
            Some(id) => format!("{id} (token endpoint {a2a_endpoint}{})", a2a::TOKEN_PATH),
            None => "none".into(),
        },
        a2a_push = if args.a2a_push { "on" } else { "off" },
        mcp_path = mcp::MCP_PATH,
        mcp_tool = mcp::TOOL,
    );
    {
        // A block, not `drop`: the lock must not live across an await (`run` is `Send`).
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(banner.as_bytes()).context("stdout")?;
        stdout.flush().context("stdout")?;
    }
    tracing::info!(%endpoint, "Q Business emulator started");
    tracing::info!(endpoint = %github_endpoint, "GitHub emulator started");

    let qbusiness = async {
        qbusiness::serve(listener, sim.router(), shutdown.clone())
            .await
            .context("Q Business emulator")
    };
    let github = async {
        github::serve(github_listener, github_sim.router(), shutdown.clone())
            .await
            .context("GitHub emulator")
    };
    let a2a = async {
        a2a::serve(a2a_listener, a2a_sim.router(), shutdown.clone())
            .await
            .context("A2A emulator")
    };
    let mcp_server = async {
        axum::serve(
            mcp_listener,
            mcp::McpSim::new(None).router(shutdown.clone()),
        )
        .with_graceful_shutdown(shutdown.clone().cancelled_owned())
        .await
        .context("MCP server")
    };
    tracing::info!(endpoint = %a2a_endpoint, "A2A emulator started");
    tokio::try_join!(qbusiness, github, a2a, mcp_server).map(|_| ())
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
        assert_eq!(cli.sim.github_listen, d.github_listen);
        assert_eq!(cli.sim.github_token, d.github_token);
        assert_eq!(cli.sim.seed, d.seed);
        assert_eq!(cli.sim.time_scale, d.time_scale);
        assert_eq!(cli.sim.github_rate_limit, d.github_rate_limit);
        assert_eq!(cli.sim.github_fault_script, d.github_fault_script);
        assert_eq!(cli.sim.a2a_listen, d.a2a_listen);
        assert_eq!(cli.sim.a2a_step_delay_ms, d.a2a_step_delay_ms);
    }

    #[test]
    fn a2a_flags_parse_and_the_token_is_redacted() {
        let cli = Cli::try_parse_from([
            "sim",
            "--a2a-listen",
            "127.0.0.1:9999",
            "--a2a-token",
            "sekrit-a2a",
            "--a2a-step-delay-ms",
            "5",
        ])
        .expect("parses");
        assert_eq!(cli.sim.a2a_listen.port(), 9999);
        assert_eq!(cli.sim.a2a_token.as_deref(), Some("sekrit-a2a"));
        assert_eq!(cli.sim.a2a_step_delay_ms, 5);
        let shown = format!("{:?}", cli.sim);
        assert!(!shown.contains("sekrit-a2a"), "{shown}");
    }

    #[test]
    fn github_flags_parse() {
        let cli = Cli::try_parse_from([
            "sim",
            "--time-scale",
            "0.1",
            "--github-fault-script",
            "502,ok",
            "--seed",
            "seeds/default.toml",
            "--github-fail-rate-5xx",
            "0.5",
        ])
        .expect("parses");
        assert_eq!(cli.sim.time_scale, 0.1);
        assert_eq!(cli.sim.github_fault_script, vec!["502", "ok"]);
        assert_eq!(cli.sim.github_fail_rate_5xx, 0.5);
        assert!(cli.sim.seed.is_some());
        assert!(Cli::try_parse_from(["sim", "--time-scale", "-1"]).is_err());
    }

    #[tokio::test]
    async fn run_serves_every_emulator_until_shutdown() {
        let args = SimArgs {
            qbusiness_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            github_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            a2a_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            mcp_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            ..SimArgs::default()
        };
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(run(args, shutdown.clone()));
        tokio::time::sleep(Duration::from_millis(50)).await;
        shutdown.cancel();
        task.await.expect("join").expect("run");
    }

    #[tokio::test]
    async fn run_rejects_an_unknown_scripted_fault() {
        let args = SimArgs {
            qbusiness_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            github_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            a2a_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            mcp_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            github_fault_script: vec!["nope".into()],
            ..SimArgs::default()
        };
        let err = run(args, CancellationToken::new())
            .await
            .expect_err("unknown fault");
        assert!(format!("{err:#}").contains("nope"), "{err:#}");
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
        assert!(!shown.contains(DEFAULT_GITHUB_TOKEN), "{shown}");
        let shown = format!("{:?}", GithubSim::new(GithubConfig::default()));
        assert!(!shown.contains(DEFAULT_GITHUB_TOKEN), "{shown}");
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
