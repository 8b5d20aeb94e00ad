//! The client's address, as the failure throttle and the connection share
//! see it: the TCP peer, unless the peer is a configured trusted proxy
//! (`server.trusted_proxies`), in which case the address that proxy says it
//! forwarded for.
//!
//! ```text
//! X-Forwarded-For: <spoofable>, 198.51.100.7, 10.0.0.5     peer 127.0.0.1
//!                               ▲ client     ▲ trusted      ▲ trusted
//! ```
//!
//! The chain is read right to left and the first address that is not a
//! trusted proxy is the client: everything left of it was written by the
//! client itself and could name anyone. `X-Forwarded-For` is read when
//! present (what nginx, HAProxy and the cloud load balancers append to);
//! otherwise the `for=` parameters of `Forwarded` (RFC 7239). A proxy that
//! only writes `Forwarded` must drop a client's `X-Forwarded-For`, or the
//! client chooses its own address.

use std::net::IpAddr;
use std::sync::Arc;

use axum::http::HeaderMap;

use super::AuthError;

/// The client's address of a request, put into its extensions by the HTTP
/// accept loop ([`crate::mcp::serve_http_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

/// One address or CIDR block, e.g. `10.0.0.0/8`, `::1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct IpBlock {
    network: IpAddr,
    prefix: u32,
}

impl IpBlock {
    fn parse(text: &str) -> Option<Self> {
        let (address, prefix) = match text.trim().split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text.trim(), None),
        };
        let network: IpAddr = address.parse().ok()?;
        let bits = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(prefix) => prefix.parse::<u32>().ok().filter(|p| *p <= bits)?,
            None => bits,
        };
        Some(Self { network, prefix })
    }

    fn contains(&self, ip: IpAddr) -> bool {
        // An IPv4 client on a dual-stack socket arrives as ::ffff:a.b.c.d.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 @ IpAddr::V4(_) => v4,
        };
        match (self.network, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - self.prefix).unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - self.prefix).unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// `server.trusted_proxies`: the peers whose forwarding headers are
/// believed. Empty (the default): every client is its TCP peer.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Arc<[IpBlock]>);

impl TrustedProxies {
    /// Parses addresses and CIDR blocks (`"127.0.0.1"`, `"10.0.0.0/8"`,
    /// `"fd00::/8"`).
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, AuthError> {
        entries
            .iter()
            .map(|entry| {
                IpBlock::parse(entry.as_ref()).ok_or_else(|| {
                    AuthError::Config(format!(
                        "server.trusted_proxies: {:?} is not an IP address or CIDR block \
                         (e.g. \"127.0.0.1\" or \"10.0.0.0/8\")",
                        entry.as_ref()
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|blocks| Self(blocks.into()))
    }

    /// True when no proxy is trusted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `ip` is a trusted proxy.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|block| block.contains(ip))
    }

    /// The client behind `peer`: `peer` itself unless it is trusted, else
    /// the right-most forwarded address that is not trusted (the left-most
    /// when all are, `peer` when there is none or one cannot be read).
    pub fn client_addr(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.contains(peer) {
            return peer;
        }
        let mut client = peer;
        for hop in forwarded_chain(headers).into_iter().rev() {
            // `unknown`, an obfuscated name, garbage: the chain cannot be
            // followed past it, so the last trusted hop is what we know.
            let Some(ip) = hop else { break };
            client = ip;
            if !self.contains(ip) {
                break;
            }
        }
        client
    }
}

/// The forwarded-for chain, left (the original client, as claimed) to right
/// (the hop nearest to us); `None` for an entry that is not an address.
fn forwarded_chain(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    let values = |name: &str| {
        headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap_or(""))
            .collect::<Vec<_>>()
    };
    let xff = values("x-forwarded-for");
    if !xff.is_empty() {
        return xff
            .iter()
            .flat_map(|v| v.split(','))
            .map(|entry| parse_node(entry.trim()))
            .collect();
    }
    values("forwarded")
        .iter()
        .flat_map(|v| v.split(','))
        .filter_map(|element| {
            element.split(';').find_map(|pair| {
                let (key, value) = pair.trim().split_once('=')?;
                key.trim()
                    .eq_ignore_ascii_case("for")
                    .then(|| parse_node(value.trim().trim_matches('"')))
            })
        })
        .collect()
}

/// An address as a forwarding header writes it: `192.0.2.1`,
/// `192.0.2.1:4711`, `2001:db8::1`, `[2001:db8::1]:4711`.
fn parse_node(text: &str) -> Option<IpAddr> {
    if let Ok(ip) = text.parse() {
        return Some(ip);
    }
    if let Some(rest) = text.strip_prefix('[') {
        return rest.split_once(']')?.0.parse().ok();
    }
    let (host, _port) = text.rsplit_once(':')?;
    host.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("ip")
    }

    #[test]
    fn blocks_match_their_addresses_only() {
        let proxies =
            TrustedProxies::parse(&["127.0.0.1", "10.0.0.0/8", "fd00::/8"]).expect("valid");
        assert!(proxies.contains(ip("127.0.0.1")));
        assert!(proxies.contains(ip("::ffff:127.0.0.1")), "v4-mapped");
        assert!(!proxies.contains(ip("127.0.0.2")));
        assert!(proxies.contains(ip("10.255.0.1")));
        assert!(!proxies.contains(ip("11.0.0.1")));
        assert!(proxies.contains(ip("fd12::1")));
        assert!(!proxies.contains(ip("fe80::1")));
        assert!(
            TrustedProxies::parse(&["0.0.0.0/0"])
                .expect("all")
                .contains(ip("8.8.8.8"))
        );
        for bad in ["10.0.0.0/33", "localhost", "10.0.0.0/x", ""] {
            let err = TrustedProxies::parse(&[bad]).expect_err(bad);
            assert!(err.to_string().contains("server.trusted_proxies"), "{err}");
        }
    }

    #[test]
    fn the_right_most_untrusted_forwarded_address_is_the_client() {
        let proxies = TrustedProxies::parse(&["127.0.0.1", "10.0.0.0/8"]).expect("valid");
        let mut headers = HeaderMap::new();
        headers.append(
            "x-forwarded-for",
            HeaderValue::from_static("6.6.6.6, 198.51.100.7"),
        );
        headers.append("x-forwarded-for", HeaderValue::from_static("10.0.0.5"));
        assert_eq!(
            proxies.client_addr(ip("127.0.0.1"), &headers),
            ip("198.51.100.7")
        );
        // An untrusted peer's headers are not believed.
        assert_eq!(
            proxies.client_addr(ip("203.0.113.9"), &headers),
            ip("203.0.113.9")
        );
        // No header: the proxy itself.
        assert_eq!(
            proxies.client_addr(ip("127.0.0.1"), &HeaderMap::new()),
            ip("127.0.0.1")
        );
        // Forwarded (RFC 7239), with ports and brackets.
        let mut headers = HeaderMap::new();
        headers.insert(
            "forwarded",
            HeaderValue::from_static(
                "for=192.0.2.60;proto=http, for=\"[2001:db8::7]:4711\", for=10.0.0.9:80",
            ),
        );
        assert_eq!(
            proxies.client_addr(ip("127.0.0.1"), &headers),
            ip("2001:db8::7")
        );
        // An unreadable hop stops the walk at the last trusted one.
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-forwarded-for",
            HeaderValue::from_static("198.51.100.7, unknown, 10.0.0.5"),
        );
        assert_eq!(
            proxies.client_addr(ip("127.0.0.1"), &headers),
            ip("10.0.0.5")
        );
    }
}
