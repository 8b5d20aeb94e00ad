//! MCP side (in progress).
