//! The Agent Card (`lf.a2a.v1.AgentCard`) served at `/.well-known/agent-card.json`
//! (§8.2): one JSON-RPC interface at the emulator's root, protocol version 1.0,
//! streaming on, push notifications and the extended card off, one skill per
//! scripted agent, and a bearer `securitySchemes` entry when a token is configured.

use serde_json::{Value, json};

use super::A2aConfig;
use super::agents::Skill;

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
            "pushNotifications": false,
            "extendedAgentCard": false,
        },
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": skills,
    });
    if config.token.is_some() {
        card["securitySchemes"] = json!({
            BEARER_SCHEME: { "httpAuthSecurityScheme": { "scheme": "Bearer" } }
        });
        card["securityRequirements"] = json!([{ "schemes": { BEARER_SCHEME: { "list": [] } } }]);
    }
    card
}
