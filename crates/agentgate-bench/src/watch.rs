//! The Copilot watcher's cost upstream: GitHub requests per poll cycle.
//!
//! The real [`CopilotWatcher`] runs in this process against the GitHub
//! emulator ([`GithubSim`]) on loopback, watching N open issues that nobody
//! touches (so every cycle polls every target and nothing is nudged). With a
//! fixed poll policy every target is due on every tick, so a tick is a full
//! poll cycle. Requests are counted by the emulator (its front-door counters,
//! GraphQL and REST), not by the watcher, so nothing the watcher forgets to
//! count can hide.

use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::{PollPolicy, TaskId};
use agentgate_core::runtime::Runtime;
use agentgate_sim::github::{DEFAULT_GITHUB_TOKEN, GithubConfig, GithubSim, Scenario};
use anyhow::Context as _;
use backend_copilot::github::GitHub;
use backend_copilot::watcher::{CopilotWatcher, Target};
use backend_copilot::{Endpoint, Token};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

/// One watcher measurement.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct WatchMeasured {
    pub watched: usize,
    /// Full poll cycles observed.
    pub cycles: u64,
    /// GitHub requests (GraphQL + REST) the emulator received, per cycle.
    pub requests_per_cycle: f64,
    /// The most requests the watcher sent in one tick.
    pub max_requests_per_tick: u64,
    /// The target from the issue: ⌈N/25⌉ + 1.
    pub target: u64,
}

const TICK: Duration = Duration::from_millis(100);
const REPO: &str = "bench/watched";

/// Watches `n` issues for `cycles` ticks and counts what reached GitHub.
pub(crate) async fn measure(n: usize, cycles: u64) -> anyhow::Result<WatchMeasured> {
    let sim = GithubSim::new(GithubConfig {
        rate_limit: u64::MAX / 4,
        ..GithubConfig::default()
    });
    let numbers: Vec<u64> = (0..n)
        .map(|i| sim.add_issue(REPO, &format!("watched issue {i}"), Scenario::Never))
        .collect();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding the GitHub emulator")?;
    let url = format!("http://{}", listener.local_addr()?);
    let shutdown = CancellationToken::new();
    tokio::spawn(agentgate_sim::github::serve(
        listener,
        sim.router(),
        shutdown.clone(),
    ));

    let endpoint = Endpoint::new(&url, Some(Token::new(DEFAULT_GITHUB_TOKEN)))
        .context("the emulator's URL")?;
    let watcher = Arc::new(CopilotWatcher::new(
        GitHub::new(endpoint),
        PollPolicy::fixed(TICK),
    ));
    let since = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let (owner, repo) = REPO.split_once('/').unwrap_or(("bench", "watched"));
    let ids: Vec<TaskId> = numbers.iter().map(|_| TaskId::generate()).collect();
    for (id, number) in ids.iter().zip(&numbers) {
        watcher.watch(
            id,
            Target::Issue {
                owner: owner.to_owned(),
                repo: repo.to_owned(),
                number: i64::try_from(*number).expect("a small issue number"),
                since: since.clone(),
            },
            None,
            Duration::ZERO,
        );
    }
    // The watcher nudges through a runtime; an empty in-memory one will do
    // (nothing changes upstream, so nothing is nudged).
    let store = agentgate_core::store::open("sqlite::memory:").await?;
    let runtime = Runtime::builder(store).start()?;
    let run = tokio::spawn(watcher.clone().run(runtime.nudger(), shutdown.clone()));

    // Each task's step takes its first observation (as the Copilot jobs do),
    // after which a target is polled every cycle; an observation left
    // untaken would pause its target's polling.
    let taker = {
        let watcher = watcher.clone();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                for id in &ids {
                    watcher.take(id);
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    // Skip the first ticks (every target fresh), then count steady state.
    while watcher.stats().ticks < 3 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (ticks0, requests0) = (watcher.stats().ticks, upstream_requests(&sim));
    // A tick with many targets may outlast the tick interval (missed ticks
    // are skipped), so wait for ticks, not for time.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while watcher.stats().ticks < ticks0 + cycles && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (ticks1, requests1) = (watcher.stats().ticks, upstream_requests(&sim));
    shutdown.cancel();
    run.await.ok();
    taker.await.ok();
    runtime.stop().await?;

    let cycles = ticks1.saturating_sub(ticks0).max(1);
    Ok(WatchMeasured {
        watched: n,
        cycles,
        requests_per_cycle: requests1.saturating_sub(requests0) as f64 / cycles as f64,
        max_requests_per_tick: watcher.stats().max_requests_per_tick,
        target: n.div_ceil(backend_copilot::watcher::BATCH) as u64 + 1,
    })
}

fn upstream_requests(sim: &GithubSim) -> u64 {
    let stats = sim.stats();
    stats.graphql_requests + stats.rest_requests.values().sum::<u64>()
}
