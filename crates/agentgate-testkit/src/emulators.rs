//! The emulators of crates/agentgate-sim (Q Business, GitHub) on free loopback ports,
//! in the test's process, with the switches tests put in front of them:
//!
//! - [`EmulatorBuilder::answer_late`]: act on a request at once, answer later
//!   (fixed or random delay), even if the caller is gone by then, so a
//!   killed caller leaves a side effect behind that must not be repeated.
//!   (The emulators' own latency comes *before* handling.)
//! - a door ([`Emulator::close_door`] / [`Emulator::open_door`]) that holds
//!   every request until it opens;
//! - an [`AnswerHold`] (always in front) that swallows one chosen answer;
//! - [`EmulatorBuilder::layer`] for a test's own middleware (a request log);
//! - [`Emulator::go_down`] / [`Emulator::come_up`]: the listener closes and
//!   reopens on the same address, the state kept.
//!
//! [`Emulator::env`] is what `agentgate serve` needs to reach it (for the
//! A2A emulator, an `[[a2a.agents]]` table: [`Emulator::a2a_agent`]).

use std::net::SocketAddr;
use std::time::Duration;

use agentgate_sim::a2a::{A2aConfig, A2aSim};
use agentgate_sim::github::{DEFAULT_GITHUB_TOKEN, GithubConfig, GithubSim};
use agentgate_sim::qbusiness::{
    DEFAULT_ACCESS_KEY_ID, DEFAULT_APPLICATION_ID, DEFAULT_REGION, DEFAULT_SECRET_ACCESS_KEY,
    QBusinessConfig, QBusinessSim,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::hold::AnswerHold;

/// An emulator the harness can start: its router and what a gateway sets
/// to reach it.
pub trait Emulated: Clone + Send + Sync + 'static {
    fn router(&self) -> axum::Router;
    /// The environment `agentgate serve` needs to use this emulator at `url`.
    fn env(url: &str) -> Vec<(String, String)>;
}

impl Emulated for GithubSim {
    fn router(&self) -> axum::Router {
        GithubSim::router(self)
    }
    fn env(url: &str) -> Vec<(String, String)> {
        vec![
            ("GITHUB_API_URL".into(), url.into()),
            (
                "GITHUB_PERSONAL_ACCESS_TOKEN".into(),
                DEFAULT_GITHUB_TOKEN.into(),
            ),
        ]
    }
}

impl Emulated for QBusinessSim {
    fn router(&self) -> axum::Router {
        QBusinessSim::router(self)
    }
    fn env(url: &str) -> Vec<(String, String)> {
        vec![
            ("AWS_ENDPOINT_URL_QBUSINESS".into(), url.into()),
            // The emulator also plays IAM Identity Center and STS, for
            // identity-aware sessions.
            ("AWS_ENDPOINT_URL_SSO_OIDC".into(), url.into()),
            ("AWS_ENDPOINT_URL_STS".into(), url.into()),
            ("AWS_REGION".into(), DEFAULT_REGION.into()),
            ("AWS_ACCESS_KEY_ID".into(), DEFAULT_ACCESS_KEY_ID.into()),
            (
                "AWS_SECRET_ACCESS_KEY".into(),
                DEFAULT_SECRET_ACCESS_KEY.into(),
            ),
            (
                "QBUSINESS_APPLICATION_ID".into(),
                DEFAULT_APPLICATION_ID.into(),
            ),
            ("AWS_EC2_METADATA_DISABLED".into(), "true".into()),
        ]
    }
}

impl Emulated for A2aSim {
    fn router(&self) -> axum::Router {
        A2aSim::router(self)
    }
    /// An A2A agent is named in the config file, not the environment: see
    /// [`Emulator::a2a_agent`].
    fn env(_url: &str) -> Vec<(String, String)> {
        Vec::new()
    }
}

/// When answers leave after the emulator acted.
#[derive(Debug, Clone, Copy)]
enum Late {
    Fixed(Duration),
    UpTo(Duration),
}

type Layer = Box<dyn FnOnce(axum::Router) -> axum::Router + Send>;

/// How to start an emulator; [`github`] and [`qbusiness`] make one.
pub struct EmulatorBuilder<S> {
    sim: S,
    late: Option<Late>,
    layer: Option<Layer>,
}

impl<S> std::fmt::Debug for EmulatorBuilder<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmulatorBuilder")
            .field("late", &self.late)
            .finish_non_exhaustive()
    }
}

/// The GitHub emulator with `config`.
pub fn github(config: GithubConfig) -> EmulatorBuilder<GithubSim> {
    EmulatorBuilder::new(GithubSim::new(config))
}

/// The A2A emulator with `config`.
pub fn a2a(config: A2aConfig) -> EmulatorBuilder<A2aSim> {
    EmulatorBuilder::new(A2aSim::new(config))
}

/// The Q Business emulator with `config`.
pub fn qbusiness(config: QBusinessConfig) -> EmulatorBuilder<QBusinessSim> {
    EmulatorBuilder::new(QBusinessSim::new(config))
}

impl<S: Emulated> EmulatorBuilder<S> {
    pub fn new(sim: S) -> Self {
        Self {
            sim,
            late: None,
            layer: None,
        }
    }

    /// Every answer leaves `delay` after the emulator acted.
    pub fn answer_late(mut self, delay: Duration) -> Self {
        self.late = (!delay.is_zero()).then_some(Late::Fixed(delay));
        self
    }

    /// Every answer leaves a random time of at most `late` after the
    /// emulator acted.
    pub fn answer_late_up_to(mut self, late: Duration) -> Self {
        self.late = (!late.is_zero()).then_some(Late::UpTo(late));
        self
    }

    /// A test's own middleware, outermost (it sees requests first).
    pub fn layer(
        mut self,
        layer: impl FnOnce(axum::Router) -> axum::Router + Send + 'static,
    ) -> Self {
        self.layer = Some(Box::new(layer));
        self
    }

    pub async fn start(self) -> Emulator<S> {
        let (door, _) = watch::channel(true);
        let hold = AnswerHold::default();
        let mut router = hold.wrap(self.sim.router());
        router = behind_door(late(router, self.late), &door);
        if let Some(layer) = self.layer {
            router = layer(router);
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind an emulator port");
        let addr = listener.local_addr().expect("emulator address");
        let stop = CancellationToken::new();
        tokio::spawn(agentgate_sim::github::serve(
            listener,
            router.clone(),
            stop.clone(),
        ));
        Emulator {
            sim: self.sim,
            url: format!("http://{addr}"),
            addr,
            hold,
            door,
            router,
            stop,
        }
    }
}

/// A running emulator; it stops when dropped.
#[derive(Debug)]
pub struct Emulator<S> {
    /// The emulator's state and switches (faults, seeds, counters).
    pub sim: S,
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    pub addr: SocketAddr,
    /// Holds one chosen answer back (see [`AnswerHold::arm`]).
    pub hold: AnswerHold,
    door: watch::Sender<bool>,
    router: axum::Router,
    stop: CancellationToken,
}

impl<S: Emulated> Emulator<S> {
    /// What `agentgate serve` needs to use this emulator.
    pub fn env(&self) -> Vec<(String, String)> {
        S::env(&self.url)
    }

    /// Holds every request at the door until [`Self::open_door`].
    pub fn close_door(&self) {
        self.door.send_replace(false);
    }

    /// Lets the held requests (and all later ones) through.
    pub fn open_door(&self) {
        self.door.send_replace(true);
    }

    /// Takes the emulator off the network and returns once connections to
    /// its address are refused.
    pub async fn go_down(&mut self) {
        self.stop.cancel();
        let addr = self.addr;
        crate::poll::eventually_async(
            "the emulator to refuse connections",
            Duration::from_secs(10),
            || async move { tokio::net::TcpStream::connect(addr).await.is_err() },
        )
        .await;
    }

    /// Brings the emulator back on the same address with the same state.
    pub async fn come_up(&mut self) {
        let listener = tokio::net::TcpListener::bind(self.addr)
            .await
            .expect("rebind the emulator's address");
        self.stop = CancellationToken::new();
        tokio::spawn(agentgate_sim::github::serve(
            listener,
            self.router.clone(),
            self.stop.clone(),
        ));
    }
}

impl Emulator<A2aSim> {
    /// The `[[a2a.agents]]` table naming this emulator as agent `name`, with
    /// `extra` TOML lines (e.g. `client_context_ids = true`) in it.
    pub fn a2a_agent(&self, name: &str, extra: &str) -> String {
        format!(
            "[[a2a.agents]]\nname = \"{name}\"\nurl = \"{}\"\n{extra}\n",
            self.url
        )
    }
}

impl<S> Drop for Emulator<S> {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// `router` acting at once and answering `late` afterwards.
fn late(router: axum::Router, late: Option<Late>) -> axum::Router {
    let Some(late) = late else {
        return router;
    };
    router.layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| async move {
            let handled = tokio::spawn(next.run(request));
            let delay = match late {
                Late::Fixed(delay) => delay,
                Late::UpTo(most) => rand::random_range(Duration::ZERO..=most),
            };
            tokio::time::sleep(delay).await;
            handled.await.expect("emulator handler panicked")
        },
    ))
}

/// `router` holding requests while `door` is closed.
fn behind_door(router: axum::Router, door: &watch::Sender<bool>) -> axum::Router {
    let door = door.subscribe();
    router.layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let mut door = door.clone();
            async move {
                // A dropped sender means the test is over: let it through.
                let _ = door.wait_for(|open| *open).await;
                next.run(request).await
            }
        },
    ))
}
