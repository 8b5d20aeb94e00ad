//! The run: start each server as a child process, drive it, stop it, and
//! collect every figure into a [`Report`].
//!
//! Servers ([`crate::serve`] says what each is): `agentgate-sqlite`,
//! `agentgate-postgres` (both as `agentgate serve` runs by default: limits
//! on, auth mode `none`), `baseline-rmcp-our-stack` (rmcp's `TaskManager`
//! behind our `http_router`), `baseline-rmcp-plain` (the same handler on
//! rmcp's default Streamable HTTP stack) and `echo`.
//!
//! Order:
//! 1. Per MCP server: fill it with `store_tasks` working tasks, then
//!    `tasks/get` at 1, 16 and 64 pollers on random ids among them, then the
//!    one-step lifecycle (create with `ms` = 0 → poll every 2 ms →
//!    completed) and the two-step one (`ms` = 1: the first step waits, the
//!    second completes), then durable create (`tools/call` →
//!    `CreateTaskResult`) at 1 and 16 clients. The echo gets the pollers only.
//! 2. The layer ladder: `tasks/get` at 16 pollers on servers that add one
//!    HTTP layer at a time, run back to back (see [`ladder`]).
//! 3. Scheduler throughput: a store seeded by SQL with `backlog_tasks`
//!    queued tasks, agentgate started on it, timed until none is unstepped.
//! 4. Scale (seeded stores), RSS (many working tasks; agentgate without
//!    `[limits]`, see [`rss_run`]), the watcher.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use rand::Rng as _;
use sqlx::Connection as _;
use tokio::io::AsyncBufReadExt as _;

use crate::client::McpClient;
use crate::load::{self, Measured, Plan};
use crate::report::{self, Report, ServerFigures};
use crate::{seed, watch};

/// Where PostgreSQL figures come from.
#[derive(Debug, Clone)]
pub(crate) enum PgChoice {
    Off,
    /// Must work: an error if it does not.
    Given(String),
    /// Used if it answers.
    Probe(String),
}

#[derive(Debug)]
pub(crate) struct Options {
    pub size: RunSize,
    pub json: Option<PathBuf>,
    pub markdown: Option<PathBuf>,
    pub postgres: PgChoice,
}

/// How big a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RunSize {
    /// The figures BENCHMARKS.md is written from.
    Full,
    /// Small counts and short rounds: a first look, minutes.
    Quick,
    /// One short round of everything: proves the bench runs (CI); no
    /// figure is worth reading.
    Smoke,
}

/// Counts and durations of one run.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Sizes {
    #[serde(skip)]
    pub plan: Plan,
    pub warmup_s: f64,
    pub rounds: usize,
    pub round_s: f64,
    /// Working tasks in each store during the `tasks/get` runs.
    pub store_tasks: usize,
    pub pollers: Vec<usize>,
    pub create_clients: Vec<usize>,
    pub lifecycle_clients: usize,
    /// Pollers on every rung of the layer ladder.
    pub ladder_pollers: usize,
    /// Queued tasks seeded for the scheduler throughput measure.
    pub backlog_tasks: u64,
    /// Scale: stored tasks, small and large.
    pub scale_small: u64,
    pub scale_large: u64,
    /// RSS: working tasks held by agentgate on SQLite.
    pub rss_working: usize,
    /// RSS: working tasks held by the baseline and by agentgate on PostgreSQL.
    pub rss_working_small: usize,
    pub watched: Vec<usize>,
    pub watch_cycles: u64,
}

impl Sizes {
    fn new(size: RunSize) -> Self {
        let plan = match size {
            RunSize::Full => Plan {
                warmup: Duration::from_secs(2),
                rounds: 5,
                round: Duration::from_secs(2),
            },
            RunSize::Quick => Plan {
                warmup: Duration::from_millis(300),
                rounds: 3,
                round: Duration::from_millis(600),
            },
            RunSize::Smoke => Plan {
                warmup: Duration::from_millis(50),
                rounds: 1,
                round: Duration::from_millis(200),
            },
        };
        fn by_size<T>(size: RunSize, full: T, quick: T, smoke: T) -> T {
            match size {
                RunSize::Full => full,
                RunSize::Quick => quick,
                RunSize::Smoke => smoke,
            }
        }
        Self {
            plan,
            warmup_s: plan.warmup.as_secs_f64(),
            rounds: plan.rounds,
            round_s: plan.round.as_secs_f64(),
            store_tasks: 1000,
            pollers: vec![1, 16, 64],
            create_clients: vec![1, 16],
            lifecycle_clients: 16,
            ladder_pollers: 16,
            backlog_tasks: by_size(size, 50_000, 5_000, 500),
            scale_small: 1_000,
            scale_large: by_size(size, 10_000_000, 100_000, 5_000),
            rss_working: by_size(size, 100_000, 10_000, 1_000),
            // rmcp's TaskManager scans every task on every call, so creating
            // N tasks costs O(N²), and agentgate on PostgreSQL steps a few
            // hundred tasks a second: 100 000 would take many minutes for
            // those two. They hold this many instead (labelled as such).
            rss_working_small: by_size(size, 10_000, 10_000, 1_000),
            watched: vec![1, 10, 100, 1000],
            watch_cycles: by_size(size, 10, 3, 1),
        }
    }
}

/// A long wait: tasks created with it stay `working` for the whole run.
const LONG_MS: u64 = 3_000_000;

/// One server under test, running as a child process.
struct Server {
    child: tokio::process::Child,
    pid: u32,
    base: String,
    /// The bearer token its clients send, if it checks tokens.
    token: Option<String>,
}

/// What to start: a `serve` kind, its store, and its layer switches.
#[derive(Debug, Clone)]
struct Spec<'a> {
    kind: &'a str,
    store: Option<&'a str>,
    /// Check bearer tokens (one made like `agentgate auth new-token` does).
    auth: bool,
    no_limits: bool,
}

impl<'a> Spec<'a> {
    fn new(kind: &'a str, store: Option<&'a str>) -> Self {
        Self {
            kind,
            store,
            auth: false,
            no_limits: false,
        }
    }

    fn with_auth(mut self) -> Self {
        self.auth = true;
        self
    }

    fn without_limits(mut self) -> Self {
        self.no_limits = true;
        self
    }
}

impl Server {
    async fn start(spec: &Spec<'_>) -> anyhow::Result<Self> {
        let kind = spec.kind;
        let exe = std::env::current_exe().context("locating the bench binary")?;
        let mut command = tokio::process::Command::new(exe);
        command.arg("serve").arg(kind);
        if let Some(store) = spec.store {
            command.arg("--store").arg(store);
        }
        let token = spec.auth.then(agentgate_core::auth::tokens::new_token);
        if let Some(token) = &token {
            command
                .arg("--token-sha256")
                .arg(agentgate_core::auth::tokens::token_hash(token));
        }
        if spec.no_limits {
            command.arg("--no-limits");
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting the {kind} server"))?;
        let pid = child.id().context("the server exited at once")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .with_context(|| format!("the {kind} server did not start within 60 s"))??
            .with_context(|| format!("the {kind} server exited before listening"))?;
        let base = line
            .strip_prefix("listening ")
            .with_context(|| format!("unexpected first line from the {kind} server: {line}"))?
            .to_owned();
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self {
            child,
            pid,
            base,
            token,
        })
    }

    fn client(&self) -> anyhow::Result<McpClient> {
        McpClient::new(&self.base, self.token.as_deref())
    }

    /// What each load worker needs to build its own client.
    fn target(&self) -> (String, Option<String>) {
        (self.base.clone(), self.token.clone())
    }

    /// Peak and current resident set size, in MB.
    fn rss_mb(&self) -> (Option<f64>, Option<f64>) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok();
        let field = |name: &str| {
            status.as_deref().and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
                    .map(|kb| kb / 1024.0)
            })
        };
        (field("VmHWM:"), field("VmRSS:"))
    }

    async fn stop(mut self) {
        // Our own child, by its handle.
        let _ = self.child.kill().await;
    }
}

/// A worker's client; the error as text so that it can be cloned into
/// every operation (and counted there) instead of aborting the run.
fn client_for((base, token): &(String, Option<String>)) -> Result<McpClient, String> {
    McpClient::new(base, token.as_deref()).map_err(|e| format!("{e:#}"))
}

/// Creates `count` tasks with `clients` concurrent clients; returns their ids.
async fn create_many(
    server: &Server,
    count: usize,
    clients: usize,
    ms: u64,
) -> anyhow::Result<Vec<String>> {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut handles = Vec::new();
    for _ in 0..clients {
        let client = server.client()?;
        let next = next.clone();
        handles.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < count {
                ids.push(client.create(ms).await?);
            }
            anyhow::Ok(ids)
        }));
    }
    let mut ids = Vec::with_capacity(count);
    for handle in handles {
        ids.extend(handle.await.context("a creating client panicked")??);
    }
    Ok(ids)
}

/// `tasks/get` on random ids from `ids`.
async fn polls(server: &Server, ids: Arc<Vec<String>>, pollers: usize, plan: Plan) -> Measured {
    let target = server.target();
    load::run(pollers, plan, move |_| {
        let client = client_for(&target);
        let ids = ids.clone();
        move || {
            let client = client.clone();
            let id = ids[rand::rng().random_range(0..ids.len())].clone();
            async move {
                client.map_err(anyhow::Error::msg)?.get(&id).await?;
                Ok(())
            }
        }
    })
    .await
}

async fn echoes(server: &Server, pollers: usize, plan: Plan) -> Measured {
    let target = server.target();
    load::run(pollers, plan, move |_| {
        let client = client_for(&target);
        move || {
            let client = client.clone();
            let id = seed::seeded_id(rand::rng().random_range(0..1000));
            async move { client.map_err(anyhow::Error::msg)?.echo(&id).await }
        }
    })
    .await
}

async fn creates(server: &Server, clients: usize, plan: Plan) -> Measured {
    let target = server.target();
    load::run(clients, plan, move |_| {
        let client = client_for(&target);
        move || {
            let client = client.clone();
            async move {
                client.map_err(anyhow::Error::msg)?.create(LONG_MS).await?;
                Ok(())
            }
        }
    })
    .await
}

/// Create a task of `ms` (0: one step that completes; 1: a first step that
/// waits 1 ms, a second that completes), poll it every 2 ms until it ends.
async fn lifecycles(server: &Server, clients: usize, ms: u64, plan: Plan) -> Measured {
    let target = server.target();
    load::run(clients, plan, move |_| {
        let client = client_for(&target);
        move || {
            let client = client.clone();
            async move {
                let client = client.map_err(anyhow::Error::msg)?;
                let id = client.create(ms).await?;
                let deadline = Instant::now() + Duration::from_secs(30);
                loop {
                    match client.get(&id).await?.as_str() {
                        "completed" => return Ok(()),
                        "working" => {}
                        other => bail!("task {id} ended {other}"),
                    }
                    if Instant::now() > deadline {
                        bail!("task {id} still working after 30 s");
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
        }
    })
    .await
}

/// Creates `count` long-waiting tasks on `server` and, for agentgate, waits
/// until the scheduler has run their first steps (each a checkpointed wait),
/// so the reads that follow run alone. Returns their ids.
async fn fill(server: &Server, store: Option<&str>, count: usize) -> anyhow::Result<Vec<String>> {
    let ids = create_many(server, count, 16, LONG_MS).await?;
    if let Some(store) = store {
        let left = drain(store, Duration::from_secs(120), DRAIN_POLL).await?;
        if left > 0 {
            eprintln!("   ({left} first steps still queued when the reads began)");
        }
    }
    Ok(ids)
}

/// Every throughput and latency figure for one MCP server.
async fn mcp_server(name: &str, spec: &Spec<'_>, sizes: &Sizes) -> anyhow::Result<ServerFigures> {
    eprintln!("== {name}: starting");
    let server = Server::start(spec).await?;
    let store = spec.store;
    let mut figures = ServerFigures::new(name);
    let ids = Arc::new(fill(&server, store, sizes.store_tasks).await?);
    for &pollers in &sizes.pollers {
        let m = polls(&server, ids.clone(), pollers, sizes.plan).await;
        eprintln!("   tasks/get x{pollers}: {}", report::line(&m));
        figures.tasks_get.push(m);
    }
    let clients = sizes.lifecycle_clients;
    let m = lifecycles(&server, clients, 0, sizes.plan).await;
    eprintln!("   lifecycle x{clients}: {}", report::line(&m));
    figures.lifecycle = Some(m);
    let m = lifecycles(&server, clients, 1, sizes.plan).await;
    eprintln!("   two-step lifecycle x{clients}: {}", report::line(&m));
    figures.lifecycle_two_step = Some(m);
    for &clients in &sizes.create_clients {
        let m = creates(&server, clients, sizes.plan).await;
        eprintln!("   create x{clients}: {}", report::line(&m));
        figures.create.push(m);
    }
    // Creates outrun the scheduler: how long it takes to step the backlog
    // they left says how fast it runs steps (claim + step + checkpoint).
    if let Some(store) = store {
        let backlog = seed::unstepped(store).await?;
        let started = Instant::now();
        let left = drain(store, Duration::from_secs(90), DRAIN_POLL).await?;
        let seconds = started.elapsed().as_secs_f64();
        eprintln!(
            "   scheduler: ran {} of {backlog} queued first steps in {seconds:.1} s",
            backlog - left
        );
        figures.backlog = Some(report::Backlog {
            first_steps: backlog - left,
            left,
            seconds,
        });
    }
    (figures.peak_rss_mb, _) = server.rss_mb();
    server.stop().await;
    Ok(figures)
}

/// The layer ladder: `tasks/get` at `ladder_pollers` on servers that each
/// add one layer to the one before, run back to back so that they share
/// the machine's state. The limits live in agentgate's `Gateway`, not in
/// the HTTP stack, so they can only be switched on the engine: the engine
/// rung (Gateway on SQLite instead of rmcp's `TaskManager`) comes before
/// the limits rung. The last row is agentgate as it runs by default (auth
/// mode `none`), for reference.
async fn ladder(
    sizes: &Sizes,
    sqlite: &dyn Fn(&str) -> String,
) -> anyhow::Result<Vec<report::Rung>> {
    let a = sqlite("ladder-a.db");
    let b = sqlite("ladder-b.db");
    let c = sqlite("ladder-c.db");
    let rungs: Vec<(&str, &str, Spec<'_>)> = vec![
        (
            "rmcp plain",
            "rmcp's StreamableHttpService (default config, LocalSessionManager) under axum::serve, TCP_NODELAY",
            Spec::new("baseline-plain", None),
        ),
        (
            "+ accept loop",
            "core's serve_http: connection cap, header-read and idle timeouts",
            Spec::new("baseline-accept", None),
        ),
        (
            "+ http_router (body/listen)",
            "json_rpc_body (body read and JSON check, Mcp-Name, subscriptions/listen), Host/Origin config",
            Spec::new("baseline", None),
        ),
        (
            "+ auth",
            "[auth] mode = \"tokens\", one bearer token",
            Spec::new("baseline", None).with_auth(),
        ),
        (
            "+ engine (SQLite)",
            "agentgate's Gateway on a SQLite store instead of rmcp's TaskManager",
            Spec::new("agentgate", Some(&a))
                .with_auth()
                .without_limits(),
        ),
        (
            "+ limits = full agentgate",
            "[limits] defaults (caps raised out of the bench's reach)",
            Spec::new("agentgate", Some(&b)).with_auth(),
        ),
        (
            "full agentgate, default auth (none)",
            "as agentgate serve runs by default: reference, not a rung",
            Spec::new("agentgate", Some(&c)),
        ),
    ];
    let mut out = Vec::new();
    for (name, adds, spec) in rungs {
        let server = Server::start(&spec).await?;
        let ids = Arc::new(fill(&server, spec.store, sizes.store_tasks).await?);
        let m = polls(&server, ids, sizes.ladder_pollers, sizes.plan).await;
        eprintln!("   {name}: {}", report::line(&m));
        server.stop().await;
        out.push(report::Rung {
            name: name.to_owned(),
            adds: adds.to_owned(),
            tasks_get: m,
        });
    }
    Ok(out)
}

/// Scheduler throughput: `count` queued tasks seeded by SQL, agentgate
/// started on the store, timed until no task is left unstepped.
async fn scheduler_run(
    store: &str,
    count: u64,
    postgres: bool,
) -> anyhow::Result<report::SchedulerFigures> {
    migrate(store).await?;
    let started = Instant::now();
    if postgres {
        seed::backlog_postgres(store, count).await?;
    } else {
        seed::backlog_sqlite(store, count).await?;
    }
    let seed_s = started.elapsed().as_secs_f64();
    let server = Server::start(&Spec::new("agentgate", Some(store))).await?;
    // Timed from the moment the server listens (its scheduler started just
    // before): the steps counted are those run inside the timed window.
    let at_start = seed::unstepped(store).await?;
    let started = Instant::now();
    // Generous: a slow store still finishes, its rate is then just low.
    let limit = Duration::from_secs(120 + count / 50);
    let left = drain(store, limit, Duration::from_millis(50)).await?;
    let seconds = started.elapsed().as_secs_f64();
    server.stop().await;
    let steps = at_start - left;
    let figures = report::SchedulerFigures {
        store: if postgres { "postgres" } else { "sqlite" }.to_owned(),
        seeded: count,
        seed_seconds: seed_s,
        steps,
        left,
        seconds,
        steps_per_s: steps as f64 / seconds.max(0.001),
    };
    eprintln!(
        "   {}: {steps} steps in {seconds:.2} s = {:.0} steps/s ({} already run before the timing began, {left} left; seeded in {seed_s:.1} s)",
        figures.store,
        figures.steps_per_s,
        i64::try_from(count).unwrap_or(i64::MAX) - at_start,
    );
    Ok(figures)
}

async fn echo_server(sizes: &Sizes) -> anyhow::Result<ServerFigures> {
    eprintln!("== echo: starting");
    let server = Server::start(&Spec::new("echo", None)).await?;
    let mut figures = ServerFigures::new("echo");
    for &pollers in &sizes.pollers {
        let m = echoes(&server, pollers, sizes.plan).await;
        eprintln!("   echo x{pollers}: {}", report::line(&m));
        figures.tasks_get.push(m);
    }
    (figures.peak_rss_mb, _) = server.rss_mb();
    server.stop().await;
    Ok(figures)
}

/// `tasks/get` p99 on a store holding `count` seeded tasks.
async fn scale_run(
    store: &str,
    count: u64,
    sizes: &Sizes,
    seed_pg: bool,
) -> anyhow::Result<report::ScaleFigures> {
    migrate(store).await?;
    let started = Instant::now();
    if seed_pg {
        seed::postgres(store, count).await?;
    } else {
        seed::sqlite(store, count).await?;
    }
    let seed_s = started.elapsed().as_secs_f64();
    let server = Server::start(&Spec::new("agentgate", Some(store))).await?;
    let target = server.target();
    let m = load::run(16, sizes.plan, move |_| {
        let client = client_for(&target);
        move || {
            let client = client.clone();
            let id = seed::seeded_id(rand::rng().random_range(0..count));
            async move {
                client.map_err(anyhow::Error::msg)?.get(&id).await?;
                Ok(())
            }
        }
    })
    .await;
    eprintln!(
        "   {count} stored tasks: {} (seeded in {seed_s:.1} s)",
        report::line(&m)
    );
    server.stop().await;
    Ok(report::ScaleFigures {
        stored_tasks: count,
        seed_seconds: seed_s,
        tasks_get: m,
    })
}

/// Creates the schema of `store` by its own migrations, in a child process
/// (see [`crate::serve::migrate`]).
async fn migrate(store: &str) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("locating the bench binary")?;
    let status = tokio::process::Command::new(exe)
        .args(["migrate", "--store", store])
        .stdin(Stdio::null())
        .status()
        .await
        .context("running the migrations")?;
    if !status.success() {
        bail!(
            "migrating {} failed: {status}",
            agentgate_core::store::redact_url(store)
        );
    }
    Ok(())
}

/// How often [`drain`] counts the unstepped tasks, but for the scheduler
/// measure (which counts more often, for a finer end time).
const DRAIN_POLL: Duration = Duration::from_millis(100);

/// Waits up to `limit` until the scheduler has run every task's first step,
/// counting every `every`; returns how many are still waiting (0 when it
/// caught up).
async fn drain(store: &str, limit: Duration, every: Duration) -> anyhow::Result<i64> {
    let deadline = Instant::now() + limit;
    loop {
        let left = seed::unstepped(store).await?;
        if left == 0 || Instant::now() > deadline {
            return Ok(left);
        }
        tokio::time::sleep(every).await;
    }
}

/// Peak RSS of a server holding `count` working tasks, all of one
/// principal. agentgate runs without `[limits]` here: with the defaults one
/// principal may hold 200 live tasks, and even with that cap raised every
/// create counts the principal's live tasks row by row under its admission
/// lock, so creating 100 000 would take about an hour (about 260 creates/s
/// at 10 000 live tasks, falling as they pile up).
async fn rss_run(
    kind: &str,
    store: Option<&str>,
    count: usize,
) -> anyhow::Result<report::RssFigures> {
    let server = Server::start(&Spec::new(kind, store).without_limits()).await?;
    let (_, idle) = server.rss_mb();
    let started = Instant::now();
    create_many(&server, count, 64, LONG_MS).await?;
    let create_s = started.elapsed().as_secs_f64();
    // Wait until the scheduler has run every task's first step, so each
    // one is a checkpointed, waiting `working` task (as a watched agent is).
    // (Bounded: the scheduler's step rate falls as waiting tasks pile up.)
    let unstepped = match store {
        Some(store) => drain(store, Duration::from_secs(60), DRAIN_POLL).await?,
        None => 0,
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (peak, current) = server.rss_mb();
    server.stop().await;
    eprintln!(
        "   {kind} ({}) with {count} working tasks: peak RSS {:.1} MB (created in {create_s:.1} s)",
        store.map_or("in memory", |s| s.split(':').next().unwrap_or(s)),
        peak.unwrap_or(f64::NAN)
    );
    Ok(report::RssFigures {
        server: kind.to_owned(),
        store: store.map(|s| {
            if s.starts_with("sqlite:") {
                "sqlite"
            } else {
                "postgres"
            }
            .to_owned()
        }),
        working_tasks: count,
        idle_rss_mb: idle,
        peak_rss_mb: peak,
        rss_mb: current,
        create_seconds: create_s,
        first_step_pending: unstepped,
    })
}

/// A throw-away PostgreSQL database; dropped by [`PgDb::drop_db`].
struct PgDb {
    admin: String,
    name: String,
    url: String,
}

impl PgDb {
    async fn create(admin: &str, suffix: &str) -> anyhow::Result<Self> {
        let mut parsed = url::Url::parse(admin).context("the PostgreSQL URL")?;
        let name = format!("agentgate_bench_{}_{suffix}", std::process::id());
        let mut conn =
            tokio::time::timeout(Duration::from_secs(5), sqlx::PgConnection::connect(admin))
                .await
                .context("PostgreSQL did not answer within 5 s")?
                .context("connecting to PostgreSQL")?;
        sqlx::query(&format!("DROP DATABASE IF EXISTS {name}"))
            .execute(&mut conn)
            .await?;
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut conn)
            .await
            .context("creating the bench database")?;
        conn.close().await.ok();
        parsed.set_path(&format!("/{name}"));
        Ok(Self {
            admin: admin.to_owned(),
            name,
            url: parsed.to_string(),
        })
    }

    async fn drop_db(self) {
        if let Ok(mut conn) = sqlx::PgConnection::connect(&self.admin).await {
            let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
            if let Err(e) = sqlx::query(&sql).execute(&mut conn).await {
                eprintln!("could not drop database {}: {e}", self.name);
            }
            conn.close().await.ok();
        }
    }
}

/// The PostgreSQL admin URL to use, or why there is none.
async fn postgres_admin(choice: &PgChoice) -> anyhow::Result<Result<String, String>> {
    match choice {
        PgChoice::Off => Ok(Err("--no-postgres".to_owned())),
        PgChoice::Given(url) => {
            sqlx::PgConnection::connect(url)
                .await
                .context("connecting to the given PostgreSQL server")?
                .close()
                .await
                .ok();
            Ok(Ok(url.clone()))
        }
        PgChoice::Probe(url) => {
            match tokio::time::timeout(Duration::from_secs(3), sqlx::PgConnection::connect(url))
                .await
            {
                Ok(Ok(conn)) => {
                    conn.close().await.ok();
                    Ok(Ok(url.clone()))
                }
                Ok(Err(e)) => Ok(Err(format!("no PostgreSQL at {url}: {e}"))),
                Err(_) => Ok(Err(format!("no PostgreSQL at {url}: timed out"))),
            }
        }
    }
}

pub(crate) async fn run(options: Options) -> anyhow::Result<()> {
    let sizes = Sizes::new(options.size);
    let mut report = Report::start(options.size, sizes.clone());
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let sqlite = |name: &str| format!("sqlite://{}", dir.path().join(name).display());
    let pg_admin = postgres_admin(&options.postgres).await?;
    if let Err(why) = &pg_admin {
        eprintln!("PostgreSQL skipped: {why}");
        report.postgres_skipped = Some(why.clone());
    }

    // 1: throughput, lifecycle and create latency per server.
    report.servers.push(
        mcp_server(
            "agentgate-sqlite",
            &Spec::new("agentgate", Some(&sqlite("main.db"))),
            &sizes,
        )
        .await?,
    );
    if let Ok(admin) = &pg_admin {
        let db = PgDb::create(admin, "main").await?;
        let figures = mcp_server(
            "agentgate-postgres",
            &Spec::new("agentgate", Some(&db.url)),
            &sizes,
        )
        .await;
        db.drop_db().await;
        report.servers.push(figures?);
    }
    report.servers.push(
        mcp_server(
            report::BASELINE_OUR_STACK,
            &Spec::new("baseline", None),
            &sizes,
        )
        .await?,
    );
    report.servers.push(
        mcp_server(
            report::BASELINE_PLAIN,
            &Spec::new("baseline-plain", None),
            &sizes,
        )
        .await?,
    );
    report.servers.push(echo_server(&sizes).await?);

    // 2: the cost of each HTTP layer.
    eprintln!("== layer ladder: tasks/get x{}", sizes.ladder_pollers);
    report.ladder = ladder(&sizes, &sqlite).await?;

    // 3: scheduler throughput on a seeded backlog.
    eprintln!("== scheduler: {} queued tasks", sizes.backlog_tasks);
    report
        .scheduler
        .push(scheduler_run(&sqlite("backlog.db"), sizes.backlog_tasks, false).await?);
    if let Ok(admin) = &pg_admin {
        let db = PgDb::create(admin, "backlog").await?;
        let figures = scheduler_run(&db.url, sizes.backlog_tasks, true).await;
        db.drop_db().await;
        report.scheduler.push(figures?);
    }

    // 4a: tasks/get p99 with few vs many stored tasks (SQLite).
    eprintln!("== scale (agentgate-sqlite)");
    for (n, count) in [sizes.scale_small, sizes.scale_large]
        .into_iter()
        .enumerate()
    {
        let store = sqlite(&format!("scale{n}.db"));
        report
            .scale
            .push(scale_run(&store, count, &sizes, false).await?);
    }

    // 4b: peak RSS with many working tasks.
    eprintln!("== RSS with working tasks");
    report
        .rss
        .push(rss_run("agentgate", Some(&sqlite("rss.db")), sizes.rss_working).await?);
    if let Ok(admin) = &pg_admin {
        let db = PgDb::create(admin, "rss").await?;
        let figures = rss_run("agentgate", Some(&db.url), sizes.rss_working_small).await;
        db.drop_db().await;
        report.rss.push(figures?);
    }
    report
        .rss
        .push(rss_run("baseline", None, sizes.rss_working_small).await?);

    // 5: the Copilot watcher's GitHub requests per cycle.
    eprintln!("== Copilot watcher against the GitHub emulator");
    for &n in &sizes.watched {
        let m = watch::measure(n, sizes.watch_cycles).await?;
        eprintln!(
            "   {n} watched: {:.2} requests/cycle (target ≤ {})",
            m.requests_per_cycle, m.target
        );
        report.watcher.push(m);
    }

    report.finish();
    println!("{}", report.markdown());
    if let Some(path) = &options.json {
        std::fs::write(path, serde_json::to_string_pretty(&report.json())?)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = &options.markdown {
        report::write_markdown(path, &report.markdown())?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
