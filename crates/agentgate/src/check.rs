//! `agentgate check`: whether `serve` can work with this config and
//! environment, found out before serving rather than from a user's failed
//! call.
//!
//! ```text
//! config    the file parsed and its values are in range (loading it checks that)
//! store     opens as serve opens it (pending migrations applied) and answers a read
//! <backend> Backend::check: its settings, and who its credentials are upstream
//! ```
//!
//! One line per check on stdout, `ok`, `--` (not configured: its tools say
//! so when called, the others work) or `FAIL` with what to fix; exit status
//! 0 when nothing failed, 1 otherwise.

use std::path::Path;
use std::time::Duration;

use agentgate_backend::Health;
use agentgate_core::runtime::Runtime;
use anyhow::Result;

use crate::config::FileConfig;
use crate::serve::StoreArgs;

/// How long one backend's check may take (its upstream may be down).
const CHECK_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs every check and prints its line; `true` when none failed.
pub(crate) async fn run(args: StoreArgs, file: FileConfig, path: Option<&Path>) -> Result<bool> {
    let mut healthy = true;
    let mut report = |what: &str, health: Health| {
        let (mark, text) = match health {
            Health::Ready(text) => ("ok  ", text),
            Health::NotConfigured(text) => ("--  ", text),
            Health::Broken(text) => {
                healthy = false;
                ("FAIL", text)
            }
            other => ("FAIL", format!("{other:?}")),
        };
        println!("{mark}  {what:10}  {text}");
    };
    report("config", Health::Ready(file_summary(&file, path)));

    let store = match args.open(&file).await {
        Ok((store, url)) => match store.next_due().await {
            Ok(_) => {
                report("store", Health::Ready(format!("{url} opens and answers")));
                store
            }
            Err(e) => {
                report(
                    "store",
                    Health::Broken(format!("{url} does not answer: {e}")),
                );
                return Ok(false);
            }
        },
        Err(e) => {
            report("store", Health::Broken(format!("{e:#}")));
            return Ok(false);
        }
    };

    let selection = file.server.tools.clone();
    let builder = Runtime::builder(store).read_only(file.server.read_only == Some(true));
    let runtime = match crate::backends::add_all(builder, &file.backends, selection)
        .await
        .and_then(|builder| Ok(builder.start()?))
    {
        Ok(runtime) => runtime,
        Err(e) => {
            report("backends", Health::Broken(format!("{e:#}")));
            return Ok(false);
        }
    };
    for (name, backend) in runtime.backends() {
        let health = tokio::time::timeout(CHECK_TIMEOUT, backend.check())
            .await
            .unwrap_or_else(|_| {
                Health::Broken(format!(
                    "its upstream did not answer within {} s",
                    CHECK_TIMEOUT.as_secs()
                ))
            });
        report(name, health);
    }
    for (name, why) in crate::backends::off(&file.backends)? {
        report(name, Health::NotConfigured(why));
    }
    runtime.stop().await?;
    Ok(healthy)
}

/// Which file was read and which backend sections it has.
fn file_summary(file: &FileConfig, path: Option<&Path>) -> String {
    let sections: Vec<&str> = file.backends.keys().map(String::as_str).collect();
    let source = match path {
        Some(path) => path.display().to_string(),
        None => "no config file (the defaults)".to_owned(),
    };
    if sections.is_empty() {
        format!("{source}; no backend sections, each backend from its environment")
    } else {
        format!("{source}; backend sections: {}", sections.join(", "))
    }
}
