//! `agentgate auth`: the bearer tokens of `[auth] mode = "tokens"`, from the
//! config file's side.
//!
//! ```text
//! auth new-token --principal P ─▶ a token (printed once) and its [[auth.tokens]] entry (its SHA-256)
//! auth list                    ─▶ who may call, and where each token comes from (never a token)
//! auth revoke --principal P    ─▶ P's entries removed from the file, the rest kept as written
//! ```
//!
//! `serve` reads its tokens at start: a revoke takes effect when it restarts,
//! which `revoke` says. The file is edited with `toml_edit`, so comments,
//! order and spacing survive.

use std::path::Path;

use anyhow::{Context as _, Result, bail};
use toml_edit::DocumentMut;

use crate::config::FileConfig;

/// Prints a new token and its `[[auth.tokens]]` entry.
pub(crate) fn new_token(principal: &str) -> Result<()> {
    check_principal(principal)?;
    let token = agentgate_core::auth::tokens::new_token();
    let hash = agentgate_core::auth::tokens::token_hash(&token);
    println!(
        "# The token for {principal}, shown only now; give it to the client as\n\
         # `Authorization: Bearer <token>`:\n{token}\n\n\
         # Add to the config file, under [auth] mode = \"tokens\":\n\
         [[auth.tokens]]\nprincipal = \"{principal}\"\nsha256 = \"{hash}\""
    );
    Ok(())
}

fn check_principal(principal: &str) -> Result<()> {
    let valid = !principal.is_empty()
        && principal
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._@-".contains(c));
    if !valid {
        bail!(
            "--principal {principal:?}: use letters, digits and . _ @ - only (e.g. alice, ci-bot)"
        );
    }
    Ok(())
}

/// Prints who may call under the config's `[auth]`, and where each token
/// comes from: a hash's first digits, or the variable it is read from
/// (whether it is set, never its value).
pub(crate) fn list(file: &FileConfig) -> Result<()> {
    use agentgate_core::auth::AuthMode;
    match file.auth.mode {
        AuthMode::Tokens => {
            if file.auth.tokens.is_empty() {
                println!("mode = \"tokens\", and no [[auth.tokens]]: nobody can call");
            }
            for entry in &file.auth.tokens {
                let from = match (&entry.sha256, &entry.token_env) {
                    (Some(hash), _) => {
                        format!("sha256 {}…", hash.chars().take(12).collect::<String>())
                    }
                    (None, Some(var)) => {
                        let set = std::env::var_os(var).is_some_and(|v| !v.is_empty());
                        format!("${var} ({})", if set { "set" } else { "not set" })
                    }
                    (None, None) => "no token (refused at start)".to_owned(),
                };
                println!("token:{:<24} {from}", entry.principal);
            }
        }
        AuthMode::Oauth => {
            let issuer = file
                .auth
                .oauth
                .as_ref()
                .map_or("(no [auth.oauth] issuer)", |o| o.issuer.as_str());
            println!(
                "mode = \"oauth\": callers are the issuer's users, oauth:{issuer}#<sub>; there is \
                 no list here (revoke at the issuer)"
            );
        }
        AuthMode::None => {
            println!("mode = \"none\": every HTTP caller is `anonymous`; there are no tokens");
        }
    }
    Ok(())
}

/// Removes `principal`'s `[[auth.tokens]]` entries from the config file at
/// `path`, keeping everything else as written.
pub(crate) fn revoke(path: Option<&Path>, principal: &str) -> Result<()> {
    check_principal(principal)?;
    let Some(path) = path else {
        bail!("auth revoke edits the config file: pass --config FILE (or set AGENTGATE_CONFIG)");
    };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut doc: DocumentMut = text
        .parse()
        .with_context(|| format!("{} is not valid TOML", path.display()))?;
    let Some(tokens) = doc
        .get_mut("auth")
        .and_then(|auth| auth.get_mut("tokens"))
        .and_then(|tokens| tokens.as_array_of_tables_mut())
    else {
        bail!(
            "{} has no [[auth.tokens]] entries; nothing to revoke",
            path.display()
        );
    };
    let before = tokens.len();
    tokens.retain(|entry| entry.get("principal").and_then(|p| p.as_str()) != Some(principal));
    let removed = before - tokens.len();
    if removed == 0 {
        let known: Vec<String> = tokens
            .iter()
            .filter_map(|entry| entry.get("principal").and_then(|p| p.as_str()))
            .map(str::to_owned)
            .collect();
        bail!(
            "{} has no token of {principal:?}; its principals are: {}",
            path.display(),
            known.join(", ")
        );
    }
    // Written beside the file, then renamed over it: a crash leaves the old
    // file or the new one, never half of one.
    let edited = path.with_extension("toml.agentgate-edit");
    std::fs::write(&edited, doc.to_string())
        .with_context(|| format!("writing {}", edited.display()))?;
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&edited, meta.permissions());
    }
    std::fs::rename(&edited, path).with_context(|| format!("replacing {}", path.display()))?;
    println!(
        "removed {removed} token(s) of {principal} from {}.\n\
         Restart `agentgate serve` for it to take effect (tokens are read at start). The tasks of \
         token:{principal} stay in the store; never give the name {principal} to someone else \
         while they are kept.",
        path.display()
    );
    Ok(())
}
