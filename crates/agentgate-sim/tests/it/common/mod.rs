//! Test harness: starts the emulator on `127.0.0.1:0` and builds real
//! `aws-sdk-qbusiness` clients pointed at it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use agentgate_sim::qbusiness::{
    DEFAULT_ACCESS_KEY_ID, DEFAULT_REGION, DEFAULT_SECRET_ACCESS_KEY, QBusinessConfig, QBusinessSim,
};
use agentgate_testkit::{Emulator, emulators};
use aws_sdk_qbusiness::config::retry::RetryConfig;
use aws_sdk_qbusiness::config::{BehaviorVersion, Credentials, Region};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::AfterDeserializationInterceptorContextRef;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

/// A running emulator (the shared harness's); stops when dropped.
pub(crate) struct Harness {
    pub sim: QBusinessSim,
    pub endpoint: String,
    _emulator: Emulator<QBusinessSim>,
}

pub(crate) async fn start() -> Harness {
    start_with(QBusinessConfig::default()).await
}

pub(crate) async fn start_with(config: QBusinessConfig) -> Harness {
    let emulator = emulators::qbusiness(config).start().await;
    Harness {
        sim: emulator.sim.clone(),
        endpoint: emulator.url.clone(),
        _emulator: emulator,
    }
}

impl Harness {
    /// A client with the right credentials and retries disabled.
    pub(crate) fn client(&self) -> aws_sdk_qbusiness::Client {
        self.client_with(
            DEFAULT_ACCESS_KEY_ID,
            DEFAULT_SECRET_ACCESS_KEY,
            RetryConfig::disabled(),
        )
    }

    /// A client (retries disabled) that records every raw answer it reads.
    pub(crate) fn recording_client(&self) -> (aws_sdk_qbusiness::Client, Recorder) {
        let recorder = Recorder::default();
        let conf = aws_sdk_qbusiness::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(DEFAULT_REGION))
            .credentials_provider(Credentials::new(
                DEFAULT_ACCESS_KEY_ID,
                DEFAULT_SECRET_ACCESS_KEY,
                None,
                None,
                "test",
            ))
            .endpoint_url(&self.endpoint)
            .retry_config(RetryConfig::disabled())
            .interceptor(recorder.clone())
            .build();
        (aws_sdk_qbusiness::Client::from_conf(conf), recorder)
    }

    pub(crate) fn client_with(
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
    pub(crate) fn signed(
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

/// One answer as the SDK received it, before it parsed it.
#[derive(Clone, Debug)]
pub(crate) struct Exchange {
    pub operation: String,
    pub status: u16,
    /// `x-amzn-ErrorType`, without any `:…` suffix.
    pub error_type: Option<String>,
    pub body: serde_json::Value,
}

/// An SDK interceptor that keeps every raw answer.
#[derive(Clone, Debug, Default)]
pub(crate) struct Recorder(Arc<Mutex<Vec<Exchange>>>);

impl Recorder {
    pub(crate) fn exchanges(&self) -> Vec<Exchange> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Intercept for Recorder {
    fn name(&self) -> &'static str {
        "Recorder"
    }

    // After deserialization the orchestrator has read the whole body into
    // memory (before it, the body is still a stream).
    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let response = context.response();
        let operation = cfg
            .load::<Metadata>()
            .map(|m| m.name().to_owned())
            .unwrap_or_default();
        let error_type = response
            .headers()
            .get("x-amzn-errortype")
            .map(|t| t.split(':').next().unwrap_or(t).to_owned());
        let bytes = response.body().bytes().unwrap_or_default();
        let body = serde_json::from_slice(bytes).unwrap_or(serde_json::Value::Null);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Exchange {
                operation,
                status: response.status().as_u16(),
                error_type,
                body,
            });
        Ok(())
    }
}
