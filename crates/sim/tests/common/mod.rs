//! Test harness: starts the emulator on `127.0.0.1:0` and builds real
//! `aws-sdk-qbusiness` clients pointed at it.

#![allow(dead_code)]

use std::time::{Duration, SystemTime};

use agentgate_sim::qbusiness::{
    DEFAULT_ACCESS_KEY_ID, DEFAULT_REGION, DEFAULT_SECRET_ACCESS_KEY, QBusinessConfig,
    QBusinessSim, serve,
};
use aws_sdk_qbusiness::config::retry::RetryConfig;
use aws_sdk_qbusiness::config::{BehaviorVersion, Credentials, Region};
use tokio_util::sync::CancellationToken;

/// A running emulator; stops when dropped.
pub struct Harness {
    pub sim: QBusinessSim,
    pub endpoint: String,
    shutdown: CancellationToken,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

pub async fn start() -> Harness {
    start_with(QBusinessConfig::default()).await
}

pub async fn start_with(config: QBusinessConfig) -> Harness {
    let sim = QBusinessSim::new(config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
    let shutdown = CancellationToken::new();
    tokio::spawn(serve(listener, sim.router(), shutdown.clone()));
    Harness {
        sim,
        endpoint,
        shutdown,
    }
}

impl Harness {
    /// A client with the right credentials and retries disabled.
    pub fn client(&self) -> aws_sdk_qbusiness::Client {
        self.client_with(
            DEFAULT_ACCESS_KEY_ID,
            DEFAULT_SECRET_ACCESS_KEY,
            RetryConfig::disabled(),
        )
    }

    pub fn client_with(
        &self,
        access_key: &str,
        secret: &str,
        retry: RetryConfig,
    ) -> aws_sdk_qbusiness::Client {
        let conf = aws_sdk_qbusiness::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(DEFAULT_REGION))
            .credentials_provider(Credentials::new(access_key, secret, None, None, "test"))
            .endpoint_url(&self.endpoint)
            .retry_config(retry)
            .build();
        aws_sdk_qbusiness::Client::from_conf(conf)
    }

    /// A raw request signed with the default credentials (for what the SDK cannot send).
    pub fn signed(
        &self,
        method: &str,
        path_and_query: &str,
        body: &str,
    ) -> reqwest::RequestBuilder {
        use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
        use aws_sigv4::sign::v4;
        let url = format!("{}{path_and_query}", self.endpoint);
        let identity = Credentials::new(
            DEFAULT_ACCESS_KEY_ID,
            DEFAULT_SECRET_ACCESS_KEY,
            None,
            None,
            "test",
        )
        .into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(DEFAULT_REGION)
            .name("qbusiness")
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .expect("params")
            .into();
        let headers = [("content-type", "application/json")];
        let signable = SignableRequest::new(
            method,
            url.clone(),
            headers.into_iter(),
            SignableBody::Bytes(body.as_bytes()),
        )
        .expect("signable");
        let (instructions, _) = sign(signable, &params).expect("sign").into_parts();
        let mut request = reqwest::Client::new()
            .request(method.parse().expect("method"), url)
            .header("content-type", "application/json")
            .body(body.to_owned());
        for (name, value) in instructions.headers() {
            request = request.header(name, value);
        }
        request.timeout(Duration::from_secs(10))
    }
}
