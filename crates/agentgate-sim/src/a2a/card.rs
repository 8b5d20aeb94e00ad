//! The Agent Card (`lf.a2a.v1.AgentCard`) served at `/.well-known/agent-card.json`
//! (§8.2): one JSON-RPC interface at the emulator's root, protocol version 1.0,
//! streaming on, push notifications as configured, the extended card off, one skill
//! per scripted agent, and `securitySchemes` for what is configured: a bearer token
//! (`httpAuthSecurityScheme`), an OAuth client (`oauth2SecurityScheme` with the
//! client-credentials flow, §4.5.4/§4.5.9), each a `securityRequirements` entry (any
//! one of them suffices, as OpenAPI reads a list of requirements).

use serde_json::{Value, json};

use super::A2aConfig;
use super::OAUTH_SCOPE as SCOPE;
use super::agents::Skill;
use crate::oauth::{OAUTH_SCHEME, TOKEN_PATH};

/// The path of the card (§8.2 well-known URI).
pub const AGENT_CARD_PATH: &str = "/.well-known/agent-card.json";

/// The security scheme name the card declares when a token is set.
pub const BEARER_SCHEME: &str = "bearer";

/// The card, with `base_url` (no trailing slash) as the interface URL's origin.
pub(crate) fn agent_card(config: &A2aConfig, base_url: &str) -> Value {
    let skills: Vec<Value> = Skill::ALL
        .iter()
        .map(|skill| {
            json!({
                "id": skill.id(),
                "name": skill.id(),
                "description": skill.description(),
                "tags": ["agentgate-sim"],
                "examples": [format!("{} please", skill.id())],
                "inputModes": ["text/plain"],
                "outputModes": ["text/plain", "application/json"],
            })
        })
        .collect();
    let mut card = json!({
        "name": config.name,
        "description": "agentgate's A2A v1.0 emulator: scripted agents selected by skill (see the skills).",
        "supportedInterfaces": [{
            "url": format!("{base_url}/"),
            "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0",
        }],
        "provider": { "organization": "agentgate", "url": "https://example.invalid/agentgate" },
        "version": env!("CARGO_PKG_VERSION"),
        "capabilities": {
            "streaming": true,
            "pushNotifications": config.push_notifications,
            "extendedAgentCard": false,
        },
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": skills,
    });
    let mut schemes = serde_json::Map::new();
    let mut requirements = Vec::new();
    if config.token.is_some() {
        schemes.insert(
            BEARER_SCHEME.into(),
            json!({ "httpAuthSecurityScheme": { "scheme": "Bearer" } }),
        );
        requirements.push(json!({ "schemes": { BEARER_SCHEME: { "list": [] } } }));
    }
    if config.oauth.is_some() {
        schemes.insert(
            OAUTH_SCHEME.into(),
            json!({ "oauth2SecurityScheme": {
                "description": "OAuth 2.0 client credentials (RFC 6749 §4.4)",
                "flows": { "clientCredentials": {
                    "tokenUrl": format!("{base_url}{TOKEN_PATH}"),
                    "scopes": { SCOPE: "Send messages to the agent and read its tasks" },
                } },
            } }),
        );
        requirements.push(json!({ "schemes": { OAUTH_SCHEME: { "list": [SCOPE] } } }));
    }
    if !schemes.is_empty() {
        card["securitySchemes"] = Value::Object(schemes);
        card["securityRequirements"] = Value::Array(requirements);
    }
    card
}
