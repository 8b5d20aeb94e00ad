//! Where one agent's requests and credentials may go. An Agent Card is the
//! agent's own say-so, fetched over the network: it may describe the agent,
//! but it must not steer agentgate's credentials. So:
//!
//! - the JSON-RPC endpoint (the card's interface URL) must share the
//!   configured card URL's origin, unless the operator listed its origin in
//!   `allowed_endpoints`;
//! - the OAuth token URL and scopes are the config's; a card may only
//!   confirm them. With no `token_url` configured, the card's is used only
//!   when it shares the card URL's origin and is https (http only when the
//!   card URL is loopback, or with `allow_http`); the scopes the card asks
//!   for must be among the configured `scopes`;
//! - private (RFC 1918, ULA), loopback, link-local and unspecified addresses
//!   are reachable only when the configured card URL is itself one of them
//!   (by address, or the name `localhost`), or with `allow_private_network`.
//!   IP literals are checked here before each request; DNS names are checked
//!   at connect time by [`GuardedResolver`], the resolver of every HTTP
//!   client of the agent, so a name cannot be re-pointed between a check and
//!   the connection. The card's own host name is exempt: the operator chose
//!   it.
//!
//! Redirects of JSON-RPC and token requests are never followed (the
//! clients are built with no redirect policy; see `client.rs`).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::config::AgentSettings;

/// A request or credential agentgate will not send, and the setting that
/// would allow it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// Whether `ip` is private (RFC 1918, ULA fc00::/7), loopback, link-local
/// (169.254/16, fe80::/10) or unspecified — an address inside the network
/// agentgate runs in rather than a public one.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => internal_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return internal_v4(v4);
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xfe00) == 0xfc00 // ULA fc00::/7
                || (first & 0xffc0) == 0xfe80 // link-local fe80::/10
        }
    }
}

fn internal_v4(ip: Ipv4Addr) -> bool {
    ip.is_private() || ip.is_loopback() || ip.is_link_local() || ip.is_unspecified()
}

/// The URL's host as an address, when it is an IP literal.
fn ip_of(url: &url::Url) -> Option<IpAddr> {
    match url.host()? {
        url::Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
        url::Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
        url::Host::Domain(_) => None,
    }
}

/// `localhost` and its subdomains (RFC 6761 §6.3: always loopback).
fn is_localhost_name(name: &str) -> bool {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost")
}

/// Whether the URL's host is loopback: a loopback address or `localhost`.
pub fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => is_localhost_name(name),
        Some(url::Host::Ipv4(v4)) => v4.is_loopback(),
        Some(url::Host::Ipv6(v6)) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        None => false,
    }
}

/// Whether the URL's host is internal by its text alone: an internal IP
/// literal or `localhost`.
fn is_internal_host(url: &url::Url) -> bool {
    ip_of(url).is_some_and(is_internal)
        || matches!(url.host(), Some(url::Host::Domain(name)) if is_localhost_name(name))
}

/// An origin as shown in messages: `scheme://host[:port]`.
pub fn origin_of(url: &url::Url) -> String {
    url.origin().ascii_serialization()
}

/// The rules of one agent (see the module docs).
#[derive(Debug, Clone)]
pub struct Guard {
    /// `agents[i]`, for messages.
    at: String,
    card: url::Url,
    allowed_endpoints: Vec<url::Origin>,
    allow_http: bool,
    /// Internal addresses may be reached.
    private: bool,
}

impl Guard {
    pub fn new(settings: &AgentSettings) -> Self {
        Self {
            at: settings.at.clone(),
            card: settings.card_url.clone(),
            allowed_endpoints: settings.allowed_endpoints.clone(),
            allow_http: settings.allow_http,
            private: settings.allow_private_network || is_internal_host(&settings.card_url),
        }
    }

    /// The resolver of this agent's HTTP clients; `hosts` answers for the
    /// names it holds instead of DNS (tests).
    pub fn resolver(&self, hosts: Arc<HashMap<String, Vec<IpAddr>>>) -> GuardedResolver {
        GuardedResolver {
            at: self.at.clone(),
            private: self.private,
            exempt: match self.card.host() {
                Some(url::Host::Domain(name)) => Some(name.to_ascii_lowercase()),
                _ => None,
            },
            hosts,
        }
    }

    /// Refuses an internal IP-literal target unless allowed. (Names are
    /// checked at connect time by the resolver.)
    pub fn target(&self, url: &url::Url) -> Result<(), Refused> {
        if self.private || !is_internal_host(url) {
            return Ok(());
        }
        Err(Refused(format!(
            "{} is a private, loopback or link-local address and the agent's card URL ({}) is \
             not; agentgate sends nothing there unless {}.allow_private_network = true",
            origin_of(url),
            origin_of(&self.card),
            self.at
        )))
    }

    /// The JSON-RPC endpoint the card names, if agentgate may call it.
    pub fn endpoint(&self, raw: &str) -> Result<url::Url, Refused> {
        let url = url::Url::parse(raw)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
            .ok_or_else(|| {
                Refused(format!(
                    "the agent's card names {raw:?} as its JSON-RPC endpoint, which is not an \
                     http(s) URL"
                ))
            })?;
        let origin = url.origin();
        if origin != self.card.origin() && !self.allowed_endpoints.contains(&origin) {
            return Err(Refused(format!(
                "the agent's card names a JSON-RPC endpoint on {}, another origin than the card's \
                 ({}); agentgate sends nothing there unless that origin is listed in \
                 {}.allowed_endpoints",
                origin_of(&url),
                origin_of(&self.card),
                self.at
            )));
        }
        self.target(&url)?;
        Ok(url)
    }

    /// The token URL and scopes of a client-credentials request: the
    /// configured ones, which the card's flow (`card`: its token URL and
    /// the scopes it asks for) may only confirm.
    pub fn oauth(
        &self,
        configured_url: Option<&url::Url>,
        configured_scopes: &[String],
        card: Option<&(String, Vec<String>)>,
    ) -> Result<(url::Url, Vec<String>), Refused> {
        let at = format!("{}.oauth", self.at);
        let url = match (configured_url, card) {
            (Some(configured), Some((raw, _))) => {
                if url::Url::parse(raw).ok().as_ref() != Some(configured) {
                    return Err(Refused(format!(
                        "the agent's card names {} as its OAuth token URL, not {at}.token_url \
                         ({configured}); agentgate asks no token of either until the two agree",
                        shown(raw)
                    )));
                }
                configured.clone()
            }
            (Some(configured), None) => configured.clone(),
            (None, Some((raw, _))) => self.card_token_url(raw, &at)?,
            (None, None) => {
                return Err(Refused(format!(
                    "the agent's card declares no OAuth 2.0 client-credentials flow \
                     (securitySchemes) and {at}.token_url is not set; set it to the \
                     authorization server's token endpoint"
                )));
            }
        };
        if let Some((_, asked)) = card {
            let beyond: Vec<&str> = asked
                .iter()
                .filter(|s| !configured_scopes.contains(s))
                .map(String::as_str)
                .collect();
            if !beyond.is_empty() {
                return Err(Refused(format!(
                    "the agent's card asks for the OAuth scope(s) {beyond:?}, beyond {at}.scopes \
                     ({configured_scopes:?}); agentgate asks only for configured scopes: add them \
                     to {at}.scopes if this agent is meant to have them"
                )));
            }
        }
        self.target(&url)?;
        Ok((url, configured_scopes.to_vec()))
    }

    /// The card's token URL, when no token URL is configured: same origin
    /// as the card, and https unless the card is loopback or `allow_http`.
    fn card_token_url(&self, raw: &str, at: &str) -> Result<url::Url, Refused> {
        let url = url::Url::parse(raw)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
            .ok_or_else(|| {
                Refused(format!(
                    "the agent's card names {} as its OAuth token URL, which is not an http(s) \
                     URL; set {at}.token_url",
                    shown(raw)
                ))
            })?;
        if url.origin() != self.card.origin() {
            return Err(Refused(format!(
                "the agent's card names an OAuth token URL on {}, another origin than the card's \
                 ({}); agentgate sends its client secret only where {at}.token_url says: set it \
                 if that is the agent's authorization server",
                origin_of(&url),
                origin_of(&self.card)
            )));
        }
        if url.scheme() != "https" && !self.allow_http && !is_loopback(&self.card) {
            return Err(Refused(format!(
                "the agent's card names a plain-http OAuth token URL ({}); agentgate sends its \
                 client secret over http only to a loopback agent or with {}.allow_http = true",
                origin_of(&url),
                self.at
            )));
        }
        Ok(url)
    }
}

/// A URL from a card, cut short for a message (a card may hold anything).
fn shown(raw: &str) -> String {
    const MAX: usize = 200;
    if raw.chars().count() <= MAX {
        format!("{raw:?}")
    } else {
        format!("{:?}…", raw.chars().take(MAX).collect::<String>())
    }
}

/// The DNS resolver of an agent's HTTP clients: refuses to connect to an
/// internal address unless the agent may reach them (see the module docs).
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    at: String,
    private: bool,
    /// The card URL's host name: resolved as it comes.
    exempt: Option<String>,
    hosts: Arc<HashMap<String, Vec<IpAddr>>>,
}

impl GuardedResolver {
    /// The addresses agentgate may connect to out of those `name` resolves
    /// to: all of them for an agent allowed internal targets and for the
    /// card's own host; the public ones otherwise, and a refusal when none
    /// is left.
    fn keep(&self, name: &str, addrs: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, Refused> {
        if self.private || self.exempt.as_deref() == Some(name) {
            return Ok(addrs);
        }
        let kept: Vec<SocketAddr> = addrs.into_iter().filter(|a| !is_internal(a.ip())).collect();
        if kept.is_empty() {
            return Err(Refused(format!(
                "{name} resolves only to private, loopback or link-local addresses and the \
                 agent's card URL is not one; agentgate connects there only with \
                 {}.allow_private_network = true",
                self.at
            )));
        }
        Ok(kept)
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let this = self.clone();
        let name = name.as_str().to_ascii_lowercase();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = match this.hosts.get(&name) {
                Some(ips) => ips.iter().map(|ip| SocketAddr::new(*ip, 0)).collect(),
                None => tokio::net::lookup_host((name.as_str(), 0)).await?.collect(),
            };
            let kept = this.keep(&name, addrs)?;
            Ok(Box::new(kept.into_iter()) as Addrs)
        })
    }
}

/// The refusal somewhere in `error`'s chain of causes (a connection the
/// resolver refused), if any.
pub fn refused_in(error: &(dyn std::error::Error + 'static)) -> Option<Refused> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(refused) = e.downcast_ref::<Refused>() {
            return Some(refused.clone());
        }
        cause = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn guard(card: &str, extra: impl FnOnce(&mut AgentSettings)) -> Guard {
        let mut settings = AgentSettings {
            name: "t".into(),
            tool_name: "t_send_message".into(),
            card_url: url::Url::parse(card).expect("url"),
            credentials: crate::config::Credentials::None,
            poll_interval: Duration::from_secs(1),
            client_context_ids: false,
            streaming: true,
            push: true,
            allowed_endpoints: Vec::new(),
            allow_http: false,
            allow_private_network: false,
            principals: None,
            principal_tokens: Default::default(),
            at: "agents[0]".into(),
        };
        extra(&mut settings);
        Guard::new(&settings)
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn internal_addresses_are_told_from_public_ones() {
        for internal in [
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "127.0.0.2",
            "169.254.169.254",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            "0.0.0.0",
            "::",
        ] {
            assert!(is_internal(ip(internal)), "{internal}");
        }
        for public in ["8.8.8.8", "172.32.0.1", "2001:db8::1", "::ffff:8.8.8.8"] {
            assert!(!is_internal(ip(public)), "{public}");
        }
    }

    #[test]
    fn the_endpoint_must_share_the_cards_origin_unless_listed() {
        let g = guard("https://agents.example.com/travel", |_| ());
        assert!(g.endpoint("https://agents.example.com/rpc").is_ok());
        for other in [
            "https://evil.example.net/rpc",
            "http://agents.example.com/rpc",
            "https://agents.example.com:8443/rpc",
        ] {
            let e = g.endpoint(other).expect_err(other);
            assert!(e.0.contains("agents[0].allowed_endpoints"), "{e}");
        }
        let listed = guard("https://agents.example.com/travel", |s| {
            s.allowed_endpoints = vec![
                url::Url::parse("https://rpc.example.com")
                    .expect("url")
                    .origin(),
            ];
        });
        assert!(listed.endpoint("https://rpc.example.com/a2a").is_ok());
        assert!(g.endpoint("javascript:alert(1)").is_err());
    }

    #[test]
    fn internal_targets_need_an_internal_card_or_the_setting() {
        let public = guard("https://agents.example.com/", |s| {
            s.allowed_endpoints = vec![
                url::Url::parse("http://169.254.169.254")
                    .expect("url")
                    .origin(),
            ];
        });
        let e = public
            .endpoint("http://169.254.169.254/latest")
            .expect_err("metadata address");
        assert!(e.0.contains("agents[0].allow_private_network"), "{e}");
        let allowed = guard("https://agents.example.com/", |s| {
            s.allowed_endpoints = vec![
                url::Url::parse("http://169.254.169.254")
                    .expect("url")
                    .origin(),
            ];
            s.allow_private_network = true;
        });
        assert!(allowed.endpoint("http://169.254.169.254/latest").is_ok());
        let local = guard("http://127.0.0.1:9/", |_| ());
        assert!(
            local
                .target(&url::Url::parse("http://10.0.0.1/").expect("url"))
                .is_ok()
        );
    }

    #[test]
    fn the_resolver_drops_internal_addresses_except_for_the_cards_host() {
        let g = guard("https://agents.example.com/", |_| ());
        let r = g.resolver(Arc::default());
        let addrs = |list: &[&str]| list.iter().map(|a| SocketAddr::new(ip(a), 0)).collect();
        let e = r
            .keep("rebound.example.com", addrs(&["10.0.0.1", "127.0.0.1"]))
            .expect_err("internal only");
        assert!(e.0.contains("allow_private_network"), "{e}");
        let kept = r
            .keep("mixed.example.com", addrs(&["10.0.0.1", "8.8.8.8"]))
            .expect("a public one");
        assert_eq!(kept, vec![SocketAddr::new(ip("8.8.8.8"), 0)]);
        assert!(r.keep("agents.example.com", addrs(&["10.0.0.1"])).is_ok());
    }

    #[test]
    fn the_card_may_only_confirm_the_configured_token_url_and_scopes() {
        let g = guard("https://agents.example.com/", |_| ());
        let configured = url::Url::parse("https://idp.example.com/token").expect("url");
        let scopes = vec!["a2a.invoke".to_owned()];
        let card =
            |u: &str, s: &[&str]| (u.to_owned(), s.iter().map(|s| (*s).to_owned()).collect());

        let (url, asked) = g
            .oauth(
                Some(&configured),
                &scopes,
                Some(&card("https://idp.example.com/token", &["a2a.invoke"])),
            )
            .expect("confirmed");
        assert_eq!(
            (url.as_str(), asked),
            ("https://idp.example.com/token", scopes.clone())
        );
        let e = g
            .oauth(
                Some(&configured),
                &scopes,
                Some(&card("https://evil.example.net/token", &[])),
            )
            .expect_err("another token URL");
        assert!(e.0.contains("agents[0].oauth.token_url"), "{e}");
        let e = g
            .oauth(
                Some(&configured),
                &scopes,
                Some(&card("https://idp.example.com/token", &["mail.read"])),
            )
            .expect_err("another scope");
        assert!(
            e.0.contains("agents[0].oauth.scopes") && e.0.contains("mail.read"),
            "{e}"
        );

        // Nothing configured: the card's, on its own origin, over https.
        assert!(
            g.oauth(
                None,
                &[],
                Some(&card("https://agents.example.com/token", &[]))
            )
            .is_ok()
        );
        let e = g
            .oauth(None, &[], Some(&card("https://idp.evil.net/token", &[])))
            .expect_err("other origin");
        assert!(e.0.contains("agents[0].oauth.token_url"), "{e}");
        let plain = guard("http://agents.example.com/", |_| ());
        let e = plain
            .oauth(
                None,
                &[],
                Some(&card("http://agents.example.com/token", &[])),
            )
            .expect_err("plain http");
        assert!(e.0.contains("agents[0].allow_http"), "{e}");
        let plain_ok = guard("http://agents.example.com/", |s| s.allow_http = true);
        assert!(
            plain_ok
                .oauth(
                    None,
                    &[],
                    Some(&card("http://agents.example.com/token", &[]))
                )
                .is_ok()
        );
        let local = guard("http://127.0.0.1:9/", |_| ());
        assert!(
            local
                .oauth(None, &[], Some(&card("http://127.0.0.1:9/token", &[])))
                .is_ok()
        );
    }
}
