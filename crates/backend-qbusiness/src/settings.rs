//! Where the tool finds its Amazon Q Business application: the same
//! environment variables as the upstream `QBusinessQueryTool`, and the
//! standard AWS credential chain through `aws-config`.
//!
//! | variable | meaning |
//! |---|---|
//! | `AWS_REGION` | required: the application's region |
//! | `QBUSINESS_APPLICATION_ID` | required: the application to ask |
//! | `AWS_PROFILE` | optional: a named profile for credentials |
//! | `AWS_ENDPOINT_URL_QBUSINESS` | optional: another endpoint (the emulator) |

use aws_config::BehaviorVersion;
use aws_sdk_qbusiness::Client;

/// The application to ask and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub region: String,
    pub application_id: String,
    pub profile: Option<String>,
}

/// A setting that is missing; the text is upstream's, so prompts and scripts
/// that match on it keep working.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    #[error("Failed to create Q Business client: AWS_REGION environment variable is not set")]
    MissingRegion,
    #[error("QBUSINESS_APPLICATION_ID environment variable is not set")]
    MissingApplicationId,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Settings {
    /// Reads the settings from the environment, in upstream's order (region
    /// first, then the application id).
    pub fn from_env() -> Result<Self, SettingsError> {
        let region = env("AWS_REGION").ok_or(SettingsError::MissingRegion)?;
        let application_id =
            env("QBUSINESS_APPLICATION_ID").ok_or(SettingsError::MissingApplicationId)?;
        Ok(Self {
            region,
            application_id,
            profile: env("AWS_PROFILE"),
        })
    }

    /// Builds the SDK client: the standard credential chain (environment,
    /// profile, SSO, IMDS, ...), `AWS_ENDPOINT_URL_QBUSINESS` honoured, the
    /// SDK's standard retry mode (3 attempts with jittered backoff on
    /// throttling and 5xx), and every answer capped at 8 MiB.
    pub async fn client(&self) -> Client {
        self.client_counted(None).await
    }

    /// The standard AWS configuration for these settings: the region, the
    /// profile, the credential chain, and the `AWS_ENDPOINT_URL_*`
    /// variables of every service (Q Business, SSO OIDC, STS).
    pub async fn shared_config(&self) -> aws_config::SdkConfig {
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(aws_config::Region::new(self.region.clone()));
        if let Ok(name) = aws_config::AppName::new("agentgate") {
            loader = loader.app_name(name);
        }
        if let Some(profile) = &self.profile {
            loader = loader.profile_name(profile);
        }
        loader.load().await
    }

    /// [`Settings::client`], counting every HTTP attempt into `upstream`.
    pub async fn client_counted(
        &self,
        upstream: Option<agentgate_backend::UpstreamMetrics>,
    ) -> Client {
        let shared = self.shared_config().await;
        let config = aws_sdk_qbusiness::config::Builder::from(&shared)
            .interceptor(crate::upstream::CapAnswer);
        let config = match upstream {
            Some(upstream) => config.interceptor(crate::upstream::CountAttempts(upstream)),
            None => config,
        };
        Client::from_conf(config.build())
    }

    /// A client for an explicit endpoint with fixed credentials, read from
    /// nowhere else: how `agentgate demo` talks to its in-process emulator.
    /// Every HTTP attempt is counted into `upstream`, if given.
    pub fn fixed_client(
        &self,
        endpoint: &str,
        access_key_id: &str,
        secret: &str,
        upstream: Option<agentgate_backend::UpstreamMetrics>,
    ) -> Client {
        let credentials = aws_sdk_qbusiness::config::Credentials::new(
            access_key_id,
            secret,
            None,
            None,
            "agentgate-fixed",
        );
        let config = aws_sdk_qbusiness::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(aws_config::Region::new(self.region.clone()))
            .endpoint_url(endpoint)
            .credentials_provider(credentials)
            .interceptor(crate::upstream::CapAnswer);
        let config = match upstream {
            Some(upstream) => config.interceptor(crate::upstream::CountAttempts(upstream)),
            None => config,
        };
        Client::from_conf(config.build())
    }
}

/// Whether the shared config and credentials files (`~/.aws/config` and
/// `~/.aws/credentials`, or the files `AWS_CONFIG_FILE` and
/// `AWS_SHARED_CREDENTIALS_FILE` name) define `profile`, read as the SDK
/// reads them; `None` when they cannot be read.
pub async fn profile_defined(profile: &str) -> Option<bool> {
    use aws_types::os_shim_internal::{Env, Fs};
    let files = aws_runtime::env_config::file::EnvConfigFiles::default();
    let profiles = aws_config::profile::load(&Fs::real(), &Env::real(), &files, None)
        .await
        .ok()?;
    Some(profiles.get_profile(profile).is_some())
}
